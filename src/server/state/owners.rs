//! Whose a session is: the owner and workspace the server knows of a session id (served,
//! hibernated, or recorded on disk), and how many sessions a principal has.
//!
//! It reads the directory and, for a session not served, the `session_meta` opening its latest
//! trace file (or its stored trace, with a store); it never opens, wakes or resumes a session.

use std::path::PathBuf;
use std::sync::Arc;

use super::ServerState;
use crate::trace::paths;

/// What the server knows of a session it may serve.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    /// `session_meta.owner` (`None`: created outside the server, the host's).
    pub owner: Option<String>,
    /// The workspace it records.
    pub workspace: PathBuf,
}

impl ServerState {
    /// The owner and workspace of session `id`, from the served session, the hibernated
    /// entry or the trace on disk; `None` when no such session is known.
    pub fn recorded(&self, id: &str) -> Option<Recorded> {
        if let Some(r) = self.recorded_here(id) {
            return Some(r);
        }
        let trace = paths::locate_trace(&self.cfg.home, id)?;
        let meta = super::read_trace_meta(&trace)?;
        Some(Recorded {
            owner: meta.owner,
            workspace: PathBuf::from(meta.workspace),
        })
    }

    /// [`Self::recorded`], read from the store when the server has one (a session this server
    /// does not hold: the `session_meta` opening its stored trace), else off the async
    /// workers; 503 `store_unavailable` while the store is down.
    pub async fn recorded_anywhere(
        self: &Arc<Self>,
        id: &str,
    ) -> Result<Option<Recorded>, super::ApiError> {
        #[cfg(feature = "postgres")]
        if let Some(store) = self.cfg.store.clone() {
            if let Some(r) = self.recorded_here(id) {
                return Ok(Some(r));
            }
            return self.recorded_in_store(&store, id).await;
        }
        let state = self.clone();
        let id = id.to_string();
        Ok(tokio::task::spawn_blocking(move || state.recorded(&id))
            .await
            .ok()
            .flatten())
    }

    /// The owner and workspace of session `id` when it is served or hibernated here.
    fn recorded_here(&self, id: &str) -> Option<Recorded> {
        if let Some(e) = self.in_memory(id) {
            let meta = e.handle.meta();
            return Some(Recorded {
                owner: meta.owner.clone(),
                workspace: PathBuf::from(&meta.workspace),
            });
        }
        self.hibernated.lock().ok().and_then(|m| {
            m.get(id).map(|h| Recorded {
                owner: h.owner.as_deref().map(str::to_string),
                workspace: h.workspace.to_path_buf(),
            })
        })
    }

    /// The sessions `name` owns that are not deleted: served and hibernated ones.
    pub fn owned_count(&self, name: &str) -> usize {
        let served = self.sessions.lock().map_or(0, |m| {
            m.values()
                .filter(|e| e.handle.meta().owner.as_deref() == Some(name))
                .count()
        });
        let hibernated = self.hibernated.lock().map_or(0, |m| {
            m.values()
                .filter(|h| h.owner.as_deref() == Some(name))
                .count()
        });
        served + hibernated
    }
}

impl ServerState {
    /// Adds the other principals' workspace roots to a sandboxed session's `deny_read` (those
    /// that are not also its owner's roots, nor hold its workspace).
    pub(super) fn hide_other_roots(
        &self,
        sandbox: &mut crate::sandbox::SandboxPolicy,
        owner: Option<&str>,
        workspace: &std::path::Path,
    ) {
        let (Some(dir), Some(owner)) = (self.cfg.principals(), owner) else {
            return;
        };
        if sandbox.is_off() {
            return;
        }
        let own = dir
            .by_name(owner)
            .map(|p| p.workspace_roots.clone())
            .unwrap_or_else(|| dir.default_roots.clone());
        let real = std::fs::canonicalize(workspace).unwrap_or_else(|_| workspace.to_path_buf());
        for root in dir.roots_of_others(owner) {
            if !own.contains(&root)
                && !real.starts_with(&root)
                && !sandbox.deny_read.contains(&root)
            {
                sandbox.deny_read.push(root);
            }
        }
    }
}
