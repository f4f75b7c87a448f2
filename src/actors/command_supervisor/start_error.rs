//! Why the command supervisor could not start a command. The `Display` texts are the `<msg>`
//! of `[spawn error: <msg>]` that tools and models see, so they do not change.

use crate::process::SpawnError;

/// A failed start: the supervisor is gone, the process did not spawn, or its actor did not.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The session's commands were shut down (or the supervisor is unreachable).
    #[error("command session manager disposed")]
    Disposed,
    /// The process could not be spawned.
    #[error(transparent)]
    Spawn(#[from] SpawnError),
    /// The command's actor could not be spawned.
    #[error("{0}")]
    Actor(#[source] ractor::SpawnErr),
}
