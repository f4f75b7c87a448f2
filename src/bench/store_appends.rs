//! `rookery bench --trace-appends N --store postgres://…`: trace appends into the `postgres`
//! store against a floor, in one run. The same N serialized records (those of
//! `trace_appends.rs`) are appended (a) by a bare `tokio-postgres` client on its own connection
//! with one multi-row `INSERT` of them all (the floor: the same rows, the same statement shape,
//! no lease), and (b) by the host's trace writer into a session's fenced append stream
//! (`store::append::PgTrace`): N `AppendLine` casts with the handle held, then `Written`, which
//! answers once the database has committed them. Each side runs `rounds` times, interleaved,
//! each round on a fresh session; the medians are compared. The bench's sessions (named
//! `bench-store-<pid>-…`) and their records are deleted at the end.
//!
//! It measures only; it prints nothing (the CLI renders the report) and changes no writer.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::RookeryError;
use crate::store::lease::{SessionRow, take_new};
use crate::store::{PgStore, StoreError};
use crate::trace::health::TraceHealth;
use crate::trace::hub::{POOL_SIZE, TraceWriters};
use crate::trace::sink::Sink;
use crate::trace::writer::{TraceMsg, TraceStats};

/// The floor's statement: the rows of one burst in one multi-row `INSERT`.
const FLOOR_INSERT: &str = "INSERT INTO trace_records (session_id, seq, epoch, part, record)
SELECT $1, r.ord - 1, 1, 1, r.record
  FROM unnest($2::bytea[]) WITH ORDINALITY AS r(record, ord)";

/// What one run measured (medians over the rounds).
#[derive(Debug, Clone, Copy, Default)]
pub struct StoreAppendsOutcome {
    /// Records per burst.
    pub records: usize,
    /// Bytes of the burst's records, newlines included.
    pub record_bytes: usize,
    /// Rounds measured.
    pub rounds: usize,
    /// The bare client's median burst time.
    pub floor: Duration,
    /// The trace writer's median burst time into the store (first cast to the `Written` ack).
    pub store: Duration,
    /// Rows the trace writer stored, over all rounds, that are byte for byte the floor's row
    /// of the same round at the same `seq` (`rounds` × `records` when both sides wrote the
    /// same records).
    pub matching_rows: u64,
}

impl StoreAppendsOutcome {
    /// Records per second of a burst time.
    pub fn per_s(&self, d: Duration) -> f64 {
        self.records as f64 / d.as_secs_f64().max(1e-9)
    }

    /// The store writer's records/s over the floor's.
    pub fn ratio(&self) -> f64 {
        self.floor.as_secs_f64() / self.store.as_secs_f64().max(1e-9)
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v.get(v.len() / 2).copied().unwrap_or_default()
}

/// A session row for one side of one round (the floor's rows need their session too).
fn row(side: &str, round: usize) -> SessionRow {
    SessionRow {
        id: format!("bench-store-{}-{round}-{side}", std::process::id()),
        workspace: "bench".into(),
        ..SessionRow::default()
    }
}

/// The floor: the burst's rows in one `INSERT` by a client of its own.
async fn floor_burst(
    store: &PgStore,
    client: &tokio_postgres::Client,
    round: usize,
    lines: &[Vec<u8>],
) -> Result<Duration, StoreError> {
    let row = row("floor", round);
    let taken = take_new(store, &row).await?;
    let t = Instant::now();
    let n = client.execute(FLOOR_INSERT, &[&row.id, &lines]).await?;
    let took = t.elapsed();
    taken.lease.stop_renewing();
    if n as usize != lines.len() {
        return Err(StoreError::Fenced {
            id: row.id,
            epoch: 1,
        });
    }
    Ok(took)
}

/// The burst through the host's trace writer into a session's append stream.
async fn store_burst(
    store: &PgStore,
    traces: &TraceWriters,
    round: usize,
    lines: Vec<Vec<u8>>,
) -> Result<Duration, RookeryError> {
    let taken = take_new(store, &row("writer", round)).await?;
    let health = Arc::new(TraceHealth::default());
    let stream = crate::store::append::PgTrace::start(store.clone(), taken, health.clone());
    let sink = Sink::remote(crate::store::append::boxed(stream));
    let trace = traces
        .open(sink, None, health.clone())
        .map_err(|e| RookeryError::Trace(std::io::Error::other(e)))?;
    let t = Instant::now();
    trace.hold();
    for line in lines {
        trace.cast(TraceMsg::AppendLine(line))?;
    }
    trace.release()?;
    ractor::call!(trace, TraceMsg::Written)?;
    let took = t.elapsed();
    trace.shutdown().await?;
    if let Some(failure) = health.failure() {
        return Err(RookeryError::Trace(std::io::Error::other(
            failure.to_string(),
        )));
    }
    Ok(took)
}

/// Rows of round `round` that both sides stored with the same bytes at the same `seq`.
async fn matching(client: &tokio_postgres::Client, round: usize) -> Result<u64, StoreError> {
    let row = client
        .query_one(
            "SELECT count(*) FROM trace_records w JOIN trace_records f
                 ON f.session_id = $2 AND f.seq = w.seq AND f.record = w.record
              WHERE w.session_id = $1",
            &[&row("writer", round).id, &row("floor", round).id],
        )
        .await?;
    Ok(row.get::<_, i64>(0).max(0) as u64)
}

/// Deletes the bench's sessions (their records go with them).
async fn clean_up(client: &tokio_postgres::Client) -> Result<(), StoreError> {
    let pattern = format!("bench-store-{}-%", std::process::id());
    client
        .execute("DELETE FROM sessions WHERE id LIKE $1", &[&pattern])
        .await?;
    Ok(())
}

/// Runs `rounds` interleaved rounds of both sides with `n` records into the store at `url`
/// (`store` is connected to it and migrated).
pub async fn run(
    url: &str,
    store: &PgStore,
    n: usize,
    rounds: usize,
) -> Result<StoreAppendsOutcome, RookeryError> {
    let lines = super::trace_appends::records(n);
    let config: tokio_postgres::Config = url.parse().map_err(StoreError::BadUrl)?;
    let (client, connection) = config
        .connect(tokio_postgres::NoTls)
        .await
        .map_err(|e| StoreError::Unavailable(e.to_string()))?;
    let connection = tokio::spawn(connection);
    let traces = TraceWriters::start(None, POOL_SIZE, Arc::new(TraceStats::default())).await?;
    let (mut floor, mut writer) = (Vec::new(), Vec::new());
    let mut matching_rows = 0;
    let measured = async {
        for round in 0..rounds.max(1) {
            // The writer first in odd rounds: neither side always finds the other's writes
            // fresh in the database's caches.
            if round % 2 == 1 {
                writer.push(store_burst(store, &traces, round, lines.clone()).await?);
            }
            floor.push(floor_burst(store, &client, round, &lines).await?);
            if round % 2 == 0 {
                writer.push(store_burst(store, &traces, round, lines.clone()).await?);
            }
            matching_rows += matching(&client, round).await?;
        }
        Ok::<(), RookeryError>(())
    }
    .await;
    traces.stop();
    let cleaned = clean_up(&client).await;
    drop(client);
    let _ = connection.await;
    measured?;
    cleaned?;
    Ok(StoreAppendsOutcome {
        records: n,
        record_bytes: lines.iter().map(Vec::len).sum(),
        rounds: rounds.max(1),
        floor: median(floor),
        store: median(writer),
        matching_rows,
    })
}
