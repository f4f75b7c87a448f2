//! Why a command could not be started (`process::spawn_process`). The `Display` texts are the
//! `<msg>` of `[spawn error: <msg>]` that tools and models see, so they do not change.

use std::ffi::NulError;
use std::io;
use std::path::PathBuf;

/// A failed spawn of `bash -lc <cmd>`, with the OS error behind it.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// The working directory is missing or not a directory.
    #[error("working directory {} does not exist or is not a directory", .0.display())]
    NoWorkdir(PathBuf),
    /// The command or an environment entry holds a NUL byte.
    #[error("cannot run bash: a NUL byte in the command or environment")]
    NulByte(#[source] NulError),
    /// Starting bash failed (not found, pipes, the spawn itself).
    #[error("cannot run bash: {0}")]
    Bash(#[source] io::Error),
    /// Creating a pipe for bash failed.
    #[error("cannot run bash: {0}")]
    Pipe(#[source] nix::Error),
    /// `openpty` failed.
    #[error("cannot open a pseudo-terminal: {0}")]
    OpenPty(#[source] nix::Error),
    /// Preparing the pseudo-terminal's descriptors failed.
    #[error("pty: {0}")]
    Pty(#[source] nix::Error),
    /// Registering or duplicating the pseudo-terminal's descriptors failed.
    #[error("pty: {0}")]
    PtyIo(#[source] io::Error),
    /// The leader exited before its pid could be read.
    #[error("the command exited before it could be tracked")]
    Untracked,
    /// The session's sandbox could not be applied: nothing ran (never unconfined).
    #[error("cannot start the command in its sandbox ({step}): {source}")]
    Sandbox {
        /// The step that failed.
        step: &'static str,
        /// The OS error behind it.
        #[source]
        source: io::Error,
    },
    /// The spawned child came without its pipes.
    #[error("the command's pipes are missing")]
    PipesMissing,
}
