//! Rollback: drops the last N completed tasks of an idle session's context and records a
//! `rollback` event (`docs/guide/branching.md#rollback`), which resume replays.
//!
//! It decides only whether a rollback may happen now; the conversation drops the tasks (through
//! the effects executor). It never touches files: what the dropped tasks changed stays.

use super::machine::Effect;
use super::{SessionState, compaction, effects};
use crate::actors::session_api::RolledBack;
use crate::error::RookeryError;
use crate::message::{EventPayload, OmniMessage};

/// `SessionRequest::Rollback`: refused while a task or a compaction runs, after a trace
/// failure, and for 0 or more tasks than the context holds.
pub(super) fn request(state: &mut SessionState, tasks: u64) -> Result<RolledBack, RookeryError> {
    if let Some(reason) = &state.trace_failure {
        return Err(RookeryError::TraceFailed {
            session: state.id.clone(),
            reason: reason.clone(),
        });
    }
    if state.task.is_some() {
        return Err(RookeryError::SessionBusy(state.id.clone()));
    }
    if compaction::is_active(state) {
        return Err(RookeryError::Compacting(state.id.clone()));
    }
    let held = state.conversation.completed_count();
    let n = usize::try_from(tasks).unwrap_or(usize::MAX);
    if n == 0 || n > held {
        return Err(RookeryError::InvalidInput(format!(
            "cannot roll back {tasks} task(s): the context holds {held} completed task(s) (a compaction keeps none)"
        )));
    }
    let before = state.conversation.history().len();
    effects::apply(state, Effect::Rollback(n));
    let dropped = before.saturating_sub(state.conversation.history().len()) as u64;
    effects::apply(
        state,
        Effect::Emit(OmniMessage::event(EventPayload::Rollback {
            tasks,
            messages: dropped,
        })),
    );
    Ok(RolledBack {
        dropped_tasks: tasks,
        dropped_messages: dropped,
    })
}
