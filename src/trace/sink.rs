//! Where a trace writer's records go: the trace store interface. A [`Sink`] is either an open
//! [`TraceFile`] (the `files` backend, today's layout and the default) or a [`RemoteTrace`], one
//! session's append stream into a shared store (the `postgres` backend in `src/store/`).
//!
//! The writer (`writer.rs`, `hub.rs`) keeps its group commit for both: a batch of whole records
//! goes to the sink in one call, which the file writes with one `writev(2)` and a remote store
//! with one multi-row statement. This module owns the interface and the dispatch; it must not
//! know any store's protocol (a remote backend lives above the trace area and is handed down as
//! a `RemoteTrace`).

use std::path::{Path, PathBuf};

use ractor::RpcReplyPort;

use super::file::TraceFile;

/// One session's trace in a remote store, as its writer sees it. Every method returns at once:
/// the store works in its own task, in the order of the calls, and reports a failed append to
/// the trace's [`super::health::TraceHealth`] (the session then takes no new task).
pub trait RemoteTrace: Send + Sync {
    /// Queues whole records (each ending with its newline), in order, for part `part` of the
    /// trace (1, then 2 after the first rotation, …: the files `_001`, `_002`, … of the files
    /// backend).
    fn append(&self, records: Vec<Vec<u8>>, part: u32);
    /// Replies once every record queued before it is stored durably (or has failed).
    fn barrier(&self, done: RpcReplyPort<()>);
    /// Like [`Self::barrier`], then gives the session up (its lease) and ends the stream.
    fn close(&self, done: RpcReplyPort<()>);
    /// The part the stream continues (the latest part already stored; 1 for a new trace).
    fn part(&self) -> u32;
    /// A name of the trace for messages and `trace_path` (e.g. `postgres:/<session id>`).
    fn place(&self) -> &Path;
}

/// Where one trace's records go.
pub enum Sink {
    /// A JSONL file of the `files` backend (opened and locked by the spawner).
    File(TraceFile),
    /// A session's stream into a remote store, and the part its records go to now.
    Remote {
        /// The stream.
        trace: Box<dyn RemoteTrace>,
        /// The current part (bumped by a rotation).
        part: u32,
    },
}

impl std::fmt::Debug for Sink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Sink::File(file) => f.debug_tuple("File").field(&file.path()).finish(),
            Sink::Remote { trace, part } => f
                .debug_struct("Remote")
                .field("place", &trace.place())
                .field("part", part)
                .finish(),
        }
    }
}

impl From<TraceFile> for Sink {
    fn from(file: TraceFile) -> Sink {
        Sink::File(file)
    }
}

impl Sink {
    /// A remote trace's sink, continuing its latest part.
    pub fn remote(trace: Box<dyn RemoteTrace>) -> Sink {
        let part = trace.part().max(1);
        Sink::Remote { trace, part }
    }

    /// Where the records go, for messages.
    pub fn place(&self) -> PathBuf {
        match self {
            Sink::File(file) => file.path().to_path_buf(),
            Sink::Remote { trace, .. } => trace.place().to_path_buf(),
        }
    }
}
