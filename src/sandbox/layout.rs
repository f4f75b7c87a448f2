//! A session's sandbox policy resolved against its paths: the absolute, canonical roots a
//! session's processes and file tools may write, and the paths they may never read; and the
//! checks the in-process file tools make against it ([`SandboxLayout::may_read`],
//! [`SandboxLayout::may_write`]), through symlinks and `..` alike.
//!
//! It only looks at the file system (canonicalize); it never creates, writes or removes.

use std::path::{Component, Path, PathBuf};

use super::{NetworkAccess, SandboxError, SandboxMode, SandboxPolicy};

/// Paths under the user's home that are never readable in a sandboxed session.
const BUILTIN_DENY_READ_IN_HOME: [&str; 4] = [".ssh", ".aws", ".gnupg", ".config/gcloud"];

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

/// A file tool's access refused by the sandbox (its text is the tool's output).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathDenied {
    /// A read of a `deny_read` path.
    #[error(
        "sandbox {mode}: reading {} is not allowed (it is under {}, which the sandbox hides)",
        path.display(), denied.display()
    )]
    Read {
        /// The mode in force.
        mode: SandboxMode,
        /// The path asked for.
        path: PathBuf,
        /// The `deny_read` entry it is under.
        denied: PathBuf,
    },
    /// A write outside every writable root.
    #[error(
        "sandbox {mode}: writing {} is not allowed (outside the writable roots: {roots})",
        path.display()
    )]
    Write {
        /// The mode in force.
        mode: SandboxMode,
        /// The path asked for.
        path: PathBuf,
        /// The writable roots, comma-separated.
        roots: String,
    },
    /// A write of a file that has more than one hard link.
    #[error(
        "sandbox {mode}: writing {} is not allowed (it has {links} hard links, so it may also be a file outside the writable roots)",
        path.display()
    )]
    HardLinked {
        /// The mode in force.
        mode: SandboxMode,
        /// The path asked for.
        path: PathBuf,
        /// Its hard-link count.
        links: u64,
    },
}

impl SandboxLayout {
    /// Resolves `policy` (not `off`) for a session in `workspace` (canonical) whose rookery
    /// home is `rookery_home`, user home `home_dir` and private temp dir `session_tmpdir`
    /// (existing). Relative `writable_roots` / `deny_read` resolve against the workspace and
    /// `~/…` against the home; a writable root must exist.
    pub fn resolve(
        policy: &SandboxPolicy,
        workspace: &Path,
        rookery_home: &Path,
        home_dir: Option<&Path>,
        session_tmpdir: &Path,
    ) -> Result<SandboxLayout, SandboxError> {
        let must_exist = |p: &Path| {
            std::fs::canonicalize(p).map_err(|source| SandboxError::Path {
                path: p.to_path_buf(),
                source,
            })
        };
        let workspace = must_exist(workspace)?;
        let tmpdir = must_exist(session_tmpdir)?;
        let absolute = |p: &Path| -> PathBuf {
            match (p.strip_prefix("~"), home_dir) {
                (Ok(rest), Some(home)) => home.join(rest),
                _ if p.is_absolute() => p.to_path_buf(),
                _ => workspace.join(p),
            }
        };
        let mut writable = vec![tmpdir.clone()];
        if policy.mode == SandboxMode::WorkspaceWrite {
            writable.push(workspace.clone());
            for root in &policy.writable_roots {
                writable.push(must_exist(&absolute(root))?);
            }
        }
        let mut deny: Vec<PathBuf> = vec![rookery_home.to_path_buf()];
        if let Some(home) = home_dir {
            deny.extend(BUILTIN_DENY_READ_IN_HOME.iter().map(|d| home.join(d)));
        }
        deny.extend(policy.deny_read.iter().map(|d| absolute(d)));
        let mut deny_read: Vec<PathBuf> = Vec::new();
        for d in deny {
            let real = real_path(&d);
            if !deny_read.contains(&real) {
                deny_read.push(real);
            }
        }
        Ok(SandboxLayout {
            mode: policy.mode,
            network: policy.network,
            workspace,
            tmpdir,
            writable,
            deny_read,
        })
    }

    /// `mode, network off|on`, as the notes and errors name the sandbox.
    pub fn describe(&self) -> String {
        format!("{}, network {}", self.mode, self.network.as_str())
    }

    /// Whether a file tool may read `path` (absolute, or relative to the workspace): refused
    /// when its real location is under a `deny_read` path.
    pub fn may_read(&self, path: &Path) -> Result<(), PathDenied> {
        let real = real_path(&self.workspace.join(path));
        match self.denied_root(&real) {
            Some(denied) => Err(PathDenied::Read {
                mode: self.mode,
                path: real,
                denied: denied.to_path_buf(),
            }),
            None => Ok(()),
        }
    }

    /// Whether a file tool may write `path` (absolute, or relative to the workspace): its real
    /// location must be inside a writable root and not under a `deny_read` path.
    pub fn may_write(&self, path: &Path) -> Result<(), PathDenied> {
        let real = real_path(&self.workspace.join(path));
        if let Some(denied) = self.denied_root(&real) {
            return Err(PathDenied::Read {
                mode: self.mode,
                path: real,
                denied: denied.to_path_buf(),
            });
        }
        if self.writable.iter().any(|root| real.starts_with(root)) {
            return Ok(());
        }
        Err(PathDenied::Write {
            mode: self.mode,
            roots: self
                .writable
                .iter()
                .map(|r| r.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
            path: real,
        })
    }

    /// [`may_write`](Self::may_write), and refused when the file there has more than one hard
    /// link (another name of it may be outside the writable roots).
    pub fn may_overwrite(&self, path: &Path) -> Result<(), PathDenied> {
        self.may_write(path)?;
        use std::os::unix::fs::MetadataExt;
        let full = self.workspace.join(path);
        match std::fs::metadata(&full) {
            Ok(meta) if meta.is_file() && meta.nlink() > 1 => Err(PathDenied::HardLinked {
                mode: self.mode,
                path: real_path(&full),
                links: meta.nlink(),
            }),
            _ => Ok(()),
        }
    }

    fn denied_root(&self, real: &Path) -> Option<&Path> {
        self.deny_read
            .iter()
            .find(|d| real.starts_with(d))
            .map(PathBuf::as_path)
    }
}

/// Symlinks followed before a path is taken as it stands (the kernel's own limit).
const MAX_SYMLINK_HOPS: usize = 40;

/// The real location of `path` (absolute), as an open or a create would reach it: each
/// component looked at in turn, every symlink followed (a dangling one too: a create goes
/// where it points), `..` applied to what was reached so far, `.` dropped.
pub fn real_path(path: &Path) -> PathBuf {
    let mut pending: Vec<PathBuf> = path
        .components()
        .rev()
        .map(|c| PathBuf::from(c.as_os_str()))
        .collect();
    let mut out = PathBuf::from("/");
    let mut hops = 0;
    while let Some(part) = pending.pop() {
        match part.components().next() {
            Some(Component::RootDir) | Some(Component::Prefix(_)) => out = PathBuf::from("/"),
            Some(Component::CurDir) | None => {}
            Some(Component::ParentDir) => {
                out.pop();
            }
            Some(Component::Normal(name)) => {
                let next = out.join(name);
                match std::fs::read_link(&next) {
                    Ok(target) if hops < MAX_SYMLINK_HOPS => {
                        hops += 1;
                        pending.extend(
                            target
                                .components()
                                .rev()
                                .map(|c| PathBuf::from(c.as_os_str())),
                        );
                    }
                    _ => out = next,
                }
            }
        }
    }
    out
}

#[cfg(test)]
#[path = "layout_tests.rs"]
mod tests;
