//! The errors of the host API: [`RookeryError`] (what a host or session call can fail with) and
//! [`ActorError`] (a failed call to an actor). Tool failures are not errors (they are tool
//! outputs).
//!
//! Every area owns its errors and this file wraps them, never the reverse: `ConfigError` in
//! `config/error.rs` (which wraps `ModelSetupError` of `model/error.rs`, the tools', hooks' and
//! MCP's), `TraceOpenError` in `trace/open_error.rs`, `ResumeFileError` in `trace/resume.rs`,
//! `AdmitError` in `actors/subagent_supervisor.rs`, `ApiError` in `server/error.rs`, `CliError`
//! in `cli/error.rs`. Their texts name what is wrong in the library's terms (`model.base_url`, a
//! path); they never name a command-line flag: the CLI maps the variants it has flags for to its
//! own wording (`cli/error.rs`).

pub use crate::trace::open_error::TraceOpenError;

/// A failed call to an actor (it stopped, panicked, or did not answer), with ractor's error as
/// its source (the message that could not be delivered is dropped).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ActorError(#[source] ractor::RactorErr<()>);

impl<T> From<ractor::RactorErr<T>> for ActorError {
    fn from(e: ractor::RactorErr<T>) -> Self {
        ActorError(e.map(|_| ()))
    }
}

impl From<ractor::SpawnErr> for ActorError {
    fn from(e: ractor::SpawnErr) -> Self {
        ActorError(ractor::RactorErr::Spawn(e))
    }
}

impl<T> From<ractor::MessagingErr<T>> for ActorError {
    fn from(e: ractor::MessagingErr<T>) -> Self {
        ractor::RactorErr::Messaging(e).into()
    }
}

/// Errors of the host and session API.
#[derive(Debug, thiserror::Error)]
pub enum RookeryError {
    /// A configuration error.
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    /// No session of the host has this id.
    #[error("unknown session {0}")]
    UnknownSession(String),
    /// The session already runs a task.
    #[error("session {0} is busy: a task is already running")]
    SessionBusy(String),
    /// A `UserPromptSubmit` hook blocked the prompt: it never reached the model.
    #[error("prompt blocked by a UserPromptSubmit hook: {0}")]
    PromptBlocked(String),
    /// The session has ended and takes no more tasks.
    #[error("session {0} has ended")]
    SessionEnded(String),
    /// A trace file operation failed.
    #[error("trace error: {0}")]
    Trace(#[from] std::io::Error),
    /// The `postgres` trace store failed (unreachable, a lease held elsewhere, …).
    #[cfg(feature = "postgres")]
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    /// A session's trace that cannot be resumed (`trace error: <reason>`).
    #[error(transparent)]
    Resume(#[from] crate::trace::resume::ResumeFileError),
    /// Another process holds the session's trace lock (it has the session open).
    #[error("session {id} is open in another rookery process ({})", pid.map_or_else(|| "pid unknown".to_string(), |p| format!("pid {p}")))]
    SessionLocked {
        /// The session's id.
        id: String,
        /// The other process's id, when known.
        pid: Option<u32>,
    },
    /// A trace cannot be created or opened: `cannot create traces under <home>: <reason>`.
    #[error(transparent)]
    TraceOpen(#[from] TraceOpenError),
    /// The session's trace can no longer be written (`trace write failed: <reason> (<path>)`):
    /// the session takes no new task.
    #[error("session {session} failed: {reason}")]
    TraceFailed {
        /// The session's id.
        session: String,
        /// The write failure, with the trace's path.
        reason: String,
    },
    /// A directory a session needs could not be prepared (e.g. a benchmark's workspace).
    #[error("{what}: {source}")]
    Setup {
        /// What was being prepared.
        what: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A call to an actor failed (it stopped, or the call timed out).
    #[error("actor error: {0}")]
    Actor(#[source] ActorError),
    /// A manual compaction of a session with an empty context.
    #[error("session {0} has nothing to compact")]
    NothingToCompact(String),
    /// A manual compaction while one runs.
    #[error("session {0} is already compacting")]
    Compacting(String),
    /// A caller's input was refused (e.g. a blank steer text).
    #[error("{0}")]
    InvalidInput(String),
    /// A fork could not be made (no such task, or its trace could not be copied).
    #[error(transparent)]
    Fork(#[from] crate::trace::fork::ForkError),
    /// The session's sandbox cannot be had (unavailable here, or looser than allowed): the
    /// session does not start.
    #[error(transparent)]
    Sandbox(#[from] crate::sandbox::SandboxError),
}

impl<T> From<ractor::RactorErr<T>> for RookeryError {
    fn from(e: ractor::RactorErr<T>) -> Self {
        RookeryError::Actor(e.into())
    }
}

impl<T> From<ractor::MessagingErr<T>> for RookeryError {
    fn from(e: ractor::MessagingErr<T>) -> Self {
        RookeryError::Actor(e.into())
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
        RookeryError::Actor(e.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_actor_error_keeps_its_text_and_its_source() {
        let e: RookeryError =
            ractor::RactorErr::<u32>::Messaging(ractor::MessagingErr::SendErr(7)).into();
        assert_eq!(
            e.to_string(),
            "actor error: Messaging failed to enqueue the message to the specified actor, the actor is likely terminated"
        );
        let source = std::error::Error::source(&e).expect("the actor error is the source");
        assert!(source.source().is_some(), "ractor's error stays the source");
    }
}
