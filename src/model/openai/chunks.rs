//! The chunk parser of the OpenAI-compatible provider: turns the `data:` payloads of one
//! `chat/completions` SSE stream into [`ModelEvent`]s (partials, complete messages, usage, end).
//!
//! It owns segment discipline (`start → delta* → stop`, then the complete message), `content`
//! given as a string or as an array of text and thinking parts, error chunks (wrapped in
//! `error` or bare `{"object":"error"}`), when an answer is complete (finish reason, then
//! usage), the cap on one response's size, and opaque provider fields (kept in `fidelity`).
//! Tool call assembly and ids are `chunks/calls.rs`. It knows nothing about HTTP, timeouts or
//! the request body.

mod calls;
mod meta;
mod wire;

use std::sync::{Arc, Mutex};

use serde_json::{Map, Value, json};

use crate::message::{EventType, Fidelity, ModelPayload, Role, StopReason, Usage};
use crate::model::{ModelEvent, ModelOutcome};

pub(super) use self::calls::CallIds;
use self::calls::{CallAcc, Calls};
use self::meta::{map_usage, stream_error};

/// Default cap on one response's text, thinking and tool arguments together.
pub(super) const DEFAULT_MAX_RESPONSE_BYTES: usize = 8 * 1024 * 1024;

/// `fidelity` key of a thinking message: which delta field carried it (sent back under it).
pub(super) const REASONING_FIELD: &str = "reasoning_field";
/// `fidelity` key of a tool call: provider fields of the call object besides id/type/function.
pub(super) const TOOL_CALL_EXTRA: &str = "tool_call_extra";
/// `fidelity` key: provider fields of the assistant message delta (sent back on the message).
pub(super) const MESSAGE_EXTRA: &str = "message_extra";

/// Delta fields the parser understands; every other non-null one is an opaque message field.
const KNOWN_DELTA_FIELDS: [&str; 7] = [
    "role",
    "content",
    "reasoning_content",
    "reasoning",
    "tool_calls",
    "refusal",
    "function_call",
];

/// Removes the `#<digits>` a repeated id was given, for sending it back to the provider.
pub(super) fn outbound_id(id: &str) -> &str {
    match id.rsplit_once('#') {
        Some((base, n))
            if !base.is_empty() && !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) =>
        {
            base
        }
        _ => id,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Open {
    None,
    Thinking,
    Text,
    /// A call, by its slot in [`Calls`].
    Tool(usize),
}

/// What feeding one `data:` payload decided.
#[derive(Debug, PartialEq)]
pub(crate) enum Fed {
    More,
    End(ModelOutcome),
}

/// A reason to end the stream early, found in a chunk.
#[derive(Debug, thiserror::Error)]
enum ChunkError {
    /// The chunk does not mean anything sensible.
    #[error("{0}")]
    Malformed(String),
    /// The response outgrew [`ChunkParser::with_limit`].
    #[error(
        "the response is larger than max_response_bytes ({max} bytes of text, thinking and tool arguments)"
    )]
    TooLarge { max: usize },
}

impl From<&str> for ChunkError {
    fn from(s: &str) -> Self {
        ChunkError::Malformed(s.to_string())
    }
}

/// The state of one response stream (choice 0).
pub(super) struct ChunkParser {
    ids: Arc<Mutex<CallIds>>,
    open: Open,
    text: String,
    thinking: String,
    /// The delta field thinking came in, when it can be sent back under it.
    reasoning_field: Option<&'static str>,
    calls: Calls,
    message_extra: Map<String, Value>,
    finished: bool,
    usage: Option<Usage>,
    /// A usage object arrived with or after the finish reason: nothing more is expected.
    usage_final: bool,
    /// Bytes of text, thinking and arguments so far, and their cap.
    size: usize,
    max: usize,
}

impl ChunkParser {
    pub(super) fn new(ids: Arc<Mutex<CallIds>>) -> Self {
        ChunkParser {
            ids,
            open: Open::None,
            text: String::new(),
            thinking: String::new(),
            reasoning_field: None,
            calls: Calls::default(),
            message_extra: Map::new(),
            finished: false,
            usage: None,
            usage_final: false,
            size: 0,
            max: DEFAULT_MAX_RESPONSE_BYTES,
        }
    }

    /// Caps the text, thinking and tool arguments of the response at `max` bytes together.
    pub(super) fn with_limit(mut self, max: usize) -> Self {
        self.max = max;
        self
    }

    /// The finish reason and a usage object after it arrived: the answer is complete even if
    /// the server sends neither `[DONE]` nor closes the connection.
    pub(super) fn settled(&self) -> bool {
        self.finished && self.usage_final
    }

    /// The finish reason arrived (usage may still follow).
    pub(super) fn finished(&self) -> bool {
        self.finished
    }

    /// Ends a finished answer that got no usage: completed, with whatever usage was seen.
    pub(super) fn complete(&mut self, out: &mut Vec<ModelEvent>) -> ModelOutcome {
        self.eof(out)
    }

    /// Feeds the data of one SSE event; events to emit are pushed onto `out`.
    pub(super) fn feed(&mut self, data: &str, out: &mut Vec<ModelEvent>) -> Fed {
        let data = data.trim();
        // The usual chunk, parsed into borrowed fields; anything else takes the general path.
        if let Some(fed) = self.feed_typed(data, out) {
            return fed;
        }
        self.feed_general(data, out)
    }

    /// [`Self::feed`] through a `Value` tree: every chunk shape, every error text.
    fn feed_general(&mut self, data: &str, out: &mut Vec<ModelEvent>) -> Fed {
        let data = data.trim();
        if data == "[DONE]" {
            return self.finish(out);
        }
        if data.is_empty() {
            return Fed::More;
        }
        let chunk: Value = match serde_json::from_str(data) {
            Ok(v @ Value::Object(_)) => v,
            Ok(_) => {
                return Fed::End(malformed(format!(
                    "chunk is not a JSON object: {}",
                    clip(data, 200)
                )));
            }
            Err(e) => {
                return Fed::End(malformed(format!(
                    "unparseable chunk ({e}): {}",
                    clip(data, 200)
                )));
            }
        };
        if let Some(outcome) = stream_error(&chunk) {
            return Fed::End(outcome);
        }
        let usage = chunk.get("usage").filter(|u| u.is_object()).map(map_usage);
        let choice = chunk
            .get("choices")
            .and_then(Value::as_array)
            .and_then(|c| {
                c.iter()
                    .find(|c| c.get("index").and_then(Value::as_u64).unwrap_or(0) == 0)
            });
        if let Some(choice) = choice.filter(|_| !self.finished) {
            if let Some(delta) = choice.get("delta").and_then(Value::as_object)
                && let Err(e) = self.delta(delta, out)
            {
                return Fed::End(malformed(e.to_string()));
            }
            match choice.get("finish_reason") {
                Some(Value::String(r)) if r == "error" => {
                    return Fed::End(ModelOutcome::error(
                        StopReason::Failed,
                        "error in stream: the server ended the answer with finish_reason \"error\"",
                    ));
                }
                Some(r) if !r.is_null() => {
                    if let Err(e) = self.on_finish(out) {
                        return Fed::End(malformed(e.to_string()));
                    }
                }
                _ => {}
            }
        }
        if let Some(usage) = usage {
            self.usage = Some(usage);
            self.usage_final = self.finished;
        }
        Fed::More
    }

    /// The body ended without `[DONE]`: complete if a finish reason was seen.
    pub(super) fn eof(&mut self, out: &mut Vec<ModelEvent>) -> ModelOutcome {
        match self.finish(out) {
            Fed::End(o) => o,
            Fed::More => malformed("stream ended without a finish_reason".to_string()),
        }
    }

    fn finish(&mut self, out: &mut Vec<ModelEvent>) -> Fed {
        if !self.finished {
            return Fed::End(malformed(
                "stream ended without a finish_reason".to_string(),
            ));
        }
        if let Some(usage) = self.usage.take() {
            out.push(ModelEvent::Usage(usage));
        }
        Fed::End(ModelOutcome::completed())
    }

    fn grow(&mut self, by: usize) -> Result<(), ChunkError> {
        self.size = self.size.saturating_add(by);
        if self.size > self.max {
            return Err(ChunkError::TooLarge { max: self.max });
        }
        Ok(())
    }

    fn push_thinking(
        &mut self,
        piece: &str,
        field: Option<&'static str>,
        out: &mut Vec<ModelEvent>,
    ) -> Result<(), ChunkError> {
        if piece.is_empty() {
            return Ok(());
        }
        self.grow(piece.len())?;
        self.switch(Open::Thinking, out);
        if field.is_some() {
            self.reasoning_field = field;
        }
        self.thinking.push_str(piece);
        out.push(ModelEvent::partial_thinking(EventType::Delta, piece));
        Ok(())
    }

    fn push_text(&mut self, piece: &str, out: &mut Vec<ModelEvent>) -> Result<(), ChunkError> {
        if piece.is_empty() {
            return Ok(());
        }
        self.grow(piece.len())?;
        self.switch(Open::Text, out);
        self.text.push_str(piece);
        out.push(ModelEvent::partial_text(EventType::Delta, piece));
        Ok(())
    }

    /// `content` as an array of parts: `text` parts are text, `thinking` parts (whose
    /// `thinking` is a string or an array of text parts) are thinking, in their order.
    fn content_parts(
        &mut self,
        parts: &[Value],
        out: &mut Vec<ModelEvent>,
    ) -> Result<(), ChunkError> {
        for part in parts {
            let kind = part.get("type").and_then(Value::as_str).unwrap_or("text");
            match kind {
                "text" => {
                    let text = part.get("text").and_then(Value::as_str).unwrap_or("");
                    self.push_text(text, out)?;
                }
                "thinking" | "reasoning" => match part.get(kind) {
                    Some(Value::String(s)) => self.push_thinking(s, None, out)?,
                    Some(Value::Array(inner)) => {
                        for p in inner {
                            let text = p.get("text").and_then(Value::as_str).unwrap_or("");
                            self.push_thinking(text, None, out)?;
                        }
                    }
                    _ => {}
                },
                other => tracing::debug!(
                    part = other,
                    "openai: a content part of this kind is not kept"
                ),
            }
        }
        Ok(())
    }

    fn delta(
        &mut self,
        delta: &Map<String, Value>,
        out: &mut Vec<ModelEvent>,
    ) -> Result<(), ChunkError> {
        let reasoning = [
            ("reasoning_content", "reasoning_content"),
            ("reasoning", "reasoning"),
        ]
        .into_iter()
        .find_map(|(key, field)| {
            delta
                .get(key)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(|s| (s, field))
        });
        if let Some((piece, field)) = reasoning {
            self.push_thinking(piece, Some(field), out)?;
        }
        match delta.get("content") {
            Some(Value::String(piece)) => self.push_text(piece, out)?,
            Some(Value::Array(parts)) => self.content_parts(parts, out)?,
            _ => {}
        }
        if let Some(piece) = delta.get("refusal").and_then(Value::as_str) {
            self.push_text(piece, out)?;
        }
        if let Some(calls) = delta.get("tool_calls").filter(|c| !c.is_null()) {
            let calls = calls.as_array().ok_or("delta.tool_calls is not an array")?;
            for (pos, call) in calls.iter().enumerate() {
                self.tool_call_delta(pos, call, out)?;
            }
        }
        for (key, value) in delta {
            if !KNOWN_DELTA_FIELDS.contains(&key.as_str()) && !value.is_null() {
                accumulate(&mut self.message_extra, key, value);
            }
        }
        Ok(())
    }

    fn tool_call_delta(
        &mut self,
        pos: usize,
        call: &Value,
        out: &mut Vec<ModelEvent>,
    ) -> Result<(), ChunkError> {
        let call = call
            .as_object()
            .ok_or("a delta.tool_calls entry is not an object")?;
        let index = match call.get("index") {
            Some(i) => i
                .as_u64()
                .ok_or("delta.tool_calls[].index is not a number")?,
            None => u64::try_from(pos).unwrap_or(u64::MAX),
        };
        let function = call.get("function").and_then(Value::as_object);
        let name = function
            .and_then(|f| f.get("name"))
            .and_then(Value::as_str)
            .unwrap_or("");
        let fragment = function
            .and_then(|f| f.get("arguments"))
            .and_then(Value::as_str)
            .unwrap_or("");
        let provider_id = call.get("id").and_then(Value::as_str).unwrap_or("");
        let extra = call.iter().filter(|(key, value)| {
            !matches!(key.as_str(), "index" | "id" | "type" | "function") && !value.is_null()
        });
        self.tool_call_piece(index, provider_id, name, fragment, extra, out)
    }

    /// One `delta.tool_calls[]` fragment, its fields taken out; `extra` are its provider fields.
    fn tool_call_piece<'v>(
        &mut self,
        index: u64,
        provider_id: &str,
        name: &str,
        fragment: &str,
        extra: impl Iterator<Item = (&'v String, &'v Value)>,
        out: &mut Vec<ModelEvent>,
    ) -> Result<(), ChunkError> {
        let slot = match self.calls.find(index, provider_id, name) {
            Some(slot) => slot,
            None => {
                let given = Some(provider_id).filter(|s| !s.is_empty());
                let id = self
                    .ids
                    .lock()
                    .map(|mut ids| ids.assign(given))
                    .unwrap_or_else(|p| p.into_inner().assign(given));
                self.calls.open(index, provider_id, id)
            }
        };
        self.grow(fragment.len())?;
        if let Some(acc) = self.calls.get_mut(slot) {
            if acc.name.is_empty() && !name.is_empty() {
                acc.name = name.to_string();
            }
            for (key, value) in extra {
                acc.extra.insert(key.clone(), value.clone());
            }
        }
        self.switch(Open::Tool(slot), out);
        if !fragment.is_empty()
            && let Some(acc) = self.calls.get_mut(slot)
        {
            acc.arguments.push_str(fragment);
            out.push(partial_call(EventType::Delta, acc, fragment));
        }
        Ok(())
    }

    /// Closes the open segment (if another one is wanted) and opens `to`.
    fn switch(&mut self, to: Open, out: &mut Vec<ModelEvent>) {
        if self.open == to {
            return;
        }
        self.close(out);
        self.open = to;
        match to {
            Open::None => {}
            Open::Thinking => out.push(ModelEvent::partial_thinking(EventType::Start, "")),
            Open::Text => out.push(ModelEvent::partial_text(EventType::Start, "")),
            Open::Tool(i) => {
                if let Some(acc) = self.calls.get(i) {
                    out.push(partial_call(EventType::Start, acc, ""));
                }
            }
        }
    }

    /// Stops the open segment; a text or thinking segment's complete message follows at once.
    fn close(&mut self, out: &mut Vec<ModelEvent>) {
        match std::mem::replace(&mut self.open, Open::None) {
            Open::None => {}
            Open::Thinking => {
                out.push(ModelEvent::partial_thinking(EventType::Stop, ""));
                // Thinking from `content` parts has no field to be sent back under.
                let fidelity = self.reasoning_field.take().map(|field| {
                    let mut fidelity = Fidelity::new();
                    fidelity.insert(REASONING_FIELD.to_string(), json!(field));
                    fidelity
                });
                out.push(ModelEvent::Complete(ModelPayload::Thinking {
                    role: Role::Assistant,
                    thinking: std::mem::take(&mut self.thinking),
                    stop_reason: StopReason::Completed,
                    fidelity,
                }));
            }
            Open::Text => {
                out.push(ModelEvent::partial_text(EventType::Stop, ""));
                out.push(ModelEvent::Complete(ModelPayload::Text {
                    role: Role::Assistant,
                    text: std::mem::take(&mut self.text),
                    sender: None,
                    stop_reason: StopReason::Completed,
                    fidelity: None,
                }));
            }
            Open::Tool(i) => {
                if let Some(acc) = self.calls.get(i) {
                    out.push(partial_call(EventType::Stop, acc, ""));
                }
            }
        }
    }

    /// The choice finished: close the open segment, complete every tool call in index order,
    /// and attach the opaque message fields to the last message completed here.
    fn on_finish(&mut self, out: &mut Vec<ModelEvent>) -> Result<(), ChunkError> {
        self.finished = true;
        let first_here = out.len();
        self.close(out);
        for acc in self.calls.take() {
            if acc.name.is_empty() {
                return Err(ChunkError::Malformed(format!(
                    "tool call {} ({}) has no function name",
                    acc.index, acc.id
                )));
            }
            let fidelity = (!acc.extra.is_empty()).then(|| {
                let mut f = Fidelity::new();
                f.insert(TOOL_CALL_EXTRA.to_string(), Value::Object(acc.extra));
                f
            });
            out.push(ModelEvent::Complete(ModelPayload::ToolCall {
                role: Role::Assistant,
                name: acc.name,
                arguments: acc.arguments,
                tool_call_id: acc.id,
                stop_reason: StopReason::Completed,
                fidelity,
            }));
        }
        if self.message_extra.is_empty() {
            return Ok(());
        }
        let extra = Value::Object(std::mem::take(&mut self.message_extra));
        let last = out[first_here..].iter_mut().rev().find_map(|e| match e {
            ModelEvent::Complete(
                ModelPayload::Text { fidelity, .. }
                | ModelPayload::Thinking { fidelity, .. }
                | ModelPayload::ToolCall { fidelity, .. },
            ) => Some(fidelity),
            _ => None,
        });
        match last {
            Some(fidelity) => {
                fidelity
                    .get_or_insert_with(Fidelity::new)
                    .insert(MESSAGE_EXTRA.to_string(), extra);
            }
            None => {
                tracing::debug!("openai: opaque message fields with no message to keep them on")
            }
        }
        Ok(())
    }
}

/// Strings are concatenated, arrays extended, anything else replaced (streamed fields).
fn accumulate(map: &mut Map<String, Value>, key: &str, value: &Value) {
    match (map.get_mut(key), value) {
        (Some(Value::String(acc)), Value::String(s)) => acc.push_str(s),
        (Some(Value::Array(acc)), Value::Array(items)) => acc.extend(items.iter().cloned()),
        _ => {
            map.insert(key.to_string(), value.clone());
        }
    }
}

fn malformed(message: String) -> ModelOutcome {
    ModelOutcome::error(StopReason::Malformed, message)
}

/// At most `max` characters of `s`, with `…` when cut.
pub(crate) fn clip(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &s[..at]),
        None => s.to_string(),
    }
}

fn partial_call(event_type: EventType, acc: &CallAcc, arguments: &str) -> ModelEvent {
    ModelEvent::Partial(ModelPayload::PartialToolCall {
        role: Role::Assistant,
        event_type,
        name: acc.name.clone(),
        arguments: arguments.to_string(),
        tool_call_id: acc.id.clone(),
        stop_reason: StopReason::Completed,
    })
}

#[cfg(test)]
mod tests;
