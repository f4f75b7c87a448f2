//! The event parser of the Anthropic provider: turns the `data:` payloads of one streamed
//! Messages response (`message_start`, `content_block_start/delta/stop`, `message_delta`,
//! `message_stop`, `ping`, `error`) into [`ModelEvent`]s.
//!
//! It owns segment discipline (`start → delta* → stop`, then the complete message), tool input
//! assembly (fragments joined, parsed at block stop; none = `{}`), thinking signatures and
//! redacted thinking (kept for the next request), usage (each field from the last event carrying
//! it) and the classification of in-stream errors. Server tool blocks are not client calls and
//! are skipped. It knows nothing about HTTP, timeouts or the request body.

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use super::request::{FIDELITY_KEY, REDACTED_THINKING_MIME};
use crate::message::{EventType, Fidelity, ModelPayload, Role, StopReason, Usage};
use crate::model::ModelEvent;
use crate::model::ModelOutcome;
use crate::model::openai::{Fed, StreamParser, clip};

/// One content block being streamed, by its `index`.
#[derive(Debug)]
enum Block {
    Text(String),
    Thinking {
        thinking: String,
        signature: String,
    },
    Tool {
        id: String,
        name: String,
        json: String,
    },
    /// Server tools, their results, and block types this client does not know: skipped.
    Skipped,
}

/// Usage fields as last reported.
#[derive(Debug, Default)]
struct Counts {
    input: Option<u64>,
    cache_write: Option<u64>,
    cache_read: Option<u64>,
    output: Option<u64>,
}

impl Counts {
    fn merge(&mut self, usage: &Value) {
        let take = |slot: &mut Option<u64>, key: &str| {
            if let Some(n) = usage.get(key).and_then(Value::as_u64) {
                *slot = Some(n);
            }
        };
        take(&mut self.input, "input_tokens");
        take(&mut self.cache_write, "cache_creation_input_tokens");
        take(&mut self.cache_read, "cache_read_input_tokens");
        take(&mut self.output, "output_tokens");
    }

    fn usage(&self) -> Usage {
        let (input, cache_write, cache_read, output) = (
            self.input.unwrap_or(0),
            self.cache_write.unwrap_or(0),
            self.cache_read.unwrap_or(0),
            self.output.unwrap_or(0),
        );
        Usage {
            cache_read,
            cache_write,
            output,
            total: input
                .saturating_add(cache_write)
                .saturating_add(cache_read)
                .saturating_add(output),
        }
    }
}

/// The state of one response stream.
#[derive(Debug, Default)]
pub(super) struct EventParser {
    started: bool,
    blocks: BTreeMap<u64, Block>,
    counts: Counts,
    stop_reason: Option<String>,
    /// Tool ids the session has seen (a repeated id would make a later request invalid).
    ids: Arc<Mutex<HashSet<String>>>,
    /// Bytes of text, thinking, signatures and tool input so far, and their cap.
    size: usize,
    max: usize,
}

impl EventParser {
    pub(super) fn new(ids: Arc<Mutex<HashSet<String>>>, max_bytes: usize) -> Self {
        EventParser {
            ids,
            max: max_bytes,
            ..EventParser::default()
        }
    }

    /// Counts `n` more bytes of the response against the cap.
    fn grow(&mut self, n: usize) -> Result<(), StreamError> {
        self.size = self.size.saturating_add(n);
        if self.size > self.max {
            return Err(StreamError::TooLarge(self.max));
        }
        Ok(())
    }

    fn event(&mut self, event: &Value, out: &mut Vec<ModelEvent>) -> Result<Fed, StreamError> {
        let kind = event.get("type").and_then(Value::as_str).unwrap_or("");
        match kind {
            "ping" => {}
            "error" => return Ok(Fed::End(stream_error(event.get("error")))),
            "message_start" => {
                self.started = true;
                if let Some(usage) = event.pointer("/message/usage") {
                    self.counts.merge(usage);
                }
            }
            "content_block_start" => {
                let index = index(event)?;
                let block = event
                    .get("content_block")
                    .ok_or(StreamError::Missing("content_block_start", "content_block"))?;
                self.grow(payload_bytes(block))?;
                self.start(index, block, out)?;
            }
            "content_block_delta" => {
                let index = index(event)?;
                let delta = event
                    .get("delta")
                    .ok_or(StreamError::Missing("content_block_delta", "delta"))?;
                self.grow(payload_bytes(delta))?;
                self.delta(index, delta, out)?;
            }
            "content_block_stop" => {
                let index = index(event)?;
                self.stop(index, out)?;
            }
            "message_delta" => {
                if let Some(reason) = event.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    self.stop_reason = Some(reason.to_string());
                }
                if let Some(usage) = event.get("usage") {
                    self.counts.merge(usage);
                }
            }
            "message_stop" => return Ok(self.finish(out)),
            other => tracing::debug!(event = %other, "anthropic: unknown stream event ignored"),
        }
        Ok(Fed::More)
    }

    fn start(
        &mut self,
        index: u64,
        block: &Value,
        out: &mut Vec<ModelEvent>,
    ) -> Result<(), StreamError> {
        if self.blocks.contains_key(&index) {
            return Err(StreamError::StartedTwice(index));
        }
        let str_field = |key: &str| block.get(key).and_then(Value::as_str).unwrap_or("");
        let new = match str_field("type") {
            "text" => {
                out.push(ModelEvent::partial_text(EventType::Start, ""));
                let text = str_field("text").to_string();
                if !text.is_empty() {
                    out.push(ModelEvent::partial_text(EventType::Delta, &text));
                }
                Block::Text(text)
            }
            "thinking" => {
                out.push(ModelEvent::partial_thinking(EventType::Start, ""));
                let thinking = str_field("thinking").to_string();
                if !thinking.is_empty() {
                    out.push(ModelEvent::partial_thinking(EventType::Delta, &thinking));
                }
                Block::Thinking {
                    thinking,
                    signature: str_field("signature").to_string(),
                }
            }
            "redacted_thinking" => {
                out.push(ModelEvent::Complete(ModelPayload::InlineThinking {
                    role: Role::Assistant,
                    data: str_field("data").to_string(),
                    mime_type: REDACTED_THINKING_MIME.to_string(),
                    stop_reason: StopReason::Completed,
                    fidelity: None,
                }));
                Block::Skipped
            }
            "tool_use" => {
                let name = str_field("name").to_string();
                if name.is_empty() {
                    return Err(StreamError::NoToolName(index));
                }
                let id = self.unique_id(str_field("id"));
                out.push(partial_call(EventType::Start, &name, &id, ""));
                // Input given whole in the start (a non-empty object) counts as its first fragment.
                let json = match block.get("input") {
                    Some(Value::Object(m)) if !m.is_empty() => Value::Object(m.clone()).to_string(),
                    _ => String::new(),
                };
                if !json.is_empty() {
                    out.push(partial_call(EventType::Delta, &name, &id, &json));
                }
                Block::Tool { id, name, json }
            }
            other => {
                tracing::debug!(block = %other, "anthropic: content block not for the client; skipped");
                Block::Skipped
            }
        };
        self.blocks.insert(index, new);
        Ok(())
    }

    /// The provider's id, or `<id>_<n>` when the session saw it before (`toolu_rk<n>` if none).
    fn unique_id(&mut self, id: &str) -> String {
        let mut ids = self.ids.lock().unwrap_or_else(|p| p.into_inner());
        let base = if id.is_empty() {
            format!("toolu_rk{}", ids.len() + 1)
        } else {
            id.to_string()
        };
        let mut unique = base.clone();
        let mut n = 1;
        while ids.contains(&unique) {
            n += 1;
            unique = format!("{base}_{n}");
        }
        ids.insert(unique.clone());
        unique
    }

    fn delta(
        &mut self,
        index: u64,
        delta: &Value,
        out: &mut Vec<ModelEvent>,
    ) -> Result<(), StreamError> {
        let block = self
            .blocks
            .get_mut(&index)
            .ok_or(StreamError::NotStarted("delta for", index))?;
        let kind = delta.get("type").and_then(Value::as_str).unwrap_or("");
        let piece = |key: &'static str| -> Result<&str, StreamError> {
            delta
                .get(key)
                .and_then(Value::as_str)
                .ok_or_else(|| StreamError::DeltaField(kind.to_string(), key))
        };
        match (block, kind) {
            (Block::Text(text), "text_delta") => {
                let p = piece("text")?;
                if !p.is_empty() {
                    text.push_str(p);
                    out.push(ModelEvent::partial_text(EventType::Delta, p));
                }
            }
            (Block::Thinking { thinking, .. }, "thinking_delta") => {
                let p = piece("thinking")?;
                if !p.is_empty() {
                    thinking.push_str(p);
                    out.push(ModelEvent::partial_thinking(EventType::Delta, p));
                }
            }
            (Block::Thinking { signature, .. }, "signature_delta") => {
                signature.push_str(piece("signature")?);
            }
            (Block::Tool { id, name, json }, "input_json_delta") => {
                let p = piece("partial_json")?;
                if !p.is_empty() {
                    json.push_str(p);
                    out.push(partial_call(EventType::Delta, name, id, p));
                }
            }
            (Block::Skipped, _) | (Block::Text(_), "citations_delta") => {}
            (_, kind) => {
                return Err(StreamError::DeltaMismatch(kind.to_string(), index));
            }
        }
        Ok(())
    }

    fn stop(&mut self, index: u64, out: &mut Vec<ModelEvent>) -> Result<(), StreamError> {
        let block = self
            .blocks
            .get_mut(&index)
            .ok_or(StreamError::NotStarted("stop of", index))?;
        complete(index, std::mem::replace(block, Block::Skipped), out)
    }

    /// `message_stop` (or the end of the body after `message_delta`): close what is open, then
    /// usage and a completed end.
    fn finish(&mut self, out: &mut Vec<ModelEvent>) -> Fed {
        for (index, block) in std::mem::take(&mut self.blocks) {
            if let Err(e) = complete(index, block, out) {
                return Fed::End(malformed(e.to_string()));
            }
        }
        if self.stop_reason.is_none() {
            return Fed::End(malformed(
                "stream ended without a stop_reason (no message_delta)".to_string(),
            ));
        }
        out.push(ModelEvent::Usage(self.counts.usage()));
        Fed::End(ModelOutcome::completed())
    }
}

impl StreamParser for EventParser {
    fn finished(&self) -> bool {
        self.stop_reason.is_some()
    }

    fn complete(&mut self, out: &mut Vec<ModelEvent>) -> ModelOutcome {
        match self.finish(out) {
            Fed::End(outcome) => outcome,
            Fed::More => malformed("stream ended early".to_string()),
        }
    }

    fn feed(&mut self, data: &str, out: &mut Vec<ModelEvent>) -> Fed {
        let data = data.trim();
        if data.is_empty() {
            return Fed::More;
        }
        let event: Value = match serde_json::from_str(data) {
            Ok(v @ Value::Object(_)) => v,
            Ok(_) => {
                return Fed::End(malformed(format!(
                    "event is not a JSON object: {}",
                    clip(data, 200)
                )));
            }
            Err(e) => {
                return Fed::End(malformed(format!(
                    "unparseable event ({e}): {}",
                    clip(data, 200)
                )));
            }
        };
        match self.event(&event, out) {
            Ok(fed) => fed,
            Err(e) => Fed::End(malformed(e.to_string())),
        }
    }

    fn eof(&mut self, out: &mut Vec<ModelEvent>) -> ModelOutcome {
        if !self.started {
            return malformed("stream ended before message_start".to_string());
        }
        match self.finish(out) {
            Fed::End(outcome) => outcome,
            Fed::More => malformed("stream ended early".to_string()),
        }
    }
}

/// Emits a finished block: the stop partial and its complete message.
fn complete(index: u64, block: Block, out: &mut Vec<ModelEvent>) -> Result<(), StreamError> {
    match block {
        Block::Skipped => {}
        Block::Text(text) => {
            out.push(ModelEvent::partial_text(EventType::Stop, ""));
            out.push(ModelEvent::Complete(ModelPayload::Text {
                role: Role::Assistant,
                text,
                sender: None,
                stop_reason: StopReason::Completed,
                fidelity: None,
            }));
        }
        Block::Thinking {
            thinking,
            signature,
        } => {
            out.push(ModelEvent::partial_thinking(EventType::Stop, ""));
            let mut fidelity = Fidelity::new();
            fidelity.insert(FIDELITY_KEY.to_string(), json!({"signature": signature}));
            out.push(ModelEvent::Complete(ModelPayload::Thinking {
                role: Role::Assistant,
                thinking,
                stop_reason: StopReason::Completed,
                fidelity: Some(fidelity),
            }));
        }
        Block::Tool { id, name, mut json } => {
            if json.trim().is_empty() {
                json = "{}".to_string();
                out.push(partial_call(EventType::Delta, &name, &id, &json));
            } else {
                match serde_json::from_str::<Value>(&json) {
                    Ok(Value::Object(_)) => {}
                    Ok(_) => {
                        return Err(StreamError::InputNotObject {
                            index,
                            name,
                            head: clip(&json, 200),
                        });
                    }
                    Err(e) => {
                        return Err(StreamError::InputNotJson {
                            index,
                            name,
                            source: e,
                            head: clip(&json, 200),
                        });
                    }
                }
            }
            out.push(partial_call(EventType::Stop, &name, &id, ""));
            out.push(ModelEvent::Complete(ModelPayload::ToolCall {
                role: Role::Assistant,
                name,
                arguments: json,
                tool_call_id: id,
                stop_reason: StopReason::Completed,
                fidelity: None,
            }));
        }
    }
    Ok(())
}

/// Bytes of the strings a block start or delta carries (what the response accumulates).
fn payload_bytes(v: &Value) -> usize {
    match v {
        Value::String(s) => s.len(),
        Value::Array(a) => a.iter().map(payload_bytes).sum(),
        Value::Object(m) => m.values().map(payload_bytes).sum(),
        _ => 0,
    }
}

fn index(event: &Value) -> Result<u64, StreamError> {
    event
        .get("index")
        .and_then(Value::as_u64)
        .ok_or(StreamError::NoIndex)
}

/// Why a stream is malformed; its text is the `malformed` request's error message.
#[derive(Debug, thiserror::Error)]
enum StreamError {
    #[error("the response exceeds {0} bytes of text, thinking and tool input")]
    TooLarge(usize),
    #[error("{0} without {1}")]
    Missing(&'static str, &'static str),
    #[error("content block {0} started twice")]
    StartedTwice(u64),
    #[error("tool_use block {0} has no name")]
    NoToolName(u64),
    #[error("{0} content block {1}, which never started")]
    NotStarted(&'static str, u64),
    #[error("{0} without a {1} string")]
    DeltaField(String, &'static str),
    #[error("delta of type \"{0}\" does not fit content block {1}")]
    DeltaMismatch(String, u64),
    #[error("input of tool_use {index} ({name}) is not a JSON object: {head}")]
    InputNotObject {
        index: u64,
        name: String,
        head: String,
    },
    #[error("input of tool_use {index} ({name}) is not valid JSON ({source}): {head}")]
    InputNotJson {
        index: u64,
        name: String,
        source: serde_json::Error,
        head: String,
    },
    #[error("content block event without an index")]
    NoIndex,
}

/// An `error` event: overloaded / API / rate-limit errors are retried, auth is final, request
/// errors are permanent.
fn stream_error(error: Option<&Value>) -> ModelOutcome {
    let kind = error
        .and_then(|e| e.get("type"))
        .and_then(Value::as_str)
        .unwrap_or("error");
    let message = error
        .and_then(|e| e.get("message"))
        .and_then(Value::as_str)
        .unwrap_or("no message");
    let text = format!("error in stream: {kind}: {}", clip(message, 500));
    match kind {
        "authentication_error" | "permission_error" => ModelOutcome::error(StopReason::Auth, text),
        "invalid_request_error" | "not_found_error" | "request_too_large" | "billing_error" => {
            let mut o = ModelOutcome::error(StopReason::Failed, text);
            o.permanent = true;
            o
        }
        _ => ModelOutcome::error(StopReason::Failed, text),
    }
}

fn malformed(message: String) -> ModelOutcome {
    ModelOutcome::error(StopReason::Malformed, message)
}

fn partial_call(event_type: EventType, name: &str, id: &str, arguments: &str) -> ModelEvent {
    ModelEvent::Partial(ModelPayload::PartialToolCall {
        role: Role::Assistant,
        event_type,
        name: name.to_string(),
        arguments: arguments.to_string(),
        tool_call_id: id.to_string(),
        stop_reason: StopReason::Completed,
    })
}
#[cfg(test)]
#[path = "stream_tests.rs"]
mod tests;
