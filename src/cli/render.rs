//! Readable transcript rendering for `rookery run` without `--json`: assistant text, one line
//! per tool call with its description, outputs collapsed to their first and last 4 lines.
//!
//! Rendering only: it reads messages and returns text, it never decides anything.

use crate::message::{EventPayload, ModelPayload, OmniMessage, StopReason};

/// Lines kept at each end of a collapsed tool output.
const KEEP: usize = 4;

/// Collapses `text` to its first and last `KEEP` lines with a marker in between.
pub fn collapse(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    if lines.len() <= 2 * KEEP + 1 {
        return lines.join("\n");
    }
    let hidden = lines.len() - 2 * KEEP;
    let mut out: Vec<String> = lines[..KEEP].iter().map(|s| s.to_string()).collect();
    out.push(format!("… ({hidden} more lines)"));
    out.extend(lines[lines.len() - KEEP..].iter().map(|s| s.to_string()));
    out.join("\n")
}

fn indent(text: &str) -> String {
    text.lines()
        .map(|l| format!("    {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// One line for a tool call: `▸ name — description` (or the arguments when none).
pub fn tool_call_line(name: &str, arguments: &str) -> String {
    let parsed: Option<serde_json::Value> = serde_json::from_str(arguments).ok();
    let desc = parsed
        .as_ref()
        .and_then(|v| v.get("description"))
        .and_then(|d| d.as_str())
        .map(str::to_string);
    let summary = desc.unwrap_or_else(|| {
        let mut s: String = arguments.chars().take(120).collect();
        if arguments.chars().count() > 120 {
            s.push('…');
        }
        s
    });
    format!("▸ {name} — {summary}")
}

/// The transcript text for one message, or `None` when it shows nothing.
pub fn render(msg: &OmniMessage) -> Option<String> {
    if msg.has_origin() {
        return None;
    }
    if let Some(p) = msg.as_model() {
        return match p {
            ModelPayload::Text { text, .. } if p.role() == crate::message::Role::Assistant => {
                Some(text.clone())
            }
            ModelPayload::Text {
                text,
                sender: Some(crate::message::Sender::Harness),
                ..
            } => Some(format!("◂ notice\n{}", indent(&collapse(text)))),
            ModelPayload::ToolCall {
                name, arguments, ..
            } => Some(tool_call_line(name, arguments)),
            ModelPayload::ToolCallOutput {
                output,
                stop_reason,
                ..
            } => {
                let mark = if *stop_reason == StopReason::Completed {
                    String::new()
                } else {
                    format!("  ({stop_reason})")
                };
                Some(format!("{}{mark}", indent(&collapse(output))))
            }
            _ => None,
        };
    }
    match msg.as_event()? {
        EventPayload::RequestEnd {
            status,
            error_message,
            retry_in_ms: Some(ms),
            ..
        } => Some(format!(
            "! model request {status}: {}; retrying in {ms} ms",
            error_message.as_deref().unwrap_or("unknown")
        )),
        // What `rookery serve`'s principals did (the audit of `--auth`).
        EventPayload::ApiAction { action, by, mode } => Some(match mode {
            Some(mode) => format!("· {action} {mode} by {by}"),
            None => format!("· {action} by {by}"),
        }),
        EventPayload::ApprovalDecision {
            decision,
            tool_call_id,
            decided_by: Some(by),
            ..
        } => Some(format!(
            "· approval of {tool_call_id}: {} decided by {by}",
            serde_json::to_value(decision)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default()
        )),
        _ => None,
    }
}

/// The transcript of one session's stream: [`render`], except that a task's `abort` is shown
/// when its `task_end` arrives, under the status the trace records for it
/// (`! failed: llm request error: …`, `! aborted: interrupted by user`).
#[derive(Debug, Default)]
pub struct Transcript {
    abort: Option<String>,
}

impl Transcript {
    /// The text to print for `msg`, if any (nothing for a child session's messages).
    pub fn render(&mut self, msg: &OmniMessage) -> Option<String> {
        if msg.has_origin() {
            return None;
        }
        match msg.as_event() {
            Some(EventPayload::Abort { reason }) => {
                self.abort = Some(reason.clone().unwrap_or_else(|| "aborted".to_string()));
                None
            }
            Some(EventPayload::TaskEnd { status, .. }) => self
                .abort
                .take()
                .map(|reason| format!("! {status}: {reason}")),
            _ => render(msg),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_abort_is_shown_with_the_status_of_its_task_end() {
        let mut t = Transcript::default();
        let abort = OmniMessage::event(EventPayload::Abort {
            reason: Some("llm request error: auth".into()),
        });
        assert_eq!(t.render(&abort), None);
        let end = OmniMessage::event(EventPayload::TaskEnd {
            status: StopReason::Failed,
            reason: None,
            output: None,
        });
        assert_eq!(
            t.render(&end).as_deref(),
            Some("! failed: llm request error: auth")
        );
        assert_eq!(
            t.render(&end),
            None,
            "a task end without abort shows nothing"
        );
    }

    #[test]
    fn collapses_long_outputs() {
        let text: Vec<String> = (1..=20).map(|i| i.to_string()).collect();
        let c = collapse(&text.join("\n"));
        assert_eq!(c, "1\n2\n3\n4\n… (12 more lines)\n17\n18\n19\n20");
        assert_eq!(collapse("a\nb"), "a\nb");
    }

    #[test]
    fn tool_line_uses_description() {
        assert_eq!(
            tool_call_line(
                "exec_command",
                r#"{"cmd":"ls","description":"List files."}"#
            ),
            "▸ exec_command — List files."
        );
        assert_eq!(
            tool_call_line("read_file", r#"{"file_path":"a"}"#),
            r#"▸ read_file — {"file_path":"a"}"#
        );
    }
}
