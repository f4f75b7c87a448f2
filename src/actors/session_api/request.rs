//! `SessionRequest`: every request others may send a session — the handle's calls, the inbox
//! and fork requests a subagent supervisor makes, the notices and agent inputs it delivers.
//!
//! Plain data (texts, choices and reply ports): a remote node will speak these. The session's
//! own internal messages (model events, tool results, …) are not here; they stay private to
//! `actors/session/`.

use ractor::RpcReplyPort;
use tokio::sync::watch;

use super::{
    CompactStart, ForkTurns, Inbox, MessageReceiver, ModelChoice, OutputSchema, RolledBack,
    SessionStatus, SpecError, SteerOutcome, Switched, TaskSummary,
};
use crate::error::RookeryError;
use crate::message::{ModelPayload, Sender};

/// A request to a session.
pub enum SessionRequest {
    /// A receiver of the session's messages from now on.
    Subscribe(RpcReplyPort<MessageReceiver>),
    /// Starts a task with a user text (`sender` marks who wrote it, e.g. a parent agent).
    StartTask(
        String,
        Option<Sender>,
        RpcReplyPort<Result<(), RookeryError>>,
    ),
    /// Starts a task whose final answer must meet an output schema (`OutputSchema`).
    StartStructured(String, OutputSchema, RpcReplyPort<Result<(), RookeryError>>),
    /// Aborts the running task, if any.
    Abort,
    /// A client's trace context (`traceparent`) for what it sends next: the next task's span
    /// joins that trace; a running task gets a `rookery.steer` event naming it.
    JoinTrace(crate::telemetry::TraceParent),
    /// Records that an API request acted on the session (`api_action`).
    ApiAction {
        /// `task_start`, `steer`, `abort`, `approval_mode` or `delete`.
        action: String,
        /// The principal that sent the request.
        by: String,
        /// The mode an `approval_mode` request set.
        mode: Option<String>,
    },
    /// Records a schedule's addition, removal or run (`rookery serve`'s schedules).
    Schedule(crate::message::schedule::ScheduleRecord),
    /// Compacts the context now (idle) or before the next request (a task runs).
    Compact(RpcReplyPort<Result<CompactStart, RookeryError>>),
    /// Drops the last N completed tasks from the context (refused while a task runs).
    Rollback(u64, RpcReplyPort<Result<RolledBack, RookeryError>>),
    /// A receiver of the session's inbox (`wait_agent`).
    Inbox(RpcReplyPort<watch::Receiver<Inbox>>),
    /// The history of completed tasks a spawned agent starts with (`fork_turns`).
    Fork(ForkTurns, RpcReplyPort<Vec<ModelPayload>>),
    /// A text for the model from a collaborating agent (a report or a message), delivered at
    /// the next input-assembly point like a notice; `what` describes it for `wait_agent`.
    AgentInput {
        /// The text for the model.
        text: String,
        /// What it is (e.g. `message from agent <id>`), for `wait_agent`.
        what: String,
    },
    /// Wakes `wait_agent` (a message was queued for this session elsewhere).
    Poke(String),
    /// A `[background_task_done]` text to deliver at the next input-assembly point.
    Notice(String),
    /// Switches the model from the next request on, or (`false`) only checks that the choice
    /// resolves and builds.
    SwitchModel(ModelChoice, bool, RpcReplyPort<Result<Switched, SpecError>>),
    /// Steers the running task (or starts one when idle).
    Steer(
        String,
        Option<Sender>,
        RpcReplyPort<Result<SteerOutcome, RookeryError>>,
    ),
    /// Replies when no task runs (at once if idle) with the last task's summary.
    WaitIdle(RpcReplyPort<Option<TaskSummary>>),
    /// Whether the session is idle, running or failed.
    Status(RpcReplyPort<SessionStatus>),
    /// Registered background commands and subagents.
    LiveCounts(RpcReplyPort<(usize, usize)>),
    /// Aborts a running task, flushes and closes the trace, stops the actor.
    Close(RpcReplyPort<()>),
    /// Test hook: makes the session's handler panic.
    #[doc(hidden)]
    InjectPanic,
}
