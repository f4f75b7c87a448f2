//! `SessionHandle::fork`: a new session's trace copied from this session's up to the end of
//! one of its tasks (`crate::trace::fork`), ready for `Host::resume_session`.
//!
//! It only flushes this session's trace and copies it; it never starts the fork and never
//! changes this session.

use super::SessionHandle;
use crate::error::RookeryError;
use crate::trace::fork::{ForkOverrides, ForkedTrace, fork_trace};

impl SessionHandle {
    /// Writes a fork of this session: a new session (own id, own trace) whose history is this
    /// one's up to the end of task `at_task` (numbered from 1; `None`: the last completed one,
    /// so a running session forks its last completed task). Its `session_meta` names
    /// `forked_from`. Start it with `Host::resume_session(&forked.session_id, options)`. This
    /// session is untouched.
    pub async fn fork(&self, at_task: Option<u64>) -> Result<ForkedTrace, RookeryError> {
        self.fork_with(at_task, ForkOverrides::default()).await
    }

    /// [`Self::fork`] with another workspace or approval mode for the fork.
    pub async fn fork_with(
        &self,
        at_task: Option<u64>,
        overrides: ForkOverrides,
    ) -> Result<ForkedTrace, RookeryError> {
        // Every record so far is in the file before it is copied.
        self.flush_trace().await?;
        let latest = self.trace_path();
        // `<home>/traces/<date>/<file>`.
        let home = latest
            .parent()
            .and_then(|d| d.parent())
            .and_then(|t| t.parent())
            .map(std::path::Path::to_path_buf)
            .ok_or_else(|| {
                RookeryError::InvalidInput(format!(
                    "cannot fork: {} is not under a Rookery home",
                    latest.display()
                ))
            })?;
        let forked =
            tokio::task::spawn_blocking(move || fork_trace(&home, &latest, at_task, &overrides))
                .await
                .map_err(|e| RookeryError::InvalidInput(format!("fork failed: {e}")))??;
        Ok(forked)
    }
}
