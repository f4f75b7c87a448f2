//! Typed errors of the library. Tool failures are not errors (they are tool outputs); these are
//! the failures of configuration, start-up and the host API.
//!
//! Every area has its own enum (`ConfigError` here for configuration and model set-up,
//! `RookeryError` for the host and session API, `TraceOpenError` in `trace/open_error.rs`,
//! `AdmitError` in `actors/subagent_supervisor.rs`, `ApiError` in `server/error.rs`).
//! Their texts name what is wrong in the library's terms (`model.base_url`, a path); they never
//! name a command-line flag: the CLI maps the variants it has flags for to its own wording
//! (`cli/error.rs`).

use std::path::PathBuf;

pub use crate::trace::open_error::TraceOpenError;

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
    #[error("invalid script {path}: {source}")]
    InvalidScript {
        path: PathBuf,
        #[source]
        source: Box<crate::model::scripted::ScriptError>,
    },
    #[error("workspace {0} does not exist or is not a directory")]
    Workspace(PathBuf),
    /// A model provider that talks HTTP, configured without its endpoint or model name.
    #[error("model provider \"{provider}\" needs a base_url and a model")]
    MissingEndpoint { provider: String },
    /// A provider with a default endpoint, configured without a model name.
    #[error("model provider \"{provider}\" needs a model")]
    MissingModel { provider: String },
    /// `model.base_url` is not an http(s) URL.
    #[error("model.base_url must start with http:// or https:// (got \"{0}\")")]
    BadBaseUrl(String),
    /// `model.api_key_env` is empty or not a variable name.
    #[error("model.api_key_env must name an environment variable")]
    BadKeyVariable,
    /// The scripted provider asked for as an HTTP model: its turns come from a script file.
    #[error("the scripted model takes its turns from a script file")]
    ScriptedNeedsScript,
    /// The API key's value cannot be sent in an HTTP header.
    #[error("the API key in ${var} contains characters not allowed in an HTTP header")]
    KeyNotHeader { var: String },
    /// The provider's HTTP client could not be built.
    #[error("cannot build the HTTP client: {0}")]
    HttpClient(#[source] reqwest::Error),
    /// A hooks file that cannot be used.
    #[error(transparent)]
    Hooks(#[from] crate::hooks::HookConfigError),
    #[error(transparent)]
    Mcp(#[from] crate::mcp::McpConfigError),
    /// `compaction.max_context` below 1.
    #[error("compaction.max_context must be a whole number of at least 1 (got {0})")]
    BadMaxContext(i64),
    #[error("{0}")]
    Other(String),
    #[error(transparent)]
    Profile(#[from] crate::tools::profile::ProfileError),
}

/// A failed call to an actor (it stopped, panicked, or did not answer), with ractor's error as
/// its source (the message that could not be delivered is dropped).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ActorError(#[source] ractor::RactorErr<()>);

impl<T> From<ractor::RactorErr<T>> for ActorError {
    fn from(e: ractor::RactorErr<T>) -> Self {
        use ractor::{MessagingErr, RactorErr};
        ActorError(match e {
            RactorErr::Spawn(s) => RactorErr::Spawn(s),
            RactorErr::Messaging(m) => RactorErr::Messaging(match m {
                MessagingErr::SendErr(_) => MessagingErr::SendErr(()),
                MessagingErr::ChannelClosed => MessagingErr::ChannelClosed,
                MessagingErr::InvalidActorType => MessagingErr::InvalidActorType,
            }),
            RactorErr::Actor(a) => RactorErr::Actor(a),
            RactorErr::Timeout => RactorErr::Timeout,
        })
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
    #[error(transparent)]
    TraceOpen(#[from] TraceOpenError),
    /// The session's trace can no longer be written (`trace write failed: <reason> (<path>)`):
    /// the session takes no new task.
    #[error("session {session} failed: {reason}")]
    TraceFailed { session: String, reason: String },
    /// A directory a session needs could not be prepared (e.g. a benchmark's workspace).
    #[error("{what}: {source}")]
    Setup {
        what: String,
        #[source]
        source: std::io::Error,
    },
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

    #[test]
    fn config_texts_name_no_flags() {
        for e in [
            ConfigError::MissingEndpoint {
                provider: "vllm".into(),
            },
            ConfigError::MissingModel {
                provider: "anthropic".into(),
            },
            ConfigError::BadBaseUrl("x".into()),
            ConfigError::BadKeyVariable,
            ConfigError::ScriptedNeedsScript,
        ] {
            assert!(!e.to_string().contains("--"), "{e}");
        }
    }
}
