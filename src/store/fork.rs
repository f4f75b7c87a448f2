//! A fork of a stored session, stored: the origin's records read back by part, the copy made
//! by the trace area's fork rules (`crate::trace::fork::fork_records`), and the fork inserted
//! as a new session (epoch 1, its records, then its lease given up so whoever resumes it takes
//! it). `rookery sessions fork --store` and `POST /v1/sessions/{id}/fork` on a store use it.
//!
//! It never writes the origin's rows and never starts the fork.

use super::PgStore;
use super::append::append_once;
use super::error::StoreError;
use super::lease::{SessionRow, release, take_new};
use crate::message::{OmniMessage, Payload};
use crate::trace::fork::{ForkCopy, ForkError, ForkOverrides, ForkedTrace, fork_records};

/// Why a stored fork could not be made.
#[derive(Debug, thiserror::Error)]
pub enum StoredForkError {
    /// The origin has no such task (or no completed one), or no `session_meta`.
    #[error(transparent)]
    Fork(#[from] ForkError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Forks stored session `origin` at the end of task `at_task` (default: the last completed)
/// into a new stored session, not held by anyone.
pub async fn fork(
    store: &PgStore,
    origin: &str,
    at_task: Option<u64>,
    overrides: &ForkOverrides,
) -> Result<ForkedTrace, StoredForkError> {
    let parts = read_parts(store, origin).await?;
    if parts.is_empty() {
        return Err(StoreError::UnknownSession(origin.to_string()).into());
    }
    let ForkCopy {
        session_id,
        lines,
        from,
    } = fork_records(&parts, origin.to_string(), at_task, overrides)?;
    let row = fork_row(&session_id, &lines);
    let taken = take_new(store, &row).await?;
    let records: Vec<Vec<u8>> = lines
        .into_iter()
        .map(|l| {
            let mut bytes = l.into_bytes();
            bytes.push(b'\n');
            bytes
        })
        .collect();
    let stored = append_once(store, &taken.lease, 0, &records).await;
    if let Err(e) = release(store, &taken.lease).await {
        tracing::warn!("[store] cannot give up the lease of the fork {session_id}: {e}");
    }
    stored?;
    Ok(ForkedTrace {
        path: PgStore::place(&session_id),
        session_id,
        from,
    })
}

/// The origin's records, parsed, one list per part, oldest first.
async fn read_parts(store: &PgStore, id: &str) -> Result<Vec<Vec<OmniMessage>>, StoreError> {
    let client = store.client().await?;
    let rows = client
        .query(
            "SELECT part, record FROM trace_records WHERE session_id = $1 ORDER BY seq",
            &[&id],
        )
        .await?;
    let mut parts: Vec<Vec<OmniMessage>> = Vec::new();
    let mut current = None;
    for r in &rows {
        let part: i32 = r.get(0);
        if current != Some(part) {
            parts.push(Vec::new());
            current = Some(part);
        }
        let Ok(text) = std::str::from_utf8(r.get::<_, &[u8]>(1)) else {
            continue;
        };
        // A line that does not parse is left out, as a trace reader skips it.
        if let (Ok(msg), Some(last)) = (OmniMessage::from_json(text.trim_end()), parts.last_mut()) {
            last.push(msg);
        }
    }
    Ok(parts)
}

/// The fork's row, from the `session_meta` its copy opens with.
fn fork_row(id: &str, lines: &[String]) -> SessionRow {
    let meta = lines
        .first()
        .and_then(|l| OmniMessage::from_json(l).ok())
        .and_then(|m| match m.payload {
            Payload::SessionMeta(meta) => Some(*meta),
            _ => None,
        })
        .unwrap_or_default();
    SessionRow {
        id: id.to_string(),
        parent: None,
        workspace: meta.workspace.clone(),
        tool_profile: meta.launch.tool_profile.clone().unwrap_or_default(),
        model: format!("{}/{}", meta.provider, meta.model_id),
        approval_mode: meta.approval_mode.unwrap_or_default(),
    }
}
