//! The session's inbox signal and its fork source: what `wait_agent` waits on (steers, notices,
//! agent reports and messages arriving) and the completed tasks `spawn_agent` may copy into a
//! child (`fork_turns`).
//!
//! It owns the [`Inbox`] watch value and the task boundaries; it never delivers input (the
//! turn loop does) and never starts a task.

use crate::message::ModelPayload;

use super::SessionState;

/// What arrived for the session's model and what it has been given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Inbox {
    /// Arrivals so far (steers, notices, reports, messages).
    pub arrived: u64,
    /// `arrived` as of the last input-assembly point.
    pub delivered: u64,
    /// The last arrival, e.g. `agent agent-1a2b3c4d reported (completed)`.
    pub last: String,
}

impl Inbox {
    /// Something arrived that the model has not been given yet.
    pub fn waiting(&self) -> bool {
        self.arrived > self.delivered
    }
}

/// Which of the parent's completed tasks a spawned agent starts with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ForkTurns {
    None,
    All,
    Last(usize),
}

/// Records an arrival and wakes the waiters.
pub(super) fn arrived(state: &SessionState, what: &str) {
    state.inbox.send_modify(|i| {
        i.arrived += 1;
        i.last = what.to_string();
    });
}

/// Marks every arrival so far as given to the model (an input-assembly point).
pub(super) fn delivered(state: &SessionState) {
    state.inbox.send_if_modified(|i| {
        let changed = i.delivered != i.arrived;
        i.delivered = i.arrived;
        changed
    });
}

/// A task starts: its input begins at the committed end of the history.
pub(super) fn task_started(state: &mut SessionState) {
    state.task_start = state.committed;
}

/// A task completed: its span of the history is a turn `fork_turns` may copy.
pub(super) fn task_completed(state: &mut SessionState) {
    let span = (state.task_start, state.committed);
    if span.0 < span.1 {
        state.completed_tasks.push(span);
    }
}

/// The history of the chosen completed tasks, oldest first (spans the history no longer
/// holds, e.g. after a compaction, are skipped).
pub(super) fn fork(state: &SessionState, turns: ForkTurns) -> Vec<ModelPayload> {
    let spans = &state.completed_tasks;
    let chosen = match turns {
        ForkTurns::None => &spans[..0],
        ForkTurns::All => &spans[..],
        ForkTurns::Last(n) => &spans[spans.len().saturating_sub(n)..],
    };
    let mut out = Vec::new();
    for (start, end) in chosen {
        if let Some(part) = state.history.get(*start..*end) {
            out.extend(part.iter().cloned());
        }
    }
    out
}
