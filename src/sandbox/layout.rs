//! A session's sandbox policy resolved against its paths: the absolute, canonical roots a
//! session's processes and file tools may write, and the paths they may never read.

use std::path::PathBuf;

use super::{NetworkAccess, SandboxMode};

/// The resolved sandbox of one session (built once when the session starts).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxLayout {
    /// The mode in force (never `off`: an unsandboxed session has no layout).
    pub mode: SandboxMode,
    /// Network access of the session's processes.
    pub network: NetworkAccess,
    /// The session's workspace (canonical).
    pub workspace: PathBuf,
    /// The session's private temp dir (`$TMPDIR` of its processes, removed with the session).
    pub tmpdir: PathBuf,
    /// Every writable directory: the temp dir, and in `workspace-write` the workspace and
    /// the writable roots (canonical).
    pub writable: Vec<PathBuf>,
    /// Paths never readable: the built-in list plus the configured one (canonical where they
    /// exist).
    pub deny_read: Vec<PathBuf>,
}
