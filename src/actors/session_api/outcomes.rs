//! What a session's requests answer: how a task ended (`TaskSummary`), what a steer did
//! (`SteerOutcome`, and the text a steer becomes) and what a manual compaction did
//! (`CompactStart`).
//!
//! Plain data; nothing here runs a turn or records.

use crate::message::StopReason;

/// How a task ended, for callers waiting on it.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskSummary {
    /// `completed`, `failed` or `aborted`.
    pub status: StopReason,
    /// The last assistant text of the task.
    pub final_text: Option<String>,
    /// The parsed final answer of a completed task that had an output schema.
    pub output: Option<serde_json::Value>,
    /// Tool calls the model made during the task.
    pub tool_calls: usize,
    /// The abort reason, when the task was aborted or failed with one.
    pub abort_reason: Option<String>,
}

/// What a steer did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SteerOutcome {
    /// A task was running: the text joins it at its next input-assembly point.
    Queued,
    /// No task was running: the text started one.
    Started,
}

impl SteerOutcome {
    /// `queued` or `started` (the API's spelling).
    pub fn as_str(self) -> &'static str {
        match self {
            SteerOutcome::Queued => "queued",
            SteerOutcome::Started => "started",
        }
    }
}

/// The user text a steer becomes.
pub fn steering_text(text: &str) -> String {
    format!("[user_steering]\n{text}\n[/user_steering]")
}

/// What a manual compaction did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompactStart {
    /// The session was idle: the compaction runs now.
    Started,
    /// A task runs: the session compacts before its next request.
    Scheduled,
}
