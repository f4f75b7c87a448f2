//! The request body of the OpenAI-compatible provider: `ModelRequest` → `chat/completions` JSON
//! (system prompt, user texts and images, assistant messages with `tool_calls`, one `tool`
//! message per call id in call order, tool schemas, the configured extra fields).
//!
//! It owns the history → messages mapping and the replay of opaque `fidelity` fields. It never
//! sends anything and never sees the API key.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::chunks::{MESSAGE_EXTRA, REASONING_FIELD, TOOL_CALL_EXTRA, outbound_id};
use crate::message::{Fidelity, ModelPayload, Role};
use crate::model::ModelRequest;

/// Body keys Rookery sets itself; `extra` may not override them.
pub use crate::model::model_config::RESERVED_BODY_KEYS;

/// What a text-only model sees instead of an image.
pub const IMAGE_OMITTED: &str = "[image omitted: this model does not accept images]";

/// The JSON body of one streamed request.
pub fn build_body(
    model: &str,
    request: &ModelRequest,
    vision: bool,
    extra: &Map<String, Value>,
) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    body.insert("messages".into(), Value::Array(messages(request, vision)));
    body.insert("stream".into(), json!(true));
    body.insert("stream_options".into(), json!({"include_usage": true}));
    if !request.tools.is_empty() {
        let tools = request
            .tools
            .iter()
            .map(|spec| json!({"type": "function", "function": spec}))
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    for (key, value) in extra {
        if !RESERVED_BODY_KEYS.contains(&key.as_str()) {
            body.insert(key.clone(), value.clone());
        }
    }
    Value::Object(body)
}

/// The `tools` array of a body (`[{"type":"function","function":spec}, …]`) as JSON text:
/// computed once per tool list and spliced into every body by [`encode_body`].
pub fn tools_json(tools: &[Value]) -> String {
    #[derive(serde::Serialize)]
    struct Wrapped<'a> {
        r#type: &'static str,
        function: &'a Value,
    }
    let wrapped: Vec<Wrapped<'_>> = tools
        .iter()
        .map(|function| Wrapped {
            r#type: "function",
            function,
        })
        .collect();
    serde_json::to_string(&wrapped).unwrap_or_else(|_| "[]".to_string())
}

/// The serialized body of one streamed request: [`build_body`] without `tools`, with
/// `tools_json` (from [`tools_json`]) spliced in when the request has tools. Same JSON value,
/// without copying the tool schemas into every body.
pub fn encode_body(
    model: &str,
    request: &ModelRequest,
    vision: bool,
    extra: &Map<String, Value>,
    tools_json: &str,
) -> Vec<u8> {
    let no_tools = ModelRequest {
        system_prompt: request.system_prompt.clone(),
        history: request.history.clone(),
        tools: Arc::new(Vec::new()),
    };
    let body = build_body(model, &no_tools, vision, extra);
    let mut out = serde_json::to_vec(&body).unwrap_or_else(|_| b"{}".to_vec());
    if !request.tools.is_empty() && out.last() == Some(&b'}') {
        out.pop();
        if out.len() > 1 {
            out.push(b',');
        }
        out.extend_from_slice(b"\"tools\":");
        out.extend_from_slice(tools_json.as_bytes());
        out.push(b'}');
    }
    out
}

/// An assistant turn being assembled, and the tool outputs answering it.
#[derive(Default)]
struct Group {
    text: String,
    reasoning: Option<(String, String)>,
    calls: Vec<Value>,
    call_ids: Vec<String>,
    extra: Map<String, Value>,
    outputs: Vec<(String, String, Vec<String>)>,
    any: bool,
}

struct Builder {
    vision: bool,
    out: Vec<Value>,
    user: Vec<Value>,
    group: Option<Group>,
}

fn messages(request: &ModelRequest, vision: bool) -> Vec<Value> {
    let mut b = Builder {
        vision,
        out: Vec::new(),
        user: Vec::new(),
        group: None,
    };
    if !request.system_prompt.is_empty() {
        b.out
            .push(json!({"role": "system", "content": request.system_prompt.as_ref()}));
    }
    let windowed = crate::model::image_window::windowed(
        &request.history,
        crate::model::image_window::MAX_REQUEST_IMAGES,
    );
    for payload in windowed.as_deref().unwrap_or(&request.history).iter() {
        b.add(payload);
    }
    b.flush_group();
    b.flush_user();
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
                ..
            } => {
                self.flush_user();
                let entry = (tool_call_id.clone(), output.clone(), images.clone());
                match self
                    .group
                    .as_mut()
                    .filter(|g| g.call_ids.contains(tool_call_id))
                {
                    Some(group) => group.outputs.push(entry),
                    None => {
                        tracing::warn!(tool_call_id = %tool_call_id, "openai: tool output without its call; sent as user text");
                        self.flush_group();
                        self.user.push(text_part(&format!(
                            "[tool output for {tool_call_id}]\n{output}"
                        )));
                        self.push_images(images);
                    }
                }
            }
            p if p.role() == Role::Assistant => {
                self.flush_user();
                if self.group.as_ref().is_some_and(|g| !g.outputs.is_empty()) {
                    self.flush_group();
                }
                let group = self.group.get_or_insert_with(Group::default);
                add_assistant(group, p);
            }
            ModelPayload::Text { text, .. } => {
                self.flush_group();
                self.user.push(text_part(text));
            }
            ModelPayload::ImageUrl { image_url, .. } => {
                self.flush_group();
                self.user.push(self.image_part(image_url));
            }
            ModelPayload::InlineData {
                data, mime_type, ..
            } => {
                self.flush_group();
                let part = if mime_type.starts_with("image/") {
                    self.image_part(&format!("data:{mime_type};base64,{data}"))
                } else {
                    text_part(&format!("[attachment of type {mime_type} omitted]"))
                };
                self.user.push(part);
            }
            _ => tracing::debug!("openai: a user payload of this kind is not sent"),
        }
    }

    fn image_part(&self, url: &str) -> Value {
        if self.vision {
            json!({"type": "image_url", "image_url": {"url": url}})
        } else {
            text_part(IMAGE_OMITTED)
        }
    }

    fn push_images(&mut self, images: &[String]) {
        if self.vision {
            for url in images {
                let part = self.image_part(url);
                self.user.push(part);
            }
        }
    }

    fn flush_user(&mut self) {
        if self.user.is_empty() {
            return;
        }
        let parts = std::mem::take(&mut self.user);
        let content = match parts.as_slice() {
            [only] if only["type"] == "text" => only["text"].clone(),
            _ => Value::Array(parts),
        };
        self.out.push(json!({"role": "user", "content": content}));
    }

    /// Emits the assistant message, then one `tool` message per call in call order (a call the
    /// history has no output for gets a placeholder, so the request stays valid), then the
    /// images the outputs carried, as one user message.
    fn flush_group(&mut self) {
        let Some(group) = self.group.take() else {
            return;
        };
        if !group.any {
            return;
        }
        let mut message = Map::new();
        message.insert("role".into(), json!("assistant"));
        let content = if !group.text.is_empty() {
            json!(group.text)
        } else if group.calls.is_empty() {
            json!("")
        } else {
            Value::Null
        };
        message.insert("content".into(), content);
        if !group.calls.is_empty() {
            message.insert("tool_calls".into(), Value::Array(group.calls));
        }
        if let Some((field, thinking)) = group.reasoning {
            message.insert(field, json!(thinking));
        }
        for (key, value) in group.extra {
            message.entry(key).or_insert(value);
        }
        self.out.push(Value::Object(message));
        let mut outputs = group.outputs;
        let mut images = Vec::new();
        for id in &group.call_ids {
            let content = match outputs.iter().position(|(oid, _, _)| oid == id) {
                Some(at) => {
                    let (_, output, imgs) = outputs.remove(at);
                    if !imgs.is_empty() {
                        images.push((id.clone(), imgs));
                    }
                    output
                }
                None => {
                    tracing::warn!(tool_call_id = %id, "openai: tool call without an output; a placeholder is sent");
                    "[no output recorded for this call]".to_string()
                }
            };
            self.out
                .push(json!({"role": "tool", "tool_call_id": outbound_id(id), "content": content}));
        }
        for (id, output, imgs) in outputs {
            tracing::warn!(tool_call_id = %id, "openai: second output for one call; sent as user text");
            self.user
                .push(text_part(&format!("[tool output for {id}]\n{output}")));
            self.push_images(&imgs);
        }
        if self.vision {
            for (id, imgs) in images {
                self.user.push(text_part(&format!(
                    "[images returned by tool call {}]",
                    outbound_id(&id)
                )));
                self.push_images(&imgs);
            }
        }
    }
}

fn add_assistant(group: &mut Group, payload: &ModelPayload) {
    match payload {
        ModelPayload::Text { text, fidelity, .. } => {
            group.any = true;
            group.text.push_str(text);
            merge_extra(group, fidelity.as_ref());
        }
        ModelPayload::Thinking {
            thinking, fidelity, ..
        } => {
            merge_extra(group, fidelity.as_ref());
            let field = fidelity
                .as_ref()
                .and_then(|f| f.get(REASONING_FIELD))
                .and_then(Value::as_str);
            // Thinking from another provider (no field recorded) is not sent back.
            if let Some(field) = field {
                group.any = true;
                match &mut group.reasoning {
                    Some((_, acc)) => acc.push_str(thinking),
                    None => group.reasoning = Some((field.to_string(), thinking.clone())),
                }
            }
        }
        ModelPayload::ToolCall {
            name,
            arguments,
            tool_call_id,
            fidelity,
            ..
        } => {
            group.any = true;
            let mut call = Map::new();
            call.insert("id".into(), json!(outbound_id(tool_call_id)));
            call.insert("type".into(), json!("function"));
            call.insert(
                "function".into(),
                json!({"name": name, "arguments": arguments}),
            );
            if let Some(Value::Object(extra)) =
                fidelity.as_ref().and_then(|f| f.get(TOOL_CALL_EXTRA))
            {
                for (key, value) in extra {
                    call.entry(key.clone()).or_insert_with(|| value.clone());
                }
            }
            merge_extra(group, fidelity.as_ref());
            group.calls.push(Value::Object(call));
            group.call_ids.push(tool_call_id.clone());
        }
        _ => tracing::debug!("openai: an assistant payload of this kind is not sent"),
    }
}

fn merge_extra(group: &mut Group, fidelity: Option<&Fidelity>) {
    if let Some(Value::Object(extra)) = fidelity.and_then(|f| f.get(MESSAGE_EXTRA)) {
        for (key, value) in extra {
            group.extra.insert(key.clone(), value.clone());
        }
    }
}

fn text_part(text: &str) -> Value {
    json!({"type": "text", "text": text})
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::message::StopReason;

    fn user(text: &str) -> ModelPayload {
        ModelPayload::Text {
            role: Role::User,
            text: text.into(),
            sender: None,
            stop_reason: StopReason::Completed,
            fidelity: None,
        }
    }

    fn assistant(text: &str) -> ModelPayload {
        ModelPayload::Text {
            role: Role::Assistant,
            text: text.into(),
            sender: None,
            stop_reason: StopReason::Completed,
            fidelity: None,
        }
    }

    fn call(id: &str, args: &str, fidelity: Option<Value>) -> ModelPayload {
        ModelPayload::ToolCall {
            role: Role::Assistant,
            name: "read_file".into(),
            arguments: args.into(),
            tool_call_id: id.into(),
            stop_reason: StopReason::Completed,
            fidelity: fidelity.and_then(|f| f.as_object().cloned()),
        }
    }

    fn output(id: &str, text: &str, images: &[&str]) -> ModelPayload {
        ModelPayload::ToolCallOutput {
            role: Role::User,
            output: text.into(),
            images: images.iter().map(|s| s.to_string()).collect(),
            tool_call_id: id.into(),
            stop_reason: StopReason::Completed,
        }
    }

    fn body(history: Vec<ModelPayload>, vision: bool) -> Value {
        let request = ModelRequest {
            system_prompt: Arc::from(""),
            history: Arc::new(history),
            tools: Arc::new(Vec::new()),
        };
        let extra = json!({"temperature": 0.2, "model": "ignored"});
        build_body(
            "m",
            &request,
            vision,
            extra.as_object().unwrap_or(&Map::new()),
        )
    }

    #[test]
    fn a_turn_is_one_assistant_message_with_its_tool_messages_in_call_order() {
        let thinking = ModelPayload::Thinking {
            role: Role::Assistant,
            thinking: "plan".into(),
            stop_reason: StopReason::Completed,
            fidelity: json!({"reasoning_field": "reasoning_content"})
                .as_object()
                .cloned(),
        };
        let b = body(
            vec![
                user("go"),
                thinking,
                assistant("reading"),
                call(
                    "a#2",
                    r#"{"file_path":"x"}"#,
                    Some(json!({"tool_call_extra": {"extra_content": {"sig": "s"}}})),
                ),
                call(
                    "b",
                    "{bad json",
                    Some(json!({"message_extra": {"reasoning_details": [1]}})),
                ),
                output("b", "B out", &[]),
                output("a#2", "A out", &[]),
                assistant("done"),
            ],
            false,
        );
        assert_eq!(
            b,
            json!({
                "model": "m",
                "messages": [
                    {"role": "user", "content": "go"},
                    {"role": "assistant", "content": "reading", "tool_calls": [
                        {"id": "a", "type": "function", "function": {"name": "read_file", "arguments": "{\"file_path\":\"x\"}"},
                         "extra_content": {"sig": "s"}},
                        {"id": "b", "type": "function", "function": {"name": "read_file", "arguments": "{bad json"}}],
                     "reasoning_content": "plan", "reasoning_details": [1]},
                    {"role": "tool", "tool_call_id": "a", "content": "A out"},
                    {"role": "tool", "tool_call_id": "b", "content": "B out"},
                    {"role": "assistant", "content": "done"}
                ],
                "stream": true,
                "stream_options": {"include_usage": true},
                "temperature": 0.2
            })
        );
    }

    #[test]
    fn images_for_vision_models_and_placeholders_otherwise() {
        let history = vec![
            user("look"),
            ModelPayload::ImageUrl {
                role: Role::User,
                image_url: "https://x/y.png".into(),
                stop_reason: StopReason::Completed,
            },
            call("c1", "{}", None),
            output("c1", "image/png, 3 B", &["data:image/png;base64,AAA"]),
            user("next"),
        ];
        assert_eq!(
            body(history.clone(), true)["messages"],
            json!([
                {"role": "user", "content": [
                    {"type": "text", "text": "look"},
                    {"type": "image_url", "image_url": {"url": "https://x/y.png"}}]},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "image/png, 3 B"},
                {"role": "user", "content": [
                    {"type": "text", "text": "[images returned by tool call c1]"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAA"}},
                    {"type": "text", "text": "next"}]}
            ])
        );
        assert_eq!(
            body(history, false)["messages"][0]["content"][1],
            json!({"type": "text", "text": IMAGE_OMITTED})
        );
    }

    #[test]
    fn unpaired_calls_and_outputs_still_make_a_valid_request() {
        let b = body(
            vec![
                call("c1", "{}", None),
                call("c2", "{}", None),
                output("c2", "two", &[]),
                output("zz", "lost", &[]),
            ],
            false,
        );
        assert_eq!(
            b["messages"],
            json!([
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}},
                    {"id": "c2", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "[no output recorded for this call]"},
                {"role": "tool", "tool_call_id": "c2", "content": "two"},
                {"role": "user", "content": "[tool output for zz]\nlost"}
            ])
        );
        // Thinking of another provider is not sent; a thinking-only turn is dropped.
        let b = body(
            vec![
                user("q"),
                ModelPayload::Thinking {
                    role: Role::Assistant,
                    thinking: "t".into(),
                    stop_reason: StopReason::Completed,
                    fidelity: None,
                },
                user("r"),
            ],
            false,
        );
        assert_eq!(
            b["messages"],
            json!([{"role": "user", "content": "q"}, {"role": "user", "content": "r"}])
        );
    }

    #[test]
    fn system_prompt_and_tools() {
        let request = ModelRequest {
            system_prompt: Arc::from("sys"),
            history: Arc::new(vec![user("hi")]),
            tools: Arc::new(vec![
                json!({"name": "t", "description": "d", "parameters": {"type": "object"}}),
            ]),
        };
        let b = build_body("m", &request, false, &Map::new());
        assert_eq!(
            b["messages"][0],
            json!({"role": "system", "content": "sys"})
        );
        assert_eq!(
            b["tools"],
            json!([{"type": "function", "function": {"name": "t", "description": "d", "parameters": {"type": "object"}}}])
        );
    }
}
