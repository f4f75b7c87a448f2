//! The `TraceActor`: the only writer of one session's JSONL trace.
//!
//! Records arrive as messages and are written in arrival order, one `write(2)` each, on a file
//! held open for the actor's life. `Flush` and `Shutdown` reply only after every earlier record
//! is on disk, so a caller that awaits them loses nothing. A failed write or sync is logged and
//! reported once through the trace's [`TraceHealth`] (the session then stops taking tasks); it
//! never stops the actor, which still tries every later record. It must not decide what is
//! recordable: callers send only recordable messages.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};

use super::file::TraceFile;
use super::health::{TraceHealth, failure_text};
use crate::message::OmniMessage;
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
}

/// Shared counters a host reads for metrics.
#[derive(Debug, Default)]
pub struct TraceStats {
    pub bytes_written: AtomicU64,
    pub records: AtomicU64,
    pub failed_writes: AtomicU64,
}

/// Start-up arguments: the file to write (opened by the spawner, so an open failure is a
/// plain error naming the path), the counters to update and the health to report to.
pub struct TraceArgs {
    pub file: TraceFile,
    pub stats: Arc<TraceStats>,
    /// Scrubs secrets from the records sent as messages (`Append`); `AppendLine` records come
    /// scrubbed from their session.
    pub redactor: Option<Arc<Redactor>>,
    pub health: Arc<TraceHealth>,
}

/// One record as the trace stores it: the JSON envelope and a newline.
pub fn record_line(msg: &OmniMessage) -> Option<Vec<u8>> {
    // A fresh buffer per record: an idle session keeps no buffer at all.
    let mut line = Vec::with_capacity(256);
    if let Err(e) = serde_json::to_writer(&mut line, msg) {
        tracing::error!("[trace] cannot serialize a record: {e}");
        return None;
    }
    line.push(b'\n');
    Some(line)
}

pub struct TraceActor;

pub struct TraceState {
    pub(super) file: TraceFile,
    pub(super) stats: Arc<TraceStats>,
    redactor: Option<Arc<Redactor>>,
    health: Arc<TraceHealth>,
    /// A rotation waiting for the next record (none is made for nothing).
    rotation: Option<super::rotation::Rotation>,
}

impl TraceState {
    fn append(&mut self, msg: &OmniMessage) {
        if let Some(line) = record_line(msg) {
            let line = match &self.redactor {
                Some(r) => r.redact_bytes(&line).unwrap_or(line),
                None => line,
            };
            self.write_line(line);
        }
    }

    /// Writes one serialized record (newline included) with one `write(2)`.
    fn write_line(&mut self, mut line: Vec<u8>) {
        if let Some(rotation) = self.rotation.take() {
            self.rotate(rotation);
        }
        let len = line.len() as u64;
        match self.file.append_line(&mut line) {
            Ok(()) => {
                self.stats.bytes_written.fetch_add(len, Ordering::Relaxed);
                self.stats.records.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                self.stats.failed_writes.fetch_add(1, Ordering::Relaxed);
                self.failed(&e);
            }
        }
    }

    fn sync(&mut self) {
        if let Err(e) = self.file.sync() {
            self.failed(&e);
        }
    }

    pub(super) fn failed(&self, e: &std::io::Error) {
        let text = failure_text(e, self.file.path());
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
    type State = TraceState;
    type Arguments = TraceArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        args: TraceArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(TraceState {
            file: args.file,
            stats: args.stats,
            redactor: args.redactor,
            health: args.health,
            rotation: None,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: TraceMsg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            TraceMsg::Append(msg) => state.append(&msg),
            TraceMsg::AppendLine(line) => state.write_line(line),
            TraceMsg::Flush(reply) => {
                state.sync();
                let _ = reply.send(());
            }
            TraceMsg::Rotate(rotation) => state.rotation = Some(rotation),
            TraceMsg::Written(reply) => {
                let _ = reply.send(());
            }
            TraceMsg::Shutdown(reply) => {
                state.sync();
                // Released before the reply: a closed session can be reopened at once.
                state.file.unlock();
                let _ = reply.send(());
                myself.stop(None);
            }
        }
        Ok(())
    }
}
