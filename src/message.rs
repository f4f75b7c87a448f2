//! OmniMessage: the envelope `{timestamp, type, payload, origin?}` and every payload of the
//! PenguinHarness protocol (complete, partial and event payloads), with builders.
//!
//! This module owns the wire shape of messages and traces. It must not know about actors, tools
//! or I/O. Payloads it does not recognise (a newer trace, another runtime's extension) are kept
//! verbatim as raw JSON, so reading a trace never fails on an unknown `type`.

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

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

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    User,
    Assistant,
}

/// Who, other than the human, wrote a user-role text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Sender {
    ParentAgent,
    Harness,
    Server,
}

/// Phase of a streaming partial: every segment is `start → delta* → stop`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
        tools: Vec<Value>,
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

/// The payload of an envelope. `Unknown` keeps what this build does not understand, verbatim.
#[derive(Debug, Clone, PartialEq)]
pub enum Payload {
    SessionMeta(SessionMeta),
    Model(ModelPayload),
    Event(EventPayload),
    /// Envelope type and payload as read (an unknown `type` at either level).
    Unknown {
        kind: String,
        payload: Value,
    },
}

/// One message of the protocol: a line of a trace, an item of a session's stream.
#[derive(Debug, Clone, PartialEq)]
pub struct OmniMessage {
    /// ISO-8601 UTC with milliseconds, set when the message is built.
    pub timestamp: String,
    pub payload: Payload,
    /// Child-session ids, outer → inner; `None` = from this session. Never an empty list.
    pub origin: Option<Vec<String>>,
}

/// The current time as the envelope wants it: `2026-07-18T03:10:22.531Z`.
///
/// One clock read per call; the calendar part (`…T03:10:22.`) is formatted once per second
/// per thread and reused, so a message costs a copy and three digits, not a date conversion.
pub fn now_timestamp() -> String {
    use std::cell::RefCell;
    use std::time::{SystemTime, UNIX_EPOCH};
    thread_local! {
        static SECOND: RefCell<(u64, String)> = const { RefCell::new((u64::MAX, String::new())) };
    }
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let (secs, ms) = (since.as_secs(), since.subsec_millis().min(999));
    let mut out = String::with_capacity(24);
    SECOND.with(|cell| {
        let mut cached = cell.borrow_mut();
        if cached.0 != secs {
            cached.1 = second_prefix(secs);
            cached.0 = secs;
        }
        out.push_str(&cached.1);
    });
    for digit in [ms / 100, ms / 10 % 10, ms % 10] {
        out.push(char::from(b'0' + digit as u8));
    }
    out.push('Z');
    out
}

/// `YYYY-MM-DDTHH:MM:SS.` of a Unix second.
fn second_prefix(secs: u64) -> String {
    use chrono::{Datelike, Timelike};
    use std::fmt::Write;
    let at = i64::try_from(secs)
        .ok()
        .and_then(|s| chrono::DateTime::from_timestamp(s, 0))
        .unwrap_or_default();
    let mut out = String::with_capacity(24);
    let _ = write!(
        out,
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.",
        at.year(),
        at.month(),
        at.day(),
        at.hour(),
        at.minute(),
        at.second(),
    );
    out
}

impl OmniMessage {
    pub fn new(payload: Payload) -> Self {
        OmniMessage {
            timestamp: now_timestamp(),
            payload,
            origin: None,
        }
    }

    pub fn model(payload: ModelPayload) -> Self {
        Self::new(Payload::Model(payload))
    }

    pub fn event(payload: EventPayload) -> Self {
        Self::new(Payload::Event(payload))
    }

    pub fn session_meta(meta: SessionMeta) -> Self {
        Self::new(Payload::SessionMeta(meta))
    }

    /// The envelope `type`: `session_meta`, `model_msg` or `event_msg` (or the unknown one read).
    pub fn kind(&self) -> &str {
        match &self.payload {
            Payload::SessionMeta(_) => "session_meta",
            Payload::Model(_) => "model_msg",
            Payload::Event(_) => "event_msg",
            Payload::Unknown { kind, .. } => kind,
        }
    }

    /// Prepends one forwarding hop (`origin = [id, ...old]`).
    pub fn with_origin(mut self, child_session_id: &str) -> Self {
        let mut origin = vec![child_session_id.to_string()];
        origin.extend(self.origin.take().unwrap_or_default());
        self.origin = Some(origin);
        self
    }

    /// True when this message came from a child session.
    pub fn has_origin(&self) -> bool {
        self.origin.as_ref().is_some_and(|o| !o.is_empty())
    }

    /// Whether the trace records it: everything but partials and origin-tagged messages.
    pub fn is_recordable(&self) -> bool {
        if self.has_origin() {
            return false;
        }
        !matches!(&self.payload, Payload::Model(p) if p.is_partial())
    }

    pub fn as_model(&self) -> Option<&ModelPayload> {
        match &self.payload {
            Payload::Model(p) => Some(p),
            _ => None,
        }
    }

    pub fn as_event(&self) -> Option<&EventPayload> {
        match &self.payload {
            Payload::Event(p) => Some(p),
            _ => None,
        }
    }

    /// One JSON line (no trailing newline).
    pub fn to_json(&self) -> String {
        // Serializing this type cannot fail: every field is a string, number, map or list.
        serde_json::to_string(self).unwrap_or_else(|e| {
            format!(
                r#"{{"timestamp":"{}","type":"invalid","payload":{{"error":"{e}"}}}}"#,
                self.timestamp
            )
        })
    }

    pub fn from_json(line: &str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(line)
    }
}

impl Serialize for OmniMessage {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let fields = if self.origin.is_some() { 4 } else { 3 };
        let mut s = serializer.serialize_struct("OmniMessage", fields)?;
        s.serialize_field("timestamp", &self.timestamp)?;
        s.serialize_field("type", self.kind())?;
        match &self.payload {
            Payload::SessionMeta(m) => s.serialize_field("payload", m)?,
            Payload::Model(m) => s.serialize_field("payload", m)?,
            Payload::Event(e) => s.serialize_field("payload", e)?,
            Payload::Unknown { payload, .. } => s.serialize_field("payload", payload)?,
        }
        if let Some(origin) = &self.origin {
            s.serialize_field("origin", origin)?;
        }
        s.end()
    }
}

impl<'de> Deserialize<'de> for OmniMessage {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Raw {
            timestamp: String,
            #[serde(rename = "type")]
            kind: String,
            payload: Value,
            #[serde(default)]
            origin: Option<Vec<String>>,
        }
        let raw = Raw::deserialize(deserializer)?;
        if !raw.payload.is_object() {
            return Err(D::Error::custom("payload is not an object"));
        }
        let payload = match raw.kind.as_str() {
            "session_meta" => match serde_json::from_value::<SessionMeta>(raw.payload.clone()) {
                Ok(m) => Payload::SessionMeta(m),
                Err(_) => Payload::Unknown {
                    kind: raw.kind,
                    payload: raw.payload,
                },
            },
            "model_msg" => match serde_json::from_value::<ModelPayload>(raw.payload.clone()) {
                Ok(m) => Payload::Model(m),
                Err(_) => Payload::Unknown {
                    kind: raw.kind,
                    payload: raw.payload,
                },
            },
            "event_msg" => match serde_json::from_value::<EventPayload>(raw.payload.clone()) {
                Ok(e) => Payload::Event(e),
                Err(_) => Payload::Unknown {
                    kind: raw.kind,
                    payload: raw.payload,
                },
            },
            _ => Payload::Unknown {
                kind: raw.kind,
                payload: raw.payload,
            },
        };
        Ok(OmniMessage {
            timestamp: raw.timestamp,
            payload,
            origin: raw.origin.filter(|o| !o.is_empty()),
        })
    }
}

pub mod build;
pub mod launch;
