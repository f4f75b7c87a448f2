//! The OS side of one command: spawning `bash -lc <cmd>` as the leader of its own session and
//! process group (setsid, Linux parent-death signal, hardened environment of `docs/tools.md#background-commands`,
//! the `ROOKERY_CMD` cookie of `tree.rs`), with pipes or a pseudo-terminal. The first command
//! starts the guard (`guard.rs`) that covers a killed rookery; the group's kill lives in
//! `group.rs` (re-exported here).
//!
//! It does not read or write the streams (the CommandActor's tasks do) and knows nothing of
//! registries or tools.

use std::ffi::OsStr;
use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;
#[cfg(not(target_os = "linux"))]
use std::process::Stdio;
use std::sync::Arc;

use nix::sys::signal::Signal;
use tokio::io::unix::AsyncFd;
use tokio::process::{ChildStderr, ChildStdin, ChildStdout};

#[cfg(target_os = "linux")]
pub use super::spawn_raw::ChildProc;
/// The spawned leader (waited for by the command actor).
#[cfg(not(target_os = "linux"))]
pub type ChildProc = tokio::process::Child;

pub use super::group::{KILL_GRACE, KillOnDrop, ProcessGroup, group_alive};
#[cfg(target_os = "linux")]
pub use super::group::{group_members, proc_stat};
pub use super::spawn_error::SpawnError;

/// Keys always set in the child environment (they win over everything else).
pub const HARDENED_ENV: [(&str, &str); 6] = [
    ("GIT_EDITOR", "true"),
    ("GIT_TERMINAL_PROMPT", "0"),
    ("TERM", "dumb"),
    ("NO_COLOR", "1"),
    ("PAGER", "cat"),
    ("GIT_PAGER", "cat"),
];

/// Keys removed from the inherited environment (compared case-insensitively).
pub const STRIPPED_ENV: [&str; 9] = [
    "PORT",
    "HOST",
    "PENGUIN_CLI_ENTRY",
    "PENGUIN_WEB_DIST",
    "FORCE_COLOR",
    "CLICOLOR_FORCE",
    "PENGUIN_DESKTOP_TOKEN",
    "PENGUIN_PORT_FILE",
    "PENGUIN_SEED_ADMIN_PASSWORD",
];

/// What to run.
#[derive(Debug, Clone)]
pub struct SpawnSpec {
    /// The shell command line (run with `bash -lc`).
    pub cmd: String,
    /// The working directory.
    pub cwd: PathBuf,
    /// Run under a pseudo-terminal instead of pipes.
    pub tty: bool,
    /// Extra variables (applied before the hardened keys, which still win).
    pub env: Vec<(String, String)>,
    /// Which inherited variables the command may see (secrets are stripped).
    pub env_policy: std::sync::Arc<super::env_policy::EnvPolicy>,
    /// The session's kernel confinement, applied between fork and exec (`None`: unsandboxed).
    pub sandbox: Option<Arc<crate::sandbox::Confinement>>,
}

/// How a command's foreground process ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExitInfo {
    /// Exited by itself with this code.
    Code(i32),
    /// Killed by this signal.
    Signal(i32),
    /// Could not be started; the text says why.
    SpawnError(String),
    /// The command's actor failed or vanished; the text says why.
    Failed(String),
}

/// `SIGTERM` for 15; `signal N` for numbers this platform does not name.
pub fn signal_name(sig: i32) -> String {
    match Signal::try_from(sig) {
        Ok(s) => s.as_str().to_string(),
        Err(_) => format!("signal {sig}"),
    }
}

impl ExitInfo {
    /// `exit code N` | `terminated by signal S` | `spawn error: msg` | `failed: msg`.
    pub fn detail(&self) -> String {
        match self {
            ExitInfo::Code(n) => format!("exit code {n}"),
            ExitInfo::Signal(s) => format!("terminated by signal {}", signal_name(*s)),
            ExitInfo::SpawnError(m) => format!("spawn error: {m}"),
            ExitInfo::Failed(m) => format!("failed: {m}"),
        }
    }

    /// True for everything but exit code 0.
    pub fn is_failure(&self) -> bool {
        !matches!(self, ExitInfo::Code(0))
    }

    /// The tool note of `docs/tools.md#exec_command` (`None` for exit code 0).
    pub fn note(&self) -> Option<String> {
        match self {
            ExitInfo::Code(0) => None,
            ExitInfo::Code(n) => Some(format!("[exit code: {n}]")),
            ExitInfo::Signal(s) => Some(format!("[terminated by signal {}]", signal_name(*s))),
            ExitInfo::SpawnError(m) => Some(format!("[spawn error: {m}]")),
            ExitInfo::Failed(m) => Some(format!("[command failed: {m}]")),
        }
    }

    /// The exit of a waited-for process (`Failed` when it reports neither a code nor a signal).
    pub fn from_status(status: std::process::ExitStatus) -> Self {
        use std::os::unix::process::ExitStatusExt;
        match (status.code(), status.signal()) {
            (Some(c), _) => ExitInfo::Code(c),
            (None, Some(s)) => ExitInfo::Signal(s),
            (None, None) => ExitInfo::Failed("unknown exit status".to_string()),
        }
    }
}

/// The streams of a spawned command.
pub enum ProcessIo {
    /// Pipes for stdin, stdout and stderr.
    Pipes {
        /// Where input goes.
        stdin: ChildStdin,
        /// The standard output.
        stdout: ChildStdout,
        /// The standard error.
        stderr: ChildStderr,
    },
    /// The master side of the pseudo-terminal (non-blocking), for reading and writing.
    Pty {
        /// The master descriptor, registered with tokio's reactor.
        master: Arc<AsyncFd<OwnedFd>>,
    },
}

/// A freshly spawned command; dropping it kills its group.
pub struct SpawnedProcess {
    /// The foreground process, to wait for.
    pub child: ChildProc,
    /// Its streams.
    pub io: ProcessIo,
    /// Kills the command's process group when dropped.
    pub group: KillOnDrop,
}

fn stripped(key: &OsStr) -> bool {
    key.to_str()
        .is_some_and(|k| STRIPPED_ENV.iter().any(|s| s.eq_ignore_ascii_case(k)))
}

fn set_cloexec(fd: &OwnedFd) -> nix::Result<()> {
    use nix::fcntl::{FcntlArg, FdFlag, fcntl};
    fcntl(fd.as_fd(), FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC)).map(|_| ())
}

fn set_nonblocking(fd: &OwnedFd) -> nix::Result<()> {
    use nix::fcntl::{FcntlArg, OFlag, fcntl};
    let flags = OFlag::from_bits_truncate(fcntl(fd.as_fd(), FcntlArg::F_GETFL)?);
    fcntl(fd.as_fd(), FcntlArg::F_SETFL(flags | OFlag::O_NONBLOCK)).map(|_| ())
}

/// The child's environment: ours without the stripped keys, then `extra`, then the hardened
/// keys (later entries win).
fn child_env(
    extra: &[(String, String)],
    policy: &super::env_policy::EnvPolicy,
) -> std::collections::BTreeMap<std::ffi::OsString, std::ffi::OsString> {
    let mut env: std::collections::BTreeMap<_, _> = std::env::vars_os()
        .filter(|(k, v)| !stripped(k) && policy.allows(k, v))
        .collect();
    for (k, v) in extra {
        env.insert(k.into(), v.into());
    }
    for (k, v) in HARDENED_ENV {
        env.insert(k.into(), v.into());
    }
    env
}

/// `bash` on the child's `PATH` (as `execvp` would find it).
#[cfg(target_os = "linux")]
fn find_bash(path: Option<&std::ffi::OsStr>) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = path.unwrap_or(OsStr::new("/usr/local/bin:/usr/bin:/bin"));
    std::env::split_paths(path)
        .map(|dir| dir.join("bash"))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// Spawns `bash -lc <cmd>` with `clone(CLONE_VM | CLONE_VFORK)` (no copy of our address space;
/// see `spawn_raw.rs`). Must run inside a tokio runtime, on a thread that outlives the child (a
/// runtime worker): the parent-death signal fires when the spawning *thread* exits. Errors are
/// the `<msg>` of `[spawn error: <msg>]` (see `spawn_error.rs`).
#[cfg(target_os = "linux")]
pub async fn spawn_process(spec: &SpawnSpec) -> Result<SpawnedProcess, SpawnError> {
    use super::spawn_raw::above_stdio;
    use std::ffi::CString;
    use std::os::fd::AsRawFd;
    use std::os::unix::ffi::OsStrExt;

    if !spec.cwd.is_dir() {
        return Err(SpawnError::NoWorkdir(spec.cwd.clone()));
    }
    let cstr = |b: &[u8]| CString::new(b).map_err(SpawnError::NulByte);
    let mut env = child_env(&spec.env, &spec.env_policy);
    if let Some(conf) = &spec.sandbox {
        // The session's private temp dir, the one place `read-only` may write.
        env.insert("TMPDIR".into(), conf.layout().tmpdir.clone().into());
    }
    let cookie = super::tree::new_cookie();
    env.insert(super::tree::COOKIE_VAR.into(), cookie.clone().into());
    super::guard::ensure();
    let bash = find_bash(env.get(OsStr::new("PATH")).map(|p| p.as_os_str()))
        .ok_or_else(|| SpawnError::Bash(std::io::Error::from_raw_os_error(libc::ENOENT)))?;
    let program = cstr(bash.as_os_str().as_bytes())?;
    let argv = [cstr(b"bash")?, cstr(b"-lc")?, cstr(spec.cmd.as_bytes())?];
    let mut envp = Vec::with_capacity(env.len());
    for (k, v) in &env {
        let mut kv = Vec::with_capacity(k.len() + v.len() + 1);
        kv.extend_from_slice(k.as_bytes());
        kv.push(b'=');
        kv.extend_from_slice(v.as_bytes());
        envp.push(cstr(&kv)?);
    }
    let cwd = cstr(spec.cwd.as_os_str().as_bytes())?;
    let pipe = || -> Result<(OwnedFd, OwnedFd), SpawnError> {
        let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(SpawnError::Pipe)?;
        let r = above_stdio(r).map_err(SpawnError::Bash)?;
        let w = above_stdio(w).map_err(SpawnError::Bash)?;
        Ok((r, w))
    };

    if spec.tty {
        let pty = nix::pty::openpty(
            &nix::pty::Winsize {
                ws_row: 24,
                ws_col: 80,
                ws_xpixel: 0,
                ws_ypixel: 0,
            },
            None,
        )
        .map_err(SpawnError::OpenPty)?;
        set_cloexec(&pty.master).map_err(SpawnError::Pty)?;
        set_cloexec(&pty.slave).map_err(SpawnError::Pty)?;
        let slave = above_stdio(pty.slave).map_err(SpawnError::PtyIo)?;
        let fd = slave.as_raw_fd();
        let strings = (program, argv.to_vec(), envp, cwd);
        let (pid, child) = start(strings, [fd, fd, fd], true, spec).await?;
        // Only the child keeps the slave open, so the master reads EIO (end) once it is closed.
        drop(slave);
        let group = KillOnDrop(ProcessGroup::new(pid, cookie));
        let master = pty.master;
        set_nonblocking(&master).map_err(SpawnError::Pty)?;
        // SAFETY: an `OwnedFd` always reports the descriptor it owns, and that descriptor
        // stays open until the `AsyncFd` (its owner) is dropped.
        let afd = unsafe { AsyncFd::register(master) }.map_err(|e| SpawnError::PtyIo(e.into()))?;
        tracing::debug!(pid, tty = true, "command spawned");
        return Ok(SpawnedProcess {
            child,
            io: ProcessIo::Pty {
                master: Arc::new(afd),
            },
            group,
        });
    }

    let (in_r, in_w) = pipe()?;
    let (out_r, out_w) = pipe()?;
    let (err_r, err_w) = pipe()?;
    let stdio = [in_r.as_raw_fd(), out_w.as_raw_fd(), err_w.as_raw_fd()];
    let strings = (program, argv.to_vec(), envp, cwd);
    let (pid, child) = start(strings, stdio, false, spec).await?;
    drop((in_r, out_w, err_w));
    let group = KillOnDrop(ProcessGroup::new(pid, cookie));
    let wrap = SpawnError::Bash;
    let io = ProcessIo::Pipes {
        stdin: ChildStdin::from_std(std::process::ChildStdin::from(in_w)).map_err(wrap)?,
        stdout: ChildStdout::from_std(std::process::ChildStdout::from(out_r)).map_err(wrap)?,
        stderr: ChildStderr::from_std(std::process::ChildStderr::from(err_r)).map_err(wrap)?,
    };
    tracing::debug!(pid, tty = false, "command spawned");
    Ok(SpawnedProcess { child, io, group })
}

/// The program, argv, envp and working directory of a start.
#[cfg(target_os = "linux")]
type Strings = (
    std::ffi::CString,
    Vec<std::ffi::CString>,
    Vec<std::ffi::CString>,
    std::ffi::CString,
);

/// Starts the prepared bash: unconfined (`spawn_raw.rs`) or, with a sandbox, through the
/// session's keeper (`spawn_confined.rs`). Returns the pid of the group's leader.
#[cfg(target_os = "linux")]
async fn start(
    strings: Strings,
    stdio: [std::os::fd::RawFd; 3],
    tty: bool,
    spec: &SpawnSpec,
) -> Result<(i32, ChildProc), SpawnError> {
    let Some(conf) = &spec.sandbox else {
        let (program, argv, envp, cwd) = &strings;
        let pid = super::spawn_raw::spawn(program, argv, envp, cwd, stdio, tty)
            .map_err(SpawnError::Bash)?;
        return Ok((pid, ChildProc::new(pid)));
    };
    match super::spawn_confined::spawn(strings, stdio, tty, conf.clone()).await {
        Ok((pid, report)) => Ok((pid, ChildProc::confined(pid, report))),
        Err(e) if e.sandbox => {
            tracing::warn!(step = e.step, error = %e.source, "sandboxed spawn refused");
            Err(SpawnError::Sandbox {
                step: e.step,
                source: e.source,
            })
        }
        Err(e) => Err(SpawnError::Bash(e.source)),
    }
}

/// Spawns `bash -lc <cmd>`. Must run inside a tokio runtime, on a thread that outlives the
/// child (a runtime worker). Errors are the `<msg>` of `[spawn error: <msg>]` (see `spawn_error.rs`).
#[cfg(not(target_os = "linux"))]
pub async fn spawn_process(spec: &SpawnSpec) -> Result<SpawnedProcess, SpawnError> {
    if !spec.cwd.is_dir() {
        return Err(SpawnError::NoWorkdir(spec.cwd.clone()));
    }
    if spec.sandbox.is_some() {
        // Fail closed: the kernel confinement exists on Linux only.
        return Err(SpawnError::Sandbox {
            step: "confine the command",
            source: std::io::Error::from(std::io::ErrorKind::Unsupported),
        });
    }
    let mut cmd = tokio::process::Command::new("bash");
    cmd.arg("-lc").arg(&spec.cmd).current_dir(&spec.cwd);
    cmd.env_clear();
    cmd.envs(child_env(&spec.env, &spec.env_policy));
    cmd.kill_on_drop(false);

    let master = if spec.tty {
        let pty = nix::pty::openpty(
            &nix::pty::Winsize {
                ws_row: 24,
                ws_col: 80,
                ws_xpixel: 0,
                ws_ypixel: 0,
            },
            None,
        )
        .map_err(SpawnError::OpenPty)?;
        set_cloexec(&pty.master).map_err(SpawnError::Pty)?;
        set_cloexec(&pty.slave).map_err(SpawnError::Pty)?;
        let dup = |fd: &OwnedFd| fd.try_clone().map_err(SpawnError::PtyIo);
        cmd.stdin(Stdio::from(dup(&pty.slave)?))
            .stdout(Stdio::from(dup(&pty.slave)?))
            .stderr(Stdio::from(dup(&pty.slave)?));
        // `pty.slave` is dropped at the end of this block: only the child keeps the slave open,
        // so the master reads EIO (end) once the child side is closed.
        Some(pty.master)
    } else {
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        None
    };

    let parent = std::process::id() as libc::pid_t;
    let tty = spec.tty;
    // SAFETY: the closure runs between fork and exec and only makes async-signal-safe raw
    // system calls (setsid, ioctl, prctl, getppid); the errors it builds do not allocate.
    unsafe {
        cmd.pre_exec(move || {
            // Signals the parent ignores must still reach the command (Ctrl-C, kill).
            for sig in [libc::SIGINT, libc::SIGQUIT, libc::SIGHUP, libc::SIGTERM] {
                libc::signal(sig, libc::SIG_DFL);
            }
            if libc::setsid() == -1 {
                return Err(std::io::Error::last_os_error());
            }
            if tty && libc::ioctl(0, libc::TIOCSCTTY as _, 0) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            #[cfg(any(target_os = "linux", target_os = "android"))]
            {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                // The parent may have died before prctl took effect.
                if libc::getppid() != parent {
                    return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
                }
            }
            let _ = parent;
            Ok(())
        });
    }

    let spawned = cmd.spawn();
    // Drops the child's copies of the pty slave held by the Command.
    drop(cmd);
    let mut child = spawned.map_err(SpawnError::Bash)?;
    let Some(pid) = child.id().and_then(|p| i32::try_from(p).ok()) else {
        return Err(SpawnError::Untracked);
    };
    let group = KillOnDrop(ProcessGroup::new(pid, String::new()));
    let io = match master {
        Some(master) => {
            set_nonblocking(&master).map_err(SpawnError::Pty)?;
            // SAFETY: an `OwnedFd` always reports the descriptor it owns, and that descriptor
            // stays open until the `AsyncFd` (its owner) is dropped.
            let afd =
                unsafe { AsyncFd::register(master) }.map_err(|e| SpawnError::PtyIo(e.into()))?;
            ProcessIo::Pty {
                master: Arc::new(afd),
            }
        }
        None => match (child.stdin.take(), child.stdout.take(), child.stderr.take()) {
            (Some(stdin), Some(stdout), Some(stderr)) => ProcessIo::Pipes {
                stdin,
                stdout,
                stderr,
            },
            _ => return Err(SpawnError::PipesMissing),
        },
    };
    tracing::debug!(pid, tty = spec.tty, "command spawned");
    Ok(SpawnedProcess { child, io, group })
}

#[cfg(test)]
mod tests {
    use super::super::group::wait_until;
    use super::*;
    use std::time::Duration;

    #[test]
    fn exit_texts() {
        assert_eq!(ExitInfo::Code(0).note(), None);
        assert_eq!(ExitInfo::Code(3).note().as_deref(), Some("[exit code: 3]"));
        assert_eq!(
            ExitInfo::Signal(15).note().as_deref(),
            Some("[terminated by signal SIGTERM]")
        );
        assert_eq!(ExitInfo::Signal(2).detail(), "terminated by signal SIGINT");
        assert_eq!(ExitInfo::Code(0).detail(), "exit code 0");
        assert!(!ExitInfo::Code(0).is_failure());
        assert!(ExitInfo::Code(1).is_failure());
    }

    #[test]
    fn stripped_keys_ignore_case() {
        assert!(stripped(OsStr::new("force_color")));
        assert!(stripped(OsStr::new("PORT")));
        assert!(!stripped(OsStr::new("PATH")));
    }

    #[tokio::test]
    async fn missing_workdir_is_a_spawn_error() {
        let spec = SpawnSpec {
            cmd: "true".into(),
            cwd: PathBuf::from("/nonexistent/rookery-dir"),
            tty: false,
            env: Vec::new(),
            env_policy: Default::default(),
            sandbox: None,
        };
        let err = spawn_process(&spec)
            .await
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert_eq!(
            err,
            "working directory /nonexistent/rookery-dir does not exist or is not a directory"
        );
    }

    #[tokio::test]
    async fn kill_terminates_the_whole_group() {
        let dir = tempfile::tempdir().unwrap();
        let spec = SpawnSpec {
            cmd: "sleep 30 & sleep 30 & wait".into(),
            cwd: dir.path().to_path_buf(),
            tty: false,
            env: vec![("HOME".into(), dir.path().display().to_string())],
            env_policy: Default::default(),
            sandbox: None,
        };
        let SpawnedProcess {
            mut child, group, ..
        } = spawn_process(&spec).await.unwrap();
        let pgid = group.0.pgid();
        // bash and both sleeps (the `wait` keeps bash from exec-ing the last command).
        let all_up = || group_members(pgid).len() == 3;
        assert!(wait_until(Duration::from_secs(5), all_up));
        let mut done = group.0.done();
        let inner = group.0.clone();
        tokio::spawn(async move {
            let _ = child.wait().await;
            inner.mark_reaped();
        });
        drop(group);
        tokio::time::timeout(Duration::from_secs(10), done.wait_for(|d| *d))
            .await
            .unwrap()
            .unwrap();
        assert!(group_members(pgid).is_empty());
    }
}
