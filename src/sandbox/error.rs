//! Why a sandbox could not be set up or was refused.

use std::io;
use std::path::PathBuf;

use super::SandboxMode;

/// A sandbox that cannot be had. Security fails closed: each of these stops the session (or
/// the command) instead of running it unconfined.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// The kernel or the build lacks a mechanism the mode needs.
    #[error("sandbox `{mode}` is unavailable on this machine: {missing}")]
    Unavailable {
        /// The mode asked for.
        mode: SandboxMode,
        /// What is missing (e.g. `Landlock ABI 6 or newer (the kernel has 3)`).
        missing: String,
    },
    /// The request would be looser than what is allowed (a resume, or `serve --sandbox`).
    #[error("sandbox `{requested}` is looser than allowed (`{allowed}`)")]
    NotAllowed {
        /// What was asked for.
        requested: String,
        /// The loosest setting allowed.
        allowed: String,
    },
    /// A path of the policy could not be resolved.
    #[error("sandbox path {}: {source}", path.display())]
    Path {
        /// The path as configured.
        path: PathBuf,
        /// Why it could not be used.
        #[source]
        source: io::Error,
    },
    /// Building the session's filters failed.
    #[error("cannot build the sandbox ({what}): {source}")]
    Setup {
        /// Which step failed.
        what: &'static str,
        /// The OS error behind it.
        #[source]
        source: io::Error,
    },
}
