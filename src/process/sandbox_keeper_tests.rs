//! The keeper of a sandboxed session, through the real spawn path: commands share the keeper's
//! namespaces (never the host's), the keeper ends with the session's confinement and takes the
//! namespace's processes with it, and a killed keeper fails the next command closed.

use std::os::fd::{FromRawFd, OwnedFd};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::io::unix::AsyncFd;

use super::keeper_pid;
use crate::process::{ProcessIo, SpawnError, SpawnSpec, SpawnedProcess, spawn_process};
use crate::sandbox::{Confinement, NetworkAccess, SandboxLayout, SandboxMode};

const LIMIT: Duration = Duration::from_secs(60);

/// A `workspace-write` confinement over `dir` (fails, naming what is missing, on a machine
/// without Landlock, seccomp or user namespaces: these tests need them).
fn confinement(dir: &Path) -> Arc<Confinement> {
    let ws = dir.join("ws");
    let tmp = dir.join("tmp");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(&tmp).unwrap();
    let layout = SandboxLayout {
        mode: SandboxMode::WorkspaceWrite,
        network: NetworkAccess::Off,
        workspace: ws.canonicalize().unwrap(),
        tmpdir: tmp.canonicalize().unwrap(),
        writable: vec![ws.canonicalize().unwrap(), tmp.canonicalize().unwrap()],
        deny_read: vec![dir.join("secret")],
    };
    match Confinement::prepare(layout) {
        Ok(c) => Arc::new(c),
        Err(e) => panic!("these tests need Landlock, seccomp and user namespaces: {e}"),
    }
}

fn spec(dir: &Path, conf: &Arc<Confinement>, cmd: &str) -> SpawnSpec {
    SpawnSpec {
        cmd: cmd.to_string(),
        cwd: dir.join("ws"),
        tty: false,
        env: vec![("HOME".into(), dir.join("ws").display().to_string())],
        env_policy: Default::default(),
        sandbox: Some(conf.clone()),
    }
}

/// Runs `cmd` sandboxed; its stdout and exit code.
async fn run(dir: &Path, conf: &Arc<Confinement>, cmd: &str) -> (String, Option<i32>) {
    let SpawnedProcess {
        mut child,
        io,
        group,
    } = spawn_process(&spec(dir, conf, cmd)).await.unwrap();
    let ProcessIo::Pipes {
        stdin, mut stdout, ..
    } = io
    else {
        panic!("pipes expected");
    };
    drop(stdin);
    let mut out = String::new();
    stdout.read_to_string(&mut out).await.unwrap();
    let status = child.wait().await.unwrap();
    group.0.mark_reaped();
    (out, status.code())
}

/// Waits (on its pidfd, no polling) until process `pid` has exited.
async fn exited(pid: libc::pid_t) {
    // SAFETY: pidfd_open has no memory arguments; a valid result is a descriptor we own.
    let raw = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if raw < 0 {
        return; // already reaped: gone
    }
    // SAFETY: a fresh pidfd nobody else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(raw as i32) };
    // SAFETY: the `OwnedFd` reports the descriptor it owns, open until `afd` drops.
    let afd = unsafe { AsyncFd::register(fd) }.unwrap();
    tokio::time::timeout(LIMIT, afd.readable())
        .await
        .expect("the process did not exit")
        .unwrap()
        .retain_ready();
}

fn ns_links(pid: &str) -> Vec<String> {
    ["user", "mnt", "pid"]
        .iter()
        .map(|ns| {
            std::fs::read_link(format!("/proc/{pid}/ns/{ns}"))
                .unwrap()
                .display()
                .to_string()
        })
        .collect()
}

#[tokio::test]
async fn commands_share_the_keepers_namespaces_never_the_hosts() {
    let dir = tempfile::tempdir().unwrap();
    let conf = confinement(dir.path());
    let cmd = "readlink /proc/self/ns/user /proc/self/ns/mnt /proc/self/ns/pid";
    let (first, code) = run(dir.path(), &conf, cmd).await;
    assert_eq!(code, Some(0), "{first}");
    let (second, _) = run(dir.path(), &conf, cmd).await;
    let first: Vec<String> = first.lines().map(str::to_string).collect();
    let second: Vec<String> = second.lines().map(str::to_string).collect();
    assert_eq!(first.len(), 3, "{first:?}");
    assert_eq!(first, second, "one keeper per session, built once");
    let keeper = keeper_pid(&conf).await.expect("a keeper runs");
    assert_eq!(first, ns_links(&keeper.to_string()));
    let host = ns_links("self");
    for (ours, theirs) in first.iter().zip(&host) {
        assert_ne!(ours, theirs, "a command shares a namespace of the host");
    }
    // Nothing inside can leave them: creating or entering namespaces is refused.
    let (out, code) = run(
        dir.path(),
        &conf,
        "unshare -U true 2>/dev/null && echo unshared; nsenter -t 1 -U true 2>/dev/null && echo entered; echo done",
    )
    .await;
    assert_eq!((out.as_str(), code), ("done\n", Some(0)));
}

#[tokio::test]
async fn the_keeper_ends_with_the_session_and_takes_its_processes() {
    let dir = tempfile::tempdir().unwrap();
    let conf = confinement(dir.path());
    let spec = spec(dir.path(), &conf, "sleep 600");
    let SpawnedProcess {
        mut child, group, ..
    } = spawn_process(&spec).await.unwrap();
    let keeper = keeper_pid(&conf).await.expect("a keeper runs");
    let sleeper = child.id().unwrap() as libc::pid_t;
    assert_eq!(
        crate::process::proc_stat(sleeper).map(|s| s.1),
        Some(keeper),
        "the command is the keeper's child"
    );
    // The session ends: its confinement (and with it the keeper) is dropped.
    drop((spec, conf));
    exited(keeper).await;
    let status = tokio::time::timeout(LIMIT, child.wait())
        .await
        .unwrap()
        .unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(libc::SIGKILL), "{status:?}");
    exited(sleeper).await;
    group.0.mark_reaped();
}

#[tokio::test]
async fn a_killed_keeper_fails_the_next_command_closed() {
    let dir = tempfile::tempdir().unwrap();
    let conf = confinement(dir.path());
    assert_eq!(run(dir.path(), &conf, "true").await.1, Some(0));
    let keeper = keeper_pid(&conf).await.expect("a keeper runs");
    // SAFETY: kill of our own child (the keeper, not reaped while its handle lives).
    assert_eq!(unsafe { libc::kill(keeper, libc::SIGKILL) }, 0);
    exited(keeper).await;
    let marker = dir.path().join("ws").join("ran");
    let cmd = format!("touch {}", marker.display());
    let err = match spawn_process(&spec(dir.path(), &conf, &cmd)).await {
        Err(e) => e,
        Ok(_) => panic!("a command ran without its keeper"),
    };
    assert!(matches!(err, SpawnError::Sandbox { .. }), "{err}");
    let text = err.to_string();
    assert!(text.contains("sandbox keeper"), "{text}");
    assert!(text.contains("did not run"), "{text}");
    assert!(!marker.exists(), "the command ran");
    // The next command gets a fresh keeper, and runs confined.
    let (out, code) = run(dir.path(), &conf, "touch ran").await;
    assert_eq!(code, Some(0), "{out}");
    assert!(marker.exists());
    let fresh = keeper_pid(&conf).await.expect("a fresh keeper");
    assert_ne!(fresh, keeper);
}
