//! The model side: the `Model` trait a session streams requests through, the events a stream
//! yields, and the request it is given.
//!
//! A model knows nothing of actors, approvals or traces: it turns one request into one stream of
//! events that ends with exactly one [`ModelEvent::End`]. Retrying is the turn loop's job.

pub mod anthropic;
pub mod build;
pub mod environment;
pub mod error;
pub(crate) mod http_client;
pub(crate) mod image_window;
pub mod model_config;
pub mod openai;
pub(crate) mod provider_defaults;
mod script_error;
pub mod scripted;

use std::sync::Arc;

use futures::stream::BoxStream;
use serde_json::Value;

use crate::message::{ModelPayload, StopReason, Usage};

/// Who the model is, for `session_meta`.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelInfo {
    /// The provider name (`anthropic`, `openai`, `scripted`, …).
    pub provider: String,
    /// The provider's model id.
    pub model_id: String,
    /// Number or string, recorded verbatim.
    pub context_window: Value,
}

/// One request: everything the model may see.
#[derive(Debug, Clone)]
pub struct ModelRequest {
    /// The system prompt sent with every request.
    pub system_prompt: Arc<str>,
    /// Complete model messages (user texts, assistant texts/thinking/tool calls, tool outputs),
    /// in conversation order, tool outputs paired with their calls in call order.
    pub history: Arc<Vec<ModelPayload>>,
    /// `{name, description, parameters}` of each available tool.
    pub tools: Arc<Vec<Value>>,
}

impl ModelRequest {
    /// Number of `tool_call_output` messages in the history.
    pub fn tool_results(&self) -> usize {
        self.history
            .iter()
            .filter(|m| matches!(m, ModelPayload::ToolCallOutput { .. }))
            .count()
    }
}

/// What a model stream yields.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelEvent {
    /// A `partial_text`, `partial_thinking` or `partial_tool_call` segment piece.
    Partial(ModelPayload),
    /// A complete `text`, `thinking` or `tool_call` (with `stop_reason: completed` for real calls).
    Complete(ModelPayload),
    /// Token use of this request (the last event before a completed `End`).
    Usage(Usage),
    /// The end of the stream; exactly one, always last.
    End(ModelOutcome),
}

impl ModelEvent {
    /// A piece of the assistant's streamed text.
    pub fn partial_text(event_type: crate::message::EventType, text: &str) -> Self {
        ModelEvent::Partial(ModelPayload::PartialText {
            role: crate::message::Role::Assistant,
            event_type,
            text: text.to_string(),
            stop_reason: StopReason::Completed,
        })
    }

    /// A piece of the assistant's streamed thinking.
    pub fn partial_thinking(event_type: crate::message::EventType, thinking: &str) -> Self {
        ModelEvent::Partial(ModelPayload::PartialThinking {
            role: crate::message::Role::Assistant,
            event_type,
            thinking: thinking.to_string(),
            stop_reason: StopReason::Completed,
        })
    }
}

/// How a request ended.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelOutcome {
    /// `completed`, or `failed|timeout|malformed` (retried), or `auth` (final).
    pub status: StopReason,
    /// The failure's detail on a non-completed status.
    pub error_message: Option<String>,
    /// A `failed` that must not be retried (HTTP 400/404/422).
    pub permanent: bool,
    /// A server-requested wait before the next attempt (`Retry-After`), in ms.
    pub retry_after_ms: Option<u64>,
}

impl ModelOutcome {
    /// A clean completion.
    pub fn completed() -> Self {
        ModelOutcome {
            status: StopReason::Completed,
            error_message: None,
            permanent: false,
            retry_after_ms: None,
        }
    }

    /// An end with `status` and its detail, not marked permanent (so retried unless `auth`).
    pub fn error(status: StopReason, message: impl Into<String>) -> Self {
        ModelOutcome {
            status,
            error_message: Some(message.into()),
            permanent: false,
            retry_after_ms: None,
        }
    }
}

/// What a model session knows about the session it serves.
#[derive(Debug, Clone, Default)]
pub struct ModelSessionContext {
    /// The id of the session served.
    pub session_id: String,
    /// True for a subagent's (child) session.
    pub is_subagent: bool,
    /// A subagent's prompt (picks the scripted model's `children` entry).
    pub first_prompt: Option<String>,
    /// The first free `call_<n>` index (non-zero when a session resumes from its trace).
    pub next_call_index: u64,
    /// Model requests the session already made (non-zero on resume): the scripted model
    /// continues its script from there.
    pub requests_made: u64,
}

/// A model: shared by all sessions of a host.
pub trait Model: Send + Sync + 'static {
    /// Who the model is, recorded in `session_meta`.
    fn info(&self) -> ModelInfo;
    /// Per-session state (the scripted model's cursor and call counter).
    fn open(&self, ctx: &ModelSessionContext) -> Box<dyn ModelSession>;
}

/// One session's view of a model. `stream` is called once per request, from the session actor;
/// the returned stream is driven by a spawned task.
pub trait ModelSession: Send + 'static {
    /// Starts one request; the stream ends with exactly one [`ModelEvent::End`].
    fn stream(&mut self, request: ModelRequest) -> BoxStream<'static, ModelEvent>;

    /// Tool call ids the session's history already holds (a model switch, a resume): a
    /// provider that repeats one gets it disambiguated as if this session had seen it.
    fn known_call_ids(&mut self, _ids: &[&str]) {}

    /// The JSON Schema the final answer of the requests from now on must meet (`None`: no
    /// constraint). A provider with a response format passes it on (OpenAI-compatible:
    /// `response_format`); the others ignore it, the session checks the answer either way.
    fn set_output_schema(&mut self, _schema: Option<&Value>) {}

    /// The W3C `traceparent` of the next request (`None`: none): an HTTP provider sends it as
    /// that header, so the request joins the session's OpenTelemetry trace.
    fn set_traceparent(&mut self, _traceparent: Option<&str>) {}
}

/// Pushes one streamed segment: `start` and `stop` partials with empty content around one
/// `delta` carrying all of it, then the complete message (what the built-in models emit).
pub fn push_segment(
    events: &mut Vec<ModelEvent>,
    content: &str,
    complete: ModelPayload,
    partial: impl Fn(crate::message::EventType, String) -> ModelPayload,
) {
    use crate::message::EventType;
    events.push(ModelEvent::Partial(partial(
        EventType::Start,
        String::new(),
    )));
    events.push(ModelEvent::Partial(partial(
        EventType::Delta,
        content.to_string(),
    )));
    events.push(ModelEvent::Partial(partial(EventType::Stop, String::new())));
    events.push(ModelEvent::Complete(complete));
}
