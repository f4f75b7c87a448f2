//! OmniMessage: every payload of the PenguinHarness protocol (complete, partial and event
//! payloads), the envelope `{timestamp, type, payload, origin?}` (`envelope`), with builders.
//!
//! This module owns the wire shape of messages and traces. It must not know about actors, tools
//! or I/O. Payloads it does not recognise (a newer trace, another runtime's extension) are kept
//! verbatim as raw JSON, so reading a trace never fails on an unknown `type`.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

mod envelope;
pub use envelope::{OmniMessage, Payload, now_timestamp};

/// The six outcome values shared by complete messages, `request_end` and tool outputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    #[default]
    Completed,
    Failed,
    Aborted,
    Timeout,
    Malformed,
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

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    User,
    Assistant,
}

/// Who, other than the human, wrote a user-role text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Sender {
    ParentAgent,
    Harness,
    Server,
}

/// Phase of a streaming partial: every segment is `start → delta* → stop`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventType {
    Start,
    Delta,
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
    pub session_id: String,
    pub provider: String,
    pub model_id: String,
    pub model_context_window: Value,
    pub system_prompt: String,
    pub agent_state: String,
    pub workspace: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// The approval mode the session started with (`approval_mode_changed` records changes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_mode: Option<String>,
    /// What reopening the session needs (see [`launch::Launch`]).
    #[serde(flatten)]
    pub launch: Box<launch::Launch>,
}

/// `model_msg` payloads: seven complete kinds and four streaming partials.
#[derive(Debug, Clone, PartialEq, Hash, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ModelPayload {
    Text {
        role: Role,
        text: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sender: Option<Sender>,
        #[serde(default)]
        stop_reason: StopReason,
        #[serde(default, skip_serializing_if = "is_empty_map")]
        fidelity: Option<Fidelity>,
    },
    ImageUrl {
        role: Role,
        image_url: String,
        #[serde(default)]
        stop_reason: StopReason,
    },
    InlineData {
        role: Role,
        data: String,
        mime_type: String,
        #[serde(default)]
        stop_reason: StopReason,
        #[serde(default, skip_serializing_if = "is_empty_map")]
        fidelity: Option<Fidelity>,
    },
    Thinking {
        role: Role,
        thinking: String,
        #[serde(default)]
        stop_reason: StopReason,
        #[serde(default, skip_serializing_if = "is_empty_map")]
        fidelity: Option<Fidelity>,
    },
    InlineThinking {
        role: Role,
        data: String,
        mime_type: String,
        #[serde(default)]
        stop_reason: StopReason,
        #[serde(default, skip_serializing_if = "is_empty_map")]
        fidelity: Option<Fidelity>,
    },
    ToolCall {
        role: Role,
        name: String,
        arguments: String,
        tool_call_id: String,
        #[serde(default)]
        stop_reason: StopReason,
        #[serde(default, skip_serializing_if = "is_empty_map")]
        fidelity: Option<Fidelity>,
    },
    ToolCallOutput {
        role: Role,
        output: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        images: Vec<String>,
        tool_call_id: String,
        #[serde(default)]
        stop_reason: StopReason,
    },
    PartialText {
        role: Role,
        event_type: EventType,
        text: String,
        #[serde(default)]
        stop_reason: StopReason,
    },
    PartialThinking {
        role: Role,
        event_type: EventType,
        thinking: String,
        #[serde(default)]
        stop_reason: StopReason,
    },
    PartialToolCall {
        role: Role,
        event_type: EventType,
        name: String,
        arguments: String,
        tool_call_id: String,
        #[serde(default)]
        stop_reason: StopReason,
    },
    PartialToolCallOutput {
        role: Role,
        event_type: EventType,
        output: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        images: Vec<String>,
        tool_call_id: String,
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
    #[serde(default)]
    pub cache_read: u64,
    #[serde(default)]
    pub cache_write: u64,
    #[serde(default)]
    pub output: u64,
    #[serde(default)]
    pub total: u64,
}

impl Usage {
    pub fn add(&mut self, other: &Usage) {
        self.cache_read += other.cache_read;
        self.cache_write += other.cache_write;
        self.output += other.output;
        self.total += other.total;
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    Allow,
    Deny,
    Forbidden,
}

/// `event_msg` payloads: the twelve of the protocol (`docs/protocol.md#events`) plus Rookery's own (`command_evicted`,
/// `task_end`, `approval_mode_changed`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum EventPayload {
    RequestBegin {},
    RequestEnd {
        status: StopReason,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error_message: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        attempt: Option<u32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        retry_in_ms: Option<u64>,
    },
    ApprovalDecision {
        decision: Decision,
        tool_call_id: String,
        /// Who decided: `hook`, `policy`, `mode`, `user` or `api` (Rookery's own).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        source: Option<String>,
        /// The hook's reason or the policy rule's name.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        /// The call asked to run outside the session's sandbox (`require_escalated`).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        escalation: bool,
    },
    Abort {
        reason: Option<String>,
    },
    TokenUsage {
        session: Usage,
        request: Usage,
    },
    CompactionBegin {
        reason: String,
        mode: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        context: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        turns: Option<u64>,
    },
    CompactionEnd {
        reason: String,
        mode: String,
        status: StopReason,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        attempt: Option<u32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error_message: Option<String>,
    },
    Subagent {
        session_id: String,
    },
    ToolListReady {
        tools: ToolList,
    },
    /// PenguinHarness writes one pair for all servers (`servers`, `results`); Rookery writes
    /// one pair per server (`server`, and `tools`, `ms`, `error` on the end).
    McpConnectBegin {
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        servers: Vec<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        server: Option<String>,
    },
    McpConnectEnd {
        status: StopReason,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        results: Vec<Value>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        server: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tools: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ms: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// One reconnect try of an MCP server whose transport died (Rookery's own).
    McpReconnect {
        server: String,
        attempt: u32,
        status: StopReason,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    GoalFinished {
        outcome: String,
        rounds: u64,
        tokens_used: u64,
    },
    CommandEvicted {
        process_id: String,
        status: String,
    },
    TaskEnd {
        status: StopReason,
    },
    /// A subscriber fell behind and lost its `count` oldest messages (Rookery's own; built for
    /// that subscriber only, never recorded). `text` reads `[... N earlier messages dropped ...]`.
    MessagesDropped {
        count: u64,
        text: String,
    },
    /// `rookery serve` hibernated the idle session (Rookery's own; streamed, never recorded).
    SessionHibernated {},
    /// `rookery serve` resumed the hibernated session (Rookery's own; streamed, never recorded).
    SessionResumed {},
    /// The session's approval mode changed (Rookery's own).
    ApprovalModeChanged {
        mode: String,
    },
    /// A PreToolUse hook replaced a call's arguments (Rookery's own).
    HookRewrite {
        tool_call_id: String,
        command: String,
        original_arguments: String,
        arguments: String,
    },
    /// A hook failed without blocking: an exit other than 0 or 2, a timeout, bad JSON.
    HookError {
        tool_call_id: String,
        command: String,
        #[serde(default)]
        exit_code: Option<i32>,
        stderr: String,
    },
    /// A spawned agent's copy of its parent's turns (`spawn_agent` `fork_turns`), written
    /// right after its `session_meta`; resume puts them first in its history (Rookery's own).
    ForkedHistory {
        messages: Vec<ModelPayload>,
    },
    /// The session's model changed (a parent's `send_message` with `model` /
    /// `reasoning_effort`): `model` is the `models:` name or `provider/model` it resolved from;
    /// resume resolves it again, so a resumed session keeps it (Rookery's own).
    ModelSwitched {
        model: String,
        provider: String,
        model_id: String,
        context_window: Value,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reasoning_effort: Option<String>,
    },
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
