//! OmniMessage: every payload of the PenguinHarness protocol (complete, partial and event
//! payloads), the envelope `{timestamp, type, payload, origin?}` (`envelope`), with builders.
//!
//! This module owns the wire shape of messages and traces. It must not know about actors, tools
//! or I/O. Payloads it does not recognise (a newer trace, another runtime's extension) are kept
//! verbatim as raw JSON, so reading a trace never fails on an unknown `type`.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

mod envelope;
mod event;
mod grant;
pub mod schedule;
pub use envelope::{OmniMessage, Payload, now_timestamp};
pub use event::EventPayload;
pub use grant::Grant;

/// The six outcome values shared by complete messages, `request_end` and tool outputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The step, request or call finished normally (also the default when absent on read).
    #[default]
    Completed,
    /// It failed (a model error, a tool error, a failed compaction).
    Failed,
    /// It was denied, or interrupted by the user.
    Aborted,
    /// The transport stalled or dropped (a model request that is retried).
    Timeout,
    /// The stream was unparseable or truncated (a model request that is retried).
    Malformed,
    /// The provider rejected the credentials: never retried, ends the task.
    Auth,
}

impl StopReason {
    /// The wire spelling (`completed`, `failed`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::Completed => "completed",
            StopReason::Failed => "failed",
            StopReason::Aborted => "aborted",
            StopReason::Timeout => "timeout",
            StopReason::Malformed => "malformed",
            StopReason::Auth => "auth",
        }
    }
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Who a model message belongs to in the conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The human, a parent agent or the harness; also tool outputs.
    User,
    /// The model: its text, thinking and tool calls.
    Assistant,
}

/// Who, other than the human, wrote a user-role text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Sender {
    /// A parent agent's prompt inside its child session.
    ParentAgent,
    /// The runtime itself (background completion notices).
    Harness,
    /// The server (reserved for scheduled triggers).
    Server,
}

/// Phase of a streaming partial: every segment is `start → delta* → stop`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventType {
    /// Opens a segment (empty content).
    Start,
    /// One fragment of the segment's content.
    Delta,
    /// Closes a segment (empty content); carries the segment's final `stop_reason`.
    Stop,
}

/// Opaque provider data, replayed verbatim. An empty object is omitted on the wire.
pub type Fidelity = Map<String, Value>;

fn is_empty_map(m: &Option<Fidelity>) -> bool {
    m.as_ref().is_none_or(Map::is_empty)
}

/// `session_meta` payload (no `type` field: the envelope type is the discriminator).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct SessionMeta {
    /// The session's id (`session-<date>-<time>-<hex>`).
    pub session_id: String,
    /// The provider name (`anthropic`, `openai`, `scripted`, …).
    pub provider: String,
    /// The provider's model id.
    pub model_id: String,
    /// The model's context window as the model reports it (a number or a string).
    pub model_context_window: Value,
    /// The system prompt the session sends.
    pub system_prompt: String,
    /// The canonical absolute workspace path (the protocol's name for it).
    pub agent_state: String,
    /// The canonical absolute workspace path.
    pub workspace: String,
    /// `subagent` for a child session; absent for a user-created one. Survives a resume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// The approval mode the session started with (`approval_mode_changed` records changes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_mode: Option<String>,
    /// Set on a fork: the session, task and record its history was copied from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forked_from: Option<ForkedFrom>,
    /// The principal the session belongs to (`rookery serve --auth`; `admin` without it);
    /// absent for a session created outside the server. Survives a resume; a subagent has its
    /// parent's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// What reopening the session needs (see [`launch::Launch`]).
    #[serde(flatten)]
    pub launch: Box<launch::Launch>,
}

/// `session_meta.forked_from`: where a fork's history was copied from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct ForkedFrom {
    /// The origin session's id.
    pub session_id: String,
    /// The origin's task (numbered from 1) whose end the copy stops at.
    pub task: u64,
    /// The index (from 0) of the last record copied, in the origin's trace file that holds it.
    pub seq: u64,
}

/// `model_msg` payloads: seven complete kinds and four streaming partials.
#[derive(Debug, Clone, PartialEq, Hash, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ModelPayload {
    /// Text of the human, a parent agent, the harness or the model.
    Text {
        /// `user` or `assistant`.
        role: Role,
        /// The text itself.
        text: String,
        /// Who wrote a user-role text other than the human; `None` for human input.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sender: Option<Sender>,
        /// How the message ended.
        #[serde(default)]
        stop_reason: StopReason,
        /// Opaque provider data, replayed verbatim.
        #[serde(default, skip_serializing_if = "is_empty_map")]
        fidelity: Option<Fidelity>,
    },
    /// An image given by URL (`https://…` or a `data:<mime>;base64,…` URL).
    ImageUrl {
        /// Who the image belongs to.
        role: Role,
        /// The image's URL.
        image_url: String,
        /// How the message ended.
        #[serde(default)]
        stop_reason: StopReason,
    },
    /// Inline base64 data with its MIME type (an image, a document).
    InlineData {
        /// Who the data belongs to.
        role: Role,
        /// The content, base64-encoded.
        data: String,
        /// The content's MIME type (`image/png`, …).
        mime_type: String,
        /// How the message ended.
        #[serde(default)]
        stop_reason: StopReason,
        /// Opaque provider data, replayed verbatim.
        #[serde(default, skip_serializing_if = "is_empty_map")]
        fidelity: Option<Fidelity>,
    },
    /// The model's visible reasoning.
    Thinking {
        /// Always `assistant`.
        role: Role,
        /// The reasoning text.
        thinking: String,
        /// How the message ended.
        #[serde(default)]
        stop_reason: StopReason,
        /// Opaque provider data (e.g. a signature), replayed verbatim.
        #[serde(default, skip_serializing_if = "is_empty_map")]
        fidelity: Option<Fidelity>,
    },
    /// Reasoning the provider returns opaque (redacted or encrypted), replayed verbatim.
    InlineThinking {
        /// Always `assistant`.
        role: Role,
        /// The opaque reasoning data.
        data: String,
        /// The data's MIME type, as the provider labels it.
        mime_type: String,
        /// How the message ended.
        #[serde(default)]
        stop_reason: StopReason,
        /// Opaque provider data, replayed verbatim.
        #[serde(default, skip_serializing_if = "is_empty_map")]
        fidelity: Option<Fidelity>,
    },
    /// A tool call the model made.
    ToolCall {
        /// Always `assistant`.
        role: Role,
        /// The tool's name.
        name: String,
        /// The call's arguments: a JSON object serialised as a string.
        arguments: String,
        /// The model's id of the call; its output carries the same id.
        tool_call_id: String,
        /// How the message ended.
        #[serde(default)]
        stop_reason: StopReason,
        /// Opaque provider data, replayed verbatim.
        #[serde(default, skip_serializing_if = "is_empty_map")]
        fidelity: Option<Fidelity>,
    },
    /// The output of one tool call (exactly one per call).
    ToolCallOutput {
        /// Always `user`.
        role: Role,
        /// The output text the model reads.
        output: String,
        /// Images the tool returned, as data URLs (omitted when empty).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        images: Vec<String>,
        /// The id of the call this answers.
        tool_call_id: String,
        /// `completed`, `failed` (a tool error) or `aborted` (denied or interrupted).
        #[serde(default)]
        stop_reason: StopReason,
    },
    /// A fragment of streamed assistant text (streamed only, never recorded).
    PartialText {
        /// Always `assistant`.
        role: Role,
        /// The fragment's phase in its segment.
        event_type: EventType,
        /// The fragment (empty on `start` and `stop`).
        text: String,
        /// The segment's outcome (final on `stop`).
        #[serde(default)]
        stop_reason: StopReason,
    },
    /// A fragment of streamed thinking (streamed only, never recorded).
    PartialThinking {
        /// Always `assistant`.
        role: Role,
        /// The fragment's phase in its segment.
        event_type: EventType,
        /// The fragment (empty on `start` and `stop`).
        thinking: String,
        /// The segment's outcome (final on `stop`).
        #[serde(default)]
        stop_reason: StopReason,
    },
    /// A fragment of a streamed tool call (streamed only, never recorded).
    PartialToolCall {
        /// Always `assistant`.
        role: Role,
        /// The fragment's phase in its segment.
        event_type: EventType,
        /// The tool's name.
        name: String,
        /// A fragment of the arguments string.
        arguments: String,
        /// The call's id.
        tool_call_id: String,
        /// The segment's outcome (final on `stop`).
        #[serde(default)]
        stop_reason: StopReason,
    },
    /// A fragment of a streamed tool output (streamed only, never recorded).
    PartialToolCallOutput {
        /// Always `user`.
        role: Role,
        /// The fragment's phase in its segment.
        event_type: EventType,
        /// A fragment of the output text.
        output: String,
        /// The output's images (data URLs), all in one delta.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        images: Vec<String>,
        /// The id of the call this answers.
        tool_call_id: String,
        /// The segment's outcome (final on `stop`).
        #[serde(default)]
        stop_reason: StopReason,
    },
}

impl ModelPayload {
    /// True for the four `partial_*` kinds (never traced, never part of history).
    pub fn is_partial(&self) -> bool {
        matches!(
            self,
            ModelPayload::PartialText { .. }
                | ModelPayload::PartialThinking { .. }
                | ModelPayload::PartialToolCall { .. }
                | ModelPayload::PartialToolCallOutput { .. }
        )
    }

    /// The role of any payload kind.
    pub fn role(&self) -> Role {
        match self {
            ModelPayload::Text { role, .. }
            | ModelPayload::ImageUrl { role, .. }
            | ModelPayload::InlineData { role, .. }
            | ModelPayload::Thinking { role, .. }
            | ModelPayload::InlineThinking { role, .. }
            | ModelPayload::ToolCall { role, .. }
            | ModelPayload::ToolCallOutput { role, .. }
            | ModelPayload::PartialText { role, .. }
            | ModelPayload::PartialThinking { role, .. }
            | ModelPayload::PartialToolCall { role, .. }
            | ModelPayload::PartialToolCallOutput { role, .. } => *role,
        }
    }

    /// The `stop_reason` of any payload kind.
    pub fn stop_reason(&self) -> StopReason {
        match self {
            ModelPayload::Text { stop_reason, .. }
            | ModelPayload::ImageUrl { stop_reason, .. }
            | ModelPayload::InlineData { stop_reason, .. }
            | ModelPayload::Thinking { stop_reason, .. }
            | ModelPayload::InlineThinking { stop_reason, .. }
            | ModelPayload::ToolCall { stop_reason, .. }
            | ModelPayload::ToolCallOutput { stop_reason, .. }
            | ModelPayload::PartialText { stop_reason, .. }
            | ModelPayload::PartialThinking { stop_reason, .. }
            | ModelPayload::PartialToolCall { stop_reason, .. }
            | ModelPayload::PartialToolCallOutput { stop_reason, .. } => *stop_reason,
        }
    }
}

/// Token counters of `token_usage` (`session` running totals and this `request`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Usage {
    /// Prompt tokens read from the provider's cache.
    #[serde(default)]
    pub cache_read: u64,
    /// Prompt tokens written to the provider's cache.
    #[serde(default)]
    pub cache_write: u64,
    /// Output tokens generated.
    #[serde(default)]
    pub output: u64,
    /// All tokens of the request(s): input (cached or not) plus output.
    #[serde(default)]
    pub total: u64,
}

impl Usage {
    /// Adds `other`'s counters to these (running session totals).
    pub fn add(&mut self, other: &Usage) {
        self.cache_read += other.cache_read;
        self.cache_write += other.cache_write;
        self.output += other.output;
        self.total += other.total;
    }
}

/// The approval gate's verdict on one tool call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// The call runs.
    Allow,
    /// The call is refused; the model may try something else.
    Deny,
    /// The call is refused by the command policy: a rule no approval mode or approver can lift.
    Forbidden,
    /// An approver's answer only: the call runs, and later calls the grant's rule matches run
    /// without asking (the gate records it as `allow` plus an `approval_grant`).
    AllowForSession,
}

pub mod build;
pub(crate) mod json_bytes;
pub mod launch;
pub(crate) mod tool_list;
pub use tool_list::ToolList;

/// What kind of JSON value `value` is, as an error text names it ("a string", "an array", …).
pub(crate) fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
