//! One sandboxed session's share of the sandbox, set up once when the session starts: its
//! private temp dir (removed when the last holder drops it), its resolved layout and its
//! prepared confinement.
//!
//! It creates and removes only that temp dir; it never starts a process.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{Confinement, SandboxError, SandboxLayout, SandboxPolicy};

/// The sandbox of one running session (`None` in a session whose mode is `off`).
#[derive(Debug)]
pub struct SessionSandbox {
    confinement: Arc<Confinement>,
    // Dropped after the confinement: the temp dir goes when the session's last holder does.
    _tmpdir: PrivateTmp,
}

impl SessionSandbox {
    /// Sets up `policy` for a session in `workspace`: a private temp dir, the layout, and the
    /// confinement (built once). `Ok(None)` when the policy is `off`; any failure means the
    /// session must not start.
    pub fn start(
        policy: &SandboxPolicy,
        workspace: &Path,
        rookery_home: &Path,
        home_dir: Option<&Path>,
    ) -> Result<Option<Arc<SessionSandbox>>, SandboxError> {
        if policy.is_off() {
            return Ok(None);
        }
        let tmpdir = PrivateTmp::create()?;
        let layout =
            SandboxLayout::resolve(policy, workspace, rookery_home, home_dir, &tmpdir.path)?;
        let confinement = Arc::new(Confinement::prepare(layout)?);
        Ok(Some(Arc::new(SessionSandbox {
            confinement,
            _tmpdir: tmpdir,
        })))
    }

    /// The resolved layout (what the file tools check against).
    pub fn layout(&self) -> &SandboxLayout {
        self.confinement.layout()
    }

    /// The confinement the process layer applies to each of the session's processes.
    pub fn confinement(&self) -> &Arc<Confinement> {
        &self.confinement
    }
}

/// A private (0700) temp dir, removed with everything in it when dropped.
#[derive(Debug)]
struct PrivateTmp {
    path: PathBuf,
}

impl PrivateTmp {
    fn create() -> Result<PrivateTmp, SandboxError> {
        use std::os::unix::fs::DirBuilderExt;
        let base = std::env::temp_dir();
        let mut last = None;
        for _ in 0..16 {
            let path = base.join(format!("rookery-sandbox-{:016x}", rand::random::<u64>()));
            match std::fs::DirBuilder::new().mode(0o700).create(&path) {
                Ok(()) => return Ok(PrivateTmp { path }),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
                Err(source) => {
                    return Err(SandboxError::Setup {
                        what: "creating the session's temp dir",
                        source,
                    });
                }
            }
        }
        Err(SandboxError::Setup {
            what: "creating the session's temp dir",
            source: last.unwrap_or_else(|| std::io::Error::other("no free name")),
        })
    }
}

impl Drop for PrivateTmp {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.path) {
            tracing::warn!(path = %self.path.display(), error = %e, "cannot remove the session's temp dir");
        }
    }
}

/// Whether sessions of `policy`'s mode can start on this machine: the same set-up a session
/// makes, on a throwaway workspace (`serve` asks this once when it starts).
pub fn probe(policy: &SandboxPolicy) -> Result<(), SandboxError> {
    let ws = PrivateTmp::create()?;
    let home = ws.path.join("home");
    std::fs::create_dir(&home).map_err(|source| SandboxError::Setup {
        what: "creating the probe's home",
        source,
    })?;
    let probe = SandboxPolicy {
        writable_roots: Vec::new(),
        deny_read: Vec::new(),
        ..policy.clone()
    };
    SessionSandbox::start(&probe, &ws.path, &home.join(".rookery"), Some(&home)).map(|_| ())
}
