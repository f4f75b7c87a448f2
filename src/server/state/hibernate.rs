//! Hibernation of served sessions: a session idle (no task, no live command or subagent, no
//! pending approval) for `--idle-hibernate SECS`, or beyond `--max-resident N` resident
//! sessions (least recently used first), is closed — its actors stop, its trace is flushed
//! and closed — and only a small directory entry stays: its workspace, approval mode, creation
//! time, event numbering (the event log itself, without its replay ring, while SSE clients are
//! connected) and its trace file (for an id that dates it, only the file's number). The next request naming it (task,
//! approvals, events, …) resumes it from its latest trace file with that mode; SSE subscribers
//! see `session_hibernated` then `session_resumed` on the same stream (on the store, a stream
//! parked here ends with `session_moved` once another node wakes the session instead:
//! `parked_moves.rs`).
//!
//! A create at the cap hibernates the least recently used idle session before it starts the new
//! one; a resume beyond the cap wakes the sweeper, which hibernates one after the resume.
//!
//! This module decides when and keeps the entries; it must not touch a session's trace (the
//! library's close and resume do) and never hibernates a session that is doing anything.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::{ApiError, OpenOptions, ServerState, SessionEntry};
use crate::actors::session::SessionStatus;
use crate::approval::ApprovalMode;
use crate::message::{EventPayload, OmniMessage};
use crate::server::sse::{CLIENT_BUFFER, EventLog, RING_CAPACITY};
use crate::trace::paths;

/// Default of `--idle-hibernate` (seconds).
pub(super) const DEFAULT_IDLE_HIBERNATE_SECS: u64 = 600;
/// Default of `--max-resident`.
pub(super) const DEFAULT_MAX_RESIDENT: usize = 10_000;

/// When sessions hibernate.
#[derive(Debug, Clone, Copy)]
pub struct HibernationConfig {
    /// Idle this long (`None`: never by idleness).
    pub idle: Option<Duration>,
    /// Resident sessions at most (the least recently used idle ones go first).
    pub max_resident: usize,
}

impl Default for HibernationConfig {
    fn default() -> Self {
        HibernationConfig {
            idle: Some(Duration::from_secs(DEFAULT_IDLE_HIBERNATE_SECS)),
            max_resident: DEFAULT_MAX_RESIDENT,
        }
    }
}

/// A hibernated session's directory entry.
pub(super) struct Hibernated {
    pub workspace: Box<Path>,
    /// The file its trace was written to last, when its id does not say where that is (a
    /// dated id's file is found by name in its date directory).
    pub trace: Option<Box<Path>>,
    /// The `_NNN` of the file its trace was written to last (for a dated id, whose directory
    /// its id says).
    pub file_index: u32,
    pub approval_mode: ApprovalMode,
    /// Its sandbox mode and network (the wake restores them from the trace).
    pub sandbox: (crate::sandbox::SandboxMode, crate::sandbox::NetworkAccess),
    /// When the session was first created (`GET /v1/sessions` keeps showing it).
    pub created_at: Box<str>,
    /// `session_meta.owner`.
    pub owner: Option<Box<str>>,
    pub log: Parked,
}

impl Hibernated {
    /// The entry of session `id` as `GET /v1/sessions` lists it.
    fn view(&self, home: &Path, id: &str) -> HibernatedView {
        HibernatedView {
            id: id.to_string(),
            workspace: self.workspace.to_path_buf(),
            approval_mode: self.approval_mode,
            sandbox: self.sandbox,
            last_event_id: self.log.last_seq(),
            created_at: self.created_at.to_string(),
            trace_path: match &self.trace {
                Some(t) => t.to_path_buf(),
                None => paths::trace_path(home, id)
                    .with_file_name(paths::trace_file_name(id, self.file_index)),
            },
            owner: self.owner.as_deref().map(str::to_string),
        }
    }
}

/// What a woken session takes back from its hibernation.
pub(in crate::server) struct Carried {
    pub log: Arc<EventLog>,
    pub trace: Option<PathBuf>,
    pub created_at: String,
}

/// A hibernated session as `GET /v1/sessions` lists it.
pub struct HibernatedView {
    /// The session's id.
    pub id: String,
    /// Its workspace.
    pub workspace: PathBuf,
    /// Its approval mode when it hibernated.
    pub approval_mode: ApprovalMode,
    /// The sandbox mode and network it runs with.
    pub sandbox: (crate::sandbox::SandboxMode, crate::sandbox::NetworkAccess),
    /// The last SSE event id it streamed.
    pub last_event_id: u64,
    /// When it was created (ISO-8601 UTC).
    pub created_at: String,
    /// The file its trace was written to last (where a wake resumes it from).
    pub trace_path: PathBuf,
    /// The principal it belongs to (`session_meta.owner`).
    pub owner: Option<String>,
}

/// The `NNN` of a trace file named `<id>_NNN.jsonl` (1 when the name says otherwise).
fn file_index(id: &str, path: &Path) -> u32 {
    path.file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_prefix(id))
        .and_then(|n| n.strip_prefix('_'))
        .and_then(|n| n.strip_suffix(".jsonl"))
        .and_then(|n| n.parse().ok())
        .unwrap_or(1)
}

/// A hibernated session's event log: kept while SSE clients are connected to it, else only
/// its numbering (the next log continues it).
pub(super) enum Parked {
    Streams(Arc<EventLog>),
    Numbered(u64),
}

impl Parked {
    fn last_seq(&self) -> u64 {
        match self {
            Parked::Streams(log) => log.last_seq(),
            Parked::Numbered(n) => *n,
        }
    }

    /// The log the woken session goes on with.
    fn log(&self, ring_bytes: usize) -> Arc<EventLog> {
        match self {
            Parked::Streams(log) => log.clone(),
            Parked::Numbered(n) => Arc::new(EventLog::after(
                *n,
                RING_CAPACITY,
                ring_bytes,
                CLIENT_BUFFER,
            )),
        }
    }

    fn close(&self) {
        if let Parked::Streams(log) = self {
            log.close();
        }
    }
}

/// Last use of a session, in ms since the epoch.
#[derive(Debug, Default)]
pub(crate) struct Activity(AtomicU64);

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl Activity {
    pub(crate) fn now() -> Self {
        Activity(AtomicU64::new(now_ms()))
    }
    pub(crate) fn touch(&self) {
        self.0.store(now_ms(), Ordering::Relaxed);
    }
    pub(crate) fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// The `session_hibernated` (or, `false`, `session_resumed`) event of a session's stream.
pub(super) fn event(hibernated: bool) -> OmniMessage {
    OmniMessage::event(if hibernated {
        EventPayload::SessionHibernated {}
    } else {
        EventPayload::SessionResumed {}
    })
}

impl ServerState {
    /// Starts the sweeper that hibernates idle sessions and enforces `--max-resident`.
    /// On the store it also starts the watch that ends the streams of sessions hibernated here
    /// once another node woke them (`parked_moves.rs`).
    pub fn start_hibernation(self: &Arc<Self>) {
        #[cfg(feature = "postgres")]
        self.start_parked_watch();
        let cfg = self.cfg.hibernation;
        let every = cfg
            .idle
            .map_or(Duration::from_secs(5), |d| d / 4)
            .clamp(Duration::from_millis(100), Duration::from_secs(5));
        let me = Arc::downgrade(self);
        let rebalance = self.rebalance.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    () = rebalance.notified() => {}
                }
                let Some(state) = me.upgrade() else { return };
                if state.is_shutting_down() {
                    return;
                }
                state.sweep().await;
            }
        });
    }

    /// True when `entry` does nothing: no task, no live command or subagent, no approval.
    pub(super) async fn is_quiet(entry: &SessionEntry) -> bool {
        entry.approvals.pending_count() == 0
            && matches!(entry.handle.status().await, Ok(SessionStatus::Idle))
            && matches!(entry.handle.live_counts().await, Ok((0, 0)))
    }

    /// The resident sessions, least recently used first.
    pub(super) fn by_last_use(&self) -> Vec<Arc<SessionEntry>> {
        let mut list: Vec<(u64, Arc<SessionEntry>)> = self
            .sessions
            .lock()
            .map(|m| {
                m.values()
                    .map(|e| (e.last_active.get(), e.clone()))
                    .collect()
            })
            .unwrap_or_default();
        list.sort_unstable_by_key(|(t, _)| *t);
        list.into_iter().map(|(_, e)| e).collect()
    }

    /// Room for one more resident session: while `--max-resident` are resident, the least
    /// recently used quiet one hibernates. Busy sessions are skipped (the cap then waits for
    /// one to become quiet).
    pub(super) async fn make_room(&self) {
        let cap = self.cfg.hibernation.max_resident;
        if self.resident_count() < cap {
            return;
        }
        let list = self.by_last_use();
        let mut over = (list.len() + 1).saturating_sub(cap);
        for entry in list {
            if over == 0 {
                return;
            }
            if Self::is_quiet(&entry).await && self.hibernate(&entry).await {
                over -= 1;
            }
        }
    }

    async fn sweep(&self) {
        let now = now_ms();
        let list = self.by_last_use();
        let mut over = list.len().saturating_sub(self.cfg.hibernation.max_resident);
        for entry in list {
            let idle_for = Duration::from_millis(now.saturating_sub(entry.last_active.get()));
            let idle = self.cfg.hibernation.idle.is_some_and(|d| idle_for >= d);
            if (over > 0 || idle) && Self::is_quiet(&entry).await && self.hibernate(&entry).await {
                over = over.saturating_sub(1);
            }
        }
    }

    /// Hibernates a quiet session; false when it is in use after all or closing failed.
    pub(super) async fn hibernate(&self, entry: &Arc<SessionEntry>) -> bool {
        let _guard = self.resume_lock.lock().await;
        let id = entry.id().to_string();
        if !self.in_memory(&id).is_some_and(|e| Arc::ptr_eq(&e, entry)) {
            return false;
        }
        // No work is handed over from here on; what was handed over before shows in the check.
        let _gate = entry.gate.write().await;
        if !Self::is_quiet(entry).await {
            return false;
        }
        entry.hibernating.store(true, Ordering::SeqCst);
        if let Ok(mut map) = self.sessions.lock() {
            map.remove(&id);
        }
        let mode = entry.policy.mode();
        if let Err(e) = entry.handle.close().await {
            tracing::warn!(session = %id, "cannot hibernate: {e}");
        }
        entry.approvals.close();
        entry.log.park();
        entry.log.push(&event(true));
        let log = if entry.log.clients() > 0 {
            Parked::Streams(entry.log.clone())
        } else {
            Parked::Numbered(entry.log.last_seq())
        };
        let trace = entry.handle.trace_path();
        let index = file_index(&id, &trace);
        let trace =
            (!paths::in_own_date_dir(&self.cfg.home, &id, &trace)).then(|| trace.into_boxed_path());
        tracing::info!(session = %id, "hibernated");
        if let Ok(mut h) = self.hibernated.lock() {
            h.insert(
                id,
                Hibernated {
                    workspace: PathBuf::from(&entry.handle.meta().workspace).into_boxed_path(),
                    trace,
                    file_index: index,
                    approval_mode: mode,
                    sandbox: entry.handle.sandbox(),
                    created_at: entry.created_at.as_str().into(),
                    owner: entry.handle.meta().owner.as_deref().map(Box::from),
                    log,
                },
            );
        }
        true
    }

    /// Resumes a hibernated session (`None`: `id` is not hibernated).
    pub(super) async fn wake(&self, id: &str) -> Result<Option<Arc<SessionEntry>>, ApiError> {
        let _guard = self.resume_lock.lock().await;
        if let Some(e) = self.in_memory(id) {
            return Ok(Some(e));
        }
        let Some(h) = self.hibernated.lock().ok().and_then(|mut m| m.remove(id)) else {
            return Ok(None);
        };
        let open = OpenOptions {
            workspace: Some(h.workspace.to_path_buf()),
            approval_mode: Some(h.approval_mode),
            config: None,
            // `None`: the resume reads the profile the trace recorded.
            tools_profile: None,
            // Default: the resume restores the sandbox the trace recorded.
            sandbox: Default::default(),
            // The resume restores the recorded owner.
            owner: None,
        };
        let carried = Carried {
            log: h.log.log(self.cfg.ring_bytes),
            trace: h.trace.as_deref().map(Path::to_path_buf),
            created_at: h.created_at.to_string(),
        };
        let resumed = self.resume_locked(id, open, Some(carried)).await;
        match resumed {
            Ok(e) => Ok(Some(e)),
            Err(err) => {
                // Still hibernated: a later request may succeed (e.g. under --max-sessions).
                if let Ok(mut m) = self.hibernated.lock() {
                    m.insert(id.to_string(), h);
                }
                Err(err)
            }
        }
    }

    /// Whether `entry` is still its session's served entry (not hibernated or closed since).
    pub fn is_current(&self, entry: &Arc<SessionEntry>) -> bool {
        self.in_memory(entry.id())
            .is_some_and(|e| Arc::ptr_eq(&e, entry))
    }

    /// Sessions resident now.
    pub fn resident_count(&self) -> usize {
        self.sessions.lock().map_or(0, |m| m.len())
    }

    /// Sessions hibernated now.
    pub fn hibernated_count(&self) -> usize {
        self.hibernated.lock().map_or(0, |m| m.len())
    }

    /// The hibernated sessions, by id.
    pub fn hibernated_list(&self) -> Vec<HibernatedView> {
        let home = &self.cfg.home;
        let mut v: Vec<_> = self
            .hibernated
            .lock()
            .map(|m| m.iter().map(|(id, h)| h.view(home, id)).collect())
            .unwrap_or_default();
        v.sort_by(|a, b| a.id.cmp(&b.id));
        v
    }

    /// Hibernated session `id`, if it is one.
    pub fn hibernated_list_one(&self, id: &str) -> Option<HibernatedView> {
        let home = &self.cfg.home;
        self.hibernated
            .lock()
            .ok()
            .and_then(|m| m.get(id).map(|h| h.view(home, id)))
    }

    /// SSE clients connected to hibernated sessions (their event logs wait for the wake).
    pub fn hibernated_clients(&self) -> usize {
        self.hibernated.lock().map_or(0, |m| {
            m.values()
                .map(|h| match &h.log {
                    Parked::Streams(log) => log.clients(),
                    Parked::Numbered(_) => 0,
                })
                .sum()
        })
    }

    /// Forgets a hibernated session (DELETE): its stream ends. False when it was not one.
    pub(super) fn forget_hibernated(&self, id: &str) -> bool {
        match self.hibernated.lock().ok().and_then(|mut m| m.remove(id)) {
            Some(h) => {
                h.log.close();
                true
            }
            None => false,
        }
    }

    /// Ends the streams of every hibernated session (shutdown).
    pub(super) fn close_hibernated(&self) {
        if let Ok(mut m) = self.hibernated.lock() {
            for (_, h) in m.drain() {
                h.log.close();
            }
        }
    }
}
