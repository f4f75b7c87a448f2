//! Builders for the payloads the runtime emits. Each sets `stop_reason` explicitly and stamps
//! the envelope's timestamp; none does I/O.

use super::*;

/// A user-role text; `sender` is `None` for human input.
pub fn user_text(text: impl Into<String>, sender: Option<Sender>) -> OmniMessage {
    OmniMessage::model(ModelPayload::Text {
        role: Role::User,
        text: text.into(),
        sender,
        stop_reason: StopReason::Completed,
        fidelity: None,
    })
}

/// An assistant text that ended with `stop_reason`.
pub fn assistant_text(text: impl Into<String>, stop_reason: StopReason) -> OmniMessage {
    OmniMessage::model(ModelPayload::Text {
        role: Role::Assistant,
        text: text.into(),
        sender: None,
        stop_reason,
        fidelity: None,
    })
}

/// A completed assistant thinking message.
pub fn thinking(thinking: impl Into<String>) -> OmniMessage {
    OmniMessage::model(ModelPayload::Thinking {
        role: Role::Assistant,
        thinking: thinking.into(),
        stop_reason: StopReason::Completed,
        fidelity: None,
    })
}

/// A completed assistant tool call (`arguments` is the JSON string of the call).
pub fn tool_call(
    name: impl Into<String>,
    arguments: impl Into<String>,
    tool_call_id: impl Into<String>,
) -> OmniMessage {
    OmniMessage::model(ModelPayload::ToolCall {
        role: Role::Assistant,
        name: name.into(),
        arguments: arguments.into(),
        tool_call_id: tool_call_id.into(),
        stop_reason: StopReason::Completed,
        fidelity: None,
    })
}

/// The output of the call `tool_call_id`, with its images (data URLs).
pub fn tool_call_output(
    tool_call_id: impl Into<String>,
    output: impl Into<String>,
    images: Vec<String>,
    stop_reason: StopReason,
) -> OmniMessage {
    OmniMessage::model(ModelPayload::ToolCallOutput {
        role: Role::User,
        output: output.into(),
        images,
        tool_call_id: tool_call_id.into(),
        stop_reason,
    })
}

/// A streamed fragment of assistant text.
pub fn partial_text(
    event_type: EventType,
    text: impl Into<String>,
    stop_reason: StopReason,
) -> OmniMessage {
    OmniMessage::model(ModelPayload::PartialText {
        role: Role::Assistant,
        event_type,
        text: text.into(),
        stop_reason,
    })
}

/// A streamed fragment of the output of the call `tool_call_id`.
pub fn partial_tool_call_output(
    tool_call_id: impl Into<String>,
    event_type: EventType,
    output: impl Into<String>,
    images: Vec<String>,
    stop_reason: StopReason,
) -> OmniMessage {
    OmniMessage::model(ModelPayload::PartialToolCallOutput {
        role: Role::User,
        event_type,
        output: output.into(),
        images,
        tool_call_id: tool_call_id.into(),
        stop_reason,
    })
}

/// A `request_begin` event.
pub fn request_begin() -> OmniMessage {
    OmniMessage::event(EventPayload::RequestBegin {})
}

/// A `request_end` event (see [`EventPayload::RequestEnd`] for when each field is set).
pub fn request_end(
    status: StopReason,
    error_message: Option<String>,
    attempt: Option<u32>,
    retry_in_ms: Option<u64>,
) -> OmniMessage {
    OmniMessage::event(EventPayload::RequestEnd {
        status,
        error_message,
        attempt,
        retry_in_ms,
    })
}

/// An `approval_decision` without `source` or `reason`.
pub fn approval_decision(decision: Decision, tool_call_id: impl Into<String>) -> OmniMessage {
    OmniMessage::event(EventPayload::ApprovalDecision {
        decision,
        tool_call_id: tool_call_id.into(),
        source: None,
        reason: None,
        escalation: false,
        decided_by: None,
    })
}

/// An `approval_decision` with who decided (`hook`, `policy`, `mode`, `user`, `api`) and why.
pub fn approval_decision_by(
    decision: Decision,
    tool_call_id: impl Into<String>,
    source: &str,
    reason: Option<String>,
) -> OmniMessage {
    decision_by(decision, tool_call_id.into(), source, reason, false)
}

/// [`approval_decision_by`] of a call that asked to run outside the session's sandbox
/// (`"escalation": true`).
pub fn escalation_decision_by(
    decision: Decision,
    tool_call_id: impl Into<String>,
    source: &str,
    reason: Option<String>,
) -> OmniMessage {
    decision_by(decision, tool_call_id.into(), source, reason, true)
}

fn decision_by(
    decision: Decision,
    tool_call_id: String,
    source: &str,
    reason: Option<String>,
    escalation: bool,
) -> OmniMessage {
    OmniMessage::event(EventPayload::ApprovalDecision {
        decision,
        tool_call_id,
        source: Some(source.to_string()),
        reason,
        escalation,
        decided_by: None,
    })
}

/// An `abort` event with its reason, if known.
pub fn abort(reason: Option<String>) -> OmniMessage {
    OmniMessage::event(EventPayload::Abort { reason })
}

/// A `token_usage` event: the session's totals and this request's counts.
pub fn token_usage(session: Usage, request: Usage) -> OmniMessage {
    OmniMessage::event(EventPayload::TokenUsage { session, request })
}

/// The `task_end` event that closes a task.
pub fn task_end(status: StopReason) -> OmniMessage {
    task_end_with(status, None)
}

/// The `task_end` event of a task with an output schema: `output` is its parsed answer.
pub fn task_end_with(status: StopReason, output: Option<serde_json::Value>) -> OmniMessage {
    OmniMessage::event(EventPayload::TaskEnd {
        status,
        reason: None,
        output,
    })
}

/// The `task_end` (`failed`, reason `node_lost`) a node that takes over a session writes for
/// the task its dead holder was running (`docs/protocol.md#failover`).
pub fn task_end_node_lost() -> OmniMessage {
    OmniMessage::event(EventPayload::TaskEnd {
        status: StopReason::Failed,
        reason: Some(NODE_LOST.to_string()),
        output: None,
    })
}

/// The `task_end` reason of a task whose node died (`docs/protocol.md#failover`).
pub const NODE_LOST: &str = "node_lost";

/// A `tool_list_ready` event announcing `tools`.
pub fn tool_list_ready(tools: impl Into<ToolList>) -> OmniMessage {
    OmniMessage::event(EventPayload::ToolListReady {
        tools: tools.into(),
    })
}
