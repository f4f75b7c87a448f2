//! What the hibernation scenario reads back from the `postgres` store when its server state runs
//! on it (`rookery bench --hibernation N --store URL`): the records of a woken session's trace,
//! who holds a session's lease, and the totals of the run's sessions (found by the workspace
//! they all share, so the bench keeps no list of their ids: that list would be in the RSS it
//! measures).
//!
//! It only reads; it never takes or gives up a lease and never deletes anything (the run's
//! sessions stay in the store, where they can be counted).

use crate::store::{PgStore, StoreError};

/// What the store holds of one run's sessions.
#[derive(Debug, Clone, Copy, Default)]
pub struct StoreTotals {
    /// `sessions` rows of the run.
    pub sessions: u64,
    /// Of those, the ones whose unexpired lease this node holds.
    pub leases_held: u64,
    /// `trace_records` rows of the run's sessions.
    pub records: u64,
    /// Bytes of those records.
    pub bytes: u64,
}

/// Records of session `id`'s trace in the store.
pub async fn records(store: &PgStore, id: &str) -> Result<usize, StoreError> {
    let client = store.client().await?;
    let row = client
        .query_one(
            "SELECT count(*) FROM trace_records WHERE session_id = $1",
            &[&id],
        )
        .await?;
    Ok(usize::try_from(row.get::<_, i64>(0)).unwrap_or(0))
}

/// The node holding session `id`'s unexpired lease, if any.
pub async fn holder(store: &PgStore, id: &str) -> Result<Option<String>, StoreError> {
    let client = store.client().await?;
    let row = client
        .query_opt(
            "SELECT owner_node FROM sessions
              WHERE id = $1 AND lease_expiry > now()",
            &[&id],
        )
        .await?;
    Ok(row.and_then(|r| r.get::<_, Option<String>>(0)))
}

/// The totals of the sessions that share the workspace of session `sample` (one run's).
pub async fn totals(store: &PgStore, sample: &str) -> Result<StoreTotals, StoreError> {
    let client = store.client().await?;
    let Some(ws) = client
        .query_opt("SELECT workspace FROM sessions WHERE id = $1", &[&sample])
        .await?
    else {
        return Ok(StoreTotals::default());
    };
    let ws: String = ws.get(0);
    let sessions = client
        .query_one(
            "SELECT count(*),
                    count(*) FILTER (WHERE owner_node = $2 AND lease_expiry > now())
               FROM sessions WHERE workspace = $1",
            &[&ws, &store.options().node],
        )
        .await?;
    let records = client
        .query_one(
            "SELECT count(*), coalesce(sum(length(r.record)), 0)::bigint
               FROM trace_records r JOIN sessions s ON s.id = r.session_id
              WHERE s.workspace = $1",
            &[&ws],
        )
        .await?;
    let n = |v: i64| u64::try_from(v).unwrap_or(0);
    Ok(StoreTotals {
        sessions: n(sessions.get(0)),
        leases_held: n(sessions.get(1)),
        records: n(records.get(0)),
        bytes: n(records.get(1)),
    })
}
