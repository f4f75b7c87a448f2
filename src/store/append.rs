//! One session's trace stream into the store, the trace area's [`RemoteTrace`]: the writer's
//! batches queue (bounded) to one task per session, which writes everything queued at that
//! moment with one multi-row `INSERT`. The statement carries the lease's epoch and joins the
//! session's row on it, so the database inserts nothing once the epoch has moved on: the stream
//! then loses the lease and reports the failure to the trace's health.
//!
//! A connection failure is retried (the batch keeps its `seq` numbers, so a retry of an insert
//! that did commit is refused by the unique `(session_id, seq)` and counted as done) until the
//! lease runs out locally. Each committed batch is published with its `seq` numbers
//! (`commits.rs`) for the server's SSE. It owns the append statement and its retry; it must not
//! take or renew leases (`lease.rs`).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use ractor::RpcReplyPort;
use tokio::sync::mpsc;

use super::PgStore;
use super::commits::Publisher;
use super::error::StoreError;
use super::lease::{Lease, Taken, keep_renewed, release};
use crate::trace::health::TraceHealth;
use crate::trace::sink::RemoteTrace;

/// Requests a session's stream holds at most before the writer's next batch fails (the store
/// is that far behind: the session stops rather than buffer without bound).
const QUEUE: usize = 4096;

/// Records written by one statement at most (a longer run is split).
const MAX_ROWS: usize = 1000;

/// Bytes written by one statement at most (a longer run is split).
const MAX_BYTES: usize = 8 << 20;

/// The fenced append: the session's row is updated (and so locked against a concurrent epoch
/// bump) only under the holder's epoch, and the rows are inserted only through it.
const APPEND: &str = "WITH lease AS (
    UPDATE sessions SET last_activity = now()
     WHERE id = $1 AND epoch = $2
    RETURNING id
)
INSERT INTO trace_records (session_id, seq, epoch, part, record)
SELECT lease.id, $3 + r.ord - 1, $2, r.part, r.record
  FROM lease, unnest($4::bytea[], $5::int4[]) WITH ORDINALITY AS r(record, part, ord)";

enum Op {
    Append(Vec<Vec<u8>>, u32),
    Barrier(RpcReplyPort<()>),
    Close(RpcReplyPort<()>),
}

/// A session's append stream (see the module doc).
pub struct PgTrace {
    tx: mpsc::Sender<Op>,
    lease: Arc<Lease>,
    health: Arc<TraceHealth>,
    place: PathBuf,
    part: u32,
}

impl PgTrace {
    /// Starts the stream of a session whose lease was just taken, and the lease's renewals.
    pub fn start(store: PgStore, taken: Taken, health: Arc<TraceHealth>) -> PgTrace {
        let (tx, rx) = mpsc::channel(QUEUE);
        let place = PgStore::place(&taken.lease.session_id);
        keep_renewed(store.clone(), taken.lease.clone());
        let lease = taken.lease.clone();
        // Asked before every tool call: a holder frozen past its TTL (SIGSTOP, a long pause)
        // may have been replaced while it could not tell, so it gives the session up at once,
        // before the renewal that would find out runs.
        health.set_fence(move || {
            if lease.lost_reason().is_none() && lease.expired_locally() {
                lease.lose(format!(
                    "session {} stopped: its lease went unrenewed for a whole TTL, another node may hold it",
                    lease.session_id
                ));
            }
            lease.lost_reason()
        });
        let publisher = store
            .commit_feeds()
            .open(&taken.lease.session_id, taken.next_seq);
        let writer = Writer {
            publisher,
            store,
            lease: taken.lease.clone(),
            health: health.clone(),
            next_seq: taken.next_seq,
            failed: false,
        };
        tokio::spawn(writer.run(rx));
        PgTrace {
            tx,
            lease: taken.lease,
            health,
            place,
            part: taken.part,
        }
    }

    /// The lease the stream appends under.
    pub fn lease(&self) -> &Arc<Lease> {
        &self.lease
    }

    fn send(&self, op: Op) {
        match self.tx.try_send(op) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(_)) => {
                self.health.fail(format!(
                    "trace error: the store is {QUEUE} batches behind on {}; the session stops",
                    self.place.display()
                ));
            }
            // The stream has ended (closed or lost): an ack's port is dropped, so its caller
            // gets an error instead of waiting.
            Err(mpsc::error::TrySendError::Closed(_)) => {}
        }
    }
}

impl RemoteTrace for PgTrace {
    fn append(&self, records: Vec<Vec<u8>>, part: u32) {
        self.send(Op::Append(records, part));
    }

    fn barrier(&self, done: RpcReplyPort<()>) {
        self.send(Op::Barrier(done));
    }

    fn close(&self, done: RpcReplyPort<()>) {
        self.send(Op::Close(done));
    }

    fn part(&self) -> u32 {
        self.part
    }

    fn place(&self) -> &Path {
        &self.place
    }
}

struct Writer {
    /// Tells the session's follower what was committed.
    publisher: Publisher,
    store: PgStore,
    lease: Arc<Lease>,
    health: Arc<TraceHealth>,
    next_seq: i64,
    /// A batch was lost: later ones are dropped (the session has stopped taking tasks).
    failed: bool,
}

impl Writer {
    async fn run(mut self, mut rx: mpsc::Receiver<Op>) {
        let mut records: Vec<Vec<u8>> = Vec::new();
        let mut parts: Vec<i32> = Vec::new();
        while let Some(op) = rx.recv().await {
            // Group commit: everything queued right now goes in one statement.
            let mut next = Some(op);
            while let Some(op) = next.take() {
                match op {
                    Op::Append(batch, part) => {
                        parts.extend(std::iter::repeat_n(part as i32, batch.len()));
                        records.extend(batch);
                        next = rx.try_recv().ok();
                    }
                    Op::Barrier(done) => {
                        self.write(&mut records, &mut parts).await;
                        let _ = done.send(());
                    }
                    Op::Close(done) => {
                        self.write(&mut records, &mut parts).await;
                        if let Err(e) = release(&self.store, &self.lease).await {
                            tracing::warn!(
                                "[store] cannot give up the lease of {}: {e}",
                                self.lease.session_id
                            );
                        }
                        let _ = done.send(());
                        return;
                    }
                }
            }
            self.write(&mut records, &mut parts).await;
        }
        // Every sender is gone without a close: the lease runs out by itself.
        self.lease.stop_renewing();
    }

    /// Writes the gathered records (one statement per [`MAX_ROWS`] / [`MAX_BYTES`]).
    async fn write(&mut self, records: &mut Vec<Vec<u8>>, parts: &mut Vec<i32>) {
        if records.is_empty() {
            return;
        }
        let mut records_left = std::mem::take(records);
        let mut parts_left = std::mem::take(parts);
        while !records_left.is_empty() {
            let mut n = 0;
            let mut bytes = 0;
            while n < records_left.len() && n < MAX_ROWS && (n == 0 || bytes < MAX_BYTES) {
                bytes += records_left[n].len();
                n += 1;
            }
            let rest_records = records_left.split_off(n);
            let rest_parts = parts_left.split_off(n);
            self.write_one(&records_left, &parts_left).await;
            records_left = rest_records;
            parts_left = rest_parts;
        }
    }

    async fn write_one(&mut self, records: &[Vec<u8>], parts: &[i32]) {
        if self.failed {
            return;
        }
        let mut wait = Duration::from_millis(50);
        loop {
            match self.insert(records, parts).await {
                Ok(()) => {
                    self.publisher.publish(self.next_seq, records);
                    self.next_seq += records.len() as i64;
                    return;
                }
                Err(e) if e.is_transient() && !self.lease.expired_locally() => {
                    tracing::warn!(
                        "[store] appending to {} failed, retrying: {e}",
                        self.lease.session_id
                    );
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(Duration::from_secs(1));
                }
                Err(e) => {
                    self.failed = true;
                    let text = format!("trace error: {e}");
                    self.health.fail(text.clone());
                    self.lease.lose(text);
                    return;
                }
            }
        }
    }

    /// One fenced insert. A retry that finds its rows already stored (the earlier attempt
    /// committed but its answer was lost) is done.
    async fn insert(&self, records: &[Vec<u8>], parts: &[i32]) -> Result<(), StoreError> {
        let client = self.store.client().await?;
        let stored = client
            .execute(
                APPEND,
                &[
                    &self.lease.session_id,
                    &self.lease.epoch,
                    &self.next_seq,
                    &records,
                    &parts,
                ],
            )
            .await;
        match stored {
            Ok(n) if n as usize == records.len() => Ok(()),
            Ok(_) => Err(StoreError::Fenced {
                id: self.lease.session_id.clone(),
                epoch: self.lease.epoch,
            }),
            Err(e) if is_unique_violation(&e) && self.already_stored(records).await? => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Whether the first record of a batch is stored at its `seq` under this epoch.
    async fn already_stored(&self, records: &[Vec<u8>]) -> Result<bool, StoreError> {
        let client = self.store.client().await?;
        let row = client
            .query_opt(
                "SELECT record FROM trace_records
                  WHERE session_id = $1 AND seq = $2 AND epoch = $3",
                &[&self.lease.session_id, &self.next_seq, &self.lease.epoch],
            )
            .await?;
        Ok(row.is_some_and(|r| records.first().is_some_and(|f| r.get::<_, &[u8]>(0) == f)))
    }
}

fn is_unique_violation(e: &tokio_postgres::Error) -> bool {
    e.code() == Some(&tokio_postgres::error::SqlState::UNIQUE_VIOLATION)
}

/// The stream as the trace area's interface.
pub fn boxed(trace: PgTrace) -> Box<dyn RemoteTrace> {
    Box::new(trace)
}

/// Appends `records` to `lease`'s session at `seq` under the lease's epoch, as the stream does
/// (for tools and tests that hold a lease without a session).
pub async fn append_once(
    store: &PgStore,
    lease: &Lease,
    seq: i64,
    records: &[Vec<u8>],
) -> Result<(), StoreError> {
    let parts = vec![1i32; records.len()];
    let client = store.client().await?;
    let n = client
        .execute(
            APPEND,
            &[&lease.session_id, &lease.epoch, &seq, &records, &parts],
        )
        .await?;
    if n as usize != records.len() {
        return Err(StoreError::Fenced {
            id: lease.session_id.clone(),
            epoch: lease.epoch,
        });
    }
    Ok(())
}
