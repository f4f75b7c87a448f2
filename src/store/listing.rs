//! Reading the store: sessions listed newest activity first by an indexed query (a page at a
//! time, never a scan of the table), and a session's trace read back for a resume. It never
//! writes.

use super::PgStore;
use super::error::StoreError;

/// One session as a listing shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct ListedSession {
    /// The session id.
    pub id: String,
    /// The parent of a subagent.
    pub parent: Option<String>,
    /// `running` (a node holds it) or `idle`.
    pub status: String,
    /// The workspace.
    pub workspace: String,
    /// `provider/model`.
    pub model: String,
    /// The tool profile.
    pub tool_profile: String,
    /// Created, RFC 3339 UTC.
    pub created_at: String,
    /// Last record appended, RFC 3339 UTC.
    pub last_activity: String,
    /// The node holding the lease, if any.
    pub owner_node: Option<String>,
    /// The lease epoch.
    pub epoch: i64,
}

/// Up to `limit` sessions, newest activity first (the `sessions_by_activity` index).
pub async fn list(store: &PgStore, limit: i64) -> Result<Vec<ListedSession>, StoreError> {
    list_where(store, limit, None).await
}

/// Up to `limit` sessions of the `rookery serve --auth` principal `owner` (the `owner` of the
/// `session_meta` that opens each trace), newest activity first. The sessions are walked in
/// the index's order and each one's opening record looked up by its `(session_id, seq)` key.
pub async fn list_owned(
    store: &PgStore,
    owner: &str,
    limit: i64,
) -> Result<Vec<ListedSession>, StoreError> {
    list_where(store, limit, Some(owner)).await
}

async fn list_where(
    store: &PgStore,
    limit: i64,
    owner: Option<&str>,
) -> Result<Vec<ListedSession>, StoreError> {
    const COLUMNS: &str = "SELECT id, parent, status, workspace, model, tool_profile,
            to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'),
            to_char(last_activity AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'),
            owner_node, epoch
       FROM sessions s";
    const ORDER: &str = "ORDER BY last_activity DESC, id LIMIT $1";
    let client = store.client().await?;
    // Two statements rather than one with `$2 IS NULL OR …`: the plain listing stays the
    // index's walk whatever plan the server picks.
    let rows = match owner {
        None => {
            client
                .query(&format!("{COLUMNS} {ORDER}"), &[&limit])
                .await?
        }
        Some(owner) => {
            let sql = format!(
                "{COLUMNS}
                  WHERE (SELECT convert_from(r.record, 'UTF8')::jsonb #>> '{{payload,owner}}'
                           FROM trace_records r
                          WHERE r.session_id = s.id
                          ORDER BY r.seq
                          LIMIT 1) = $2
                  {ORDER}"
            );
            client.query(&sql, &[&limit, &owner]).await?
        }
    };
    Ok(rows
        .iter()
        .map(|r| ListedSession {
            id: r.get(0),
            parent: r.get(1),
            status: r.get(2),
            workspace: r.get(3),
            model: r.get(4),
            tool_profile: r.get(5),
            created_at: r.get(6),
            last_activity: r.get(7),
            owner_node: r.get(8),
            epoch: r.get(9),
        })
        .collect())
}

/// The workspace of session `id`, if the store has it.
pub async fn workspace(store: &PgStore, id: &str) -> Result<Option<String>, StoreError> {
    let client = store.client().await?;
    let row = client
        .query_opt("SELECT workspace FROM sessions WHERE id = $1", &[&id])
        .await?;
    Ok(row.map(|r| r.get(0)))
}

/// A session's trace as two byte runs of whole JSONL lines: the parts before the latest, and
/// the latest part (what the `files` backend keeps in `_001` … and `_NNN`).
#[derive(Debug, Default)]
pub struct StoredTrace {
    /// Every record of the earlier parts, in order.
    pub earlier: Vec<u8>,
    /// Every record of the latest part, in order.
    pub latest: Vec<u8>,
}

/// Reads session `id`'s records.
pub async fn read_trace(store: &PgStore, id: &str) -> Result<StoredTrace, StoreError> {
    let client = store.client().await?;
    let rows = client
        .query(
            "SELECT part, record FROM trace_records WHERE session_id = $1 ORDER BY seq",
            &[&id],
        )
        .await?;
    let latest_part = rows.iter().map(|r| r.get::<_, i32>(0)).max().unwrap_or(1);
    let mut trace = StoredTrace::default();
    for r in &rows {
        let into = if r.get::<_, i32>(0) == latest_part {
            &mut trace.latest
        } else {
            &mut trace.earlier
        };
        into.extend_from_slice(r.get::<_, &[u8]>(1));
    }
    Ok(trace)
}

/// The records session `id`'s holder of `epoch` appended, in order (what a node that died
/// under that epoch had recorded: its running task, its commands).
pub async fn read_epoch(store: &PgStore, id: &str, epoch: i64) -> Result<Vec<u8>, StoreError> {
    let client = store.client().await?;
    let rows = client
        .query(
            "SELECT record FROM trace_records WHERE session_id = $1 AND epoch = $2 ORDER BY seq",
            &[&id, &epoch],
        )
        .await?;
    let mut records = Vec::new();
    for r in &rows {
        records.extend_from_slice(r.get::<_, &[u8]>(0));
    }
    Ok(records)
}
