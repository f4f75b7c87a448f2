//! The store's schema as versioned migrations, the missing ones applied in order in one
//! transaction that holds a transaction-scoped advisory lock, so nodes starting at the same time
//! wait for each other and each migration is applied once (or, on a failure, none of this run).
//! `rookery_migrations` records the applied versions.
//!
//! It owns the schema. A migration, once released, is never edited: a change is a new one.

use deadpool_postgres::ClientWrapper;

use super::error::StoreError;

/// The advisory lock key of the migrations (`'rookery'` as bytes).
const MIGRATION_LOCK: i64 = 0x0072_6f6f_6b65_7279;

/// The migrations, oldest first: `(version, SQL)`.
pub const MIGRATIONS: &[(i32, &str)] = &[
    (
        1,
        r#"
CREATE TABLE sessions (
    id            text PRIMARY KEY,
    parent        text,
    created_at    timestamptz NOT NULL DEFAULT now(),
    workspace     text NOT NULL DEFAULT '',
    tool_profile  text NOT NULL DEFAULT '',
    model         text NOT NULL DEFAULT '',
    approval_mode text NOT NULL DEFAULT '',
    status        text NOT NULL DEFAULT 'idle',
    last_activity timestamptz NOT NULL DEFAULT now(),
    owner_node    text,
    epoch         bigint NOT NULL DEFAULT 0,
    lease_expiry  timestamptz
);
-- The listing: newest activity first, a page at a time.
CREATE INDEX sessions_by_activity ON sessions (last_activity DESC, id);
CREATE INDEX sessions_by_parent ON sessions (parent) WHERE parent IS NOT NULL;
CREATE TABLE trace_records (
    session_id text NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    seq        bigint NOT NULL,
    epoch      bigint NOT NULL,
    part       integer NOT NULL DEFAULT 1,
    record     bytea NOT NULL,
    CONSTRAINT trace_records_session_seq UNIQUE (session_id, seq)
);
"#,
    ),
    (
        2,
        r#"
-- The nodes of a cluster (`rookery serve --node-id`): each registers itself and heartbeats;
-- `boot` tells two processes started under one name apart.
CREATE TABLE nodes (
    node_id        text PRIMARY KEY,
    advertise      text NOT NULL,
    boot           text NOT NULL,
    started_at     timestamptz NOT NULL DEFAULT now(),
    last_heartbeat timestamptz NOT NULL DEFAULT now()
);
-- Who holds which sessions: `/v1/cluster`'s resident counts.
CREATE INDEX sessions_by_owner ON sessions (owner_node) WHERE owner_node IS NOT NULL;
"#,
    ),
    (
        3,
        r#"
-- The sessions' schedules (`POST /v1/sessions/{id}/schedules`), shared by every node. Minutes
-- count `minute_ms` milliseconds since the Unix epoch; `next_minute` is the first minute after
-- `last_minute` the pattern matches (NULL: never again), so the due ones are an indexed range.
-- A node fires a schedule only after moving `last_minute` from the value it read to the minute
-- it fires (a compare-and-set): one node per minute.
CREATE TABLE schedules (
    schedule_id    text PRIMARY KEY,
    session_id     text NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    cron           text NOT NULL,
    text           text NOT NULL,
    timezone       text NOT NULL,
    if_busy        text NOT NULL,
    minute_ms      bigint NOT NULL,
    created_minute bigint NOT NULL,
    last_minute    bigint NOT NULL,
    next_minute    bigint,
    last_node      text,
    added_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX schedules_by_session ON schedules (session_id, added_at);
CREATE INDEX schedules_due ON schedules (next_minute) WHERE next_minute IS NOT NULL;
"#,
    ),
];

/// The newest schema version this build knows.
pub fn latest() -> i32 {
    MIGRATIONS.last().map_or(0, |m| m.0)
}

/// Applies every missing migration; returns the versions applied (none when up to date).
pub async fn migrate(client: &mut ClientWrapper) -> Result<Vec<i32>, StoreError> {
    let tx = client.transaction().await?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS rookery_migrations (
            version    integer PRIMARY KEY,
            applied_at timestamptz NOT NULL DEFAULT now()
        )",
    )
    .await?;
    let row = tx
        .query_one(
            "SELECT coalesce(max(version), 0) FROM rookery_migrations",
            &[],
        )
        .await?;
    let current: i32 = row.get(0);
    if current > latest() {
        return Err(StoreError::SchemaTooNew {
            found: current,
            known: latest(),
        });
    }
    let mut applied = Vec::new();
    for (version, sql) in MIGRATIONS.iter().filter(|m| m.0 > current) {
        let failed = |source| StoreError::Migration {
            version: *version,
            source,
        };
        tx.batch_execute(sql).await.map_err(failed)?;
        tx.execute(
            "INSERT INTO rookery_migrations (version) VALUES ($1)",
            &[version],
        )
        .await
        .map_err(failed)?;
        applied.push(*version);
    }
    tx.commit().await?;
    if !applied.is_empty() {
        tracing::info!("[store] applied migrations {applied:?}");
    }
    Ok(applied)
}
