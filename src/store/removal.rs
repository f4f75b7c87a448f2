//! `rookery sessions rm` on the store: a session and its subagents deleted (their records go
//! with them, `ON DELETE CASCADE`), refused while a live node holds the session's lease.
//!
//! It owns the delete statement only; it must not take leases nor touch a running session.

use std::time::Duration;

use super::PgStore;
use super::error::StoreError;

/// What a removal deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Removed {
    /// Sessions deleted (the session and its subagents).
    pub sessions: u64,
    /// Their trace records.
    pub records: i64,
}

/// Deletes session `id` and the sessions whose parent it is, in one transaction; refused with
/// [`StoreError::Leased`] while a node holds its unexpired lease.
pub async fn remove(store: &PgStore, id: &str) -> Result<Removed, StoreError> {
    let mut client = store.client().await?;
    let tx = client.transaction().await?;
    let row = tx
        .query_opt(
            "SELECT owner_node,
                    greatest(extract(epoch FROM lease_expiry - now()), 0)::float8
               FROM sessions WHERE id = $1 FOR UPDATE",
            &[&id],
        )
        .await?;
    let Some(row) = row else {
        return Err(StoreError::UnknownSession(id.to_string()));
    };
    let holder: Option<String> = row.get(0);
    let left: Option<f64> = row.get(1);
    if let (Some(node), Some(left)) = (holder, left.filter(|l| *l > 0.0)) {
        return Err(StoreError::Leased {
            id: id.to_string(),
            node,
            left: Duration::from_secs_f64(left),
        });
    }
    let records: i64 = tx
        .query_one(
            "SELECT count(*) FROM trace_records
              WHERE session_id IN (SELECT id FROM sessions WHERE id = $1 OR parent = $1)",
            &[&id],
        )
        .await?
        .get(0);
    let sessions = tx
        .execute("DELETE FROM sessions WHERE id = $1 OR parent = $1", &[&id])
        .await?;
    tx.commit().await?;
    Ok(Removed { sessions, records })
}
