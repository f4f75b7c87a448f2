//! The session's inbox signal and its fork source: what `wait_agent` waits on (steers, notices,
//! agent reports and messages arriving) and the completed tasks `spawn_agent` may copy into a
//! child (`fork_turns`).
//!
//! It owns the [`Inbox`] watch value and the task boundaries (rebuilt from the trace on resume,
//! restarted by a compaction); it never delivers input (the turn loop does) and never starts a
//! task.

use tokio::sync::watch;

use crate::message::ModelPayload;

use super::SessionState;

pub use crate::actors::session_api::Inbox;

/// The session's [`Inbox`], watched once someone asked for a receiver: until then (an idle
/// session nobody waits on) it is the bare value, not a watch channel.
#[derive(Debug)]
pub(crate) enum InboxSignal {
    Unwatched(Inbox),
    Watched(watch::Sender<Inbox>),
}

impl Default for InboxSignal {
    fn default() -> Self {
        InboxSignal::Unwatched(Inbox::default())
    }
}

impl InboxSignal {
    /// A receiver that sees the value as it is now, then every change.
    pub(crate) fn subscribe(&mut self) -> watch::Receiver<Inbox> {
        match self {
            InboxSignal::Watched(tx) => tx.subscribe(),
            InboxSignal::Unwatched(value) => {
                let (tx, rx) = watch::channel(std::mem::take(value));
                *self = InboxSignal::Watched(tx);
                rx
            }
        }
    }

    /// Changes the value; receivers are woken when `change` says it changed.
    fn modify(&mut self, change: impl FnOnce(&mut Inbox) -> bool) {
        match self {
            InboxSignal::Watched(tx) => {
                tx.send_if_modified(change);
            }
            InboxSignal::Unwatched(value) => {
                change(value);
            }
        }
    }
}

pub use crate::actors::session_api::ForkTurns;

/// Records an arrival and wakes the waiters.
pub(super) fn arrived(state: &mut SessionState, what: &str) {
    state.inbox.modify(|i| {
        i.arrived += 1;
        i.last = what.to_string();
        true
    });
}

/// Marks every arrival so far as given to the model (an input-assembly point).
pub(super) fn delivered(state: &mut SessionState) {
    state.inbox.modify(|i| {
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

/// A completed compaction replaced the context: the turns before it are gone; a running task
/// continues from the start of the new context (its summary).
pub(super) fn context_replaced(state: &mut SessionState) {
    state.completed_tasks.clear();
    state.task_start = 0;
}

/// What `fork_turns` copies, oldest first (`docs/collaboration.md#fork_turns`): `all` is the
/// current context before the running task (after a compaction: the summary and the turns
/// since); `N` the last N completed tasks in it, or all of it when it holds fewer. A call
/// whose output is not in the copy (or an output whose call is not) is left out, so the copy
/// is always paired.
pub(super) fn fork(state: &SessionState, turns: ForkTurns) -> Vec<ModelPayload> {
    let end = if state.task.is_some() {
        state.task_start
    } else {
        state.committed
    }
    .min(state.history.len());
    let spans: Vec<(usize, usize)> = state
        .completed_tasks
        .iter()
        .copied()
        .filter(|(s, e)| s < e && *e <= end)
        .collect();
    let chosen: Vec<(usize, usize)> = match turns {
        ForkTurns::None => Vec::new(),
        ForkTurns::Last(n) if n <= spans.len() => spans[spans.len() - n..].to_vec(),
        ForkTurns::All | ForkTurns::Last(_) => vec![(0, end)],
    };
    let mut out = Vec::new();
    for (start, end) in chosen {
        if let Some(part) = state.history.get(start..end) {
            out.extend(part.iter().cloned());
        }
    }
    paired(out)
}

/// `messages` without the calls that have no output among them and the outputs that have no
/// call among them.
fn paired(messages: Vec<ModelPayload>) -> Vec<ModelPayload> {
    use std::collections::HashSet;
    let mut calls = HashSet::new();
    let mut outputs = HashSet::new();
    for m in &messages {
        match m {
            ModelPayload::ToolCall { tool_call_id, .. } => {
                calls.insert(tool_call_id.clone());
            }
            ModelPayload::ToolCallOutput { tool_call_id, .. } => {
                outputs.insert(tool_call_id.clone());
            }
            _ => {}
        }
    }
    messages
        .into_iter()
        .filter(|m| match m {
            ModelPayload::ToolCall { tool_call_id, .. } => outputs.contains(tool_call_id),
            ModelPayload::ToolCallOutput { tool_call_id, .. } => calls.contains(tool_call_id),
            _ => true,
        })
        .collect()
}
