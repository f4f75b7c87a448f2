//! The history → `messages` mapping of the OpenAI-compatible request: one assistant message per
//! turn with its `tool_calls`, one `tool` message per call id in call order, user texts and
//! images, and the replay of opaque `fidelity` fields. It must not build the rest of the body
//! (`super` does), send anything or see the API key.

use std::borrow::Cow;

use serde_json::{Map, Value};

use super::IMAGE_OMITTED;
use super::wire_message::{Assistant, Call, Part, WireMessage, assistant_value};
use crate::message::{Fidelity, ModelPayload, Role};
use crate::model::ModelRequest;
use crate::model::openai::chunks::{MESSAGE_EXTRA, REASONING_FIELD, TOOL_CALL_EXTRA, outbound_id};

/// An assistant turn being assembled, and the tool outputs answering it, borrowed from the
/// history.
#[derive(Default)]
struct Group<'a> {
    assistant: Assistant<'a>,
    /// Each call's replayed provider fields, in call order.
    call_extras: Vec<Option<&'a Map<String, Value>>>,
    call_ids: Vec<&'a str>,
    extra: Map<String, Value>,
    outputs: Vec<(&'a str, &'a str, &'a [String])>,
    any: bool,
}

struct Builder<'a> {
    vision: bool,
    out: Vec<WireMessage<'a>>,
    user: Vec<Part<'a>>,
    group: Option<Group<'a>>,
    /// The payload being added, and the last restart point: `(i, n)` when adding payload `i`
    /// had flushed everything before it and `out` then held `n` messages. Those `n` messages
    /// are final for any history that starts with payloads `..=i`, and a fresh builder started
    /// at payload `i` emits exactly the rest (see [`messages_from`]).
    at: usize,
    restart: Option<(usize, usize)>,
}

/// The `messages` of `request`'s body as JSON values.
pub(super) fn messages(request: &ModelRequest, vision: bool) -> Vec<Value> {
    let windowed = crate::model::image_window::windowed(
        &request.history,
        crate::model::image_window::MAX_REQUEST_IMAGES,
    );
    let history = windowed.as_deref().unwrap_or(&request.history);
    let mut b = Builder::new(vision);
    if !request.system_prompt.is_empty() {
        b.out.push(system_message(&request.system_prompt));
    }
    for payload in history.iter() {
        b.add(payload);
    }
    b.flush_group();
    b.flush_user();
    b.out
        .iter()
        .map(|message| serde_json::to_value(message).unwrap_or(Value::Null))
        .collect()
}

pub(in crate::model::openai) fn system_message(prompt: &str) -> WireMessage<'_> {
    WireMessage::System(prompt)
}

/// What a fresh builder started at a restart point emits: see [`messages_from`].
pub(in crate::model::openai) struct Fresh<'a> {
    /// The messages of `history[start..]`, the last of them flushed at the end.
    pub(in crate::model::openai) messages: Vec<WireMessage<'a>>,
    /// The last restart point found: its index into `history` and its count of `messages`.
    pub(in crate::model::openai) restart: Option<(usize, usize)>,
    /// How many of `messages` were emitted before the end's flush. They are emitted alike for
    /// any longer history that starts with the same payloads.
    pub(in crate::model::openai) before_flush: usize,
    /// The end's flush emitted what a restart point at the next payload would flush: true
    /// unless a group and user parts were both pending (then the two orders differ).
    pub(in crate::model::openai) flush_is_restart: bool,
    /// The count of `messages` at a restart point at payload `watch`, if there is one.
    pub(in crate::model::openai) watched: Option<usize>,
}

/// The messages of `history[start..]` from a fresh builder (as [`messages`] would emit them
/// after a restart point at `start`), and what a later request needs to know to reuse them.
pub(in crate::model::openai) fn messages_from(
    history: &[ModelPayload],
    start: usize,
    vision: bool,
    watch: usize,
) -> Fresh<'_> {
    let mut b = Builder::new(vision);
    let mut watched = None;
    for (i, payload) in history.iter().enumerate().skip(start) {
        b.at = i;
        b.add(payload);
        if i == watch {
            watched = b.restart.filter(|(at, _)| *at == i).map(|(_, n)| n);
        }
    }
    let restart = b.restart;
    let before_flush = b.out.len();
    let flush_is_restart = b.group.is_none() || b.user.is_empty();
    b.flush_group();
    b.flush_user();
    Fresh {
        messages: b.out,
        restart,
        before_flush,
        flush_is_restart,
        watched,
    }
}

impl<'a> Builder<'a> {
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

    fn add(&mut self, payload: &'a ModelPayload) {
        match payload {
            _ if payload.is_partial() => {}
            ModelPayload::ToolCallOutput {
                output,
                images,
                tool_call_id,
                ..
            } => {
                self.flush_user();
                let entry = (tool_call_id.as_str(), output.as_str(), images.as_slice());
                match self
                    .group
                    .as_mut()
                    .filter(|g| g.call_ids.contains(&tool_call_id.as_str()))
                {
                    Some(group) => group.outputs.push(entry),
                    None => {
                        tracing::warn!(tool_call_id = %tool_call_id, "openai: tool output without its call; sent as user text");
                        self.flush_group();
                        self.mark();
                        self.user.push(text_part(format!(
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
                self.user.push(text_part(text.as_str()));
            }
            ModelPayload::ImageUrl { image_url, .. } => {
                self.flush_group();
                self.mark();
                self.user.push(self.image_part(image_url.as_str()));
            }
            ModelPayload::InlineData {
                data, mime_type, ..
            } => {
                self.flush_group();
                self.mark();
                let part = if mime_type.starts_with("image/") {
                    self.image_part(format!("data:{mime_type};base64,{data}"))
                } else {
                    text_part(format!("[attachment of type {mime_type} omitted]"))
                };
                self.user.push(part);
            }
            _ => tracing::debug!("openai: a user payload of this kind is not sent"),
        }
    }

    fn image_part(&self, url: impl Into<Cow<'a, str>>) -> Part<'a> {
        if self.vision {
            Part::ImageUrl(url.into())
        } else {
            text_part(IMAGE_OMITTED)
        }
    }

    fn push_images(&mut self, images: &'a [String]) {
        if self.vision {
            for url in images {
                let part = self.image_part(url.as_str());
                self.user.push(part);
            }
        }
    }

    fn flush_user(&mut self) {
        if self.user.is_empty() {
            return;
        }
        let parts = std::mem::take(&mut self.user);
        self.out.push(WireMessage::User(parts));
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
        let call_ids = group.call_ids;
        let message = if group.extra.is_empty()
            && group.call_extras.iter().all(Option::is_none)
            && group.assistant.is_plain()
        {
            WireMessage::Assistant(group.assistant)
        } else {
            WireMessage::Merged(assistant_value(
                &group.assistant,
                &group.call_extras,
                group.extra,
            ))
        };
        self.out.push(message);
        let mut outputs = group.outputs;
        let mut images = Vec::new();
        for &id in &call_ids {
            let content = match outputs.iter().position(|(oid, _, _)| *oid == id) {
                Some(at) => {
                    let (_, output, imgs) = outputs.remove(at);
                    if !imgs.is_empty() {
                        images.push((id, imgs));
                    }
                    output
                }
                None => {
                    tracing::warn!(tool_call_id = %id, "openai: tool call without an output; a placeholder is sent");
                    "[no output recorded for this call]"
                }
            };
            self.out.push(WireMessage::Tool {
                id: outbound_id(id),
                content,
            });
        }
        for (id, output, imgs) in outputs {
            tracing::warn!(tool_call_id = %id, "openai: second output for one call; sent as user text");
            self.user
                .push(text_part(format!("[tool output for {id}]\n{output}")));
            self.push_images(imgs);
        }
        if self.vision {
            for (id, imgs) in images {
                self.user.push(text_part(format!(
                    "[images returned by tool call {}]",
                    outbound_id(id)
                )));
                self.push_images(imgs);
            }
        }
    }
}

fn add_assistant<'a>(group: &mut Group<'a>, payload: &'a ModelPayload) {
    match payload {
        ModelPayload::Text { text, fidelity, .. } => {
            group.any = true;
            append(&mut group.assistant.text, text);
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
                match &mut group.assistant.reasoning {
                    Some((_, acc)) => append(acc, thinking),
                    None => group.assistant.reasoning = Some((field, Cow::Borrowed(thinking))),
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
            group.assistant.calls.push(Call {
                id: outbound_id(tool_call_id),
                name,
                arguments,
            });
            group.call_extras.push(
                fidelity
                    .as_ref()
                    .and_then(|f| f.get(TOOL_CALL_EXTRA))
                    .and_then(Value::as_object),
            );
            merge_extra(group, fidelity.as_ref());
            group.call_ids.push(tool_call_id);
        }
        _ => tracing::debug!("openai: an assistant payload of this kind is not sent"),
    }
}

/// Appends `more` to `text`, borrowing while `text` is empty.
fn append<'a>(text: &mut Cow<'a, str>, more: &'a str) {
    if text.is_empty() {
        *text = Cow::Borrowed(more);
    } else {
        text.to_mut().push_str(more);
    }
}

fn merge_extra(group: &mut Group<'_>, fidelity: Option<&Fidelity>) {
    if let Some(Value::Object(extra)) = fidelity.and_then(|f| f.get(MESSAGE_EXTRA)) {
        for (key, value) in extra {
            group.extra.insert(key.clone(), value.clone());
        }
    }
}

fn text_part<'a>(text: impl Into<Cow<'a, str>>) -> Part<'a> {
    Part::Text(text.into())
}
