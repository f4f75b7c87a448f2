//! The session trace: the JSONL file format (`<home>/traces/<yyyy-mm-dd>/<session_id>_NNN.jsonl`,
//! one `OmniMessage` envelope per line), its paths, its append mechanics and its tolerant reader.
//!
//! This module owns the file format. The `TraceActor` in `writer.rs` is the only writer of a
//! session's trace: nothing else may open a `TraceFile` for appending. Readers (`reader.rs`)
//! never modify a trace.

pub mod catalog; // listing, reading, resolving and deleting recorded sessions
pub mod file;
pub mod health;
pub mod lock;
pub mod open_error; // a trace that cannot be created or opened
pub mod paths;
pub mod reader;
pub mod resume;
pub mod rotation; // the switch to `_002`, `_003`, … after a compaction
pub mod summary;
pub mod writer; // the TraceActor
