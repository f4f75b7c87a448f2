//! The session's open partial streams, scrubbed across their pieces: the text of the
//! `partial_*` messages of one stream (the text, the thinking, one tool call's arguments, one
//! call's output) goes through a [`PieceScrubber`], so a secret split across two deltas never
//! reaches a subscriber (SSE, `--json --partials`). What is held back at a `stop` is sent as one
//! more `delta` just before it.
//!
//! It rewrites partials only; complete messages are scrubbed whole by `secrets::scrub`, and it
//! never records anything.

use std::collections::HashMap;

use crate::message::{EventType, ModelPayload, OmniMessage, Payload, StopReason};
use crate::redact::Redactor;
use crate::redact::stream::PieceScrubber;

/// Which stream a partial belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Stream {
    Text,
    Thinking,
    Arguments(String),
    Output(String),
}

/// The held-back ends of the session's open partial streams.
#[derive(Debug, Default)]
pub(crate) struct PartialScrubs {
    open: HashMap<Stream, PieceScrubber>,
}

/// The stream, the event type and the text of a partial; `None` for any other message.
fn parts(msg: &mut OmniMessage) -> Option<(Stream, EventType, &mut String)> {
    let Payload::Model(p) = &mut msg.payload else {
        return None;
    };
    match p {
        ModelPayload::PartialText {
            event_type, text, ..
        } => Some((Stream::Text, *event_type, text)),
        ModelPayload::PartialThinking {
            event_type,
            thinking,
            ..
        } => Some((Stream::Thinking, *event_type, thinking)),
        ModelPayload::PartialToolCall {
            event_type,
            arguments,
            tool_call_id,
            ..
        } => Some((
            Stream::Arguments(tool_call_id.clone()),
            *event_type,
            arguments,
        )),
        ModelPayload::PartialToolCallOutput {
            event_type,
            output,
            tool_call_id,
            ..
        } => Some((Stream::Output(tool_call_id.clone()), *event_type, output)),
        _ => None,
    }
}

/// `msg` (a partial) turned into a `delta` carrying `text`.
fn as_delta(mut msg: OmniMessage, text: String) -> OmniMessage {
    if let Payload::Model(p) = &mut msg.payload {
        match p {
            ModelPayload::PartialText {
                event_type,
                text: t,
                stop_reason,
                ..
            }
            | ModelPayload::PartialThinking {
                event_type,
                thinking: t,
                stop_reason,
                ..
            }
            | ModelPayload::PartialToolCall {
                event_type,
                arguments: t,
                stop_reason,
                ..
            } => {
                *event_type = EventType::Delta;
                *t = text;
                *stop_reason = StopReason::Completed;
            }
            ModelPayload::PartialToolCallOutput {
                event_type,
                output,
                images,
                stop_reason,
                ..
            } => {
                *event_type = EventType::Delta;
                *output = text;
                images.clear();
                *stop_reason = StopReason::Completed;
            }
            _ => {}
        }
    }
    msg
}

impl PartialScrubs {
    /// What to stream for `msg`: `msg` itself when it is no partial; else the partial with
    /// what may be sent of its text (scrubbed), preceded at a `stop` by a `delta` with what
    /// was held back.
    pub(crate) fn scrub(&mut self, redactor: &Redactor, mut msg: OmniMessage) -> Vec<OmniMessage> {
        let Some((stream, event, text)) = parts(&mut msg) else {
            return vec![msg];
        };
        if event == EventType::Start {
            // A stream begun again (a retried request) forgets what its last try held.
            self.open.remove(&stream);
        }
        let piece = std::mem::take(text);
        let scrubber = self.open.entry(stream.clone()).or_default();
        let mut sent = scrubber.push(redactor, &piece);
        if event != EventType::Stop {
            *text = sent;
            return vec![msg];
        }
        sent.push_str(&scrubber.finish(redactor));
        self.open.remove(&stream);
        if piece.is_empty() && !sent.is_empty() {
            // The held-back end goes out as the stream's last delta; the stop stays empty.
            let delta = as_delta(msg.clone(), sent);
            return vec![delta, msg];
        }
        *text = sent;
        vec![msg]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::build;

    fn text_of(m: &OmniMessage) -> (EventType, String) {
        match m.as_model() {
            Some(ModelPayload::PartialText {
                event_type, text, ..
            }) => (*event_type, text.clone()),
            Some(ModelPayload::PartialToolCallOutput {
                event_type, output, ..
            }) => (*event_type, output.clone()),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_split_secret_is_held_back_and_sent_scrubbed_before_the_stop() {
        let r = Redactor::new(["sk-Split-9876"]).unwrap();
        let mut s = PartialScrubs::default();
        let mut out = Vec::new();
        let c = StopReason::Completed;
        for m in [
            build::partial_text(EventType::Start, "", c),
            build::partial_text(EventType::Delta, "key SK-spl", c),
            build::partial_tool_call_output("call_1", EventType::Delta, "out sk-", vec![], c),
            build::partial_text(EventType::Delta, "IT-9876 then sk-", c),
            build::partial_text(EventType::Stop, "", c),
        ] {
            out.extend(s.scrub(&r, m).iter().map(text_of));
        }
        use EventType::*;
        assert_eq!(
            out,
            [
                (Start, String::new()),
                (Delta, "key ".to_string()),
                (Delta, "out ".to_string()),
                (Delta, "[redacted] then ".to_string()),
                (Delta, "sk-".to_string()),
                (Stop, String::new()),
            ]
        );
        // Other messages pass as they are.
        let done = build::assistant_text("x".to_string(), c);
        assert_eq!(s.scrub(&r, done.clone()), [done]);
    }
}
