//! `describe_image`: the text-only model's image tool. Loads an image (see `image_source`),
//! sends it with a question to the configured vision model once (on the same OpenAI-compatible
//! endpoint), and streams the answer back as its output after the header
//! `<mime>, <size> — described by <model>:\n`. No image is returned.
//!
//! The vision request never enters the session's stream or trace; the tool never retries it.

use std::sync::Arc;

use futures::StreamExt;
use futures::future::BoxFuture;
use serde_json::{Map, Value};

use super::args::{opt_str, require_nonempty_str};
use super::image_source::{LoadError, format_size, load_prepared};
use super::{Tool, ToolContext, ToolResult};
use crate::message::{EventType, ModelPayload, Role, StopReason};
use crate::model::openai::OpenAiModel;
use crate::model::{ModelEvent, ModelRequest};

/// The tool's name.
pub const NAME: &str = "describe_image";

/// The question asked when the call gives no `prompt`.
pub const DEFAULT_PROMPT: &str =
    "Describe this image in detail, including any visible text, numbers, UI elements and layout.";

/// The output when no vision model is configured.
pub const NO_VISION_MODEL: &str = "No vision model is configured for this project. The current model does not \
accept images; ask the user to pick a vision model in the model settings (vision_model) to enable image reading.";

/// The output when the vision model answered with no text.
pub const NO_TEXT: &str = "[vision model returned no text]";

/// The `describe_image` builtin: `client` is the endpoint with a `vision_model` configured
/// (`None`: every call fails with [`NO_VISION_MODEL`]).
#[derive(Debug, Clone)]
pub struct DescribeImageTool {
    client: Option<Arc<OpenAiModel>>,
}

impl DescribeImageTool {
    /// The tool over the vision `client` (`None`: every call answers that no vision model is
    /// configured).
    pub fn new(client: Option<Arc<OpenAiModel>>) -> Self {
        DescribeImageTool { client }
    }
}

impl Tool for DescribeImageTool {
    fn call(&self, ctx: ToolContext, args: Map<String, Value>) -> BoxFuture<'static, ToolResult> {
        let client = self.client.clone();
        Box::pin(async move {
            let source = match require_nonempty_str(&args, "source", NAME) {
                Ok(s) => s.to_string(),
                Err(e) => {
                    ctx.emit(e.to_string());
                    return ToolResult::failed();
                }
            };
            let Some((client, model)) = client.and_then(|c| {
                let m = c.vision_model()?.to_string();
                Some((c, m))
            }) else {
                ctx.emit(NO_VISION_MODEL);
                return ToolResult::failed();
            };
            let (loaded, prepared) =
                match load_prepared(&source, &ctx.env.workspace, &ctx.cancel).await {
                    Ok(p) => p,
                    Err(LoadError::Aborted) => return aborted(),
                    Err(LoadError::Failed(text)) => {
                        ctx.emit(text);
                        return ToolResult::failed();
                    }
                };
            let prompt = opt_str(&args, "prompt")
                .filter(|p| !p.trim().is_empty())
                .unwrap_or(DEFAULT_PROMPT);
            let request = ModelRequest {
                system_prompt: Arc::from(""),
                history: Arc::new(vec![
                    ModelPayload::Text {
                        role: Role::User,
                        text: prompt.to_string(),
                        sender: None,
                        stop_reason: StopReason::Completed,
                        fidelity: None,
                    },
                    ModelPayload::ImageUrl {
                        role: Role::User,
                        image_url: prepared.data_url,
                        stop_reason: StopReason::Completed,
                    },
                ]),
                tools: Arc::new(Vec::new()),
            };
            let mut stream = client.one_off(&model, &request, true);
            ctx.emit(format!(
                "{}, {} — described by {model}:\n",
                loaded.mime,
                format_size(loaded.bytes.len() as u64)
            ));
            let mut streamed = false;
            let outcome = loop {
                let event = tokio::select! {
                    biased;
                    _ = ctx.cancel.cancelled() => return aborted(),
                    e = stream.next() => e,
                };
                match event {
                    Some(ModelEvent::Partial(ModelPayload::PartialText {
                        event_type: EventType::Delta,
                        text,
                        ..
                    })) if !text.is_empty() => {
                        streamed = true;
                        ctx.emit(text);
                    }
                    Some(ModelEvent::End(outcome)) => break Some(outcome),
                    Some(_) => {}
                    None => break None,
                }
            };
            match outcome {
                Some(o) if o.status == StopReason::Completed => {
                    if !streamed {
                        ctx.emit(NO_TEXT);
                    }
                    ToolResult::completed()
                }
                other => {
                    let status = other.as_ref().map_or(StopReason::Failed, |o| o.status);
                    let detail = other
                        .and_then(|o| o.error_message)
                        .map(|m| format!(": {m}"))
                        .unwrap_or_default();
                    let sep = if streamed { "\n" } else { "" };
                    ctx.emit(format!(
                        "{sep}Vision model ({model}) request {status}{detail}"
                    ));
                    ToolResult::failed()
                }
            }
        })
    }
}

fn aborted() -> ToolResult {
    ToolResult {
        stop_reason: Some(StopReason::Aborted),
        ..ToolResult::default()
    }
}
