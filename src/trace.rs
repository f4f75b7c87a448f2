//! The session trace: the JSONL file format (`<home>/traces/<yyyy-mm-dd>/<session_id>_NNN.jsonl`,
//! one `OmniMessage` envelope per line), its paths, its append mechanics and its tolerant reader.
//!
//! This module owns the file format. A session's trace has exactly one writer: its host's
//! `TraceWriter` that owns the file (`hub.rs`; `writer.rs` holds the per-file steps and a
//! one-file `TraceActor`): nothing else may open a `TraceFile` for appending. Readers (`reader.rs`)
//! never modify a trace.

pub mod batch; // whole records gathered for one writev(2), none copied
pub mod catalog; // listing, reading, resolving and deleting recorded sessions
pub mod file;
pub mod fork; // a new session's trace copied from another's up to a task's end
pub mod health;
pub mod hub; // the host's pool of trace writers, each owning many files
pub mod lock;
pub mod open_error; // a trace that cannot be created or opened
pub mod page; // a session's conversation read a page at a time, subagents inlined
pub mod paths;
pub mod private; // the modes of the trace tree: 0700 directories, 0600 files
pub mod reader;
pub mod record_source; // a session's records read from a store, as plain data
pub mod resume;
pub mod rotation; // the switch to `_002`, `_003`, … after a compaction
pub mod sink; // the trace store interface: a file, or a remote store's stream
pub mod store_choice; // `--store files|postgres://…` and `$ROOKERY_STORE`
pub mod summary;
pub mod writer; // the per-file steps and the one-file TraceActor
