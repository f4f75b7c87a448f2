//! The session's inbox signal and its fork source: what `wait_agent` waits on (steers, notices,
//! agent reports and messages arriving) and the completed tasks `spawn_agent` may copy into a
//! child (`fork_turns`).
//!
//! It owns the [`Inbox`] watch value; the task boundaries it forks from are the conversation's
//! (`conversation.rs`). It never delivers input (the turn loop does) and never starts a task.

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

/// What `fork_turns` copies, oldest first (`docs/collaboration.md#fork_turns`): the
/// conversation's context before the running task, or its last N completed tasks, always
/// paired (see `Conversation::fork`).
pub(super) fn fork(state: &SessionState, turns: ForkTurns) -> Vec<ModelPayload> {
    state.conversation.fork(turns, state.task.is_some())
}
