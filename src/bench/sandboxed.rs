//! `rookery bench --workload exec --sandbox MODE`: the cost of the kernel confinement on the
//! spawn path, in one run: interleaved rounds of the same N workers × K commands (`bash -lc
//! true`, each spawned through `process::spawn_process` and waited for) sandboxed and not,
//! and the spawn floor (`bash -lc true` through tokio's `Command`). Each figure is wall time
//! and CPU per command: this process, its reaped children, and the session's sandbox keeper
//! with the commands it reaped (they are its children, not ours: `/proc/<keeper>/stat`).
//!
//! It measures spawns directly, not sessions: the session's sandbox setting is wired
//! elsewhere. It renders nothing (`cli/bench_sandbox.rs` does).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::AsyncReadExt;

use super::measure::{self, FloorError};
use crate::process::{ProcessIo, SpawnError, SpawnSpec, spawn_process};
use crate::sandbox::{Confinement, NetworkAccess, SandboxError, SandboxLayout, SandboxMode};

/// Why the sandbox bench could not run.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SandboxBenchError {
    #[error("{0}")]
    Sandbox(#[from] SandboxError),
    #[error("spawn error: {0}")]
    Spawn(#[from] SpawnError),
    #[error("spawn floor: {0}")]
    Floor(#[from] FloorError),
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("`bash -lc true` ended with {0}")]
    Failed(String),
}

/// One phase of a round: wall time and CPU seconds of `commands` commands.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Phase {
    pub(crate) wall: Duration,
    pub(crate) cpu_s: f64,
    pub(crate) commands: usize,
}

impl Phase {
    /// CPU per command in µs.
    pub(crate) fn cpu_per_command_us(&self) -> f64 {
        if self.commands == 0 {
            0.0
        } else {
            self.cpu_s * 1e6 / self.commands as f64
        }
    }
}

/// One round: the floor, the unsandboxed commands, the sandboxed ones.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Round {
    pub(crate) floor: Phase,
    pub(crate) plain: Phase,
    pub(crate) sandboxed: Phase,
}

/// The paths of the run (under a scratch dir the caller owns).
pub(crate) struct Paths {
    pub(crate) workspace: PathBuf,
    pub(crate) tmpdir: PathBuf,
    pub(crate) shell_home: PathBuf,
    pub(crate) rookery_home: PathBuf,
}

/// The confinement of the bench's commands: `mode` over the scratch workspace, the usual
/// deny list (the rookery home and the shell HOME's key directories).
pub(crate) fn confinement(
    paths: &Paths,
    mode: SandboxMode,
    network: NetworkAccess,
) -> Result<Arc<Confinement>, SandboxBenchError> {
    let mut writable = vec![paths.tmpdir.clone()];
    if mode == SandboxMode::WorkspaceWrite {
        writable.push(paths.workspace.clone());
    }
    let deny_read = [".ssh", ".aws", ".gnupg", ".config/gcloud"]
        .iter()
        .map(|d| paths.shell_home.join(d))
        .chain([paths.rookery_home.clone()])
        .collect();
    let layout = SandboxLayout {
        mode,
        network,
        workspace: paths.workspace.clone(),
        tmpdir: paths.tmpdir.clone(),
        writable,
        deny_read,
    };
    Ok(Arc::new(Confinement::prepare(layout)?))
}

/// `rounds` interleaved rounds of `workers` × `per_worker` commands.
pub(crate) async fn run(
    paths: &Paths,
    conf: &Arc<Confinement>,
    workers: usize,
    per_worker: usize,
    rounds: usize,
) -> Result<Vec<Round>, SandboxBenchError> {
    let mut out = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let total = workers * per_worker;
        let floor = timed(conf, total, async {
            measure::spawn_floor(total, workers, &paths.shell_home, &paths.workspace).await?;
            Ok(())
        })
        .await?;
        let plain = timed(conf, total, spawns(paths, None, workers, per_worker)).await?;
        let sandboxed = timed(conf, total, spawns(paths, Some(conf), workers, per_worker)).await?;
        out.push(Round {
            floor,
            plain,
            sandboxed,
        });
    }
    Ok(out)
}

/// CPU seconds of the session's keeper and of the commands it reaped (0 without a keeper).
async fn keeper_cpu(conf: &Arc<Confinement>) -> f64 {
    match crate::process::keeper_pid(conf).await {
        Some(pid) => measure::proc_cpu_with_children(pid).unwrap_or(0.0),
        None => 0.0,
    }
}

async fn timed(
    conf: &Arc<Confinement>,
    commands: usize,
    f: impl std::future::Future<Output = Result<(), SandboxBenchError>>,
) -> Result<Phase, SandboxBenchError> {
    let ours = || measure::self_usage().cpu_s() + measure::children_usage().cpu_s();
    let before = ours() + keeper_cpu(conf).await;
    let start = Instant::now();
    f.await?;
    let wall = start.elapsed();
    let after = ours() + keeper_cpu(conf).await;
    Ok(Phase {
        wall,
        cpu_s: (after - before).max(0.0),
        commands,
    })
}

async fn spawns(
    paths: &Paths,
    conf: Option<&Arc<Confinement>>,
    workers: usize,
    per_worker: usize,
) -> Result<(), SandboxBenchError> {
    let runs = (0..workers).map(|_| async move {
        for _ in 0..per_worker {
            one(paths, conf).await?;
        }
        Ok::<(), SandboxBenchError>(())
    });
    for r in futures::future::join_all(runs).await {
        r?;
    }
    Ok(())
}

/// One `bash -lc true` through the command spawn path, drained and waited for.
async fn one(paths: &Paths, conf: Option<&Arc<Confinement>>) -> Result<(), SandboxBenchError> {
    let spec = SpawnSpec {
        cmd: "true".to_string(),
        cwd: paths.workspace.clone(),
        tty: false,
        env: vec![("HOME".into(), paths.shell_home.display().to_string())],
        env_policy: Default::default(),
        sandbox: conf.cloned(),
    };
    let spawned = spawn_process(&spec).await?;
    let mut child = spawned.child;
    if let ProcessIo::Pipes {
        stdin,
        mut stdout,
        mut stderr,
    } = spawned.io
    {
        drop(stdin);
        let (mut a, mut b) = (Vec::new(), Vec::new());
        let (x, y) = tokio::join!(stdout.read_to_end(&mut a), stderr.read_to_end(&mut b));
        x.and(y).map_err(|source| SandboxBenchError::Io {
            what: "reading a command's output".into(),
            source,
        })?;
    }
    let status = child.wait().await.map_err(|source| SandboxBenchError::Io {
        what: "waiting for a command".into(),
        source,
    })?;
    spawned.group.0.mark_reaped();
    if !status.success() {
        return Err(SandboxBenchError::Failed(format!("{status}")));
    }
    Ok(())
}

/// Creates the run's directories under `scratch`.
pub(crate) fn paths(scratch: &Path) -> Result<Paths, SandboxBenchError> {
    let p = Paths {
        workspace: scratch.join("ws"),
        tmpdir: scratch.join("tmp"),
        shell_home: scratch.join("shell-home"),
        rookery_home: scratch.join("home"),
    };
    for d in [&p.workspace, &p.tmpdir, &p.shell_home, &p.rookery_home] {
        std::fs::create_dir_all(d).map_err(|source| SandboxBenchError::Io {
            what: format!("cannot create {}", d.display()),
            source,
        })?;
    }
    let canon = |d: &Path| {
        d.canonicalize().map_err(|source| SandboxBenchError::Io {
            what: format!("cannot resolve {}", d.display()),
            source,
        })
    };
    Ok(Paths {
        workspace: canon(&p.workspace)?,
        tmpdir: canon(&p.tmpdir)?,
        shell_home: canon(&p.shell_home)?,
        rookery_home: canon(&p.rookery_home)?,
    })
}
