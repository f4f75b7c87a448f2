//! What `rookery bench --failover N` reads from and removes in the `postgres` store: how far each
//! of the run's sessions got (a completed task, a tool call without its output), who holds their
//! leases, which of them have a task completed after a given event id, which ones had their lost
//! task ended `node_lost`, and at the end the run's sessions and node rows deleted.
//!
//! Records are matched on their bytes (`position` in the `bytea`), never decoded, so a record of
//! any size or content cannot make a query fail. It never takes or gives up a lease.

use std::collections::HashMap;

use crate::store::{PgStore, StoreError};

/// Where one session's first task stands in its trace.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Progress {
    /// `task_end` records with `"status":"completed"`.
    pub completed: i64,
    /// `tool_call` records.
    pub calls: i64,
    /// `tool_call_output` records.
    pub outputs: i64,
}

const TASK_END: &[u8] = br#""type":"task_end""#;
const COMPLETED: &[u8] = br#""status":"completed""#;
const TOOL_CALL: &[u8] = br#""type":"tool_call""#;
const TOOL_CALL_OUTPUT: &[u8] = br#""type":"tool_call_output""#;
const NODE_LOST: &[u8] = br#""reason":"node_lost""#;

/// The progress of each of `ids` (a session without records is missing).
pub async fn progress(
    store: &PgStore,
    ids: &[String],
) -> Result<HashMap<String, Progress>, StoreError> {
    let client = store.client().await?;
    let rows = client
        .query(
            "SELECT session_id,
                    count(*) FILTER (WHERE position($2 in record) > 0
                                       AND position($3 in record) > 0),
                    count(*) FILTER (WHERE position($4 in record) > 0),
                    count(*) FILTER (WHERE position($5 in record) > 0)
               FROM trace_records WHERE session_id = ANY($1)
              GROUP BY session_id",
            &[&ids, &TASK_END, &COMPLETED, &TOOL_CALL, &TOOL_CALL_OUTPUT],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| {
            (
                r.get::<_, String>(0),
                Progress {
                    completed: r.get(1),
                    calls: r.get(2),
                    outputs: r.get(3),
                },
            )
        })
        .collect())
}

/// How many of `ids` node `node` holds by an unexpired lease.
pub async fn held_by(store: &PgStore, ids: &[String], node: &str) -> Result<u64, StoreError> {
    let client = store.client().await?;
    let row = client
        .query_one(
            "SELECT count(*) FROM sessions
              WHERE id = ANY($1) AND owner_node = $2 AND lease_expiry > now()",
            &[&ids, &node],
        )
        .await?;
    Ok(u64::try_from(row.get::<_, i64>(0)).unwrap_or(0))
}

/// Of `waiting` (a session id and the event id its task's events follow), the ones whose trace
/// has a completed `task_end` after that id.
pub async fn completed_after(
    store: &PgStore,
    waiting: &[(String, i64)],
) -> Result<Vec<String>, StoreError> {
    if waiting.is_empty() {
        return Ok(Vec::new());
    }
    let ids: Vec<&str> = waiting.iter().map(|(id, _)| id.as_str()).collect();
    let after: Vec<i64> = waiting.iter().map(|(_, seq)| *seq).collect();
    let client = store.client().await?;
    let rows = client
        .query(
            "SELECT DISTINCT w.id
               FROM unnest($1::text[], $2::bigint[]) AS w(id, after)
               JOIN trace_records r ON r.session_id = w.id AND r.seq > w.after
              WHERE position($3 in r.record) > 0 AND position($4 in r.record) > 0",
            &[&ids, &after, &TASK_END, &COMPLETED],
        )
        .await?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}

/// How many of `ids` have a task ended `node_lost` in their trace.
pub async fn node_lost(store: &PgStore, ids: &[String]) -> Result<u64, StoreError> {
    let client = store.client().await?;
    let row = client
        .query_one(
            "SELECT count(DISTINCT session_id) FROM trace_records
              WHERE session_id = ANY($1)
                AND position($2 in record) > 0 AND position($3 in record) > 0",
            &[&ids, &TASK_END, &NODE_LOST],
        )
        .await?;
    Ok(u64::try_from(row.get::<_, i64>(0)).unwrap_or(0))
}

/// Deletes the sessions `ids` (their records go with them) and the rows of the nodes `nodes`;
/// the sessions deleted.
pub async fn delete(store: &PgStore, ids: &[String], nodes: &[String]) -> Result<u64, StoreError> {
    let mut client = store.client().await?;
    let tx = client.transaction().await?;
    let deleted = tx
        .execute("DELETE FROM sessions WHERE id = ANY($1)", &[&ids])
        .await?;
    tx.execute("DELETE FROM nodes WHERE node_id = ANY($1)", &[&nodes])
        .await?;
    tx.commit().await?;
    Ok(deleted)
}
