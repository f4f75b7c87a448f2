//! The guard: one tiny watchdog process per rookery process that kills every command process
//! left when rookery dies, SIGKILL included. It is a `bash` (which every command needs anyway)
//! in its own session, without the parent-death signal and without a cookie, blocked reading a
//! pipe whose only writer is rookery (close-on-exec, so no command inherits it). However rookery
//! ends, the kernel closes that end; the guard reads EOF, SIGKILLs every process whose
//! environment carries this rookery's cookie prefix (`ROOKERY_CMD=<token>-`), until none is
//! left, and exits.
//!
//! Started on the first command; it does nothing while rookery lives. It does not kill on a
//! command's end (that is `tree.rs`) and knows nothing of sessions.

use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::OnceLock;

use super::spawn_raw::{self, above_stdio};
use super::tree::{COOKIE_VAR, instance_token};

/// Waits for EOF on stdin, then sweeps `/proc` for processes carrying the cookie prefix `$1`.
/// Pure bash (builtins only): no tool it needs can be missing.
const SCRIPT: &str = r#"read -r _
prefix="$1"
for round in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
  found=
  for f in /proc/[0-9]*/environ; do
    p=${f#/proc/}; p=${p%/environ}
    [ "$p" = "$$" ] && continue
    while IFS= read -r -d '' kv; do
      case $kv in "$prefix"*) kill -9 "$p" 2>/dev/null && found=1; break;; esac
    done 2>/dev/null < "$f"
  done
  [ -z "$found" ] && break
done
"#;

/// The guard's pipe writer, held for the life of the process, and its pid.
struct Guard {
    _writer: OwnedFd,
    pid: libc::pid_t,
}

/// Starts the guard once (later calls do nothing). A guard that cannot start is logged: the
/// in-process kills still work, only SIGKILL of rookery is then not covered.
pub fn ensure() {
    static GUARD: OnceLock<Option<Guard>> = OnceLock::new();
    GUARD.get_or_init(|| match start() {
        Ok(g) => {
            tracing::debug!(pid = g.pid, "command guard started");
            Some(g)
        }
        Err(e) => {
            tracing::warn!(
                "cannot start the command guard ({e}); commands may outlive a killed rookery"
            );
            None
        }
    });
}

fn start() -> std::io::Result<Guard> {
    let bash = ["/bin/bash", "/usr/bin/bash", "/usr/local/bin/bash"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
        .ok_or_else(|| std::io::Error::other("no bash found"))?;
    let c = |s: &str| CString::new(s).map_err(std::io::Error::other);
    let program = c(bash)?;
    let prefix = format!("{COOKIE_VAR}={}-", instance_token());
    // The script travels in the environment, so `ps` shows one short line.
    let argv = [
        c("rookery-guard")?,
        c("-c")?,
        c("eval \"$ROOKERY_GUARD_SCRIPT\"")?,
        c("rookery-guard")?,
        c(&prefix)?,
    ];
    let envp = [
        c("PATH=/usr/bin:/bin")?,
        c(&format!("ROOKERY_GUARD_SCRIPT={SCRIPT}"))?,
    ];
    let cwd = c("/")?;
    let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(std::io::Error::from)?;
    let r = above_stdio(r)?;
    let writer = above_stdio(w)?;
    let null = std::fs::OpenOptions::new().write(true).open("/dev/null")?;
    let null: OwnedFd = null.into();
    let null = above_stdio(null)?;
    let pid = spawn_raw::spawn_with(
        &program,
        &argv,
        &envp,
        &cwd,
        [r.as_raw_fd(), null.as_raw_fd(), null.as_raw_fd()],
        false,
        false,
    )?;
    Ok(Guard {
        _writer: writer,
        pid,
    })
}
