//! Rookery as a child subreaper (Linux `PR_SET_CHILD_SUBREAPER`): processes a command leaves
//! behind (a double fork, `setsid … &` after its shell exited) are re-parented to rookery
//! instead of to PID 1, so they stay visible as ours and their zombies are reaped here even when
//! PID 1 of a container never reaps.
//!
//! Reaping must never steal the exit status of a child somebody waits for by pid. The command
//! spawner announces a start ([`Starting`]) before its clone and records the child in the
//! [`owned`] set once it has its pid; it removes it when it reaps it. A reaping pass made while
//! any start is announced and not yet recorded is deferred, so the lock is not held across a
//! clone (a sandboxed start takes long enough for that lock to serialize every spawn). The
//! reaper only reaps zombie children that are not in the set and not in rookery's own session
//! (children the runtime or an
//! embedding program spawn without `setsid` stay in it). It is opt-in ([`become_subreaper`],
//! called by the `rookery` binary), since an embedding program may wait for its own detached
//! children. It kills nothing: that is `tree.rs`. It reaps on the SIGCHLD task itself and
//! starts no thread: at a pid limit there may be none to start.

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::Duration;

/// Pause after a reaping pass, so a burst of exits costs one scan.
const COALESCE: Duration = Duration::from_millis(200);

/// The children whose exit statuses belong to a waiter of ours (locked while one is spawned
/// or reaped).
pub fn owned() -> MutexGuard<'static, HashSet<libc::pid_t>> {
    static OWNED: OnceLock<Mutex<HashSet<libc::pid_t>>> = OnceLock::new();
    OWNED
        .get_or_init(|| Mutex::new(HashSet::new()))
        .lock()
        .unwrap_or_else(|p| p.into_inner())
}

/// Starts announced and not yet recorded (changed and read only under the [`owned`] lock).
static STARTING: AtomicUsize = AtomicUsize::new(0);

/// A start in progress: while one lives, no reaping pass reaps anything (the child it is
/// cloning has no pid in the [`owned`] set yet). Record the child with [`Starting::record`];
/// dropping it without recording ends the announcement (a failed start reaps its own child
/// first).
#[derive(Debug)]
pub struct Starting(());

impl Starting {
    /// Announces a start (takes the [`owned`] lock briefly).
    pub fn announce() -> Starting {
        let _owned = owned();
        STARTING.fetch_add(1, Ordering::Relaxed);
        Starting(())
    }

    /// Records `pid` as owned and ends the announcement, under one hold of the lock.
    pub fn record(self, pid: libc::pid_t) {
        let mut owned = owned();
        owned.insert(pid);
        STARTING.fetch_sub(1, Ordering::Relaxed);
        std::mem::forget(self);
    }
}

impl Drop for Starting {
    fn drop(&mut self) {
        let _owned = owned();
        STARTING.fetch_sub(1, Ordering::Relaxed);
    }
}

static STARTED: OnceLock<()> = OnceLock::new();

/// True once [`become_subreaper`] succeeded: every orphaned descendant is then a child of ours.
pub fn is_subreaper() -> bool {
    STARTED.get().is_some()
}

/// Makes this process a child subreaper and starts reaping orphans on SIGCHLD. Must run inside
/// a tokio runtime. Idempotent; an error means the kernel refused (the process keeps working,
/// orphans then go to PID 1 as before).
pub fn become_subreaper() -> std::io::Result<()> {
    if STARTED.get().is_some() {
        return Ok(());
    }
    // The SIGCHLD listener first: a subreaper that cannot reap would collect zombies.
    let mut sigchld = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::child())?;
    // SAFETY: prctl with integer arguments only.
    if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) } == -1 {
        return Err(std::io::Error::last_os_error());
    }
    let _ = STARTED.set(());
    tokio::spawn(async move {
        loop {
            if sigchld.recv().await.is_none() {
                return;
            }
            // Inline, on this task: a fork bomb at a pid limit rookery shares leaves no room
            // for a thread (tokio's `spawn_blocking` then panics, and this loop with it), and
            // its zombies are what holds the pids. The pass reads a few `/proc` files and
            // calls `waitpid(WNOHANG)`: it never blocks.
            loop {
                let (reaped, deferred) = reap_orphans();
                if reaped > 0 {
                    tracing::debug!(reaped, "reaped orphaned command processes");
                }
                tokio::time::sleep(COALESCE).await;
                // A deferred pass is made again without waiting for another SIGCHLD.
                if !deferred {
                    break;
                }
            }
        }
    });
    Ok(())
}

/// `(state, ppid, session)` of a process.
fn stat_of(pid: i32) -> Option<(char, i32, i32)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &text[text.rfind(')')? + 1..];
    let mut f = rest.split_whitespace();
    let state = f.next()?.chars().next()?;
    let ppid = f.next()?.parse().ok()?;
    let _pgrp = f.next()?;
    let session = f.next()?.parse().ok()?;
    Some((state, ppid, session))
}

/// The children orphans can be among: the kernel re-parents an orphan to its subreaper's first
/// live thread, which is the main thread unless that one has exited (an embedding program's
/// `pthread_exit`), so only the main thread's children are read (one file, instead of one per
/// thread); the children other threads spawn are the spawner's own (owned) or the runtime's.
/// `None` when they cannot be read that way (no `task/<tid>/children` in the kernel, or the main
/// thread is gone): the caller then looks at every thread or all of `/proc`.
pub fn orphan_candidates() -> Option<Vec<i32>> {
    let me = std::process::id() as i32;
    if stat_of(me).is_none_or(|(state, _, _)| matches!(state, 'Z' | 'X' | 'x')) {
        return None;
    }
    listed_children(std::path::Path::new(&format!(
        "/proc/{me}/task/{me}/children"
    )))
    .ok()
}

/// The pids a `/proc/<pid>/task/<tid>/children` file lists.
pub fn listed_children(file: &std::path::Path) -> std::io::Result<Vec<i32>> {
    Ok(std::fs::read_to_string(file)?
        .split_whitespace()
        .filter_map(|p| p.parse::<i32>().ok())
        .collect())
}

/// Reaps every zombie child that is neither owned nor in our session; returns how many, and
/// whether the pass was deferred because a start was in progress (then it reaped nothing).
pub fn reap_orphans() -> (usize, bool) {
    let me = std::process::id() as i32;
    // SAFETY: getsid(0) has no preconditions.
    let my_session = unsafe { libc::getsid(0) };
    let pids: Vec<i32> = match orphan_candidates() {
        Some(children) => children,
        None => {
            let Ok(dir) = std::fs::read_dir("/proc") else {
                return (0, false);
            };
            dir.filter_map(Result::ok)
                .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
                .collect()
        }
    };
    let zombies: Vec<i32> = pids
        .into_iter()
        .filter(|pid| {
            matches!(stat_of(*pid), Some((state, ppid, sid))
                if state == 'Z' && ppid == me && sid != my_session)
        })
        .collect();
    if zombies.is_empty() {
        return (0, false);
    }
    let owned = owned();
    if STARTING.load(Ordering::Relaxed) > 0 {
        return (0, true);
    }
    let mut n = 0;
    for pid in zombies.into_iter().filter(|p| !owned.contains(p)) {
        let mut status = 0;
        // SAFETY: WNOHANG on a zombie child of ours that no waiter owns (checked under the
        // owned lock, with no start announced and unrecorded).
        if unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) } == pid {
            n += 1;
        }
    }
    (n, false)
}
