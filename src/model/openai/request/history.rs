//! The history → `messages` mapping of the OpenAI-compatible request: one assistant message per
//! turn with its `tool_calls`, one `tool` message per call id in call order, user texts and
//! images, and the replay of opaque `fidelity` fields. It must not build the rest of the body
//! (`super` does), send anything or see the API key.

use serde_json::{Map, Value, json};

use super::IMAGE_OMITTED;
use crate::message::{Fidelity, ModelPayload, Role};
use crate::model::ModelRequest;
use crate::model::openai::chunks::{MESSAGE_EXTRA, REASONING_FIELD, TOOL_CALL_EXTRA, outbound_id};

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
    /// The payload being added, and the last restart point: `(i, n)` when adding payload `i`
    /// had flushed everything before it and `out` then held `n` messages. Those `n` messages
    /// are final for any history that starts with payloads `..=i`, and a fresh builder started
    /// at payload `i` emits exactly the rest (see [`messages_from`]).
    at: usize,
    restart: Option<(usize, usize)>,
}

pub(super) fn messages(request: &ModelRequest, vision: bool) -> Vec<Value> {
    let mut b = Builder::new(vision);
    if !request.system_prompt.is_empty() {
        b.out.push(system_message(&request.system_prompt));
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

pub(in crate::model::openai) fn system_message(prompt: &str) -> Value {
    json!({"role": "system", "content": prompt})
}

/// The messages of `history[start..]` from a fresh builder (as [`messages`] would emit them
/// after a restart point at `start`), and the last restart point found, with its index into
/// `history` and its count of the returned messages.
pub(in crate::model::openai) fn messages_from(
    history: &[ModelPayload],
    start: usize,
    vision: bool,
) -> (Vec<Value>, Option<(usize, usize)>) {
    let mut b = Builder::new(vision);
    for (i, payload) in history.iter().enumerate().skip(start) {
        b.at = i;
        b.add(payload);
    }
    let restart = b.restart;
    b.flush_group();
    b.flush_user();
    (b.out, restart)
}

impl Builder {
    fn new(vision: bool) -> Self {
        Builder {
            vision,
            out: Vec::new(),
            user: Vec::new(),
            group: None,
            at: 0,
            restart: None,
        }
    }

    /// Called after the flushes the current payload causes: nothing pending means a fresh
    /// builder starting at this payload continues identically.
    fn mark(&mut self) {
        if self.group.is_none() && self.user.is_empty() {
            self.restart = Some((self.at, self.out.len()));
        }
    }

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
                        self.mark();
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
                self.mark();
                let group = self.group.get_or_insert_with(Group::default);
                add_assistant(group, p);
            }
            ModelPayload::Text { text, .. } => {
                self.flush_group();
                self.mark();
                self.user.push(text_part(text));
            }
            ModelPayload::ImageUrl { image_url, .. } => {
                self.flush_group();
                self.mark();
                self.user.push(self.image_part(image_url));
            }
            ModelPayload::InlineData {
                data, mime_type, ..
            } => {
                self.flush_group();
                self.mark();
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
