//! The sessions' schedules in the store (`schedules`, migration 3), shared by every node of a
//! cluster: a schedule is inserted and deleted by the node serving its session's request, and
//! each node asks at every tick of its schedule clock for the due ones it may fire.
//!
//! Exactly one node fires a schedule's minute: [`claim`] moves `last_minute` from the value the
//! node read to the minute it fires, in one `UPDATE … WHERE last_minute = <read>` per row, and
//! only a node whose update changed the row fires it. A schedule whose session's lease a live
//! other node holds is neither listed as due nor claimed here: its holder fires it; one nobody
//! holds (hibernated, or its owner dead and its lease expired) is claimed by whichever node
//! comes first, which then wakes the session.
//!
//! It owns these statements only; it must not evaluate a cron pattern (the server computes
//! every `next_minute` it writes) nor start a task.

use super::PgStore;
use super::error::StoreError;

/// One schedule as the store keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleRow {
    /// The session it runs tasks in.
    pub session_id: String,
    /// `sch-…`.
    pub schedule_id: String,
    /// The 5-field cron pattern.
    pub cron: String,
    /// The task's text.
    pub text: String,
    /// The IANA time zone.
    pub timezone: String,
    /// `reject`, `enqueue`, `interrupt` or `steer`.
    pub if_busy: String,
    /// The schedule minute it was added in.
    pub created_minute: i64,
    /// The schedule minute it last ran in (its creation minute before its first run).
    pub last_minute: i64,
    /// The first minute after `last_minute` its pattern matches (`None`: never again).
    pub next_minute: Option<i64>,
}

/// What [`insert`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Inserted {
    /// The schedule is stored.
    Stored,
    /// The session has `max_per_session` schedules already.
    SessionFull,
    /// The store has `max_total` schedules already.
    StoreFull,
}

/// A due schedule's claim: the minute it is fired in and the row's next minute after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    /// The schedule.
    pub schedule_id: String,
    /// The `last_minute` the claimer read (the compare of the compare-and-set).
    pub read_last: i64,
    /// The next minute after the fired one (`None`: never again).
    pub next: Option<i64>,
}

/// The columns every read selects, in [`row`]'s order.
const COLUMNS: &str = "session_id, schedule_id, cron, text, timezone, if_busy, created_minute, \
                       last_minute, next_minute";

/// The condition, on `sc` (a `schedules` row), that no live node but `$me` holds the session's
/// lease (`$ttl`: the liveness of a node's heartbeat, in seconds).
const NOT_HELD_ELSEWHERE: &str = "NOT EXISTS (
    SELECT 1 FROM sessions s JOIN nodes n ON n.node_id = s.owner_node
     WHERE s.id = sc.session_id AND s.owner_node <> $me AND s.lease_expiry > now()
       AND n.last_heartbeat >= now() - make_interval(secs => $ttl))";

fn row(r: &tokio_postgres::Row) -> ScheduleRow {
    ScheduleRow {
        session_id: r.get(0),
        schedule_id: r.get(1),
        cron: r.get(2),
        text: r.get(3),
        timezone: r.get(4),
        if_busy: r.get(5),
        created_minute: r.get(6),
        last_minute: r.get(7),
        next_minute: r.get(8),
    }
}

fn ttl_secs(store: &PgStore) -> f64 {
    store.options().lease_ttl.as_secs_f64().max(0.001)
}

/// `NOT_HELD_ELSEWHERE` with its parameters numbered `me` and `ttl`.
fn not_held_elsewhere(me: usize, ttl: usize) -> String {
    NOT_HELD_ELSEWHERE
        .replace("$me", &format!("${me}"))
        .replace("$ttl", &format!("${ttl}"))
}

/// Stores `s`, counted on `minute_ms` minutes, unless its session has `max_per_session`
/// schedules or the store `max_total` already.
pub async fn insert(
    store: &PgStore,
    s: &ScheduleRow,
    minute_ms: i64,
    max_per_session: i64,
    max_total: i64,
) -> Result<Inserted, StoreError> {
    let client = store.client().await?;
    let n = client
        .execute(
            "INSERT INTO schedules (session_id, schedule_id, cron, text, timezone, if_busy,
                                    minute_ms, created_minute, last_minute, next_minute)
             SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10
              WHERE (SELECT count(*) FROM schedules WHERE session_id = $1) < $11
                AND (SELECT count(*) FROM schedules) < $12",
            &[
                &s.session_id,
                &s.schedule_id,
                &s.cron,
                &s.text,
                &s.timezone,
                &s.if_busy,
                &minute_ms,
                &s.created_minute,
                &s.last_minute,
                &s.next_minute,
                &max_per_session,
                &max_total,
            ],
        )
        .await?;
    if n == 1 {
        return Ok(Inserted::Stored);
    }
    let own: i64 = client
        .query_one(
            "SELECT count(*) FROM schedules WHERE session_id = $1",
            &[&s.session_id],
        )
        .await?
        .get(0);
    Ok(if own >= max_per_session {
        Inserted::SessionFull
    } else {
        Inserted::StoreFull
    })
}

/// Session `session_id`'s schedules, oldest first.
pub async fn of_session(store: &PgStore, session_id: &str) -> Result<Vec<ScheduleRow>, StoreError> {
    let client = store.client().await?;
    let rows = client
        .query(
            &format!(
                "SELECT {COLUMNS} FROM schedules WHERE session_id = $1 ORDER BY added_at, schedule_id"
            ),
            &[&session_id],
        )
        .await?;
    Ok(rows.iter().map(row).collect())
}

/// Whether session `session_id` has any schedule.
pub async fn any_of_session(store: &PgStore, session_id: &str) -> Result<bool, StoreError> {
    let client = store.client().await?;
    let r = client
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM schedules WHERE session_id = $1)",
            &[&session_id],
        )
        .await?;
    Ok(r.get(0))
}

/// Deletes schedule `schedule_id` of session `session_id`; whether it was there.
pub async fn delete(
    store: &PgStore,
    session_id: &str,
    schedule_id: &str,
) -> Result<bool, StoreError> {
    let client = store.client().await?;
    let n = client
        .execute(
            "DELETE FROM schedules WHERE session_id = $1 AND schedule_id = $2",
            &[&session_id, &schedule_id],
        )
        .await?;
    Ok(n == 1)
}

/// Deletes every schedule of session `session_id`; the ids deleted.
pub async fn delete_session(store: &PgStore, session_id: &str) -> Result<Vec<String>, StoreError> {
    let client = store.client().await?;
    let rows = client
        .query(
            "DELETE FROM schedules WHERE session_id = $1 RETURNING schedule_id",
            &[&session_id],
        )
        .await?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}

/// The schedules counted on minutes of another length than `minute_ms` (a node started with
/// another `--schedule-minute-ms`).
pub async fn other_length(store: &PgStore, minute_ms: i64) -> Result<Vec<ScheduleRow>, StoreError> {
    let client = store.client().await?;
    let rows = client
        .query(
            &format!("SELECT {COLUMNS} FROM schedules WHERE minute_ms <> $1"),
            &[&minute_ms],
        )
        .await?;
    Ok(rows.iter().map(row).collect())
}

/// Restarts schedule `schedule_id` on minutes of `minute_ms`, as last run in `last` with
/// `next` its next minute (unless another node has restarted it meanwhile).
pub async fn restart(
    store: &PgStore,
    schedule_id: &str,
    minute_ms: i64,
    last: i64,
    next: Option<i64>,
) -> Result<(), StoreError> {
    let client = store.client().await?;
    client
        .execute(
            "UPDATE schedules SET minute_ms = $2, last_minute = $3, next_minute = $4
              WHERE schedule_id = $1 AND minute_ms <> $2",
            &[&schedule_id, &minute_ms, &last, &next],
        )
        .await?;
    Ok(())
}

/// The schedules on minutes of `minute_ms` due at minute `now` (a next minute up to `now`)
/// that this node may fire: their session's lease is this node's or no live node's. At most
/// `limit`, the longest due first.
pub async fn due(
    store: &PgStore,
    minute_ms: i64,
    now: i64,
    limit: i64,
) -> Result<Vec<ScheduleRow>, StoreError> {
    let client = store.client().await?;
    let sql = format!(
        "SELECT {COLUMNS} FROM schedules sc
          WHERE sc.next_minute <= $1 AND sc.minute_ms = $2 AND {}
          ORDER BY sc.next_minute, sc.schedule_id
          LIMIT $5",
        not_held_elsewhere(3, 4)
    );
    let rows = client
        .query(
            &sql,
            &[
                &now,
                &minute_ms,
                &store.options().node,
                &ttl_secs(store),
                &limit,
            ],
        )
        .await?;
    Ok(rows.iter().map(row).collect())
}

/// Claims minute `now` of each schedule of `claims` for this node, all in one statement: a
/// row whose `last_minute` is still the one read (and whose session no live other node holds)
/// moves to `now` and its next minute; the ids of the rows that moved, which this node alone
/// fires. A row another node moved first is not claimed.
pub async fn claim(store: &PgStore, now: i64, claims: &[Claim]) -> Result<Vec<String>, StoreError> {
    if claims.is_empty() {
        return Ok(Vec::new());
    }
    let ids: Vec<&str> = claims.iter().map(|c| c.schedule_id.as_str()).collect();
    let read: Vec<i64> = claims.iter().map(|c| c.read_last).collect();
    let next: Vec<Option<i64>> = claims.iter().map(|c| c.next).collect();
    let client = store.client().await?;
    let sql = format!(
        "UPDATE schedules sc
            SET last_minute = $4, next_minute = c.next, last_node = $5
           FROM unnest($1::text[], $2::bigint[], $3::bigint[]) AS c (id, read, next)
          WHERE sc.schedule_id = c.id AND sc.last_minute = c.read AND sc.last_minute < $4
            AND {}
         RETURNING sc.schedule_id",
        not_held_elsewhere(5, 6)
    );
    let rows = client
        .query(
            &sql,
            &[
                &ids,
                &read,
                &next,
                &now,
                &store.options().node,
                &ttl_secs(store),
            ],
        )
        .await?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}

/// Gives back minute `now` of a schedule this node claimed but could not run (its session was
/// taken by another node meanwhile, or the store failed): the row goes back to `read_last` and
/// `next`, so the next tick of the node that may fire it does (once). A row that moved since
/// is left alone; whether it went back.
pub async fn unclaim(
    store: &PgStore,
    schedule_id: &str,
    now: i64,
    read_last: i64,
    next: Option<i64>,
) -> Result<bool, StoreError> {
    let client = store.client().await?;
    let n = client
        .execute(
            "UPDATE schedules SET last_minute = $3, next_minute = $4
              WHERE schedule_id = $1 AND last_minute = $2 AND last_node = $5",
            &[&schedule_id, &now, &read_last, &next, &store.options().node],
        )
        .await?;
    Ok(n == 1)
}
