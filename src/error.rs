//! Typed errors of the library. Tool failures are not errors (they are tool outputs); these are
//! the failures of configuration, start-up and the host API.

use std::path::PathBuf;

/// A configuration or start-up error: the CLI prints it on one line and exits 2.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("unknown tool \"{name}\" in tools.builtin (known tools: {known})")]
    UnknownTool { name: String, known: String },
    #[error("tool \"{0}\" is not available in this build of rookery")]
    UnavailableTool(String),
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("invalid config {path}: {message}")]
    InvalidConfig { path: PathBuf, message: String },
    #[error("invalid script {path}: {message}")]
    InvalidScript { path: PathBuf, message: String },
    #[error("workspace {0} does not exist or is not a directory")]
    Workspace(PathBuf),
    #[error("{0}")]
    Other(String),
    #[error(transparent)]
    Profile(#[from] crate::tools::profile::ProfileError),
}

/// Errors of the host and session API.
#[derive(Debug, thiserror::Error)]
pub enum RookeryError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("unknown session {0}")]
    UnknownSession(String),
    #[error("session {0} is busy: a task is already running")]
    SessionBusy(String),
    #[error("session {0} has ended")]
    SessionEnded(String),
    #[error("trace error: {0}")]
    Trace(#[from] std::io::Error),
    /// Another process holds the session's trace lock (it has the session open).
    #[error("session {id} is open in another rookery process ({})", pid.map_or_else(|| "pid unknown".to_string(), |p| format!("pid {p}")))]
    SessionLocked { id: String, pid: Option<u32> },
    /// A trace cannot be created or opened: `cannot create traces under <home>: <reason>`.
    #[error("{0}")]
    TraceOpen(String),
    /// The session's trace can no longer be written (`trace write failed: <reason> (<path>)`):
    /// the session takes no new task.
    #[error("session {session} failed: {reason}")]
    TraceFailed { session: String, reason: String },
    #[error("actor error: {0}")]
    Actor(String),
    /// A caller's input was refused (e.g. a blank steer text).
    #[error("{0}")]
    InvalidInput(String),
}

impl<T> From<ractor::RactorErr<T>> for RookeryError {
    fn from(e: ractor::RactorErr<T>) -> Self {
        RookeryError::Actor(e.to_string())
    }
}

impl RookeryError {
    /// The error of a failed owner lock on session `id`'s trace.
    pub fn from_lock(id: &str, e: crate::trace::lock::LockError) -> Self {
        match e {
            crate::trace::lock::LockError::Held { pid } => RookeryError::SessionLocked {
                id: id.to_string(),
                pid,
            },
            crate::trace::lock::LockError::Io(e) => RookeryError::Trace(e),
        }
    }
}

impl From<ractor::SpawnErr> for RookeryError {
    fn from(e: ractor::SpawnErr) -> Self {
        RookeryError::Actor(e.to_string())
    }
}
