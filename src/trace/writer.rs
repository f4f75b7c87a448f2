//! The `TraceActor`: the only writer of one session's JSONL trace.
//!
//! Records arrive as messages and are written in arrival order on a file held open for the
//! actor's life, with group commit: the first record of a batch queues a `Commit` behind every
//! message already in the mailbox, the records before it are gathered, and the `Commit` writes
//! them all (whole lines only) with one `writev(2)` of the records' own buffers (`batch.rs`). A
//! lone record is one call as before; a burst of N records is one (per 1,024). `Flush`,
//! `Written` and `Shutdown` first write what is gathered, then reply, so a caller that awaits
//! them loses nothing. A failed write or sync is logged and reported once through the trace's
//! [`TraceHealth`] (the session then stops taking tasks); it never stops the actor, which still
//! tries every later record. It must not decide what is recordable: callers send only
//! recordable messages.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};

use super::batch::Batch;
use super::file::TraceFile;
use super::health::{TraceHealth, failure_text};
use super::sink::Sink;
use crate::message::{ModelPayload, OmniMessage};
use crate::redact::Redactor;

/// Messages of the trace actor.
pub enum TraceMsg {
    /// Appends one record.
    Append(Arc<OmniMessage>),
    /// Appends one record the sender already serialized (`record_line`).
    AppendLine(Vec<u8>),
    /// Replies once every earlier record is written and synced.
    Flush(RpcReplyPort<()>),
    /// Replies once every earlier record is written (no sync).
    Written(RpcReplyPort<()>),
    /// Like `Flush`, then releases the owner lock and stops the actor.
    Shutdown(RpcReplyPort<()>),
    /// After a completed compaction: the next record goes to the next file (`_002`, …), which
    /// starts with these serialized records (`session_meta`, `tool_list_ready`). See
    /// `rotation.rs`.
    Rotate(super::rotation::Rotation),
    /// Writes the gathered records (the actor sends it to itself; harmless from anyone).
    Commit,
}

/// Gathered bytes written at once even before their `Commit` (bounds the batch's memory).
const BATCH_MAX_BYTES: usize = 1 << 20;

/// Shared counters a host reads for metrics.
#[derive(Debug, Default)]
pub struct TraceStats {
    /// Bytes appended to traces.
    pub bytes_written: AtomicU64,
    /// Records appended to traces.
    pub records: AtomicU64,
    /// Writes that failed (each reported to the file's health).
    pub failed_writes: AtomicU64,
    /// `write(2)` batches issued (each holds one or more whole records).
    pub batches: AtomicU64,
}

/// Start-up arguments: the file to write (opened by the spawner, so an open failure is a
/// plain error naming the path), the counters to update and the health to report to.
pub struct TraceArgs {
    /// The opened, locked trace file to append to.
    pub file: TraceFile,
    /// The counters to update.
    pub stats: Arc<TraceStats>,
    /// Scrubs secrets from the records sent as messages (`Append`); `AppendLine` records come
    /// scrubbed from their session.
    pub redactor: Option<Arc<Redactor>>,
    /// Where write failures are reported.
    pub health: Arc<TraceHealth>,
}

/// One record as the trace stores it: the JSON envelope and a newline.
pub fn record_line(msg: &OmniMessage) -> Option<Vec<u8>> {
    // A fresh buffer per record: an idle session keeps no buffer at all. It starts at the
    // record's likely size, so a tool output is not copied by every doubling.
    let mut line = Vec::with_capacity(likely_len(msg));
    if let Err(e) = crate::message::json_bytes::write_message(&mut line, msg) {
        tracing::error!("[trace] cannot serialize a record: {e}");
        return None;
    }
    line.push(b'\n');
    Some(line)
}

/// About the length of `msg`'s line: its long text (escaping adds little to common text)
/// and room for the envelope.
fn likely_len(msg: &OmniMessage) -> usize {
    let text = match msg.as_model() {
        Some(ModelPayload::ToolCallOutput { output, .. }) => output.len(),
        Some(ModelPayload::Text { text, .. }) => text.len(),
        Some(ModelPayload::Thinking { thinking, .. }) => thinking.len(),
        _ => 0,
    };
    text + text / 16 + 256
}

/// The writer of one file (a process with a single trace; the host uses the shared
/// [`super::hub::TraceWriter`]).
pub struct TraceActor;

/// The one-file actor's state: its file and whether a `Commit` is in its mailbox.
pub struct TraceActorState {
    file: TraceState,
    commit_queued: bool,
}

impl TraceActorState {
    /// After a gather: the first record of a batch queues the `Commit`.
    fn gathered(&mut self, myself: &ActorRef<TraceMsg>) {
        if !self.commit_queued {
            self.commit_queued = myself.cast(TraceMsg::Commit).is_ok();
            if !self.commit_queued {
                // Stopping: nothing would deliver the commit.
                self.file.commit();
            }
        }
    }
}

/// One trace as its writer holds it: its sink (an open file or a remote store's stream), the
/// records gathered for it, its pending rotation, its health and counters.
pub struct TraceState {
    pub(super) file: Sink,
    pub(super) stats: Arc<TraceStats>,
    redactor: Option<Arc<Redactor>>,
    pub(super) health: Arc<TraceHealth>,
    /// A rotation waiting for the next record (none is made for nothing).
    rotation: Option<super::rotation::Rotation>,
    /// Whole records gathered for the next write, each in its sender's buffer (empty, without
    /// capacity, when idle; whether a `Commit` is queued is the owner's business).
    batch: Batch,
}

impl TraceState {
    /// The state of a freshly opened file: nothing gathered, no rotation pending.
    pub(super) fn new(
        file: Sink,
        stats: Arc<TraceStats>,
        redactor: Option<Arc<Redactor>>,
        health: Arc<TraceHealth>,
    ) -> TraceState {
        TraceState {
            file,
            stats,
            redactor,
            health,
            rotation: None,
            batch: Batch::default(),
        }
    }

    /// Serializes, scrubs and gathers one record; returns what [`Self::gather`] returns.
    pub(super) fn append(&mut self, msg: &OmniMessage) -> bool {
        let Some(line) = record_line(msg) else {
            return false;
        };
        let line = match &self.redactor {
            Some(r) => r.redact_bytes(&line).unwrap_or(line),
            None => line,
        };
        self.gather(line)
    }

    /// Adds one serialized record (newline included) to the batch. Returns whether it is the
    /// first record of a new batch, for which the owner queues a commit.
    pub(super) fn gather(&mut self, line: Vec<u8>) -> bool {
        self.gather_batch(Batch::of(line, 1))
    }

    /// Like [`Self::gather`] for a batch of whole records (their buffers are moved, not copied).
    pub(super) fn gather_batch(&mut self, more: Batch) -> bool {
        if let Some(rotation) = self.rotation.take() {
            // Records queued before the rotation belong to the old file.
            self.commit();
            self.rotate(rotation);
        }
        let first = self.batch.is_empty();
        self.batch.append(more);
        if self.batch.bytes() >= BATCH_MAX_BYTES {
            self.commit();
            return false;
        }
        first
    }

    /// Writes the gathered records with one `writev(2)` (one per 1,024 buffers).
    pub(super) fn commit(&mut self) {
        if self.batch.is_empty() {
            return;
        }
        let batch = std::mem::take(&mut self.batch);
        let (records, len) = (batch.records(), batch.bytes() as u64);
        self.stats.batches.fetch_add(1, Ordering::Relaxed);
        let file = match &mut self.file {
            Sink::File(file) => file,
            Sink::Remote { trace, part } => {
                // The store writes the batch with one statement and reports its failure.
                self.stats.bytes_written.fetch_add(len, Ordering::Relaxed);
                self.stats.records.fetch_add(records, Ordering::Relaxed);
                trace.append(batch.into_parts(), *part);
                return;
            }
        };
        match file.append_records(batch.parts()) {
            Ok(()) => {
                self.stats.bytes_written.fetch_add(len, Ordering::Relaxed);
                self.stats.records.fetch_add(records, Ordering::Relaxed);
            }
            Err(e) => {
                self.stats
                    .failed_writes
                    .fetch_add(records, Ordering::Relaxed);
                self.failed(&e);
            }
        }
    }

    pub(super) fn sync(&mut self) {
        if let Sink::File(file) = &mut self.file
            && let Err(e) = file.sync()
        {
            self.failed(&e);
        }
    }

    pub(super) fn failed(&self, e: &std::io::Error) {
        let text = failure_text(e, &self.file.place());
        // The first failure is the session's; later ones only repeat it.
        if self.health.fail(text.clone()) {
            tracing::error!("[trace] {text}");
        } else {
            tracing::debug!("[trace] {text}");
        }
    }
}

impl Actor for TraceActor {
    type Msg = TraceMsg;
    type State = TraceActorState;
    type Arguments = TraceArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        args: TraceArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(TraceActorState {
            file: TraceState::new(
                Sink::File(args.file),
                args.stats,
                args.redactor,
                args.health,
            ),
            commit_queued: false,
        })
    }

    /// Stopped without `Shutdown` (e.g. with its supervisor): what is gathered is still written.
    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        state.file.commit();
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: TraceMsg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        if let TraceMsg::Commit = message {
            state.commit_queued = false;
        }
        match state.file.step(message) {
            Step::Done => {}
            Step::FirstOfBatch => state.gathered(&myself),
            Step::Closed => myself.stop(None),
        }
        Ok(())
    }
}

/// What one step left for the file's owner to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Step {
    Done,
    /// A record started a new batch: the owner queues a commit behind the mailbox.
    FirstOfBatch,
    /// `Shutdown` was answered: the owner forgets the file.
    Closed,
}

impl TraceState {
    /// Handles one message for this file. `Flush`, `Written` and `Shutdown` write what is
    /// gathered before they reply; `Shutdown` also syncs and releases the owner lock first, so a
    /// closed session can be reopened at once.
    pub(super) fn step(&mut self, message: TraceMsg) -> Step {
        match message {
            TraceMsg::Append(msg) => return first_step(self.append(&msg)),
            TraceMsg::AppendLine(line) => return first_step(self.gather(line)),
            TraceMsg::Commit => self.commit(),
            TraceMsg::Flush(reply) => {
                self.commit();
                self.sync();
                self.reply_when_stored(reply);
            }
            TraceMsg::Written(reply) => {
                self.commit();
                self.reply_when_stored(reply);
            }
            TraceMsg::Rotate(rotation) => self.rotation = Some(rotation),
            TraceMsg::Shutdown(reply) => {
                self.commit();
                self.sync();
                match &self.file {
                    Sink::File(file) => {
                        file.unlock();
                        let _ = reply.send(());
                    }
                    // The store answers once it has written everything and given up the lease.
                    Sink::Remote { trace, .. } => trace.close(reply),
                }
                return Step::Closed;
            }
        }
        Step::Done
    }

    /// Answers an ack now for a file (its records are written), or once a remote store has
    /// stored every record sent before.
    fn reply_when_stored(&self, reply: RpcReplyPort<()>) {
        match &self.file {
            Sink::File(_) => {
                let _ = reply.send(());
            }
            Sink::Remote { trace, .. } => trace.barrier(reply),
        }
    }
}

fn first_step(first: bool) -> Step {
    if first {
        Step::FirstOfBatch
    } else {
        Step::Done
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(i: usize) -> Vec<u8> {
        format!("{{\"n\":{i}}}\n").into_bytes()
    }

    async fn start(path: &std::path::Path) -> (ActorRef<TraceMsg>, Arc<TraceStats>) {
        let stats = Arc::new(TraceStats::default());
        let (actor, _) = Actor::spawn(
            None,
            TraceActor,
            TraceArgs {
                file: TraceFile::open(path).unwrap(),
                stats: stats.clone(),
                redactor: None,
                health: Arc::default(),
            },
        )
        .await
        .unwrap();
        (actor, stats)
    }

    /// On a current-thread runtime nothing runs between the casts: the whole burst is in the
    /// mailbox before the actor sees its first record, so it is one batch.
    #[tokio::test(flavor = "current_thread")]
    async fn a_queued_burst_is_one_write_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        let (actor, stats) = start(&path).await;
        for i in 0..1000 {
            actor.cast(TraceMsg::AppendLine(line(i))).unwrap();
        }
        ractor::call!(actor, TraceMsg::Written).unwrap();
        let want: Vec<u8> = (0..1000).flat_map(line).collect();
        assert_eq!(std::fs::read(&path).unwrap(), want);
        assert_eq!(stats.records.load(Ordering::Relaxed), 1000);
        assert_eq!(stats.batches.load(Ordering::Relaxed), 1);

        // Acks keep their meaning: what was sent before them is on disk when they answer.
        actor.cast(TraceMsg::AppendLine(line(1000))).unwrap();
        ractor::call!(actor, TraceMsg::Flush).unwrap();
        assert!(std::fs::read(&path).unwrap().ends_with(&line(1000)));
        actor.cast(TraceMsg::AppendLine(line(1001))).unwrap();
        ractor::call!(actor, TraceMsg::Shutdown).unwrap();
        let text = std::fs::read(&path).unwrap();
        assert!(text.ends_with(&line(1001)));
        assert_eq!(stats.records.load(Ordering::Relaxed), 1002);
    }

    /// Records sent from another thread while the actor writes still land whole and in order.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_senders_keep_their_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        let (actor, stats) = start(&path).await;
        let sender = actor.clone();
        let task = tokio::spawn(async move {
            for i in 0..5000 {
                sender.cast(TraceMsg::AppendLine(line(i))).unwrap();
                if i % 97 == 0 {
                    tokio::task::yield_now().await;
                }
            }
        });
        task.await.unwrap();
        ractor::call!(actor, TraceMsg::Shutdown).unwrap();
        let want: Vec<u8> = (0..5000).flat_map(line).collect();
        assert_eq!(std::fs::read(&path).unwrap(), want);
        let batches = stats.batches.load(Ordering::Relaxed);
        assert!((1..=5000).contains(&batches), "{batches}");
    }
}
