//! The terminal view of `rookery run` and `chat` when stdout is a terminal: assistant text and
//! thinking stream as their `partial_*` messages arrive (thinking dimmed, or hidden), tool calls
//! are shown when they start, and a [`StatusLine`] spinner on stderr says what the run waits for.
//! A streamed message is not printed again when it completes. Model and tool text goes through
//! [`escape_controls`]: no escape sequence from a model reaches the terminal raw.
//!
//! It only renders a session's stream (already scrubbed of secrets by the session); it never
//! decides anything, and output that is not a terminal keeps the plain [`render::Transcript`].

use std::io::Write;

use super::render;
use super::status_line::StatusLine;
use super::terminal_text::escape_controls;
use crate::message::{EventPayload, EventType, ModelPayload, OmniMessage, Role, Sender};

/// SGR: dim (faint) text.
const DIM: &str = "\x1b[2m";
/// SGR: back to normal text.
const RESET: &str = "\x1b[0m";

/// What the terminal allows, from the environment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TerminalStyle {
    /// SGR colour and dim codes may be written (no `NO_COLOR`, `TERM` is not `dumb`).
    pub color: bool,
    /// A spinner may be drawn on stderr (stderr is a terminal, `TERM` is not `dumb`).
    pub spinner: bool,
}

impl TerminalStyle {
    /// The style for `NO_COLOR` and `TERM` as given (`None`: unset) and whether stderr is a
    /// terminal. `NO_COLOR` counts when set and not empty (no-color.org).
    pub fn from_env(no_color: Option<&str>, term: Option<&str>, stderr_tty: bool) -> Self {
        let dumb = term == Some("dumb");
        TerminalStyle {
            color: !dumb && no_color.is_none_or(str::is_empty),
            spinner: !dumb && stderr_tty,
        }
    }

    /// The style of this process's environment.
    pub fn detect() -> Self {
        use std::io::IsTerminal;
        let no_color = std::env::var("NO_COLOR").ok();
        let term = std::env::var("TERM").ok();
        Self::from_env(
            no_color.as_deref(),
            term.as_deref(),
            std::io::stderr().is_terminal(),
        )
    }
}

/// Which streamed segment is open on screen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Open {
    Nothing,
    Text,
    Thinking,
}

/// The live view of one session's stream on a terminal.
pub struct LiveView<W: Write> {
    out: W,
    style: TerminalStyle,
    status: StatusLine,
    show_thinking: bool,
    transcript: render::Transcript,
    open: Open,
    /// The cursor is at the start of a line (the spinner may be drawn).
    at_line_start: bool,
    /// The text streamed for the assistant message not yet completed.
    streamed: Option<String>,
    /// Tool calls started and not yet answered: id and name.
    running: Vec<(String, String)>,
}

impl<W: Write> LiveView<W> {
    /// A view writing to `out` (stdout), its spinner on `status`.
    pub fn new(out: W, style: TerminalStyle, status: StatusLine, show_thinking: bool) -> Self {
        status.track_calls();
        LiveView {
            out,
            style,
            status,
            show_thinking,
            transcript: render::Transcript::default(),
            open: Open::Nothing,
            at_line_start: true,
            streamed: None,
            running: Vec::new(),
        }
    }

    /// The spinner line this view draws (the approval prompt pauses it).
    pub fn status(&self) -> &StatusLine {
        &self.status
    }

    /// The spinner says the run waits for the model (a task was just started).
    pub fn waiting(&mut self) {
        self.wait_for("waiting for the model".to_string());
    }

    /// Clears the spinner for good and ends any open dim text (Ctrl-C, the end of the run).
    pub fn stop(&mut self) {
        self.status.stop();
        self.close_segment();
        let _ = self.out.flush();
    }

    /// Shows what `msg` adds to the screen.
    pub fn show(&mut self, msg: &OmniMessage) {
        if msg.has_origin() {
            return;
        }
        if let Some(p) = msg.as_model() {
            self.show_model(msg, p);
        } else if let Some(e) = msg.as_event() {
            self.show_event(msg, e);
        }
        let _ = self.out.flush();
    }

    fn show_model(&mut self, msg: &OmniMessage, p: &ModelPayload) {
        match p {
            ModelPayload::PartialText {
                event_type, text, ..
            } => self.stream(Open::Text, *event_type, text),
            ModelPayload::PartialThinking {
                event_type,
                thinking,
                ..
            } if self.show_thinking => self.stream(Open::Thinking, *event_type, thinking),
            ModelPayload::PartialToolCall {
                event_type: EventType::Start,
                name,
                ..
            } => self.wait_for(format!("{name}: preparing the call")),
            ModelPayload::Text {
                text, sender: None, ..
            } if p.role() == Role::Assistant => self.complete_text(text),
            ModelPayload::Text {
                sender: Some(Sender::Harness),
                ..
            } => self.line(msg),
            ModelPayload::ToolCall {
                name, tool_call_id, ..
            } => {
                self.status.set(None);
                self.line(msg);
                self.status.call_shown(tool_call_id);
                self.running.push((tool_call_id.clone(), name.clone()));
                self.show_running();
            }
            ModelPayload::ToolCallOutput { tool_call_id, .. } => {
                self.running.retain(|(id, _)| id != tool_call_id);
                if self.running.is_empty() {
                    self.status.set(None);
                }
                self.line(msg);
                self.show_running();
            }
            _ => {}
        }
    }

    fn show_event(&mut self, msg: &OmniMessage, e: &EventPayload) {
        match e {
            EventPayload::RequestBegin {} => {
                self.streamed = None;
                self.waiting();
            }
            EventPayload::RequestEnd { .. } => {
                self.close_segment();
                if self.running.is_empty() {
                    self.status.set(None);
                }
                self.line(msg);
            }
            EventPayload::TaskEnd { .. } => {
                self.close_segment();
                self.status.set(None);
                self.running.clear();
                self.streamed = None;
                self.line(msg);
            }
            _ => self.line(msg),
        }
    }

    /// One piece of a streamed text or thinking segment.
    fn stream(&mut self, kind: Open, event_type: EventType, piece: &str) {
        match event_type {
            EventType::Start => {
                self.status.set(None);
                self.close_segment();
                self.open_segment(kind);
            }
            EventType::Delta => {
                if piece.is_empty() {
                    return;
                }
                self.status.set(None);
                if self.open != kind {
                    self.close_segment();
                    self.open_segment(kind);
                }
                let _ = self.out.write_all(escape_controls(piece).as_bytes());
                self.at_line_start = piece.ends_with('\n');
                if kind == Open::Text
                    && let Some(s) = &mut self.streamed
                {
                    s.push_str(piece);
                }
            }
            EventType::Stop => {
                if self.open == kind {
                    self.close_segment();
                }
            }
        }
    }

    fn open_segment(&mut self, kind: Open) {
        if kind == Open::Thinking && self.style.color {
            let _ = self.out.write_all(DIM.as_bytes());
        }
        if kind == Open::Text {
            self.streamed = Some(String::new());
        }
        self.open = kind;
    }

    /// Ends the open segment: normal text again, the cursor at a line start.
    fn close_segment(&mut self) {
        if self.open == Open::Thinking && self.style.color {
            let _ = self.out.write_all(RESET.as_bytes());
        }
        self.open = Open::Nothing;
        if !self.at_line_start {
            let _ = self.out.write_all(b"\n");
            self.at_line_start = true;
        }
    }

    /// A complete assistant text: only what its partials did not show (nothing, usually; all
    /// of it when no partials came or they do not match).
    fn complete_text(&mut self, text: &str) {
        self.close_segment();
        let rest = match self.streamed.take() {
            Some(shown) if text == shown => return,
            Some(shown) if !shown.is_empty() && text.starts_with(&shown) => &text[shown.len()..],
            _ => text,
        };
        self.status.set(None);
        let _ = writeln!(self.out, "{}", escape_controls(rest));
        self.at_line_start = true;
    }

    /// What the plain transcript prints for `msg`, on its own lines.
    fn line(&mut self, msg: &OmniMessage) {
        let Some(text) = self.transcript.render(msg) else {
            return;
        };
        self.close_segment();
        let out = &mut self.out;
        self.status.suspend(|| {
            let _ = writeln!(out, "{}", escape_controls(&text));
            let _ = out.flush();
        });
    }

    fn show_running(&mut self) {
        let message = match self.running.as_slice() {
            [] => return,
            [(_, name)] => format!("running {name}"),
            many => format!("running {} tools", many.len()),
        };
        self.wait_for(message);
    }

    /// Shows the spinner, unless text is mid-line on screen.
    fn wait_for(&mut self, message: String) {
        if self.at_line_start && self.open == Open::Nothing {
            self.status.set(Some(message));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::StopReason;

    fn partial(event_type: EventType, text: &str) -> OmniMessage {
        OmniMessage::model(ModelPayload::PartialText {
            role: Role::Assistant,
            event_type,
            text: text.into(),
            stop_reason: StopReason::Completed,
        })
    }

    fn complete(text: &str) -> OmniMessage {
        OmniMessage::model(ModelPayload::Text {
            role: Role::Assistant,
            text: text.into(),
            sender: None,
            stop_reason: StopReason::Completed,
            fidelity: None,
        })
    }

    fn view(color: bool) -> LiveView<Vec<u8>> {
        let style = TerminalStyle {
            color,
            spinner: false,
        };
        LiveView::new(Vec::new(), style, StatusLine::disabled(), true)
    }

    fn shown(v: &LiveView<Vec<u8>>) -> String {
        String::from_utf8(v.out.clone()).unwrap()
    }

    #[test]
    fn a_streamed_text_is_not_printed_again() {
        let mut v = view(true);
        for m in [
            partial(EventType::Start, ""),
            partial(EventType::Delta, "hello "),
            partial(EventType::Delta, "world"),
            partial(EventType::Stop, ""),
            complete("hello world"),
        ] {
            v.show(&m);
        }
        assert_eq!(shown(&v), "hello world\n");
    }

    #[test]
    fn what_the_partials_missed_is_printed_from_the_complete_text() {
        let mut v = view(true);
        v.show(&partial(EventType::Start, ""));
        v.show(&partial(EventType::Delta, "hel"));
        v.show(&complete("hello"));
        assert_eq!(shown(&v), "hel\nlo\n");
        let mut v = view(true);
        v.show(&complete("no partials \u{1b}[2J"));
        assert_eq!(shown(&v), "no partials ␛[2J\n");
    }

    #[test]
    fn thinking_is_dimmed_only_with_colour() {
        let thinking = |e, t: &str| {
            OmniMessage::model(ModelPayload::PartialThinking {
                role: Role::Assistant,
                event_type: e,
                thinking: t.into(),
                stop_reason: StopReason::Completed,
            })
        };
        for (color, want) in [(true, "\x1b[2mhmm\x1b[0m\n"), (false, "hmm\n")] {
            let mut v = view(color);
            v.show(&thinking(EventType::Start, ""));
            v.show(&thinking(EventType::Delta, "hmm"));
            v.show(&thinking(EventType::Stop, ""));
            assert_eq!(shown(&v), want);
        }
        let mut v = view(true);
        v.show_thinking = false;
        v.show(&thinking(EventType::Delta, "hmm"));
        assert_eq!(shown(&v), "");
    }

    #[test]
    fn style_follows_no_color_and_dumb_terminals() {
        let s = TerminalStyle::from_env(None, Some("xterm"), true);
        assert!(s.color && s.spinner);
        let s = TerminalStyle::from_env(Some("1"), Some("xterm"), true);
        assert!(!s.color && s.spinner);
        let s = TerminalStyle::from_env(Some(""), None, false);
        assert!(s.color && !s.spinner);
        let s = TerminalStyle::from_env(None, Some("dumb"), true);
        assert!(!s.color && !s.spinner);
    }
}
