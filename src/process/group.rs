//! One command's process group and its kill: SIGTERM to the group (and SIGCONT), SIGKILL after
//! [`KILL_GRACE`], at most once per group, from [`ProcessGroup::kill`] or from a [`KillOnDrop`]
//! guard; on Linux also the sweep of the command's cookie (`tree.rs`), so members that left the
//! group die too. `done` tells when nothing of the command is left.
//!
//! It spawns nothing and never blocks its caller: waits run on helper threads.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::sync::watch;

/// Grace between SIGTERM and SIGKILL.
pub const KILL_GRACE: Duration = Duration::from_secs(1);

/// One process group (its id is the leader's pid). `kill` runs once; `done` turns true when the
/// group has no live member left (or the SIGKILL grace ran out) and the leader was reaped.
#[derive(Debug)]
pub struct ProcessGroup {
    pgid: i32,
    /// `ROOKERY_CMD` of the command's processes (empty: none set).
    cookie: String,
    killed: AtomicBool,
    reaped: AtomicBool,
    done: watch::Sender<bool>,
}

impl ProcessGroup {
    pub(super) fn new(pgid: i32, cookie: String) -> Arc<Self> {
        Arc::new(ProcessGroup {
            pgid,
            cookie,
            killed: AtomicBool::new(false),
            reaped: AtomicBool::new(false),
            done: watch::channel(false).0,
        })
    }

    /// The process group's id (the leader's pid).
    pub fn pgid(&self) -> i32 {
        self.pgid
    }

    /// The `ROOKERY_CMD` value every process of the command inherits.
    pub fn cookie(&self) -> &str {
        &self.cookie
    }

    /// Sends `sig` to the whole group; false when the group is gone or already killed.
    pub fn signal(&self, sig: Signal) -> bool {
        if self.killed.load(Ordering::SeqCst) {
            return false;
        }
        killpg(Pid::from_raw(self.pgid), sig).is_ok()
    }

    /// The waiter reaped the leader.
    pub fn mark_reaped(&self) {
        self.reaped.store(true, Ordering::SeqCst);
    }

    /// Watches the end of the kill (true once the group is gone).
    pub fn done(&self) -> watch::Receiver<bool> {
        self.done.subscribe()
    }

    /// SIGTERM to the group now; a helper thread sends SIGKILL after [`KILL_GRACE`] if a member
    /// is still alive, then marks the group done. Idempotent; never blocks the caller.
    pub fn kill(self: &Arc<Self>) {
        if self.killed.swap(true, Ordering::SeqCst) {
            return;
        }
        let pg = Pid::from_raw(self.pgid);
        // SIGCONT too, so stopped members can act on the SIGTERM.
        let term = killpg(pg, Signal::SIGTERM);
        if term == Err(nix::errno::Errno::ESRCH) && self.reaped.load(Ordering::SeqCst) {
            // The common end of a foreground command: nothing left in the group, so no helper
            // thread; members that left it are found by the shared sweep.
            self.sweep_then_done(true);
            return;
        }
        let _ = killpg(pg, Signal::SIGCONT);
        tracing::debug!(pgid = self.pgid, ?term, "process group terminated");
        let me = Arc::clone(self);
        let spawned = std::thread::Builder::new()
            .name("rookery-pgkill".into())
            .spawn(move || me.finish_kill(term.is_ok()));
        if let Err(e) = spawned {
            tracing::warn!(
                pgid = self.pgid,
                "cannot start kill thread ({e}); SIGKILL now"
            );
            let _ = killpg(pg, Signal::SIGKILL);
            self.sweep_then_done(false);
        }
    }

    fn finish_kill(&self, group_existed: bool) {
        let pg = Pid::from_raw(self.pgid);
        if group_existed && !wait_until(KILL_GRACE, || !group_alive(self.pgid)) {
            tracing::debug!(pgid = self.pgid, "grace over; SIGKILL to the group");
            let _ = killpg(pg, Signal::SIGKILL);
            wait_until(KILL_GRACE, || !group_alive(self.pgid));
        }
        #[cfg(target_os = "linux")]
        if !self.cookie.is_empty() {
            super::tree::sweep(&self.cookie, KILL_GRACE, !group_alive(self.pgid));
        }
        // The leader is reaped by its waiter task; give it a moment so `done` means no zombie.
        wait_until(KILL_GRACE, || self.reaped.load(Ordering::SeqCst));
        self.done.send_replace(true);
    }

    /// Marks the group done once no process carries its cookie (at once without one).
    /// `group_gone`: no member of the group is left.
    fn sweep_then_done(self: &Arc<Self>, group_gone: bool) {
        #[cfg(target_os = "linux")]
        if !self.cookie.is_empty() {
            let me = Arc::clone(self);
            super::tree::sweep_later(
                self.cookie.clone(),
                KILL_GRACE,
                group_gone,
                Box::new(move || {
                    me.done.send_replace(true);
                }),
            );
            return;
        }
        self.done.send_replace(true);
    }
}

/// Polls `cond` with a growing pause until it holds or `limit` passed; true when it held.
pub(crate) fn wait_until(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    let mut pause = Duration::from_millis(2);
    loop {
        if cond() {
            return true;
        }
        let elapsed = start.elapsed();
        if elapsed >= limit {
            return false;
        }
        std::thread::sleep(pause.min(limit - elapsed));
        pause = (pause * 2).min(Duration::from_millis(50));
    }
}

/// True while a non-zombie process belongs to group `pgid`. Zombies are not counted: an orphan
/// reparented to an init that does not reap would otherwise look alive forever.
#[cfg(target_os = "linux")]
pub fn group_alive(pgid: i32) -> bool {
    // No member at all, zombies included: skip the scan of `/proc` (the common case, and the
    // scan costs a read of every process's `stat`).
    if killpg(Pid::from_raw(pgid), None) == Err(nix::errno::Errno::ESRCH) {
        return false;
    }
    !group_members(pgid).is_empty()
}

/// [`group_alive`] for a task: the `/proc` scan, when the group still has a member, runs on a
/// thread of its own, or on the caller when no thread can be started (a pid limit reached),
/// never through `spawn_blocking`, which panics then.
pub async fn group_alive_from_task(pgid: i32) -> bool {
    if killpg(Pid::from_raw(pgid), None) == Err(nix::errno::Errno::ESRCH) {
        return false;
    }
    let (tx, rx) = tokio::sync::oneshot::channel();
    let spawned = std::thread::Builder::new()
        .name("rookery-pgscan".into())
        .spawn(move || {
            let _ = tx.send(group_alive(pgid));
        });
    match spawned {
        Ok(_) => rx.await.unwrap_or(true),
        Err(e) => {
            tracing::debug!(pgid, "cannot start a scan thread ({e}); scanning here");
            group_alive(pgid)
        }
    }
}

#[cfg(not(target_os = "linux"))]
pub fn group_alive(pgid: i32) -> bool {
    killpg(Pid::from_raw(pgid), None).is_ok()
}

/// Pids of the live (non-zombie) members of group `pgid`, from `/proc`.
#[cfg(target_os = "linux")]
pub fn group_members(pgid: i32) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            matches!(proc_stat(*pid), Some((state, _, pgrp)) if pgrp == pgid && state != 'Z' && state != 'X')
        })
        .collect()
}

/// `(state, ppid, pgrp)` of a process from `/proc/<pid>/stat`.
#[cfg(target_os = "linux")]
pub fn proc_stat(pid: i32) -> Option<(char, i32, i32)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may contain spaces: parse after the last ')'.
    let rest = &text[text.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    let pgrp = fields.next()?.parse().ok()?;
    Some((state, ppid, pgrp))
}

/// Kills its group when dropped (also after a panic or an actor kill). Several guards may share
/// one group (`KillOnDrop(group.clone())`); the first one dropped kills it.
#[derive(Debug)]
pub struct KillOnDrop(pub Arc<ProcessGroup>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        self.0.kill();
    }
}
