//! The process tree of a command, however its members detach: every command's environment
//! carries `ROOKERY_CMD=<token>-<n>` (the token is random per rookery process, `n` counts its
//! commands), which every descendant inherits whether it leaves the process group (`setsid`,
//! double fork) or not (`&`, `nohup`). Killing a command sweeps `/proc/*/environ` for its cookie
//! (as Jenkins' process-tree killer does): SIGTERM, SIGKILL after the grace, again until no
//! process carries it. A process read in the middle of an `exec` shows an empty environment;
//! it is read again after short pauses rather than taken for one without a cookie. Signals go
//! through pidfds opened before the cookie is re-checked, so a pid reused after the scan is
//! never hit.
//!
//! Sweeps run on their own threads (a shared one batches the common case of a command that left
//! nothing behind into one scan), never on an actor or a runtime worker, except when no thread
//! can be started (a pid limit reached): a kill then runs where it was asked for. A process that clears
//! its environment before it `exec`s is beyond this mechanism. This module signals only
//! processes carrying a cookie of this rookery process; it knows nothing of actors or tools.

use std::collections::HashMap;
use std::io::Read;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The environment variable that marks a command's processes.
pub const COOKIE_VAR: &str = "ROOKERY_CMD";

/// How many SIGKILL rounds a sweep makes before it gives up (a fork bomb outrunning it).
const KILL_ROUNDS: usize = 20;

/// The random token of this rookery process (16 hex digits).
pub fn instance_token() -> &'static str {
    static TOKEN: OnceLock<String> = OnceLock::new();
    TOKEN.get_or_init(|| format!("{:016x}", rand::random::<u64>()))
}

/// A fresh cookie value: `<token>-<n>`.
pub fn new_cookie() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    format!(
        "{}-{}",
        instance_token(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// What a process's environment says of the cookie it carries.
#[derive(Debug, PartialEq, Eq)]
enum Mark {
    Cookie(String),
    /// No cookie: none in its environment, or the process is gone, a zombie, a kernel thread
    /// or another user's.
    Unmarked,
    /// A live process whose environment reads empty: in the middle of an `exec` (the kernel
    /// shows no environment while the new image is set up), or started with none at all.
    Unsure,
}

/// Pauses before each new read of an [`Mark::Unsure`] environment: an `exec` is over in well
/// under a millisecond (more on a loaded machine), so a process still unsure after these (76 ms
/// in all) had no environment to begin with.
const EXEC_REREADS: [Duration; 4] = [
    Duration::from_millis(1),
    Duration::from_millis(5),
    Duration::from_millis(20),
    Duration::from_millis(50),
];

fn read_mark(pid: i32, buf: &mut Vec<u8>) -> Mark {
    buf.clear();
    let Ok(mut f) = std::fs::File::open(format!("/proc/{pid}/environ")) else {
        return Mark::Unmarked;
    };
    if f.read_to_end(buf).is_err() {
        return Mark::Unmarked;
    }
    if buf.is_empty() {
        return if is_user_process(pid) {
            Mark::Unsure
        } else {
            Mark::Unmarked
        };
    }
    let prefix = format!("{COOKIE_VAR}=");
    buf.split(|b| *b == 0)
        .find_map(|kv| kv.strip_prefix(prefix.as_bytes()))
        .and_then(|v| std::str::from_utf8(v).ok())
        .map_or(Mark::Unmarked, |v| Mark::Cookie(v.to_string()))
}

/// The value of [`COOKIE_VAR`] in process `pid`'s environment (`None` for zombies, processes
/// of other users and processes without it). A process caught in the middle of an `exec` is
/// read again (see [`EXEC_REREADS`]) instead of being taken for one without a cookie.
fn cookie_of(pid: i32, buf: &mut Vec<u8>) -> Option<String> {
    let mut pauses = EXEC_REREADS.iter();
    loop {
        match read_mark(pid, buf) {
            Mark::Cookie(c) => return Some(c),
            Mark::Unmarked => return None,
            Mark::Unsure => std::thread::sleep(*pauses.next()?),
        }
    }
}

/// Where a command's processes can be once its process group is gone, when rookery is a
/// subreaper: every process it left has been re-parented into rookery's subtree, below a child
/// that rookery did not spawn itself (not in the owned set) and that is outside rookery's own
/// session. So only those subtrees are read, not all of `/proc`; rookery's own children are
/// read from the main thread, where the kernel puts orphans ([`super::reaper::orphan_candidates`];
/// from every thread when that cannot be). `None` = read all of `/proc` (no subreaper, the group
/// may still have members, or the kernel lacks `task/*/children`).
fn candidates(group_gone: bool) -> Option<Vec<i32>> {
    if !group_gone || !super::reaper::is_subreaper() {
        return None;
    }
    let me = std::process::id() as i32;
    // SAFETY: getsid(0) has no preconditions.
    let my_session = unsafe { libc::getsid(0) };
    let owned = super::reaper::owned().clone();
    let children = match super::reaper::orphan_candidates() {
        Some(children) => children,
        None => children_of(me)?,
    };
    let mut out: Vec<i32> = children
        .into_iter()
        .filter(|p| !owned.contains(p) && session_of(*p).is_some_and(|s| s != my_session))
        .collect();
    let mut next = 0;
    while next < out.len() {
        let pid = out[next];
        next += 1;
        out.extend(children_of(pid).unwrap_or_default());
    }
    Some(out)
}

/// The children of `pid` over all its threads (`None` when the kernel does not list them).
fn children_of(pid: i32) -> Option<Vec<i32>> {
    let mut out = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).ok()? {
        let Ok(task) = task else { continue };
        match super::reaper::listed_children(&task.path().join("children")) {
            Ok(children) => out.extend(children),
            Err(e)
                if e.kind() == std::io::ErrorKind::NotFound && pid == std::process::id() as i32 =>
            {
                return None;
            }
            Err(_) => {}
        }
    }
    Some(out)
}

/// `pid` is alive, not a zombie and not a kernel thread (which has no environment, ever):
/// a process that can be in the middle of an `exec`.
fn is_user_process(pid: i32) -> bool {
    /// `PF_KTHREAD` in the flags of `/proc/<pid>/stat`.
    const KERNEL_THREAD: u64 = 0x0020_0000;
    ProcStat::read(pid)
        .is_some_and(|st| !matches!(st.state, 'Z' | 'X' | 'x') && st.flags & KERNEL_THREAD == 0)
}

fn session_of(pid: i32) -> Option<i32> {
    ProcStat::read(pid).map(|st| st.session)
}

/// The fields of `/proc/<pid>/stat` the sweeps look at.
struct ProcStat {
    state: char,
    session: i32,
    flags: u64,
}

impl ProcStat {
    /// `None` when the process is gone (or the line does not parse).
    fn read(pid: i32) -> Option<ProcStat> {
        let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // After the name (which may hold spaces and parentheses): state, ppid, pgrp, session,
        // tty_nr, tpgid, flags, …
        let mut fields = text[text.rfind(')')? + 1..].split_whitespace();
        let state = fields.next()?.chars().next()?;
        let session = fields.nth(2)?.parse().ok()?;
        let flags = fields.nth(2)?.parse().ok()?;
        Some(ProcStat {
            state,
            session,
            flags,
        })
    }
}

/// Every live process (but this one) whose cookie is one of `cookies`, by cookie, looking at
/// `within` only when given.
fn scan(cookies: &[&str], within: Option<Vec<i32>>) -> HashMap<String, Vec<i32>> {
    let mut found: HashMap<String, Vec<i32>> = HashMap::new();
    let pids: Vec<i32> = match within {
        Some(pids) => pids,
        None => {
            let Ok(dir) = std::fs::read_dir("/proc") else {
                return found;
            };
            dir.filter_map(Result::ok)
                .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
                .collect()
        }
    };
    let me = std::process::id() as i32;
    let mut buf = Vec::with_capacity(4096);
    let mut unsure = Vec::new();
    let mut keep = |pid: i32, mark: Mark, unsure: &mut Vec<i32>| match mark {
        Mark::Cookie(c) if cookies.contains(&c.as_str()) => found.entry(c).or_default().push(pid),
        Mark::Unsure => unsure.push(pid),
        Mark::Cookie(_) | Mark::Unmarked => {}
    };
    for pid in pids.into_iter().filter(|pid| *pid != me) {
        keep(pid, read_mark(pid, &mut buf), &mut unsure);
    }
    // Processes caught in an `exec` are read again, together, after short pauses.
    for pause in EXEC_REREADS {
        if unsure.is_empty() {
            break;
        }
        std::thread::sleep(pause);
        for pid in std::mem::take(&mut unsure) {
            keep(pid, read_mark(pid, &mut buf), &mut unsure);
        }
    }
    found
}

/// Live processes carrying `cookie` (anywhere in `/proc`).
pub fn members(cookie: &str) -> Vec<i32> {
    members_after(cookie, false)
}

/// Live processes carrying `cookie`; with `group_gone`, the command's process group has no
/// member left, which may narrow the search (see [`candidates`]).
fn members_after(cookie: &str, group_gone: bool) -> Vec<i32> {
    scan(&[cookie], candidates(group_gone))
        .remove(cookie)
        .unwrap_or_default()
}

/// A process to signal: by pidfd when the kernel has them, so a pid that exited and was reused
/// after the scan is never signalled.
struct Target {
    pid: i32,
    pidfd: Option<std::os::fd::OwnedFd>,
}

/// The processes carrying `cookie`, each pinned by a pidfd opened *before* its cookie is
/// checked again (so the pidfd is known to refer to the process that carries it).
fn targets(cookie: &str, group_gone: bool) -> Vec<Target> {
    use std::os::fd::FromRawFd;
    let mut buf = Vec::with_capacity(4096);
    members_after(cookie, group_gone)
        .into_iter()
        .filter_map(|pid| {
            // SAFETY: pidfd_open has no memory arguments; a valid result is a descriptor we own.
            let raw = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
            if raw < 0 {
                // No pidfd support (or the process is gone): signal by pid.
                return Some(Target { pid, pidfd: None });
            }
            // SAFETY: `raw` is a fresh descriptor owned by nobody else.
            let pidfd = unsafe { std::os::fd::OwnedFd::from_raw_fd(raw as i32) };
            (cookie_of(pid, &mut buf).as_deref() == Some(cookie)).then_some(Target {
                pid,
                pidfd: Some(pidfd),
            })
        })
        .collect()
}

fn signal_all(targets: &[Target], sig: libc::c_int) {
    use std::os::fd::AsRawFd;
    for t in targets {
        match &t.pidfd {
            // SAFETY: pidfd_send_signal on a descriptor we own, no siginfo.
            Some(fd) => unsafe {
                libc::syscall(
                    libc::SYS_pidfd_send_signal,
                    fd.as_raw_fd(),
                    sig,
                    std::ptr::null::<libc::siginfo_t>(),
                    0,
                );
            },
            // SAFETY: kill has no memory arguments; the pid carried our cookie when scanned.
            None => unsafe {
                libc::kill(t.pid, sig);
            },
        }
    }
}

/// Waits up to `limit` for no process to carry `cookie`; true when none does.
fn wait_gone(cookie: &str, limit: Duration, group_gone: bool) -> bool {
    let start = Instant::now();
    let mut pause = Duration::from_millis(5);
    loop {
        if members_after(cookie, group_gone).is_empty() {
            return true;
        }
        if start.elapsed() >= limit {
            return false;
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(100));
    }
}

/// Kills every process carrying `cookie`: SIGTERM (and SIGCONT), SIGKILL after `grace`, then
/// SIGKILL rounds until a scan finds none. `group_gone`: the command's process group has no
/// member left (narrows the search). Blocks; call it from a thread of its own. Returns true
/// when nothing carries the cookie any more.
pub fn sweep(cookie: &str, grace: Duration, group_gone: bool) -> bool {
    let found = targets(cookie, group_gone);
    if found.is_empty() {
        return true;
    }
    tracing::debug!(
        cookie,
        n = found.len(),
        "escaped command processes: SIGTERM"
    );
    signal_all(&found, libc::SIGTERM);
    signal_all(&found, libc::SIGCONT);
    drop(found);
    if wait_gone(cookie, grace, group_gone) {
        return true;
    }
    for _ in 0..KILL_ROUNDS {
        let found = targets(cookie, group_gone);
        if found.is_empty() {
            return true;
        }
        tracing::debug!(
            cookie,
            n = found.len(),
            "escaped command processes: SIGKILL"
        );
        signal_all(&found, libc::SIGKILL);
        drop(found);
        if wait_gone(cookie, Duration::from_millis(500), group_gone) {
            return true;
        }
    }
    let left = members(cookie);
    tracing::warn!(cookie, left = ?left, "command processes survived every SIGKILL round");
    left.is_empty()
}

/// A sweep request: the cookie and what to run once nothing carries it (run when the job is
/// dropped, so every path that ends a job reports it done).
struct Job {
    cookie: String,
    grace: Duration,
    group_gone: bool,
    done: Option<Box<dyn FnOnce() + Send>>,
}

impl Job {
    fn run(self) {
        sweep(&self.cookie, self.grace, self.group_gone);
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        if let Some(done) = self.done.take() {
            done();
        }
    }
}

/// The shared sweeper thread's queue: `None` until it is started, and again after it could not
/// be started (at a pid limit), so a later sweep tries again.
static SWEEPER: Mutex<Option<Sender<Job>>> = Mutex::new(None);

/// Hands `job` to the shared sweeper thread, starting it when there is none; gives the job
/// back when no thread can be started.
fn to_sweeper(job: Job) -> Result<(), Job> {
    let mut sweeper = SWEEPER.lock().unwrap_or_else(|p| p.into_inner());
    let job = match sweeper.as_ref() {
        Some(tx) => match tx.send(job) {
            Ok(()) => return Ok(()),
            Err(e) => e.0,
        },
        None => job,
    };
    let (tx, rx) = channel::<Job>();
    let started = std::thread::Builder::new()
        .name("rookery-sweep".into())
        .spawn(move || run_sweeper(rx));
    match started {
        Ok(_) => {
            let sent = tx.send(job).map_err(|e| e.0);
            *sweeper = Some(tx);
            sent
        }
        Err(e) => {
            tracing::warn!("cannot start the sweeper thread ({e}); sweeping on the caller");
            *sweeper = None;
            Err(job)
        }
    }
}

/// Sweeps `cookie` off the caller's thread and then runs `done`. Jobs that arrive together share
/// one scan of `/proc`; a cookie that still has processes gets a thread of its own for the
/// SIGTERM/SIGKILL sequence. Never blocks the caller, unless no thread can be started (a pid
/// limit reached): the sweep then runs on the caller, since killing matters more.
pub fn sweep_later(
    cookie: String,
    grace: Duration,
    group_gone: bool,
    done: Box<dyn FnOnce() + Send>,
) {
    let job = Job {
        cookie,
        grace,
        group_gone,
        done: Some(done),
    };
    if let Err(job) = to_sweeper(job) {
        job.run();
    }
}

fn run_sweeper(rx: Receiver<Job>) {
    while let Ok(first) = rx.recv() {
        let mut jobs = vec![first];
        while let Ok(more) = rx.try_recv() {
            jobs.push(more);
        }
        let cookies: Vec<&str> = jobs.iter().map(|j| j.cookie.as_str()).collect();
        let within = candidates(jobs.iter().all(|j| j.group_gone));
        let found = scan(&cookies, within);
        for job in jobs {
            if found.contains_key(&job.cookie) {
                // The job goes to the new thread through a slot it can be taken back from.
                let slot = Arc::new(Mutex::new(Some(job)));
                let theirs = Arc::clone(&slot);
                let spawned = std::thread::Builder::new()
                    .name("rookery-sweep-tree".into())
                    .spawn(move || {
                        let job = theirs.lock().unwrap_or_else(|p| p.into_inner()).take();
                        if let Some(job) = job {
                            job.run();
                        }
                    });
                if let Err(e) = spawned {
                    // No thread to be had (a pid limit): the kills happen here, one cookie
                    // after the other, rather than not at all.
                    tracing::warn!("cannot start a sweep thread ({e}); sweeping here");
                    let job = slot.lock().unwrap_or_else(|p| p.into_inner()).take();
                    if let Some(job) = job {
                        job.run();
                    }
                }
            }
            // Jobs with nothing left report done as they drop here.
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cookies_are_unique_and_carry_the_token() {
        let a = new_cookie();
        let b = new_cookie();
        assert_ne!(a, b);
        assert!(a.starts_with(&format!("{}-", instance_token())));
        assert_eq!(instance_token().len(), 16);
    }

    #[test]
    fn sweep_kills_a_detached_process_by_its_cookie() {
        let cookie = new_cookie();
        // `setsid` leaves our process group and session; only the cookie finds it.
        let mut child = std::process::Command::new("setsid")
            .args(["sleep", "300"])
            .env(COOKIE_VAR, &cookie)
            .spawn()
            .unwrap();
        // Found as `sleep` itself: `setsid` forks before it execs, and a process in the middle
        // of its exec cannot be read (a sweep then would find nothing and leave the sleep).
        assert!(wait_until_found(&cookie, "sleep"));
        assert!(sweep(&cookie, Duration::from_secs(1), false));
        let _ = child.wait();
        assert!(members(&cookie).is_empty());
    }

    #[test]
    fn a_process_caught_in_an_exec_is_still_swept() {
        // Each round: a chain of ten `exec`s ending in `sleep`, swept at once. A read in the
        // middle of an exec sees an empty environment; taken for "no cookie", the sweep often
        // found nothing in the very first round and left the sleep behind.
        let chain =
            r#"if [ "$N" -gt 0 ]; then export N=$((N-1)); exec sh -c "$S"; fi; exec sleep 300"#;
        for round in 0..20 {
            let cookie = new_cookie();
            let mut child = std::process::Command::new("sh")
                .args(["-c", chain])
                .env(COOKIE_VAR, &cookie)
                .env("S", chain)
                .env("N", "10")
                .spawn()
                .unwrap();
            assert!(sweep(&cookie, Duration::from_secs(1), false));
            // Killed by a signal: reaped within the generous wait below, not left sleeping.
            let deadline = Instant::now() + Duration::from_secs(20);
            let status = loop {
                if let Some(status) = child.try_wait().unwrap() {
                    break Some(status);
                }
                if Instant::now() > deadline {
                    let _ = child.kill();
                    let _ = child.wait();
                    break None;
                }
                std::thread::sleep(Duration::from_millis(10));
            };
            let status = status.unwrap_or_else(|| panic!("round {round}: the chain survived"));
            assert!(!status.success(), "round {round}: {status:?}");
        }
    }

    #[test]
    fn an_empty_environment_is_read_again_then_taken_as_unmarked() {
        let mut child = std::process::Command::new("sleep")
            .arg("300")
            .env_clear()
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        // Exec'd (spawn returns after the exec): its environment is empty for good.
        let mut buf = Vec::new();
        assert_eq!(read_mark(pid, &mut buf), Mark::Unsure);
        assert_eq!(cookie_of(pid, &mut buf), None);
        let _ = child.kill();
        let _ = child.wait();
        // A zombie or a gone process is unmarked at once.
        assert_eq!(read_mark(pid, &mut buf), Mark::Unmarked);
        assert!(!is_user_process(pid));
        assert!(is_user_process(std::process::id() as i32));
    }

    /// Waits until a process named `comm` carries `cookie`.
    fn wait_until_found(cookie: &str, comm: &str) -> bool {
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            let named = members(cookie).into_iter().any(|pid| {
                std::fs::read_to_string(format!("/proc/{pid}/comm"))
                    .is_ok_and(|c| c.trim_end() == comm)
            });
            if named {
                return true;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        false
    }
}
