//! The JSON bytes of the messages that carry long texts (a tool's output, a tool call's
//! arguments, a text), written with a SIMD string escaper instead of serde_json's loop, which
//! looks at every byte through a table (it was a tenth of the instructions of a tool call over
//! HTTP). The bytes are exactly what serde_json writes for the same message (tested below);
//! the envelope and the four events of every request and tool call are written by hand too;
//! every other payload, and any of these with provider data (`fidelity`) to replay, is left to
//! serde_json. Each payload written by hand is destructured whole, so a new field does not
//! compile until it is written here.
//!
//! It owns no message kind and must not change a message's wire shape: `super` defines it.

use std::cell::RefCell;

use super::{Decision, EventPayload, ModelPayload, OmniMessage, Payload, Role, Sender, Usage};

/// How much text is escaped at a time: the escaper needs room for six times its input (its
/// stores run ahead of what it keeps), so a piece's room stays 24 KiB however long the text.
const PIECE: usize = 4096;

thread_local! {
    /// Where each piece is escaped before it is copied to its message, so the message's own
    /// buffer grows only by what it keeps (a kept body message would otherwise hold the room).
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Appends `text` as a JSON string, quotes included, escaped as serde_json escapes it.
pub(crate) fn write_str(out: &mut Vec<u8>, text: &str) {
    let escape = |scratch: &mut Vec<u8>, out: &mut Vec<u8>| {
        out.push(b'"');
        let mut rest = text;
        while !rest.is_empty() {
            // A character is at most 4 bytes, so a piece is never empty.
            let end = if rest.len() > PIECE {
                rest.floor_char_boundary(PIECE)
            } else {
                rest.len()
            };
            let (piece, tail) = rest.split_at(end);
            scratch.clear();
            json_escape_simd::escape_into(piece, scratch);
            // The escaper quotes each piece; the quotes are written once, around the whole.
            if let Some(inner) = scratch.get(1..scratch.len().saturating_sub(1)) {
                out.extend_from_slice(inner);
            }
            rest = tail;
        }
        out.push(b'"');
    };
    let done = SCRATCH
        .try_with(|cell| match cell.try_borrow_mut() {
            Ok(mut scratch) => {
                escape(&mut scratch, out);
                true
            }
            Err(_) => false,
        })
        .unwrap_or(false);
    if !done {
        // A thread that is exiting (no thread-locals left) escapes with a buffer of its own.
        escape(&mut Vec::new(), out);
    }
}

/// Appends the JSON of `msg` (the envelope, no newline), as `serde_json::to_writer` would.
pub(crate) fn write_message(out: &mut Vec<u8>, msg: &OmniMessage) -> Result<(), serde_json::Error> {
    out.extend_from_slice(b"{\"timestamp\":");
    write_str(out, &msg.timestamp);
    out.extend_from_slice(b",\"type\":");
    write_str(out, msg.kind());
    out.extend_from_slice(b",\"payload\":");
    let start = out.len();
    let written = match &msg.payload {
        Payload::Model(payload) => write_model_payload(out, payload),
        Payload::Event(payload) => write_event_payload(out, payload),
        Payload::SessionMeta(_) | Payload::Unknown { .. } => false,
    };
    if !written {
        out.truncate(start);
        match &msg.payload {
            Payload::SessionMeta(meta) => serde_json::to_writer(&mut *out, meta)?,
            Payload::Model(payload) => serde_json::to_writer(&mut *out, payload)?,
            Payload::Event(payload) => serde_json::to_writer(&mut *out, payload)?,
            Payload::Unknown { payload, .. } => serde_json::to_writer(&mut *out, payload)?,
        }
    }
    if let Some(origin) = &msg.origin {
        out.extend_from_slice(b",\"origin\":[");
        for (i, id) in origin.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            write_str(out, id);
        }
        out.push(b']');
    }
    out.push(b'}');
    Ok(())
}

/// Writes the four events of every model request and tool call and returns true; false for
/// the rest.
fn write_event_payload(out: &mut Vec<u8>, payload: &EventPayload) -> bool {
    match payload {
        EventPayload::RequestBegin {} => out.extend_from_slice(b"{\"type\":\"request_begin\"}"),
        EventPayload::RequestEnd {
            status,
            error_message,
            attempt,
            retry_in_ms,
        } => {
            out.extend_from_slice(b"{\"type\":\"request_end\",\"status\":\"");
            out.extend_from_slice(status.as_str().as_bytes());
            out.push(b'"');
            if let Some(error_message) = error_message {
                out.extend_from_slice(b",\"error_message\":");
                write_str(out, error_message);
            }
            if let Some(attempt) = attempt {
                out.extend_from_slice(b",\"attempt\":");
                write_number(out, u64::from(*attempt));
            }
            if let Some(retry_in_ms) = retry_in_ms {
                out.extend_from_slice(b",\"retry_in_ms\":");
                write_number(out, *retry_in_ms);
            }
            out.push(b'}');
        }
        EventPayload::ApprovalDecision {
            decision,
            tool_call_id,
            source,
            reason,
            escalation,
            decided_by,
        } => {
            out.extend_from_slice(b"{\"type\":\"approval_decision\",\"decision\":");
            out.extend_from_slice(match decision {
                Decision::Allow => b"\"allow\"",
                Decision::Deny => b"\"deny\"",
                Decision::Forbidden => b"\"forbidden\"",
                Decision::AllowForSession => b"\"allow_for_session\"",
            });
            out.extend_from_slice(b",\"tool_call_id\":");
            write_str(out, tool_call_id);
            if let Some(source) = source {
                out.extend_from_slice(b",\"source\":");
                write_str(out, source);
            }
            if let Some(reason) = reason {
                out.extend_from_slice(b",\"reason\":");
                write_str(out, reason);
            }
            if *escalation {
                out.extend_from_slice(b",\"escalation\":true");
            }
            if let Some(by) = decided_by {
                out.extend_from_slice(b",\"decided_by\":");
                write_str(out, by);
            }
            out.push(b'}');
        }
        EventPayload::TokenUsage { session, request } => {
            out.extend_from_slice(b"{\"type\":\"token_usage\",\"session\":");
            write_usage(out, session);
            out.extend_from_slice(b",\"request\":");
            write_usage(out, request);
            out.push(b'}');
        }
        _ => return false,
    }
    true
}

fn write_usage(out: &mut Vec<u8>, usage: &Usage) {
    let Usage {
        cache_read,
        cache_write,
        output,
        total,
    } = usage;
    out.extend_from_slice(b"{\"cache_read\":");
    write_number(out, *cache_read);
    out.extend_from_slice(b",\"cache_write\":");
    write_number(out, *cache_write);
    out.extend_from_slice(b",\"output\":");
    write_number(out, *output);
    out.extend_from_slice(b",\"total\":");
    write_number(out, *total);
    out.push(b'}');
}

fn write_number(out: &mut Vec<u8>, n: u64) {
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}

/// Writes the payloads it knows the shape of and returns true; false (having written
/// something or not) for the rest.
fn write_model_payload(out: &mut Vec<u8>, payload: &ModelPayload) -> bool {
    match payload {
        ModelPayload::ToolCallOutput {
            role,
            output,
            images,
            tool_call_id,
            stop_reason,
        } => {
            out.extend_from_slice(b"{\"type\":\"tool_call_output\",\"role\":");
            out.extend_from_slice(role_json(*role));
            out.extend_from_slice(b",\"output\":");
            write_str(out, output);
            if !images.is_empty() {
                out.extend_from_slice(b",\"images\":[");
                for (i, image) in images.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    write_str(out, image);
                }
                out.push(b']');
            }
            out.extend_from_slice(b",\"tool_call_id\":");
            write_str(out, tool_call_id);
            write_stop_reason(out, *stop_reason);
        }
        ModelPayload::ToolCall {
            role,
            name,
            arguments,
            tool_call_id,
            stop_reason,
            fidelity,
        } if fidelity.as_ref().is_none_or(|f| f.is_empty()) => {
            out.extend_from_slice(b"{\"type\":\"tool_call\",\"role\":");
            out.extend_from_slice(role_json(*role));
            out.extend_from_slice(b",\"name\":");
            write_str(out, name);
            out.extend_from_slice(b",\"arguments\":");
            write_str(out, arguments);
            out.extend_from_slice(b",\"tool_call_id\":");
            write_str(out, tool_call_id);
            write_stop_reason(out, *stop_reason);
        }
        ModelPayload::Text {
            role,
            text,
            sender,
            stop_reason,
            fidelity,
        } if fidelity.as_ref().is_none_or(|f| f.is_empty()) => {
            out.extend_from_slice(b"{\"type\":\"text\",\"role\":");
            out.extend_from_slice(role_json(*role));
            out.extend_from_slice(b",\"text\":");
            write_str(out, text);
            if let Some(sender) = sender {
                out.extend_from_slice(b",\"sender\":");
                out.extend_from_slice(match sender {
                    Sender::ParentAgent => b"\"parent_agent\"",
                    Sender::Harness => b"\"harness\"",
                    Sender::Server => b"\"server\"",
                });
            }
            write_stop_reason(out, *stop_reason);
        }
        _ => return false,
    }
    true
}

fn role_json(role: Role) -> &'static [u8] {
    match role {
        Role::User => b"\"user\"",
        Role::Assistant => b"\"assistant\"",
    }
}

/// `,"stop_reason":"…"}`: the last field, and the payload's end.
fn write_stop_reason(out: &mut Vec<u8>, stop_reason: super::StopReason) {
    out.extend_from_slice(b",\"stop_reason\":\"");
    out.extend_from_slice(stop_reason.as_str().as_bytes());
    out.extend_from_slice(b"\"}");
}

#[cfg(test)]
mod tests {
    use serde_json::{Map, json};

    use super::*;
    use crate::message::StopReason;

    /// Strings that exercise every escape, multi-byte text and every length around the
    /// escaper's block sizes.
    fn texts() -> Vec<String> {
        let mut texts: Vec<String> = vec![
            String::new(),
            "\"".into(),
            "\\".into(),
            "line 1: the quick brown fox\tjumps\n".repeat(40),
            // Longer than a piece, with a multi-byte character across each piece boundary.
            format!("x{}", "é".repeat(PIECE + 7)),
            format!("{}🦀{}", "a".repeat(PIECE - 2), "\"\n".repeat(PIECE)),
            "ünïcödé — 日本語 🦀 \u{7f}\u{80}\u{2028}\u{2029}\u{fffd}".into(),
            (0u8..0x80).map(char::from).collect(),
        ];
        // Every length up to 130 with an escape at each position of a block.
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let alphabet: Vec<char> = (0u8..0x80)
            .map(char::from)
            .chain(['é', '€', '😀'])
            .collect();
        for len in 0..130 {
            let mut s = String::new();
            for _ in 0..len {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                // Mostly plain letters, as real text is, with escapes now and then.
                let pick = if seed.is_multiple_of(5) {
                    alphabet[(seed >> 8) as usize % alphabet.len()]
                } else {
                    char::from(b'a' + (seed >> 8) as u8 % 26)
                };
                s.push(pick);
            }
            texts.push(s);
        }
        texts
    }

    fn same_as_serde(msg: &OmniMessage) {
        let mut fast = Vec::new();
        write_message(&mut fast, msg).unwrap();
        let serde = serde_json::to_vec(msg).unwrap();
        assert_eq!(
            String::from_utf8_lossy(&fast),
            String::from_utf8_lossy(&serde)
        );
    }

    #[test]
    fn strings_are_escaped_byte_for_byte_as_serde_json_does() {
        for text in texts() {
            let mut fast = b"prefix".to_vec();
            write_str(&mut fast, &text);
            let mut serde = b"prefix".to_vec();
            serde_json::to_writer(&mut serde, &text).unwrap();
            assert_eq!(fast, serde, "{text:?}");
        }
    }

    #[test]
    fn long_random_texts_escape_as_serde_json_does_across_pieces() {
        // Texts of up to three pieces, dense or sparse in escapes and multi-byte characters,
        // so escapes and characters fall on every kind of piece and block boundary.
        let alphabet: Vec<char> = (0u8..0x80)
            .map(char::from)
            .chain(['é', '€', '😀', '\u{2028}'])
            .collect();
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for round in 0..60u64 {
            let len = (next() % (3 * PIECE as u64)) as usize;
            let density = 1 + round % 20;
            let text: String = (0..len)
                .map(|_| {
                    let r = next();
                    if r % density == 0 {
                        alphabet[(r >> 16) as usize % alphabet.len()]
                    } else {
                        char::from(b'a' + (r >> 16) as u8 % 26)
                    }
                })
                .collect();
            let mut fast = Vec::new();
            write_str(&mut fast, &text);
            assert_eq!(fast, serde_json::to_vec(&text).unwrap(), "round {round}");
        }
    }

    #[test]
    fn the_long_payloads_are_written_as_serde_json_writes_them() {
        for (i, text) in texts().into_iter().enumerate() {
            let stop_reason = [StopReason::Completed, StopReason::Failed, StopReason::Auth][i % 3];
            let role = if i % 2 == 0 {
                Role::User
            } else {
                Role::Assistant
            };
            let payloads = [
                ModelPayload::ToolCallOutput {
                    role,
                    output: text.clone(),
                    images: if i % 4 == 0 {
                        vec![text.clone(), "data:image/png;base64,AA==".into()]
                    } else {
                        Vec::new()
                    },
                    tool_call_id: format!("call_{i}\u{1}"),
                    stop_reason,
                },
                ModelPayload::ToolCall {
                    role,
                    name: "read_file".into(),
                    arguments: text.clone(),
                    tool_call_id: text.clone(),
                    stop_reason,
                    fidelity: (i % 3 == 0).then(Map::new),
                },
                ModelPayload::Text {
                    role,
                    text: text.clone(),
                    sender: [None, Some(Sender::ParentAgent), Some(Sender::Harness)][i % 3]
                        .or((i % 7 == 0).then_some(Sender::Server)),
                    stop_reason,
                    fidelity: (i % 2 == 0).then(Map::new),
                },
            ];
            for payload in payloads {
                let mut msg = OmniMessage::model(payload);
                same_as_serde(&msg);
                msg.origin = Some(vec!["child-1".into(), text.clone()]);
                same_as_serde(&msg);
                msg.timestamp = text.clone();
                same_as_serde(&msg);
            }
        }
    }

    #[test]
    fn the_events_of_each_request_and_call_are_written_as_serde_json_writes_them() {
        let usage = |n: u64| Usage {
            cache_read: n,
            cache_write: n / 3,
            output: u64::MAX - n,
            total: 0,
        };
        let some = |t: &str| Some(t.to_string());
        let mut events = vec![
            EventPayload::RequestBegin {},
            EventPayload::TokenUsage {
                session: usage(12_345),
                request: usage(0),
            },
        ];
        for (i, text) in texts().into_iter().enumerate().step_by(7) {
            events.push(EventPayload::RequestEnd {
                status: [StopReason::Completed, StopReason::Timeout][i % 2],
                error_message: (i % 3 == 0).then(|| text.clone()),
                attempt: (i % 2 == 0).then_some(u32::MAX - i as u32),
                retry_in_ms: (i % 5 == 0).then_some(i as u64 * 1000),
            });
            events.push(EventPayload::ApprovalDecision {
                decision: [Decision::Allow, Decision::Deny, Decision::Forbidden][i % 3],
                tool_call_id: text.clone(),
                source: (i % 2 == 0).then(|| "policy".to_string()),
                reason: if i % 3 == 1 { some(&text) } else { None },
                escalation: i % 4 == 0,
                decided_by: (i % 3 == 2).then(|| text.clone()),
            });
        }
        for event in events {
            let mut msg = OmniMessage::event(event);
            same_as_serde(&msg);
            msg.origin = Some(vec!["child\"1".into()]);
            same_as_serde(&msg);
        }
    }

    #[test]
    fn other_messages_and_replayed_provider_data_are_left_to_serde_json() {
        let Some(fidelity) = json!({"signature": "s\n", "n": 1}).as_object().cloned() else {
            unreachable!()
        };
        let messages = [
            OmniMessage::model(ModelPayload::Text {
                role: Role::Assistant,
                text: "t".into(),
                sender: None,
                stop_reason: StopReason::Completed,
                fidelity: Some(fidelity.clone()),
            }),
            OmniMessage::model(ModelPayload::ToolCall {
                role: Role::Assistant,
                name: "n".into(),
                arguments: "{}".into(),
                tool_call_id: "c".into(),
                stop_reason: StopReason::Completed,
                fidelity: Some(fidelity),
            }),
            OmniMessage::model(ModelPayload::Thinking {
                role: Role::Assistant,
                thinking: "hm\t".into(),
                stop_reason: StopReason::Completed,
                fidelity: None,
            }),
            OmniMessage::event(EventPayload::Abort {
                reason: Some("user\n".into()),
            }),
            OmniMessage::session_meta(crate::message::SessionMeta::default()),
            OmniMessage {
                timestamp: "t".into(),
                payload: Payload::Unknown {
                    kind: "future_kind\u{1}".into(),
                    payload: json!({"a": [1, "b\t"]}),
                },
                origin: Some(vec!["c".into()]),
            },
        ];
        for msg in messages {
            same_as_serde(&msg);
        }
    }
}
