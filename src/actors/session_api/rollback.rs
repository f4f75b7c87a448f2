//! `SessionHandle::rollback` and its answer (`RolledBack`): dropping the last N completed
//! tasks from a session's context.
//!
//! It only sends the request; the session drops the tasks and records the `rollback`.

use super::{SessionHandle, SessionRequest};
use crate::error::RookeryError;

/// What a rollback dropped. Files the dropped tasks changed are not reverted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RolledBack {
    /// Completed tasks dropped from the context.
    pub dropped_tasks: u64,
    /// Messages of the context that went with them.
    pub dropped_messages: u64,
}

impl SessionHandle {
    /// Drops the last `tasks` completed tasks from the session's context (recorded as a
    /// `rollback`, so a resume rebuilds the context without them). Files they changed are not
    /// reverted. `SessionBusy` while a task runs; `InvalidInput` for 0 or more tasks than the
    /// context holds.
    pub async fn rollback(&self, tasks: u64) -> Result<RolledBack, RookeryError> {
        ractor::call!(self.actor.0, SessionRequest::Rollback, tasks)?
    }
}
