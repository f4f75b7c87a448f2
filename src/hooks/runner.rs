//! Runs hook commands: `bash -c COMMAND` in the workspace, in its own process group, the
//! input JSON on stdin, stdout and stderr read (capped), killed with its whole process group
//! when it passes its timeout or when the caller stops waiting.
//!
//! It reports what happened (`RawRun`); reading the result is `protocol`'s job.

use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

use super::config::HookCommand;
use super::protocol::{Exit, RawRun};

/// How many characters of a hook's stdout and of its stderr are kept.
pub(crate) const OUTPUT_CAP: usize = 10_000;

/// How long the pipes are still read after the hook itself exited (a background child of the
/// hook may hold them open; the group is killed after that).
const DRAIN_GRACE: Duration = Duration::from_secs(2);

/// Decides whether a hook inherits one environment variable.
pub(crate) type EnvFilter = Arc<dyn Fn(&std::ffi::OsStr, &std::ffi::OsStr) -> bool + Send + Sync>;

/// Where and with what environment hooks run.
#[derive(Clone)]
pub struct HookEnv {
    /// The directory hooks run in (the workspace).
    pub cwd: std::path::PathBuf,
    /// Decides which inherited variables a hook sees (`None`: all).
    pub allow_env: Option<EnvFilter>,
    /// Set on top (e.g. `HOME`).
    pub extra_env: Vec<(String, String)>,
}

/// Kills the process group when dropped unless disarmed.
struct GroupGuard(Option<i32>);

impl GroupGuard {
    fn kill(&mut self) {
        if let Some(pgid) = self.0.take() {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pgid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Reads at most `OUTPUT_CAP` characters, then keeps draining so the writer never blocks.
async fn read_capped<R: AsyncRead + Unpin>(mut r: R) -> String {
    let mut kept: Vec<u8> = Vec::new();
    let mut buf = [0u8; 8192];
    let byte_cap = OUTPUT_CAP * 4;
    loop {
        match r.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if kept.len() < byte_cap {
                    let take = n.min(byte_cap - kept.len());
                    kept.extend_from_slice(&buf[..take]);
                }
            }
        }
    }
    String::from_utf8_lossy(&kept)
        .chars()
        .take(OUTPUT_CAP)
        .collect()
}

/// Runs one hook with `input` on stdin.
pub(crate) async fn run(hook: &HookCommand, input: &[u8], env: &HookEnv) -> RawRun {
    let mut cmd = tokio::process::Command::new("bash");
    cmd.arg("-c")
        .arg(&hook.command)
        .current_dir(&env.cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    if let Some(allow) = &env.allow_env {
        cmd.env_clear();
        cmd.envs(std::env::vars_os().filter(|(k, v)| allow(k, v)));
    }
    cmd.envs(env.extra_env.iter().map(|(k, v)| (k, v)));
    cmd.env("ROOKERY_PROJECT_DIR", &env.cwd);
    cmd.env("CLAUDE_PROJECT_DIR", &env.cwd);
    let raw = |exit: Exit, stdout: String, stderr: String| RawRun {
        command: hook.command.clone(),
        exit,
        stdout,
        stderr,
    };
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return raw(Exit::Spawn(e.to_string()), String::new(), String::new()),
    };
    let mut group = GroupGuard(child.id().and_then(|p| i32::try_from(p).ok()));
    let stdin = child.stdin.take();
    let input = input.to_vec();
    let writer = tokio::spawn(async move {
        if let Some(mut stdin) = stdin {
            // A hook that does not read its input is fine.
            let _ = stdin.write_all(&input).await;
            let _ = stdin.shutdown().await;
        }
    });
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let out_task = tokio::spawn(async move {
        match stdout {
            Some(s) => read_capped(s).await,
            None => String::new(),
        }
    });
    let err_task = tokio::spawn(async move {
        match stderr {
            Some(s) => read_capped(s).await,
            None => String::new(),
        }
    });
    let exit = match tokio::time::timeout(hook.timeout, child.wait()).await {
        Ok(Ok(status)) => Exit::Code(status.code()),
        Ok(Err(e)) => Exit::Spawn(e.to_string()),
        Err(_) => {
            tracing::warn!(
                "hook `{}` passed its timeout of {:?}; killed",
                hook.command,
                hook.timeout
            );
            group.kill();
            let _ = child.wait().await;
            Exit::TimedOut
        }
    };
    writer.abort();
    let collect = async {
        let out = out_task.await.unwrap_or_default();
        let err = err_task.await.unwrap_or_default();
        (out, err)
    };
    let (stdout, stderr) = match tokio::time::timeout(DRAIN_GRACE, collect).await {
        Ok(pair) => pair,
        Err(_) => {
            group.kill();
            (String::new(), String::new())
        }
    };
    group.kill();
    raw(exit, stdout, stderr)
}

/// Runs `hooks` in parallel, each with its input (`inputs[i]` for `hooks[i]`); the runs come
/// back in config order.
pub(crate) async fn run_all(
    hooks: &[HookCommand],
    inputs: &[Vec<u8>],
    env: &HookEnv,
) -> Vec<RawRun> {
    futures::future::join_all(
        hooks
            .iter()
            .zip(inputs)
            .map(|(h, input)| run(h, input, env)),
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env() -> HookEnv {
        HookEnv {
            cwd: std::env::temp_dir(),
            allow_env: None,
            extra_env: vec![],
        }
    }

    fn hook(cmd: &str, secs: f64) -> HookCommand {
        HookCommand {
            command: cmd.into(),
            timeout: Duration::from_secs_f64(secs),
            view: super::super::config::HookView::Rookery,
        }
    }

    #[tokio::test]
    async fn stdin_exit_code_and_outputs() {
        let r = run(
            &hook("read x; echo \"got $x\"; echo err >&2; exit 3", 30.0),
            b"hello\n",
            &env(),
        )
        .await;
        assert_eq!(r.exit, Exit::Code(Some(3)));
        assert_eq!(r.stdout, "got hello\n");
        assert_eq!(r.stderr, "err\n");
    }

    #[tokio::test]
    async fn outputs_are_capped() {
        let r = run(
            &hook("head -c 50000 /dev/zero | tr '\\0' x", 30.0),
            b"",
            &env(),
        )
        .await;
        assert_eq!(r.exit, Exit::Code(Some(0)));
        assert_eq!(r.stdout.chars().count(), OUTPUT_CAP);
    }

    #[tokio::test]
    async fn a_timeout_kills_the_process_tree() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("pid");
        let cmd = format!("sleep 300 & echo $! > {}; wait", pidfile.display());
        let r = run(&hook(&cmd, 3.0), b"", &env()).await;
        assert_eq!(r.exit, Exit::TimedOut);
        let pid: i32 = std::fs::read_to_string(&pidfile)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        // The grandchild is gone (kill(pid, 0) fails once it is reaped or a zombie of init).
        loop {
            let alive = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok()
                && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
                    .map(|s| s.contains(") Z "))
                    .unwrap_or(true);
            if !alive {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "grandchild {pid} survived"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}
