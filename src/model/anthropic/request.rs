//! The request body of the Anthropic provider: `ModelRequest` → Messages API JSON (top-level
//! `system`, tool definitions, the history as alternating user/assistant messages of content
//! blocks, `max_tokens`, `thinking` and the configured extra fields, prompt-cache breakpoints).
//!
//! It owns the history → messages mapping: assistant turns keep their thinking / redacted
//! thinking blocks (signatures unchanged) before the `tool_use` blocks they preceded; the next
//! user message starts with one `tool_result` per `tool_use_id`, in call order. It never sends
//! anything and never sees the API key.

use serde_json::{Map, Value, json};

use super::DEFAULT_MAX_TOKENS;
use crate::message::{Fidelity, ModelPayload, Role, StopReason};
use crate::model::ModelRequest;
use crate::model::error::ModelSetupError;
use crate::model::openai::request::IMAGE_OMITTED;

/// Body keys Rookery sets itself; the config may not set them.
pub const RESERVED_BODY_KEYS: [&str; 5] = ["model", "messages", "stream", "system", "tools"];
/// `fidelity` key of an Anthropic thinking message: `{"signature": …}`.
pub const FIDELITY_KEY: &str = "anthropic";
/// `mime_type` of a `redacted_thinking` block kept as `inline_thinking` (its `data` verbatim).
pub const REDACTED_THINKING_MIME: &str = "application/vnd.anthropic.redacted-thinking";
/// Most `cache_control` breakpoints one request may carry (an API rule).
pub const MAX_CACHE_BREAKPOINTS: usize = 4;
/// What a call the history has no output for is answered with.
pub const MISSING_OUTPUT: &str = "[no output recorded for this call]";

/// The config's extra fields, checked against the API's rules (`max_tokens` a positive integer;
/// `thinking` `{type: enabled, budget_tokens >= 1024 and < max_tokens}` or `{type: disabled}`;
/// `stop` becomes `stop_sequences`).
pub fn checked_extra(extra: &Map<String, Value>) -> Result<Map<String, Value>, ModelSetupError> {
    if let Some(key) = extra
        .keys()
        .find(|k| RESERVED_BODY_KEYS.contains(&k.as_str()))
    {
        return Err(ModelSetupError::ReservedExtra(key.clone()));
    }
    let max_tokens = match extra.get("max_tokens") {
        None => DEFAULT_MAX_TOKENS,
        Some(v) => v
            .as_u64()
            .filter(|n| *n > 0)
            .ok_or(ModelSetupError::BadMaxTokens)?,
    };
    if let Some(thinking) = extra.get("thinking") {
        match thinking.get("type").and_then(Value::as_str) {
            Some("enabled") => {
                let budget = thinking
                    .get("budget_tokens")
                    .and_then(Value::as_u64)
                    .ok_or(ModelSetupError::BadThinkingBudget)?;
                if budget < 1024 {
                    return Err(ModelSetupError::SmallThinkingBudget);
                }
                if budget >= max_tokens {
                    return Err(ModelSetupError::ThinkingOverMaxTokens { budget, max_tokens });
                }
            }
            Some("disabled") | Some("adaptive") => {}
            _ => {
                return Err(ModelSetupError::BadThinking);
            }
        }
    }
    let mut out = extra.clone();
    out.insert("max_tokens".into(), json!(max_tokens));
    // The OpenAI-style `stop` (a string or a list) is the Messages API's `stop_sequences`.
    if let Some(stop) = out.remove("stop") {
        let list = match stop {
            Value::String(s) => json!([s]),
            v @ Value::Array(_) => v,
            _ => return Err(ModelSetupError::BadStop),
        };
        out.entry("stop_sequences").or_insert(list);
    }
    Ok(out)
}

/// The JSON body of one streamed request.
pub fn build_body(
    model: &str,
    request: &ModelRequest,
    vision: bool,
    extra: &Map<String, Value>,
) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    body.insert("max_tokens".into(), json!(DEFAULT_MAX_TOKENS));
    let mut breakpoints = 0;
    if !request.system_prompt.trim().is_empty() {
        body.insert(
            "system".into(),
            json!([{
                "type": "text",
                "text": request.system_prompt.as_ref(),
                "cache_control": {"type": "ephemeral"},
            }]),
        );
        breakpoints += 1;
    }
    let mut messages = messages(request, vision);
    if breakpoints < MAX_CACHE_BREAKPOINTS {
        mark_last_message(&mut messages);
    }
    body.insert("messages".into(), Value::Array(messages));
    if !request.tools.is_empty() {
        body.insert(
            "tools".into(),
            Value::Array(request.tools.iter().map(tool_definition).collect()),
        );
    }
    body.insert("stream".into(), json!(true));
    for (key, value) in extra {
        if !RESERVED_BODY_KEYS.contains(&key.as_str()) {
            body.insert(key.clone(), value.clone());
        }
    }
    Value::Object(body)
}

/// `{name, description, parameters}` → `{name, description, input_schema}`.
fn tool_definition(spec: &Value) -> Value {
    let mut tool = Map::new();
    tool.insert(
        "name".into(),
        spec.get("name").cloned().unwrap_or(json!("")),
    );
    if let Some(d) = spec.get("description").filter(|d| d.is_string()) {
        tool.insert("description".into(), d.clone());
    }
    let schema = match spec.get("parameters") {
        Some(p @ Value::Object(_)) => p.clone(),
        _ => json!({"type": "object", "properties": {}}),
    };
    tool.insert("input_schema".into(), schema);
    Value::Object(tool)
}

/// A `cache_control` breakpoint on the last block of the last message that may carry one
/// (thinking blocks may not).
fn mark_last_message(messages: &mut [Value]) {
    let Some(blocks) = messages
        .last_mut()
        .and_then(|m| m.get_mut("content"))
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    let target = blocks.iter_mut().rev().find(|b| {
        !matches!(
            b.get("type").and_then(Value::as_str),
            Some("thinking" | "redacted_thinking")
        )
    });
    if let Some(Value::Object(block)) = target {
        block.insert("cache_control".into(), json!({"type": "ephemeral"}));
    }
}

/// Tool use ids must match `^[a-zA-Z0-9_-]+$`; other characters become `_`.
pub fn outbound_id(id: &str) -> String {
    let clean: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if clean.is_empty() {
        "toolu_rk".to_string()
    } else {
        clean
    }
}

struct Builder {
    vision: bool,
    out: Vec<Value>,
    /// The assistant message being assembled, and the ids of its `tool_use` blocks.
    assistant: Vec<Value>,
    call_ids: Vec<String>,
    /// Tool outputs answering `call_ids`: (id, block).
    results: Vec<(String, Value)>,
    /// Other user blocks (text, images) of the next user message.
    user: Vec<Value>,
}

fn messages(request: &ModelRequest, vision: bool) -> Vec<Value> {
    let mut b = Builder {
        vision,
        out: Vec::new(),
        assistant: Vec::new(),
        call_ids: Vec::new(),
        results: Vec::new(),
        user: Vec::new(),
    };
    let windowed = crate::model::image_window::windowed(
        &request.history,
        crate::model::image_window::MAX_REQUEST_IMAGES,
    );
    for payload in windowed.as_deref().unwrap_or(&request.history).iter() {
        b.add(payload);
    }
    b.flush_user();
    b.flush_assistant();
    b.out
}

impl Builder {
    fn add(&mut self, payload: &ModelPayload) {
        match payload {
            _ if payload.is_partial() => {}
            ModelPayload::ToolCallOutput {
                output,
                images,
                tool_call_id,
                stop_reason,
                ..
            } => {
                let block = self.tool_result(tool_call_id, output, images, *stop_reason);
                let answered = self.results.iter().any(|(id, _)| id == tool_call_id);
                if self.call_ids.contains(tool_call_id) && !answered {
                    self.results.push((tool_call_id.clone(), block));
                } else {
                    tracing::warn!(tool_call_id = %tool_call_id, "anthropic: tool output without its call; sent as user text");
                    self.user.push(text_block(&format!(
                        "[tool output for {tool_call_id}]\n{output}"
                    )));
                    let imgs: Vec<Value> = images.iter().map(|u| self.image_block(u)).collect();
                    self.user.extend(imgs);
                }
            }
            p if p.role() == Role::Assistant => {
                self.flush_user();
                if let Some(block) = assistant_block(p) {
                    if let ModelPayload::ToolCall { tool_call_id, .. } = p {
                        self.call_ids.push(tool_call_id.clone());
                    }
                    self.assistant.push(block);
                }
            }
            ModelPayload::Text { text, .. } => {
                if !text.is_empty() {
                    self.user.push(text_block(text));
                }
            }
            ModelPayload::ImageUrl { image_url, .. } => {
                let block = self.image_block(image_url);
                self.user.push(block);
            }
            ModelPayload::InlineData {
                data, mime_type, ..
            } => {
                let block = if mime_type.starts_with("image/") {
                    self.image_block(&format!("data:{mime_type};base64,{data}"))
                } else if mime_type == "application/pdf" {
                    json!({"type": "document", "source": {"type": "base64", "media_type": mime_type, "data": data}})
                } else {
                    text_block(&format!("[attachment of type {mime_type} omitted]"))
                };
                self.user.push(block);
            }
            _ => tracing::debug!("anthropic: a user payload of this kind is not sent"),
        }
    }

    fn tool_result(
        &self,
        id: &str,
        output: &str,
        images: &[String],
        stop_reason: StopReason,
    ) -> Value {
        let mut block = Map::new();
        block.insert("type".into(), json!("tool_result"));
        block.insert("tool_use_id".into(), json!(outbound_id(id)));
        let mut content = Vec::new();
        if !output.is_empty() {
            content.push(text_block(output));
        }
        content.extend(images.iter().map(|u| self.image_block(u)));
        if !content.is_empty() {
            block.insert("content".into(), Value::Array(content));
        }
        if stop_reason != StopReason::Completed {
            block.insert("is_error".into(), json!(true));
        }
        Value::Object(block)
    }

    fn image_block(&self, url: &str) -> Value {
        if !self.vision {
            return text_block(IMAGE_OMITTED);
        }
        if let Some(rest) = url.strip_prefix("data:")
            && let Some((meta, data)) = rest.split_once(',')
            && let Some(media_type) = meta.strip_suffix(";base64")
        {
            return json!({"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}});
        }
        if url.starts_with("http://") || url.starts_with("https://") {
            return json!({"type": "image", "source": {"type": "url", "url": url}});
        }
        text_block("[image omitted: not a base64 data URL or an http(s) URL]")
    }

    /// The pending assistant message, then the user message answering it.
    fn flush_assistant(&mut self) {
        if self.assistant.is_empty() {
            return;
        }
        let content = std::mem::take(&mut self.assistant);
        self.out
            .push(json!({"role": "assistant", "content": content}));
        let mut results = std::mem::take(&mut self.results);
        let mut first = Vec::new();
        for id in std::mem::take(&mut self.call_ids) {
            match results.iter().position(|(rid, _)| *rid == id) {
                Some(at) => first.push(results.remove(at).1),
                None => {
                    tracing::warn!(tool_call_id = %id, "anthropic: tool call without an output; a placeholder is sent");
                    first.push(self.tool_result(&id, MISSING_OUTPUT, &[], StopReason::Aborted));
                }
            }
        }
        if !first.is_empty() {
            // The results open the next user message; other user content follows them.
            first.append(&mut self.user);
            self.user = first;
        }
    }

    /// Emits the pending assistant message (and its results) and then the user message.
    fn flush_user(&mut self) {
        if !self.assistant.is_empty() && (!self.results.is_empty() || !self.user.is_empty()) {
            self.flush_assistant();
        }
        if self.user.is_empty() || !self.assistant.is_empty() {
            return;
        }
        let content = std::mem::take(&mut self.user);
        self.out.push(json!({"role": "user", "content": content}));
    }
}

/// One assistant payload as a content block (`None`: nothing to send).
fn assistant_block(payload: &ModelPayload) -> Option<Value> {
    match payload {
        ModelPayload::Text { text, .. } => (!text.is_empty()).then(|| text_block(text)),
        ModelPayload::Thinking {
            thinking, fidelity, ..
        } => {
            // Thinking without a signature (another provider's) cannot be sent back.
            let signature = signature(fidelity.as_ref())?;
            Some(json!({"type": "thinking", "thinking": thinking, "signature": signature}))
        }
        ModelPayload::InlineThinking {
            data, mime_type, ..
        } if mime_type == REDACTED_THINKING_MIME => {
            Some(json!({"type": "redacted_thinking", "data": data}))
        }
        ModelPayload::ToolCall {
            name,
            arguments,
            tool_call_id,
            ..
        } => Some(json!({
            "type": "tool_use",
            "id": outbound_id(tool_call_id),
            "name": name,
            "input": input_object(arguments),
        })),
        _ => None,
    }
}

fn signature(fidelity: Option<&Fidelity>) -> Option<&str> {
    fidelity?
        .get(FIDELITY_KEY)?
        .get("signature")?
        .as_str()
        .filter(|s| !s.is_empty())
}

/// Tool inputs must be objects: arguments that are not a JSON object are wrapped.
fn input_object(arguments: &str) -> Value {
    if arguments.trim().is_empty() {
        return json!({});
    }
    match serde_json::from_str::<Value>(arguments) {
        Ok(v @ Value::Object(_)) => v,
        _ => json!({"_raw_arguments": arguments}),
    }
}

fn text_block(text: &str) -> Value {
    json!({"type": "text", "text": text})
}

#[cfg(test)]
#[path = "request_tests.rs"]
mod tests;
