//! `rookery sessions rm` on the store: a session and its subagents deleted (their records go
//! with them, `ON DELETE CASCADE`), refused while a live node holds the session's lease.
//!
//! It owns the delete statement only; it must not take leases nor touch a running session.

use std::time::Duration;

use super::PgStore;
use super::error::StoreError;
use crate::message::{EventPayload, OmniMessage, Payload};

/// What a removal deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Removed {
    /// Sessions deleted (the session and its subagents).
    pub sessions: u64,
    /// Their trace records.
    pub records: i64,
}

/// Deletes session `id` and its subagents (their records with them), in one transaction; refused with
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
    let ids = with_subagents(&tx, id).await?;
    let records: i64 = tx
        .query_one(
            "SELECT count(*) FROM trace_records WHERE session_id = ANY($1)",
            &[&ids],
        )
        .await?
        .get(0);
    let sessions = tx
        .execute("DELETE FROM sessions WHERE id = ANY($1)", &[&ids])
        .await?;
    tx.commit().await?;
    Ok(Removed { sessions, records })
}

/// Subagents a removal follows at most (a session's children, theirs, …).
const MAX_SESSIONS: usize = 10_000;

/// `id` and its subagents, found by the `subagent` pointers of their traces and by `parent`
/// (an imported subagent's row names it), breadth first, each once.
async fn with_subagents(
    tx: &deadpool_postgres::Transaction<'_>,
    id: &str,
) -> Result<Vec<String>, StoreError> {
    let needle: &[u8] = b"\"subagent\"";
    let mut ids = vec![id.to_string()];
    let mut next = 0;
    while next < ids.len() && ids.len() < MAX_SESSIONS {
        let current = ids[next].clone();
        next += 1;
        let mut children: Vec<String> = tx
            .query("SELECT id FROM sessions WHERE parent = $1", &[&current])
            .await?
            .iter()
            .map(|r| r.get(0))
            .collect();
        let pointers = tx
            .query(
                "SELECT record FROM trace_records
                  WHERE session_id = $1 AND position($2::bytea IN record) > 0",
                &[&current, &needle],
            )
            .await?;
        children.extend(pointers.iter().filter_map(|r| {
            let text = std::str::from_utf8(r.get::<_, &[u8]>(0)).ok()?;
            match OmniMessage::from_json(text.trim_end()).ok()?.payload {
                Payload::Event(EventPayload::Subagent { session_id }) => Some(session_id),
                _ => None,
            }
        }));
        for child in children {
            if !ids.contains(&child) {
                ids.push(child);
            }
        }
    }
    Ok(ids)
}
