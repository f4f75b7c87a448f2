//! What the server's state asks of the backend its sessions live in: with `--store`, the
//! `postgres` store (is it up, does it have a session, when was a session last written, is a
//! stored session's workspace on this node); without one, the files under the home, for which
//! these answer at once.
//!
//! It only reads; it never opens, wakes or closes a session.

use std::path::Path;

#[cfg(feature = "postgres")]
use super::stored;
use super::{ApiError, ServerState};

impl ServerState {
    /// 503 `store_unavailable` unless the server's store answers (a round trip); `Ok` without
    /// a store. Asked before work that needs the database (a task, a create).
    pub async fn store_ready(&self) -> Result<(), ApiError> {
        #[cfg(feature = "postgres")]
        if let Some(store) = &self.cfg.store {
            return crate::store::records::ping(store)
                .await
                .map_err(stored::store_error);
        }
        Ok(())
    }

    /// With a store, when session `id`'s last record was stored (its row's `last_activity`);
    /// `None` without a store, for an unknown id, or when the store cannot say.
    pub async fn stored_last_activity(&self, id: &str) -> Option<String> {
        #[cfg(feature = "postgres")]
        if let Some(store) = &self.cfg.store {
            return match crate::store::records::last_activity(store, id).await {
                Ok(at) => at,
                Err(e) => {
                    tracing::debug!(session = %id, "cannot read last_activity: {e}");
                    None
                }
            };
        }
        let _ = id;
        None
    }

    /// Whether the store (`None`: the files under the home) has session `id`.
    pub(super) async fn in_store(&self, id: &str) -> Result<Option<bool>, ApiError> {
        #[cfg(feature = "postgres")]
        if let Some(store) = &self.cfg.store {
            return crate::store::records::exists(store, id)
                .await
                .map(Some)
                .map_err(stored::store_error);
        }
        let _ = id;
        Ok(None)
    }

    /// With a store, 409 `workspace_missing` naming this node when the workspace a stored
    /// session records is not a directory here (before its lease is taken: another node may
    /// have it). Without one a missing workspace is the resume's 400 `invalid_workspace`.
    pub(super) fn check_workspace_here(&self, id: &str, workspace: &Path) -> Result<(), ApiError> {
        #[cfg(feature = "postgres")]
        if let Some(store) = &self.cfg.store
            && !workspace.is_dir()
        {
            let node = store.options().node.clone();
            return Err(ApiError::new(
                axum::http::StatusCode::CONFLICT,
                "workspace_missing",
                format!(
                    "cannot wake {id} on node {node}: its workspace {} does not exist on this node (every node needs the same workspace paths, e.g. shared storage)",
                    workspace.display()
                ),
            )
            .with_detail("node", serde_json::Value::String(node)));
        }
        let _ = (id, workspace);
        Ok(())
    }
}
