//! What the HTTP server reads of stored sessions without holding their lease: a page of
//! sessions by id (the primary key, never a scan) with the record that opens each trace, a
//! session's opening record and its `session_meta` records, its records after a `seq` a
//! bounded page at a time (event replay, the trace download, `sessions show`, `/messages`),
//! whether a session exists, the parent of a subagent, and which node holds a session (or
//! which of a set another node holds).
//!
//! It only reads; it must not take leases (`lease.rs`) nor append (`append.rs`), and it parses
//! no record: the bytes go back as the writer stored them.

use super::PgStore;
use super::error::StoreError;

/// Records one page of [`records_after`] holds at most.
pub const RECORD_PAGE: i64 = 256;

/// One session of a [`page_by_id`], with the record opening its trace.
#[derive(Debug, Clone)]
pub struct SessionOpening {
    /// The session id.
    pub id: String,
    /// Last record appended, RFC 3339 UTC (milliseconds).
    pub last_activity: String,
    /// The node holding its lease, if any.
    pub owner_node: Option<String>,
    /// The record at the lowest `seq` (its `session_meta`), when it has one.
    pub opening: Option<Vec<u8>>,
}

/// Up to `limit` sessions with ids after `after`, by id (the primary key's order).
pub async fn page_by_id(
    store: &PgStore,
    after: Option<&str>,
    limit: i64,
) -> Result<Vec<SessionOpening>, StoreError> {
    let client = store.client().await?;
    let rows = client
        .query(
            "SELECT s.id,
                    to_char(s.last_activity AT TIME ZONE 'UTC',
                            'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'),
                    s.owner_node,
                    (SELECT t.record FROM trace_records t
                      WHERE t.session_id = s.id ORDER BY t.seq LIMIT 1)
               FROM sessions s
              WHERE $1::text IS NULL OR s.id > $1
              ORDER BY s.id
              LIMIT $2",
            &[&after, &limit],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| SessionOpening {
            id: r.get(0),
            last_activity: r.get(1),
            owner_node: r.get(2),
            opening: r.get(3),
        })
        .collect())
}

/// Whether the store has session `id`.
pub async fn exists(store: &PgStore, id: &str) -> Result<bool, StoreError> {
    let client = store.client().await?;
    let row = client
        .query_opt("SELECT 1 FROM sessions WHERE id = $1", &[&id])
        .await?;
    Ok(row.is_some())
}

/// The record opening session `id`'s trace (its first `session_meta`); `None` when the
/// session has no record (or is not in the store).
pub async fn opening(store: &PgStore, id: &str) -> Result<Option<Vec<u8>>, StoreError> {
    let client = store.client().await?;
    let row = client
        .query_opt(
            "SELECT record FROM trace_records WHERE session_id = $1 ORDER BY seq LIMIT 1",
            &[&id],
        )
        .await?;
    Ok(row.map(|r| r.get(0)))
}

/// Session `id`'s records that name `"session_meta"`, newest first (a reopen appends one, a
/// rotation opens each part with one; a subagent's have an origin and are the caller's to
/// skip).
pub async fn meta_records(store: &PgStore, id: &str) -> Result<Vec<Vec<u8>>, StoreError> {
    let client = store.client().await?;
    let needle: &[u8] = b"\"session_meta\"";
    let rows = client
        .query(
            "SELECT record FROM trace_records
              WHERE session_id = $1 AND position($2::bytea IN record) > 0
              ORDER BY seq DESC",
            &[&id, &needle],
        )
        .await?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}

/// Up to `limit` records of session `id` with a `seq` above `after` (`-1`: from the first),
/// in order, each with its `seq` (the `(session_id, seq)` index).
pub async fn records_after(
    store: &PgStore,
    id: &str,
    after: i64,
    limit: i64,
) -> Result<Vec<(i64, Vec<u8>)>, StoreError> {
    let client = store.client().await?;
    let rows = client
        .query(
            "SELECT seq, record FROM trace_records
              WHERE session_id = $1 AND seq > $2
              ORDER BY seq
              LIMIT $3",
            &[&id, &after, &limit],
        )
        .await?;
    Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
}

/// The node holding session `id`'s lease now, if any (and if it is in the store).
pub async fn owner_node(store: &PgStore, id: &str) -> Result<Option<String>, StoreError> {
    let client = store.client().await?;
    let row = client
        .query_opt(
            "SELECT owner_node FROM sessions
              WHERE id = $1 AND lease_expiry IS NOT NULL AND lease_expiry > now()",
            &[&id],
        )
        .await?;
    Ok(row.and_then(|r| r.get(0)))
}

/// Of sessions `ids`, those whose unexpired lease a node other than `me` holds, with that node.
pub async fn held_elsewhere(
    store: &PgStore,
    ids: &[String],
    me: &str,
) -> Result<Vec<(String, String)>, StoreError> {
    let client = store.client().await?;
    let rows = client
        .query(
            "SELECT id, owner_node FROM sessions
              WHERE id = ANY($1) AND owner_node IS NOT NULL AND owner_node <> $2
                AND lease_expiry IS NOT NULL AND lease_expiry > now()",
            &[&ids, &me],
        )
        .await?;
    Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
}

/// When session `id`'s last record was stored (RFC 3339 UTC, milliseconds), if it is stored.
pub async fn last_activity(store: &PgStore, id: &str) -> Result<Option<String>, StoreError> {
    let client = store.client().await?;
    let row = client
        .query_opt(
            "SELECT to_char(last_activity AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')
               FROM sessions WHERE id = $1",
            &[&id],
        )
        .await?;
    Ok(row.map(|r| r.get(0)))
}

/// Answers when the database does (a connection from the pool and a round trip).
pub async fn ping(store: &PgStore) -> Result<(), StoreError> {
    let client = store.client().await?;
    client.simple_query("SELECT 1").await?;
    Ok(())
}

/// The session that started subagent `id`: its `sessions.parent` when the row has one (an
/// imported trace), else the session whose trace holds the `subagent` record pointing at it.
/// That search reads the records' bytes (not an indexed query, as the files backend reads
/// every trace for it): `sessions show` asks it only for a subagent shown by its own id.
pub async fn parent(store: &PgStore, id: &str) -> Result<Option<String>, StoreError> {
    let client = store.client().await?;
    let row = client
        .query_opt("SELECT parent FROM sessions WHERE id = $1", &[&id])
        .await?;
    if let Some(parent) = row.and_then(|r| r.get::<_, Option<String>>(0)) {
        return Ok(Some(parent));
    }
    // The pointer as the writer serializes it (`EventPayload::Subagent`: tag first).
    let quoted = serde_json::Value::String(id.to_string()).to_string();
    let pointer = format!(r#"{{"type":"subagent","session_id":{quoted}}}"#);
    let needle: &[u8] = pointer.as_bytes();
    let row = client
        .query_opt(
            "SELECT session_id FROM trace_records
              WHERE session_id <> $1 AND position($2::bytea IN record) > 0
              LIMIT 1",
            &[&id, &needle],
        )
        .await?;
    Ok(row.map(|r| r.get(0)))
}
