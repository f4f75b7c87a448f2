//! Per-session serialization of the calls that write one real file (edit_file, write_file), or
//! change one shared resource (a non-read-only MCP tool's server): such calls run one after
//! another in call order, calls on other files stay concurrent.
//!
//! The session takes a [`PathTicket`] for every call it starts, in call order (synchronously,
//! before the call's task exists). The call's task then declares the files it writes (possibly
//! none) with [`PathTicket::acquire`]; it runs once every earlier ticket has declared and no
//! earlier unreleased call writes one of its files. A file is keyed by its canonical path and,
//! when it exists, by its device + inode, so symlinks and hard links to one file share a lock.
//! Entries disappear as soon as no call holds or waits for them: the map never outgrows the
//! calls in flight.
//!
//! It must not run tools, do file I/O beyond resolving paths (`write_keys`) or know the
//! session; a call that never declares (dropped ticket) releases its place on drop.

use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::{Map, Value};
use tokio::sync::Notify;

use super::file_target::follow_symlinks;
use super::path_hint::normalize_lexically;
use super::resolve_path;

/// What identifies one real file for the locks.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum PathKey {
    /// The canonical path (or, under a missing directory, the lexically normalized one).
    Path(PathBuf),
    /// Device and inode of an existing file.
    Inode(u64, u64),
    /// A shared resource that is not a file (`ToolDefinitionConfig::exclusive`: an MCP server's
    /// state), taken the same way.
    Resource(String),
}

/// The keys of the file named by the `file_path` argument (the write target of edit_file and
/// write_file); none when the argument is missing.
pub fn file_path_keys(workspace: &Path, args: &Map<String, Value>) -> Vec<PathKey> {
    match args.get("file_path").and_then(Value::as_str) {
        Some(p) if !p.is_empty() => keys_of(&resolve_path(workspace, p)),
        _ => Vec::new(),
    }
}

/// The keys of `path`: its canonical path and inode when it exists, else the canonical path of
/// where it would be created.
pub fn keys_of(path: &Path) -> Vec<PathKey> {
    if let Ok(canonical) = std::fs::canonicalize(path) {
        let mut keys = Vec::with_capacity(2);
        if let Ok(meta) = std::fs::metadata(&canonical) {
            keys.push(PathKey::Inode(meta.dev(), meta.ino()));
        }
        keys.push(PathKey::Path(canonical));
        return keys;
    }
    // Missing: where a write would create it (a dangling link's target included).
    let real = follow_symlinks(path).map_or_else(|_| path.to_path_buf(), |(real, _)| real);
    let created = match (real.parent(), real.file_name()) {
        (Some(dir), Some(name)) => std::fs::canonicalize(dir)
            .map(|d| d.join(name))
            .unwrap_or_else(|_| normalize_lexically(&real)),
        _ => normalize_lexically(&real),
    };
    vec![PathKey::Path(created)]
}

/// The lock table of one session. Cheap to clone (shared).
#[derive(Clone, Default)]
pub struct PathLocks {
    shared: Arc<Shared>,
}

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    changed: Notify,
}

#[derive(Default)]
struct State {
    next: u64,
    /// Tickets handed out whose call has not declared its files yet.
    undeclared: BTreeSet<u64>,
    /// Per file: the tickets holding or waiting for it (the smallest one holds it).
    queues: HashMap<PathKey, BTreeSet<u64>>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // The state stays consistent under every early return, so a poisoned lock is usable.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl PathLocks {
    /// A set with no path locked.
    pub fn new() -> Self {
        Self::default()
    }

    /// The next ticket, in call order. Take it synchronously when the call starts.
    pub fn ticket(&self) -> PathTicket {
        let seq = {
            let mut state = self.shared.lock();
            let seq = state.next;
            state.next += 1;
            state.undeclared.insert(seq);
            seq
        };
        PathTicket {
            inner: Arc::new(TicketInner {
                shared: self.shared.clone(),
                seq,
                declared: AtomicBool::new(false),
            }),
        }
    }

    /// Files with a holder or waiter, plus tickets not yet declared (0 when idle).
    pub fn in_use(&self) -> usize {
        let state = self.shared.lock();
        state.queues.len() + state.undeclared.len()
    }
}

impl fmt::Debug for PathLocks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PathLocks")
            .field("in_use", &self.in_use())
            .finish()
    }
}

/// One call's place in the session's call order.
#[derive(Clone)]
pub struct PathTicket {
    inner: Arc<TicketInner>,
}

struct TicketInner {
    shared: Arc<Shared>,
    seq: u64,
    declared: AtomicBool,
}

impl Drop for TicketInner {
    fn drop(&mut self) {
        if !self.declared.load(Ordering::Acquire) {
            self.shared.lock().undeclared.remove(&self.seq);
            self.shared.changed.notify_waiters();
        }
    }
}

impl fmt::Debug for PathTicket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PathTicket")
            .field("seq", &self.inner.seq)
            .finish()
    }
}

impl PathTicket {
    /// Declares the files this call writes and waits until it may write them: every earlier
    /// ticket has declared, and none of the earlier unreleased ones writes one of `keys`.
    /// With no keys it returns at once. Dropping the future (a cancelled call) gives its place
    /// up; the returned guard releases the files when dropped.
    pub async fn acquire(&self, keys: Vec<PathKey>) -> PathGuard {
        let shared = self.inner.shared.clone();
        let seq = self.inner.seq;
        {
            let mut state = shared.lock();
            if !self.inner.declared.swap(true, Ordering::AcqRel) {
                state.undeclared.remove(&seq);
            }
            for key in &keys {
                state.queues.entry(key.clone()).or_default().insert(seq);
            }
        }
        shared.changed.notify_waiters();
        let guard = PathGuard {
            shared: shared.clone(),
            seq,
            keys,
        };
        if guard.keys.is_empty() {
            return guard;
        }
        loop {
            let notified = shared.changed.notified();
            tokio::pin!(notified);
            // Registered before the check, so a release between check and await is not missed.
            notified.as_mut().enable();
            if guard.ready() {
                return guard;
            }
            notified.await;
        }
    }
}

/// Holds the files of one call until dropped.
pub struct PathGuard {
    shared: Arc<Shared>,
    seq: u64,
    keys: Vec<PathKey>,
}

impl PathGuard {
    fn ready(&self) -> bool {
        let state = self.shared.lock();
        state.undeclared.range(..self.seq).next().is_none()
            && self.keys.iter().all(|key| {
                state
                    .queues
                    .get(key)
                    .and_then(|q| q.first())
                    .is_none_or(|first| *first == self.seq)
            })
    }
}

impl fmt::Debug for PathGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PathGuard")
            .field("seq", &self.seq)
            .field("keys", &self.keys)
            .finish()
    }
}

impl Drop for PathGuard {
    fn drop(&mut self) {
        if self.keys.is_empty() {
            return;
        }
        {
            let mut state = self.shared.lock();
            for key in &self.keys {
                if let Some(queue) = state.queues.get_mut(key) {
                    queue.remove(&self.seq);
                    if queue.is_empty() {
                        state.queues.remove(key);
                    }
                }
            }
        }
        self.shared.changed.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn key(name: &str) -> Vec<PathKey> {
        vec![PathKey::Path(PathBuf::from(name))]
    }

    /// Polls until `f` holds (generous deadline for a loaded machine).
    async fn until(mut f: impl FnMut() -> bool) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while !f() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "condition not reached"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn same_file_runs_in_ticket_order_even_when_declared_late() {
        let locks = PathLocks::new();
        let tickets: Vec<PathTicket> = (0..3).map(|_| locks.ticket()).collect();
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        // Declared in reverse order: 2, then 1, then 0.
        for (i, ticket) in tickets.into_iter().enumerate().rev() {
            let order = order.clone();
            tasks.push(tokio::spawn(async move {
                let _g = ticket.acquire(key("/f")).await;
                order.lock().unwrap().push(i);
                tokio::task::yield_now().await;
            }));
            tokio::task::yield_now().await;
        }
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(*order.lock().unwrap(), vec![0, 1, 2]);
        assert_eq!(locks.in_use(), 0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn other_files_stay_concurrent_and_no_keys_never_wait() {
        let locks = PathLocks::new();
        let first = locks.ticket();
        let second = locks.ticket();
        let third = locks.ticket();
        let held = first.acquire(key("/a")).await;
        // A later call on another file gets its lock while /a is held.
        let other = second.acquire(key("/b")).await;
        // A call with no file never waits.
        let none = third.acquire(Vec::new()).await;
        assert_eq!(locks.in_use(), 2);
        drop((held, other, none));
        assert_eq!(locks.in_use(), 0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn waits_for_earlier_undeclared_tickets_and_dropped_tickets_free_the_way() {
        let locks = PathLocks::new();
        let early = locks.ticket();
        let late = locks.ticket();
        let done = Arc::new(AtomicBool::new(false));
        let flag = done.clone();
        let waiter = tokio::spawn(async move {
            let _g = late.acquire(key("/f")).await;
            flag.store(true, Ordering::SeqCst);
        });
        // The later call has declared /f and waits: the earlier one might still declare it.
        until(|| locks.shared.lock().queues.len() == 1).await;
        // A grace window in which a wrong wake-up would show (not a synchronization point).
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!done.load(Ordering::SeqCst));
        drop(early);
        until(|| done.load(Ordering::SeqCst)).await;
        waiter.await.unwrap();
        assert_eq!(locks.in_use(), 0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_cancelled_waiter_leaves_no_entry() {
        let locks = PathLocks::new();
        let holder = locks.ticket().acquire(key("/f")).await;
        let ticket = locks.ticket();
        let waiting = tokio::spawn(async move { ticket.acquire(key("/f")).await });
        until(|| locks.in_use() == 1).await;
        waiting.abort();
        let _ = waiting.await;
        drop(holder);
        assert_eq!(locks.in_use(), 0);
    }

    #[test]
    fn keys_join_symlinks_and_hard_links_of_one_file() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("f.txt"), "x").unwrap();
        std::os::unix::fs::symlink(d.join("f.txt"), d.join("sym")).unwrap();
        std::fs::hard_link(d.join("f.txt"), d.join("hard")).unwrap();
        let direct = keys_of(&d.join("f.txt"));
        assert_eq!(keys_of(&d.join("sym")), direct);
        assert_eq!(keys_of(&d.join("hard"))[0], direct[0]);
        let missing = keys_of(&d.join("new.txt"));
        assert_eq!(
            missing,
            vec![PathKey::Path(
                std::fs::canonicalize(d).unwrap().join("new.txt")
            )]
        );
    }
}
