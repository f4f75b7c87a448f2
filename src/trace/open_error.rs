//! Why a session's trace could not be created or opened, naming the place and the reason
//! (`cannot create traces under <home>: Not a directory`).
//!
//! It owns the error type only; it must not touch files.

use std::io;
use std::path::PathBuf;

use super::health::io_reason;

/// A trace that cannot be created (new session) or opened (resumed session).
#[derive(Debug, thiserror::Error)]
pub enum TraceOpenError {
    /// No trace can be created under the home directory.
    #[error("cannot create traces under {}: {}", home.display(), io_reason(source))]
    Create {
        /// The Rookery home.
        home: PathBuf,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// The existing trace of a resumed session cannot be opened.
    #[error("cannot open trace {}: {}", path.display(), io_reason(source))]
    Open {
        /// The trace file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
}

impl TraceOpenError {
    /// The home (or trace) path the error is about.
    pub fn path(&self) -> &std::path::Path {
        match self {
            TraceOpenError::Create { home, .. } => home,
            TraceOpenError::Open { path, .. } => path,
        }
    }
}
