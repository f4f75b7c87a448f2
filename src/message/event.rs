//! The `event_msg` payloads: the protocol's events and Rookery's own, one enum.
//!
//! Wire shape only, like the rest of `message`: it must not know about actors, tools or I/O.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Decision, ModelPayload, StopReason, ToolList, Usage, schedule};

/// `event_msg` payloads: the twelve of the protocol (`docs/protocol.md#events`) plus Rookery's own (`command_evicted`,
/// `task_end`, `approval_mode_changed`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum EventPayload {
    /// Before each model request attempt.
    RequestBegin {},
    /// A model stream ended (tool outputs may follow).
    RequestEnd {
        /// The attempt's outcome.
        status: StopReason,
        /// The failure's detail, only on a non-completed status (`unknown` when none).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error_message: Option<String>,
        /// The 1-based attempt, on a non-completed end or a completion that needed retries.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        attempt: Option<u32>,
        /// The wait before the next try in milliseconds, only when the session will retry.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        retry_in_ms: Option<u64>,
    },
    /// The approval gate's decision on one real tool call, before its output.
    ApprovalDecision {
        /// The verdict.
        decision: Decision,
        /// The id of the call decided on.
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
        /// The principal whose API answer decided (`rookery serve`; Rookery's own).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        decided_by: Option<String>,
    },
    /// A task was aborted (by the user, a final model failure, a trace write failure, a crash).
    Abort {
        /// Why, when known.
        reason: Option<String>,
    },
    /// Token counts after a completed stream, just before `request_end`.
    TokenUsage {
        /// The session's running totals.
        session: Usage,
        /// This request's counts.
        request: Usage,
    },
    /// A compaction of the history starts (before the request it precedes).
    CompactionBegin {
        /// What triggered it: `context`, `turns` or `manual`.
        reason: String,
        /// How: `summarize` or `discard`.
        mode: String,
        /// The last request's `total` tokens.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        context: Option<u64>,
        /// Turns since the last compaction.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        turns: Option<u64>,
    },
    /// A compaction ended.
    CompactionEnd {
        /// What triggered it: `context`, `turns` or `manual`.
        reason: String,
        /// How: `summarize` or `discard`.
        mode: String,
        /// Its outcome.
        status: StopReason,
        /// The final attempt, when more than one was needed or it did not complete.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        attempt: Option<u32>,
        /// The last failure, when it failed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error_message: Option<String>,
    },
    /// A child session was admitted (parent trace only, never streamed).
    Subagent {
        /// The child's session id.
        session_id: String,
    },
    /// The tools the session offers the model (first task of a session, after its input).
    ToolListReady {
        /// The tool specs `{name, description, parameters}`.
        tools: ToolList,
    },
    /// PenguinHarness writes one pair for all servers (`servers`, `results`); Rookery writes
    /// one pair per server (`server`, and `tools`, `ms`, `error` on the end).
    McpConnectBegin {
        /// All servers of the connect (PenguinHarness form).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        servers: Vec<String>,
        /// The one server of this connect (Rookery's form).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        server: Option<String>,
    },
    /// An MCP connect ended (one for all servers, or one per server).
    McpConnectEnd {
        /// The connect's outcome.
        status: StopReason,
        /// One result per server (PenguinHarness form).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        results: Vec<Value>,
        /// The server connected (Rookery's form).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        server: Option<String>,
        /// How many tools the server offers.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tools: Option<u64>,
        /// How long the connect took, in milliseconds.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ms: Option<u64>,
        /// Why the connect failed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// One reconnect try of an MCP server whose transport died (Rookery's own).
    McpReconnect {
        /// The server's name in the config.
        server: String,
        /// The 1-based reconnect try.
        attempt: u32,
        /// The try's outcome.
        status: StopReason,
        /// Why the try failed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// A goal finished (part of the compatible set; not emitted yet).
    GoalFinished {
        /// How the goal ended.
        outcome: String,
        /// Model rounds the goal took.
        rounds: u64,
        /// Tokens the goal used.
        tokens_used: u64,
    },
    /// A registered background command was evicted to admit another, or reaped when idle.
    CommandEvicted {
        /// The command's process id (as `run_command` returned it).
        process_id: String,
        /// Its state when evicted: `running`, `exited` or `reaped`.
        status: String,
    },
    /// The last record of every task (Rookery's own).
    TaskEnd {
        /// `completed`, `failed` or `aborted`.
        status: StopReason,
        /// Why a task that did not complete ended, when a code says it: `node_lost` (the node
        /// running it died; written by the node that took the session over, see
        /// `docs/protocol.md#failover`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        /// The parsed final answer of a completed task with an `output_schema`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        output: Option<Value>,
    },
    /// A subscriber fell behind and lost its `count` oldest messages (Rookery's own; built for
    /// that subscriber only, never recorded). `text` reads `[... N earlier messages dropped ...]`.
    MessagesDropped {
        /// How many messages were dropped.
        count: u64,
        /// The notice the subscriber sees in their place.
        text: String,
    },
    /// `rookery serve` hibernated the idle session (Rookery's own; streamed, never recorded).
    SessionHibernated {},
    /// `rookery serve` resumed the hibernated session (Rookery's own; streamed, never recorded).
    SessionResumed {},
    /// `rookery serve --store`: the session's lease moved to another node, which serves it now;
    /// this node stopped its copy and the stream ends after this event (Rookery's own;
    /// streamed, never recorded). A client reconnects to any node with `Last-Event-ID`.
    SessionMoved {
        /// The node holding the session's lease now.
        node: String,
    },
    /// An approval answered `allow_for_session` added a grant (Rookery's own).
    ApprovalGrant {
        /// `grant-N`, unique within the session.
        grant_id: String,
        /// The allow rule, in Claude Code's syntax.
        rule: String,
        /// The call whose answer granted it.
        tool_call_id: String,
    },
    /// A grant was revoked (Rookery's own).
    ApprovalGrantRevoked {
        /// The revoked grant's id.
        grant_id: String,
    },
    /// An API request acted on the session (`rookery serve`; Rookery's own): `action` is
    /// `task_start`, `steer`, `abort`, `approval_mode` or `delete`, `by` the principal.
    ApiAction {
        /// What the request did.
        action: String,
        /// The principal that sent it.
        by: String,
        /// The mode it set (`approval_mode` only).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mode: Option<String>,
    },
    /// The session's approval mode changed (Rookery's own).
    ApprovalModeChanged {
        /// The new mode (`allow-all`, `deny-all`, `read-only`, `always-ask`).
        mode: String,
    },
    /// A PreToolUse hook replaced a call's arguments (Rookery's own).
    HookRewrite {
        /// The id of the rewritten call.
        tool_call_id: String,
        /// The hook's command line.
        command: String,
        /// The arguments the model sent (a JSON string).
        original_arguments: String,
        /// The arguments the call runs with (a JSON string).
        arguments: String,
    },
    /// A hook failed without blocking: an exit other than 0 or 2, a timeout, bad JSON.
    HookError {
        /// The id of the call the hook ran for (empty for an event about no call).
        tool_call_id: String,
        /// The hook event (`Stop`, `SessionStart`, …); absent for a call's `PreToolUse` or
        /// `PostToolUse` hook.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        event: Option<String>,
        /// The hook's command line.
        command: String,
        /// The hook's exit code; `None` when it timed out, was killed or never started.
        #[serde(default)]
        exit_code: Option<i32>,
        /// What the hook wrote to stderr (or the failure's text).
        stderr: String,
    },
    /// A hook decided something (Rookery's own): a PreToolUse or PermissionRequest allow /
    /// ask / deny, a blocked prompt, a Stop that makes the task go on, a `continue: false`.
    HookDecision {
        /// The hook event (`PreToolUse`, `UserPromptSubmit`, `Stop`, …).
        event: String,
        /// The command of the first hook that gave the decision.
        command: String,
        /// `allow`, `ask`, `deny`, `block`, `continue` or `stop`.
        decision: String,
        /// The hooks' reasons, joined (absent when none gave one).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        /// The call decided, for a tool event.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tool_call_id: Option<String>,
    },
    /// A spawned agent's copy of its parent's turns (`spawn_agent` `fork_turns`), written
    /// right after its `session_meta`; resume puts them first in its history (Rookery's own).
    ForkedHistory {
        /// The parent's complete model payloads the child starts with.
        messages: Vec<ModelPayload>,
    },
    /// The last `tasks` completed tasks were dropped from the context (`rollback`); files they
    /// changed are not reverted. Resume rebuilds the context without them (Rookery's own).
    Rollback {
        /// How many completed tasks were dropped.
        tasks: u64,
        /// How many messages of the context went with them.
        messages: u64,
    },
    /// A schedule was added to the session (`rookery serve`; Rookery's own).
    ScheduleAdded(schedule::ScheduleAdded),
    /// A schedule was removed (Rookery's own).
    ScheduleRemoved(schedule::ScheduleRemoved),
    /// A due schedule ran, or tried to (Rookery's own).
    ScheduleFired(schedule::ScheduleFired),
    /// `rookery serve` queued a task behind the running one (`if_busy: enqueue`; Rookery's
    /// own; streamed, never recorded).
    TaskQueued {
        /// The queue entry's id (`q-N`).
        entry_id: String,
        /// The task's text.
        text: String,
    },
    /// A queued task left the queue (Rookery's own; streamed, never recorded).
    TaskDequeued {
        /// The queue entry's id.
        entry_id: String,
        /// `started` (it runs now) or `cancelled` (`DELETE …/queue/{entry_id}`).
        reason: String,
    },
    /// The session's model changed (a parent's `send_message` with `model` /
    /// `reasoning_effort`): `model` is the `models:` name or `provider/model` it resolved from;
    /// resume resolves it again, so a resumed session keeps it (Rookery's own).
    ModelSwitched {
        /// The `models:` name or `provider/model` the switch resolved from.
        model: String,
        /// The new provider name.
        provider: String,
        /// The new provider's model id.
        model_id: String,
        /// The new model's context window, as the model reports it.
        context_window: Value,
        /// The reasoning effort requested with the switch, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reasoning_effort: Option<String>,
    },
}
