//! How a sandboxed command is started, through the real spawn path
//! (`rookery::process::spawn_process` with a prepared `Confinement`) and real processes: the
//! start is awaited, not blocked on (the runtime's thread runs other work while the namespaces
//! are set up), many starts run at once on one thread, and a start that is cancelled before it
//! was reported leaves nothing of the command running.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rookery::process::{ProcessIo, SpawnSpec, spawn_process};
use rookery::sandbox::{Confinement, NetworkAccess, SandboxLayout, SandboxMode};
use tokio::io::AsyncReadExt;

fn confine(root: &Path) -> (Arc<Confinement>, PathBuf, PathBuf) {
    let (ws, tmp, home) = (root.join("ws"), root.join("tmp"), root.join("home"));
    for d in [&ws, &tmp, &home] {
        std::fs::create_dir_all(d).unwrap();
    }
    let layout = SandboxLayout {
        mode: SandboxMode::WorkspaceWrite,
        network: NetworkAccess::Off,
        workspace: ws.clone(),
        tmpdir: tmp.clone(),
        writable: vec![tmp, ws.clone()],
        deny_read: vec![home.join(".ssh")],
    };
    (Arc::new(Confinement::prepare(layout).unwrap()), ws, home)
}

fn spec(cmd: &str, ws: &Path, home: &Path, conf: &Arc<Confinement>) -> SpawnSpec {
    SpawnSpec {
        cmd: cmd.to_string(),
        cwd: ws.to_path_buf(),
        tty: false,
        env: vec![("HOME".into(), home.display().to_string())],
        env_policy: Default::default(),
        sandbox: Some(conf.clone()),
    }
}

/// Runs a spawned command to its end: its stdout and whether it succeeded.
async fn finish(spawned: rookery::process::SpawnedProcess) -> (String, bool) {
    let mut child = spawned.child;
    let ProcessIo::Pipes { mut stdout, .. } = spawned.io else {
        unreachable!("no tty was asked for")
    };
    let mut out = String::new();
    stdout.read_to_string(&mut out).await.unwrap();
    let status = child.wait().await.unwrap();
    spawned.group.0.mark_reaped();
    (out, status.success())
}

/// Pids of live processes whose command line holds `word` as one argument.
fn processes_with_arg(word: &str) -> Vec<i32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let state = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let zombie = state
            .rfind(')')
            .is_some_and(|i| state[i + 1..].trim_start().starts_with('Z'));
        if !zombie && cmdline.split(|b| *b == 0).any(|a| a == word.as_bytes()) {
            found.push(pid);
        }
    }
    found
}

/// Polls `cond` (a cheap check of real state) until it holds or `limit` passes.
fn wait_until(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    cond()
}

#[tokio::test]
async fn a_sandboxed_start_yields_and_many_run_at_once_on_one_thread() {
    let dir = tempfile::tempdir().unwrap();
    let (conf, ws, home) = confine(&dir.path().canonicalize().unwrap());
    // On this single-threaded runtime a start that blocked the thread until the command ran
    // would be ready at its first poll; an awaited one waits for the report pipe.
    let s = spec("echo first", &ws, &home, &conf);
    let mut start = Box::pin(spawn_process(&s));
    assert!(
        futures::poll!(&mut start).is_pending(),
        "a sandboxed start must not block the runtime's thread until the command runs"
    );
    let (out, ok) = finish(start.await.unwrap()).await;
    assert_eq!((out.as_str(), ok), ("first\n", true));

    let specs: Vec<SpawnSpec> = (0..12)
        .map(|i| spec(&format!("echo cmd-{i}"), &ws, &home, &conf))
        .collect();
    let runs = specs.iter().map(|s| async move {
        let spawned = spawn_process(s).await.unwrap();
        finish(spawned).await
    });
    let results = futures::future::join_all(runs).await;
    for (i, (out, ok)) in results.into_iter().enumerate() {
        assert_eq!((out, ok), (format!("cmd-{i}\n"), true));
    }
}

#[tokio::test]
async fn a_cancelled_sandboxed_start_leaves_nothing_running() {
    let dir = tempfile::tempdir().unwrap();
    let (conf, ws, home) = confine(&dir.path().canonicalize().unwrap());
    // The session's first command starts its keeper; the start of the next one is a request
    // sent at the first poll.
    let (out, ok) = finish(
        spawn_process(&spec("echo warm", &ws, &home, &conf))
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((out.as_str(), ok), ("warm\n", true));
    // A sleep no other process has: a fraction of a day unique to this run.
    let marker = format!("86399.{}", std::process::id());
    let s = spec(&format!("exec sleep {marker}"), &ws, &home, &conf);
    let mut start = Box::pin(spawn_process(&s));
    assert!(futures::poll!(&mut start).is_pending());
    // The command runs (its start is reported, but nobody polled the start to read it)...
    assert!(
        wait_until(Duration::from_secs(30), || !processes_with_arg(&marker)
            .is_empty()),
        "the sandboxed command never started"
    );
    // ...and the start is given up: the command must not run on unwatched.
    drop(start);
    assert!(
        wait_until(Duration::from_secs(30), || processes_with_arg(&marker)
            .is_empty()),
        "a cancelled start left its command running: {:?}",
        processes_with_arg(&marker)
    );
}
