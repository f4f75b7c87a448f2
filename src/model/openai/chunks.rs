//! The chunk parser of the OpenAI-compatible provider: turns the `data:` payloads of one
//! `chat/completions` SSE stream into [`ModelEvent`]s (partials, complete messages, usage, end).
//!
//! It owns segment discipline (`start → delta* → stop`, then the complete message), tool call
//! assembly by `index`, opaque provider fields (kept in `fidelity`), and tool call id
//! uniqueness. It knows nothing about HTTP, timeouts or the request body.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use serde_json::{Map, Value, json};

use crate::message::{EventType, Fidelity, ModelPayload, Role, StopReason, Usage};
use crate::model::{ModelEvent, ModelOutcome};

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

/// Tool call ids seen by one session: repeats become `<id>#2`, missing ids are generated.
#[derive(Debug, Default)]
pub(super) struct CallIds {
    seen: HashMap<String, u32>,
    generated: u64,
}

impl CallIds {
    fn assign(&mut self, provider_id: Option<&str>) -> String {
        let base = match provider_id.filter(|s| !s.is_empty()) {
            Some(id) => id.to_string(),
            None => {
                self.generated += 1;
                format!("call_rk{}", self.generated)
            }
        };
        let n = self.seen.entry(base.clone()).or_insert(0);
        *n += 1;
        if *n == 1 { base } else { format!("{base}#{n}") }
    }
}

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
    Tool(u64),
}

#[derive(Debug, Default)]
struct CallAcc {
    id: String,
    name: String,
    arguments: String,
    extra: Map<String, Value>,
}

/// What feeding one `data:` payload decided.
#[derive(Debug, PartialEq)]
pub(crate) enum Fed {
    More,
    End(ModelOutcome),
}

/// The state of one response stream (choice 0).
pub(super) struct ChunkParser {
    ids: Arc<Mutex<CallIds>>,
    open: Open,
    text: String,
    thinking: String,
    reasoning_field: &'static str,
    calls: BTreeMap<u64, CallAcc>,
    message_extra: Map<String, Value>,
    finished: bool,
    usage: Option<Usage>,
}

impl ChunkParser {
    pub(super) fn new(ids: Arc<Mutex<CallIds>>) -> Self {
        ChunkParser {
            ids,
            open: Open::None,
            text: String::new(),
            thinking: String::new(),
            reasoning_field: "reasoning_content",
            calls: BTreeMap::new(),
            message_extra: Map::new(),
            finished: false,
            usage: None,
        }
    }

    /// Feeds the data of one SSE event; events to emit are pushed onto `out`.
    pub(super) fn feed(&mut self, data: &str, out: &mut Vec<ModelEvent>) -> Fed {
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
        if let Some(err) = chunk.get("error").filter(|e| !e.is_null()) {
            let message = err
                .get("message")
                .and_then(Value::as_str)
                .map(str::to_string)
                .unwrap_or_else(|| clip(&err.to_string(), 500));
            return Fed::End(ModelOutcome::error(
                StopReason::Failed,
                format!("error in stream: {message}"),
            ));
        }
        if let Some(usage) = chunk.get("usage").filter(|u| u.is_object()) {
            self.usage = Some(map_usage(usage));
        }
        let Some(choices) = chunk.get("choices").and_then(Value::as_array) else {
            return Fed::More;
        };
        let choice = choices
            .iter()
            .find(|c| c.get("index").and_then(Value::as_u64).unwrap_or(0) == 0);
        let Some(choice) = choice else {
            return Fed::More;
        };
        if self.finished {
            return Fed::More;
        }
        if let Some(delta) = choice.get("delta").and_then(Value::as_object)
            && let Err(e) = self.delta(delta, out)
        {
            return Fed::End(malformed(e));
        }
        if choice.get("finish_reason").is_some_and(|r| !r.is_null())
            && let Err(e) = self.on_finish(out)
        {
            return Fed::End(malformed(e));
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

    fn delta(
        &mut self,
        delta: &Map<String, Value>,
        out: &mut Vec<ModelEvent>,
    ) -> Result<(), String> {
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
            self.switch(Open::Thinking, out);
            self.reasoning_field = field;
            self.thinking.push_str(piece);
            out.push(partial_thinking(EventType::Delta, piece));
        }
        for key in ["content", "refusal"] {
            if let Some(piece) = delta
                .get(key)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
            {
                self.switch(Open::Text, out);
                self.text.push_str(piece);
                out.push(partial_text(EventType::Delta, piece));
            }
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
    ) -> Result<(), String> {
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
        if !self.calls.contains_key(&index) {
            let provider_id = call.get("id").and_then(Value::as_str);
            let id = self
                .ids
                .lock()
                .map(|mut ids| ids.assign(provider_id))
                .unwrap_or_else(|p| p.into_inner().assign(provider_id));
            self.calls.insert(
                index,
                CallAcc {
                    id,
                    ..CallAcc::default()
                },
            );
        }
        if let Some(acc) = self.calls.get_mut(&index) {
            if acc.name.is_empty() && !name.is_empty() {
                acc.name = name.to_string();
            }
            for (key, value) in call {
                if !matches!(key.as_str(), "index" | "id" | "type" | "function") && !value.is_null()
                {
                    acc.extra.insert(key.clone(), value.clone());
                }
            }
        }
        self.switch(Open::Tool(index), out);
        if !fragment.is_empty()
            && let Some(acc) = self.calls.get_mut(&index)
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
            Open::Thinking => out.push(partial_thinking(EventType::Start, "")),
            Open::Text => out.push(partial_text(EventType::Start, "")),
            Open::Tool(i) => {
                if let Some(acc) = self.calls.get(&i) {
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
                out.push(partial_thinking(EventType::Stop, ""));
                let mut fidelity = Fidelity::new();
                fidelity.insert(REASONING_FIELD.to_string(), json!(self.reasoning_field));
                out.push(ModelEvent::Complete(ModelPayload::Thinking {
                    role: Role::Assistant,
                    thinking: std::mem::take(&mut self.thinking),
                    stop_reason: StopReason::Completed,
                    fidelity: Some(fidelity),
                }));
            }
            Open::Text => {
                out.push(partial_text(EventType::Stop, ""));
                out.push(ModelEvent::Complete(ModelPayload::Text {
                    role: Role::Assistant,
                    text: std::mem::take(&mut self.text),
                    sender: None,
                    stop_reason: StopReason::Completed,
                    fidelity: None,
                }));
            }
            Open::Tool(i) => {
                if let Some(acc) = self.calls.get(&i) {
                    out.push(partial_call(EventType::Stop, acc, ""));
                }
            }
        }
    }

    /// The choice finished: close the open segment, complete every tool call in index order,
    /// and attach the opaque message fields to the last message completed here.
    fn on_finish(&mut self, out: &mut Vec<ModelEvent>) -> Result<(), String> {
        self.finished = true;
        let first_here = out.len();
        self.close(out);
        for (index, acc) in std::mem::take(&mut self.calls) {
            if acc.name.is_empty() {
                return Err(format!(
                    "tool call {index} ({}) has no function name",
                    acc.id
                ));
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

fn map_usage(usage: &Value) -> Usage {
    let n = |v: Option<&Value>| v.and_then(Value::as_u64).unwrap_or(0);
    let prompt = n(usage.get("prompt_tokens"));
    let output = n(usage.get("completion_tokens"));
    let total = usage
        .get("total_tokens")
        .and_then(Value::as_u64)
        .unwrap_or(prompt.saturating_add(output));
    let cache_read = usage
        .get("prompt_tokens_details")
        .and_then(|d| d.get("cached_tokens"))
        .or_else(|| usage.get("prompt_cache_hit_tokens"))
        .and_then(Value::as_u64)
        .unwrap_or(0);
    Usage {
        cache_read,
        cache_write: 0,
        output,
        total,
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

fn partial_text(event_type: EventType, text: &str) -> ModelEvent {
    ModelEvent::Partial(ModelPayload::PartialText {
        role: Role::Assistant,
        event_type,
        text: text.to_string(),
        stop_reason: StopReason::Completed,
    })
}

fn partial_thinking(event_type: EventType, thinking: &str) -> ModelEvent {
    ModelEvent::Partial(ModelPayload::PartialThinking {
        role: Role::Assistant,
        event_type,
        thinking: thinking.to_string(),
        stop_reason: StopReason::Completed,
    })
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
