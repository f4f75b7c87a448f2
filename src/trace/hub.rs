//! The host's trace writers: a small fixed pool of `TraceWriter` actors, each the only writer of
//! every trace file assigned to it (a file goes to writer `file id % pool size`), so a session
//! costs a file entry in a writer instead of an actor of its own.
//!
//! Each file keeps the one-file guarantees of `writer.rs`: records in sending order, group
//! commit per file (the handle queues records and rotations in order; the first of a batch
//! sends one `Drain`, and the writer writes everything queued at that moment with one
//! `writev(2)` of whole lines, see `batch.rs`), `Flush`/`Written`/`Shutdown` acks per file
//! (each drains the queue first), rotation, the owner lock, healing and the shared byte
//! counter. A failed write is reported to that file's own health only; the other files of the
//! writer go on (ordering across files is free).
//!
//! This module owns the routing of records to files; it must not decide what is recorded and
//! never opens a trace itself (the spawner opens and locks it, so an open failure names the
//! path).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use ractor::rpc::CallResult;
use ractor::{Actor, ActorCell, ActorProcessingErr, ActorRef, MessagingErr, RpcReplyPort};

use super::batch::Batch;
use super::health::TraceHealth;
use super::rotation::Rotation;
use super::sink::Sink;
use super::writer::{Step, TraceMsg, TraceState, TraceStats, record_line};
use crate::redact::Redactor;

/// Writers a host starts: enough that one slow file stalls only its share of the sessions,
/// few enough to cost nothing per session.
pub const POOL_SIZE: usize = 4;

/// A trace file's number within its host (never reused).
pub type FileId = u64;

/// Messages of a trace writer.
pub enum WriterMsg {
    /// Takes over an opened (and locked) file under `FileId`.
    Open(FileId, Box<OpenFile>),
    /// One step for one file (see [`TraceMsg`]), after what its handle queued; a file the
    /// writer does not know (closed) drops the reply port of an ack, so the caller gets an
    /// error.
    File(FileId, TraceMsg),
    /// The file's handle queued records (or a rotation) while none was signalled: write them.
    Drain(FileId),
    /// Writes every file's gathered records (the writer sends it to itself).
    Commit,
}

/// What a writer needs to take over a file.
pub struct OpenFile {
    file: Sink,
    /// Shared with the handle; holds the redactor of `Append` records.
    queue: Arc<Queue>,
    health: Arc<TraceHealth>,
}

/// One writer of many files.
pub struct TraceWriter;

/// What a file's handle queued for its writer, in sending order: records and rotations go
/// through this queue (one `Drain` message per batch instead of one message per record);
/// acks go through the mailbox and first drain the queue.
struct Queue {
    /// Scrubs secrets from `Append` records (serialized by the sender, into the queue).
    redactor: Option<Arc<Redactor>>,
    pending: std::sync::Mutex<Pending>,
}

#[derive(Default)]
struct Pending {
    items: Vec<Item>,
    /// A `Drain` is on its way (set by the enqueue that sent it, cleared by the drain).
    signalled: bool,
    /// Holds taken by the producer ([`TraceHandle::hold`]): while any is held, records queue
    /// without waking the writer; the last release wakes it for all of them.
    held: u32,
    /// The writer closed the file: later records are dropped.
    closed: bool,
}

enum Item {
    /// Whole records (newlines included), each in its sender's buffer.
    Lines(Batch),
    Rotate(Rotation),
}

impl Queue {
    fn lock(&self) -> std::sync::MutexGuard<'_, Pending> {
        match self.pending.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        }
    }
}

struct Entry {
    file: TraceState,
    queue: Arc<Queue>,
}

impl Entry {
    /// Gathers everything the handle queued (in order) and writes it: one `write(2)` per run
    /// of records between rotations.
    fn drain(&mut self) {
        let items = {
            let mut p = self.queue.lock();
            p.signalled = false;
            std::mem::take(&mut p.items)
        };
        for item in items {
            match item {
                Item::Lines(batch) => {
                    self.file.gather_batch(batch);
                }
                Item::Rotate(r) => {
                    self.file.step(TraceMsg::Rotate(r));
                }
            }
        }
        self.file.commit();
    }
}

/// The state of one trace writer: the files it owns and its pending commits.
pub struct WriterState {
    stats: Arc<TraceStats>,
    files: HashMap<FileId, Entry>,
    /// Files with gathered records, committed by the queued `Commit`.
    dirty: Vec<FileId>,
    commit_queued: bool,
}

impl WriterState {
    fn commit_all(&mut self) {
        for id in std::mem::take(&mut self.dirty) {
            if let Some(e) = self.files.get_mut(&id) {
                e.file.commit();
            }
        }
    }

    fn step(&mut self, myself: &ActorRef<WriterMsg>, id: FileId, message: TraceMsg) {
        let Some(entry) = self.files.get_mut(&id) else {
            tracing::debug!("[trace] a step for closed trace file {id} is dropped");
            return;
        };
        // What the handle queued before this step was sent goes first.
        entry.drain();
        if let TraceMsg::Shutdown(_) = &message {
            entry.queue.lock().closed = true;
        }
        match entry.file.step(message) {
            Step::Done => {}
            Step::FirstOfBatch => {
                self.dirty.push(id);
                if !self.commit_queued {
                    self.commit_queued = myself.cast(WriterMsg::Commit).is_ok();
                    if !self.commit_queued {
                        // Stopping: nothing would deliver the commit.
                        self.commit_all();
                    }
                }
            }
            Step::Closed => {
                // Dropping the state closes the descriptor (its lock is already released).
                self.files.remove(&id);
            }
        }
    }
}

impl Actor for TraceWriter {
    type Msg = WriterMsg;
    type State = WriterState;
    type Arguments = Arc<TraceStats>;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        stats: Arc<TraceStats>,
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(WriterState {
            stats,
            files: HashMap::new(),
            dirty: Vec::new(),
            commit_queued: false,
        })
    }

    /// Stopped (e.g. with its host): what is gathered is still written.
    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        state.commit_all();
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: WriterMsg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            WriterMsg::Open(id, open) => {
                let OpenFile {
                    file,
                    queue,
                    health,
                } = *open;
                let redactor = queue.redactor.clone();
                let file = TraceState::new(file, state.stats.clone(), redactor, health);
                state.files.insert(id, Entry { file, queue });
            }
            WriterMsg::File(id, message) => state.step(&myself, id, message),
            WriterMsg::Drain(id) => {
                if let Some(e) = state.files.get_mut(&id) {
                    e.drain();
                }
            }
            WriterMsg::Commit => {
                state.commit_queued = false;
                state.commit_all();
            }
        }
        Ok(())
    }
}

/// The host's pool of trace writers (cheap to clone).
#[derive(Clone)]
pub struct TraceWriters {
    writers: Arc<[ActorRef<WriterMsg>]>,
    next: Arc<AtomicU64>,
}

impl std::fmt::Debug for TraceWriters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TraceWriters")
            .field("writers", &self.writers.len())
            .finish()
    }
}

/// The trace writers are gone (their host stopped): the file was not taken over.
#[derive(Debug, thiserror::Error)]
#[error("the trace writer has stopped")]
pub struct WriterGone;

impl TraceWriters {
    /// Starts `n` (at least one) writers, linked to `supervisor` when given.
    pub async fn start(
        supervisor: Option<ActorCell>,
        n: usize,
        stats: Arc<TraceStats>,
    ) -> Result<TraceWriters, ractor::SpawnErr> {
        let mut writers = Vec::with_capacity(n.max(1));
        for _ in 0..n.max(1) {
            let (w, _) = match &supervisor {
                Some(s) => Actor::spawn_linked(None, TraceWriter, stats.clone(), s.clone()).await?,
                None => Actor::spawn(None, TraceWriter, stats.clone()).await?,
            };
            writers.push(w);
        }
        Ok(TraceWriters {
            writers: writers.into(),
            next: Arc::default(),
        })
    }

    /// Hands an opened file (or a remote store's stream, see [`Sink`]) to its writer; every
    /// record sent through the returned handle goes after the takeover.
    pub fn open(
        &self,
        file: impl Into<Sink>,
        redactor: Option<Arc<Redactor>>,
        health: Arc<TraceHealth>,
    ) -> Result<TraceHandle, WriterGone> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let writer = self.writers[(id % self.writers.len() as u64) as usize].clone();
        let queue = Arc::new(Queue {
            redactor,
            pending: Default::default(),
        });
        let open = OpenFile {
            file: file.into(),
            queue: queue.clone(),
            health,
        };
        writer
            .cast(WriterMsg::Open(id, Box::new(open)))
            .map_err(|_| WriterGone)?;
        Ok(TraceHandle {
            writer,
            file: id,
            queue,
        })
    }

    /// Whether `cell` is one of these writers (for a supervisor's failure report).
    pub fn owns(&self, cell: &ActorCell) -> bool {
        self.writers.iter().any(|w| w.get_id() == cell.get_id())
    }

    /// Stops every writer (each writes out what it has gathered).
    pub fn stop(&self) {
        for w in self.writers.iter() {
            w.stop(None);
        }
    }
}

/// A session's handle on its trace file: the writer and the file's number. Sends the steps of
/// [`TraceMsg`] like an `ActorRef<TraceMsg>` would (`cast`, and `call` for `ractor::call!`).
#[derive(Clone)]
pub struct TraceHandle {
    writer: ActorRef<WriterMsg>,
    file: FileId,
    queue: Arc<Queue>,
}

impl std::fmt::Debug for TraceHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TraceHandle")
            .field("file", &self.file)
            .finish()
    }
}

impl TraceHandle {
    /// Sends one step without waiting. Records (`Append` is serialized and scrubbed here) and
    /// rotations are queued in order, and only the first of a batch wakes the writer; the
    /// other steps go through its mailbox.
    pub fn cast(&self, message: TraceMsg) -> Result<(), MessagingErr<WriterMsg>> {
        match message {
            TraceMsg::AppendLine(line) => self.enqueue_line(line),
            TraceMsg::Append(msg) => match record_line(&msg) {
                Some(line) => {
                    let line = match &self.queue.redactor {
                        Some(r) => r.redact_bytes(&line).unwrap_or(line),
                        None => line,
                    };
                    self.enqueue_line(line)
                }
                None => Ok(()),
            },
            TraceMsg::Rotate(r) => self.enqueue(Item::Rotate(r)),
            other => self.writer.cast(WriterMsg::File(self.file, other)),
        }
    }

    /// Queues one whole record after the others: into the last run of records when the queue
    /// ends with one (the buffer is moved there, not copied).
    fn enqueue_line(&self, line: Vec<u8>) -> Result<(), MessagingErr<WriterMsg>> {
        self.enqueue_with(|items| match items.last_mut() {
            Some(Item::Lines(batch)) => batch.push(line, 1),
            _ => items.push(Item::Lines(Batch::of(line, 1))),
        })
    }

    fn enqueue(&self, item: Item) -> Result<(), MessagingErr<WriterMsg>> {
        self.enqueue_with(|items| items.push(item))
    }

    /// Adds to the queue with `add` and wakes the writer when this starts a batch and no hold
    /// is taken.
    fn enqueue_with(
        &self,
        add: impl FnOnce(&mut Vec<Item>),
    ) -> Result<(), MessagingErr<WriterMsg>> {
        let signal = {
            let mut p = self.queue.lock();
            if p.closed {
                return Ok(());
            }
            add(&mut p.items);
            p.held == 0 && !std::mem::replace(&mut p.signalled, true)
        };
        if signal {
            self.writer.cast(WriterMsg::Drain(self.file))
        } else {
            Ok(())
        }
    }

    /// Holds the writer back: the records queued until the matching [`Self::release`] go out
    /// together, with one `write(2)`, instead of the first waking the writer while the others
    /// are still being made. A session holds its trace from a message of a turn until the
    /// messages queued meanwhile are handled too. Acks (`Flush`, `Written`, `Shutdown`) are not
    /// held back: they drain the queue first.
    pub fn hold(&self) {
        self.queue.lock().held += 1;
    }

    /// Releases one [`Self::hold`]; the last wakes the writer if records are waiting.
    pub fn release(&self) -> Result<(), MessagingErr<WriterMsg>> {
        let signal = {
            let mut p = self.queue.lock();
            p.held = p.held.saturating_sub(1);
            p.held == 0 && !p.items.is_empty() && !std::mem::replace(&mut p.signalled, true)
        };
        if signal {
            self.writer.cast(WriterMsg::Drain(self.file))
        } else {
            Ok(())
        }
    }

    /// Sends one step with a reply port and waits for the reply (what `ractor::call!` uses).
    pub async fn call<T, F>(
        &self,
        build: F,
        timeout: Option<std::time::Duration>,
    ) -> Result<CallResult<T>, MessagingErr<WriterMsg>>
    where
        T: Send + 'static,
        F: FnOnce(RpcReplyPort<T>) -> TraceMsg,
    {
        let file = self.file;
        self.writer
            .call(|tx| WriterMsg::File(file, build(tx)), timeout)
            .await
    }

    /// Waits until every record sent so far is written, synced, and the owner lock released;
    /// the writer then forgets the file.
    pub async fn shutdown(&self) -> Result<(), ractor::RactorErr<WriterMsg>> {
        ractor::call!(self, TraceMsg::Shutdown)
    }

    /// Asks for a `Shutdown` without waiting.
    pub fn stop(&self) {
        let (tx, _rx) = ractor::concurrency::oneshot();
        let _ = self.cast(TraceMsg::Shutdown(tx.into()));
    }

    /// The file's number within its host.
    pub fn file_id(&self) -> FileId {
        self.file
    }
}

#[cfg(test)]
mod tests;
