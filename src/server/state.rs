//! The server's shared state: the `Host`, the served sessions (each with its approval policy,
//! its API approver and its event log), the defaults from the command line, and the metrics.
//!
//! It owns the server's session directory (creation, implicit resume of sessions found on disk,
//! close, shutdown, the `--max-sessions` cap) and the one pump per session that numbers its
//! messages. It never runs a turn and never writes a trace: the library does both.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use axum::http::StatusCode;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::approver::ApiApprover;
use super::error::ApiError;
use super::metrics::{Metrics, SessionObserver};
use super::sse::{CLIENT_BUFFER, EventLog, RING_CAPACITY};
use crate::Host;
use crate::actors::session::{SessionHandle, SessionOptions};
use crate::approval::{ApprovalMode, PolicyApprover};
use crate::config::AgentConfig;
use crate::message::launch::Launch;
use crate::model::Model;
use crate::trace::paths;

mod hibernate;
pub mod listing;
mod owners;
mod quotas;
mod sandbox;
mod trace_meta;
pub use hibernate::{HibernatedView, HibernationConfig};
pub use owners::Recorded;
pub use quotas::quota_exceeded;
pub use trace_meta::read_trace_meta;
mod backend;
mod resume;
mod server_config;
pub use server_config::ServerConfig;
#[cfg(feature = "postgres")]
mod parked_moves;
#[cfg(feature = "postgres")]
mod stored;
#[cfg(feature = "postgres")]
pub(in crate::server) use stored::store_error;

/// One served session.
pub struct SessionEntry {
    /// The session.
    pub handle: SessionHandle,
    /// Its approval mode policy (changed by `PUT …/approval_mode`).
    pub policy: Arc<PolicyApprover>,
    /// Its questions waiting for the approvals API.
    pub approvals: Arc<ApiApprover>,
    /// Its numbered message log (SSE replay and live feed).
    pub log: Arc<EventLog>,
    /// Its tasks waiting for it to be idle (`if_busy: enqueue`; `busy.rs`).
    pub queue: super::task_queue::TaskQueue,
    /// How its last task ended (`last_task`).
    pub last_task: Arc<super::last_task::LastTask>,
    /// When the session was created (the timestamp of its `session_meta`).
    pub created_at: String,
    /// Last use (a message of the session, or a request naming it), for hibernation.
    pub(crate) last_active: hibernate::Activity,
    /// Set while the session is being hibernated: its event log outlives it.
    pub(crate) hibernating: Arc<AtomicBool>,
    /// Held shared while a request hands the session work (a task, a steer, …), and
    /// exclusively by a hibernation while it makes sure the session is still quiet and closes
    /// it: work is either handed over before that check (and the session stays) or finds the
    /// session hibernating (and wakes it), never started and then aborted by the hibernation.
    pub(crate) gate: tokio::sync::RwLock<()>,
    /// The session's place under `--max-sessions`, given back when the entry goes.
    _slot: OwnedSemaphorePermit,
}

impl SessionEntry {
    /// The event id a task's events follow. On the store, the records the session appended
    /// before it (a takeover's failover records among them) are committed first, so the id is
    /// past them and a client reading from it sees this task's events only.
    pub async fn events_after(&self) -> u64 {
        if !self.log.is_stored() {
            return self.log.last_seq();
        }
        if let Err(e) = self.handle.flush_trace().await {
            tracing::debug!(session = %self.id(), "cannot flush the trace before a task: {e}");
        }
        self.log.committed_seq()
    }

    /// The session's id.
    pub fn id(&self) -> &str {
        self.handle.id()
    }
}

/// How a session is to be opened (create or resume).
#[derive(Default)]
pub struct OpenOptions {
    /// The workspace (default: the server's).
    pub workspace: Option<PathBuf>,
    /// The approval mode (default: the server's).
    pub approval_mode: Option<ApprovalMode>,
    /// The request's config, resolved (`session_config.rs`); `None`: the server's.
    pub config: Option<AgentConfig>,
    /// `tools_profile` of the request: overrides the config's.
    pub tools_profile: Option<crate::tools::profile::ToolProfile>,
    /// `sandbox` of the request (`{"mode", "network"}`): never looser than the server's.
    pub sandbox: crate::sandbox::SandboxRequest,
    /// The principal a new session belongs to (a resume keeps the recorded one).
    pub owner: Option<String>,
}

/// What a session is opened with before the request's own fields.
struct Base {
    model: Arc<dyn Model>,
    config: AgentConfig,
    launch: Launch,
}

/// Everything `rookery serve` shares between requests: the host, the served and hibernated
/// sessions, the metrics and the shutdown flag.
pub struct ServerState {
    /// The host that runs the sessions.
    pub host: Host,
    /// The command line's configuration.
    pub cfg: ServerConfig,
    /// The counters `/metrics` reports.
    pub metrics: Metrics,
    /// The stream tokens handed out (`stream_token.rs`).
    pub stream_tokens: super::stream_token::StreamTokens,
    sessions: Mutex<HashMap<String, Arc<SessionEntry>>>,
    /// Sessions closed through the API: not resumed implicitly, only by `POST …/resume`.
    closed: Mutex<HashSet<String>>,
    /// Serializes resumes so one id is never opened twice.
    resume_lock: tokio::sync::Mutex<()>,
    shutting_down: AtomicBool,
    /// One permit per servable session.
    slots: Arc<Semaphore>,
    /// Numbers the approval ids of every session.
    approval_ids: Arc<AtomicU64>,
    /// Sessions hibernated: the little that brings them back.
    hibernated: Mutex<HashMap<String, hibernate::Hibernated>>,
    /// Wakes the sweeper when more sessions than `--max-resident` are resident.
    rebalance: Arc<tokio::sync::Notify>,
    /// Serializes each principal's quota checks with what they admit.
    quota_locks: quotas::QuotaLocks,
    /// `--webhook` / `--webhook-allow` (`webhooks.rs`), set once at start.
    webhooks: std::sync::OnceLock<Arc<super::webhooks::Webhooks>>,
    /// The sessions' schedules (`schedules.rs`), set once at start.
    schedules: std::sync::OnceLock<Arc<super::schedules::Schedules>>,
    /// This node of a cluster (`cluster.rs`), set once at start.
    #[cfg(feature = "postgres")]
    cluster: std::sync::OnceLock<Arc<super::cluster::Cluster>>,
    me: Weak<ServerState>,
}

impl ServerState {
    /// The state of a server with no session yet.
    pub fn new(host: Host, cfg: ServerConfig) -> Arc<Self> {
        let slots = Arc::new(Semaphore::new(cfg.max_sessions.min(Semaphore::MAX_PERMITS)));
        if let Some(token) = cfg.token() {
            crate::redact::redact_in_logs(token);
        }
        let stream_tokens = super::stream_token::StreamTokens::new(cfg.stream_token_ttl);
        Arc::new_cyclic(|me| ServerState {
            host,
            cfg,
            slots,
            approval_ids: Arc::new(AtomicU64::new(0)),
            hibernated: Mutex::new(HashMap::new()),
            rebalance: Arc::new(tokio::sync::Notify::new()),
            quota_locks: Default::default(),
            metrics: Metrics::default(),
            stream_tokens,
            sessions: Mutex::new(HashMap::new()),
            closed: Mutex::new(HashSet::new()),
            resume_lock: tokio::sync::Mutex::new(()),
            shutting_down: AtomicBool::new(false),
            webhooks: std::sync::OnceLock::new(),
            schedules: std::sync::OnceLock::new(),
            #[cfg(feature = "postgres")]
            cluster: std::sync::OnceLock::new(),
            me: me.clone(),
        })
    }

    /// Sends the events of every session created or resumed from now on to `webhooks`.
    pub fn set_webhooks(&self, webhooks: Arc<super::webhooks::Webhooks>) {
        let _ = self.webhooks.set(webhooks);
    }

    /// The server's webhooks, if it has any.
    pub fn webhooks(&self) -> Option<&Arc<super::webhooks::Webhooks>> {
        self.webhooks.get()
    }

    /// The sessions' schedules (`schedule_runner::start` runs them).
    pub fn set_schedules(&self, schedules: Arc<super::schedules::Schedules>) {
        let _ = self.schedules.set(schedules);
    }

    /// The server's schedules, if it runs them.
    pub fn schedules(&self) -> Option<&Arc<super::schedules::Schedules>> {
        self.schedules.get()
    }

    /// Makes this server a node of a cluster (`forward.rs` routes its session requests).
    #[cfg(feature = "postgres")]
    pub fn set_cluster(&self, cluster: Arc<super::cluster::Cluster>) {
        crate::redact::redact_in_logs(cluster.token());
        self.stream_tokens.sign_for_cluster(cluster.token());
        let _ = self.cluster.set(cluster);
    }

    /// This node of a cluster, if the server is one.
    #[cfg(feature = "postgres")]
    pub fn cluster(&self) -> Option<&Arc<super::cluster::Cluster>> {
        self.cluster.get()
    }

    /// True once shutdown began (new requests get 503).
    pub fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::SeqCst)
    }

    /// 503 once shutdown has begun.
    pub fn check_open(&self) -> Result<(), ApiError> {
        if self.is_shutting_down() {
            Err(ApiError::shutting_down())
        } else {
            Ok(())
        }
    }

    /// Session options from a request: the server's model, the request's or the server's
    /// config, and a `PolicyApprover` over a fresh API approver.
    fn options(
        &self,
        workspace: PathBuf,
        open: &OpenOptions,
        base: Base,
    ) -> Result<(SessionOptions, Arc<PolicyApprover>, Arc<ApiApprover>), ApiError> {
        let config = match &open.config {
            Some(config) => {
                let mut config = config.clone();
                config.hooks = Arc::new(config.hooks.merged(&self.cfg.hooks));
                config.permissions = Arc::new(config.permissions.merged(&self.cfg.permissions));
                config
            }
            None => base.config,
        };
        let mut config = config;
        config.sandbox = self.session_sandbox(open)?;
        self.hide_other_roots(&mut config.sandbox, open.owner.as_deref(), &workspace);
        if let Some(p) = open.tools_profile {
            config
                .set_profile(p)
                .map_err(|e| ApiError::bad_request("invalid_tools_profile", e.to_string()))?;
        }
        let approvals = Arc::new(ApiApprover::with_counter(self.approval_ids.clone()));
        // Without a mode in the request, a resumed session takes back the one its trace recorded.
        let policy = Arc::new(match open.approval_mode {
            Some(mode) => PolicyApprover::new(mode, approvals.clone()),
            None => PolicyApprover::inherited(ApprovalMode::AllowAll, approvals.clone()),
        });
        let mut options = SessionOptions::new(workspace, base.model);
        options.launch = base.launch;
        options.config = config;
        options.approver = policy.clone();
        options.resume_sandbox = open.sandbox;
        // A task's prompt is an event of the session's stream (and of its replay).
        options.stream_prompt = true;
        options.owner = open.owner.clone();
        // The token never reaches a command's environment, the trace or the stream.
        options.secrets.extend(self.cfg.token().map(str::to_string));
        options
            .secrets
            .extend(self.webhooks().map(|w| w.secret().to_string()));
        #[cfg(feature = "postgres")]
        options
            .secrets
            .extend(self.cluster().map(|c| c.token().to_string()));
        Ok((options, policy, approvals))
    }

    /// A place for one more session, or 503 `too_many_sessions`.
    fn slot(&self) -> Result<OwnedSemaphorePermit, ApiError> {
        self.slots.clone().try_acquire_owned().map_err(|_| {
            ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "too_many_sessions",
                format!(
                    "the server already serves its limit of {} sessions (--max-sessions); close one first",
                    self.cfg.max_sessions
                ),
            )
        })
    }

    /// Creates a session.
    pub async fn create(&self, open: OpenOptions) -> Result<Arc<SessionEntry>, ApiError> {
        self.check_open()?;
        let Some(workspace) = open.workspace.clone() else {
            return Err(ApiError::bad_request(
                "invalid_request",
                "workspace is required",
            ));
        };
        let Some(model) = self.cfg.model.clone() else {
            return Err(ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "no_model",
                "the server was started without a model: it resumes recorded sessions (each with its recorded model) but cannot create new ones",
            ));
        };
        let base = Base {
            model,
            config: self.cfg.config.clone(),
            launch: self.cfg.launch.clone(),
        };
        let (options, policy, approvals) = self.options(workspace, &open, base)?;
        // Under --max-resident, the least recently used idle session hibernates first.
        self.make_room().await;
        let slot = self.slot()?;
        let handle = self
            .host
            .create_session(options)
            .await
            .map_err(ApiError::session_start)?;
        // The time its trace's `session_meta` records.
        let created_at = handle.meta_message().timestamp.clone();
        self.register(handle, policy, approvals, slot, None, created_at)
            .await
    }

    /// Subscribes to a new session once, starts its pump and lists it; `created_at` is when the
    /// session was first created (kept across resumes and hibernation).
    async fn register(
        &self,
        handle: SessionHandle,
        policy: Arc<PolicyApprover>,
        approvals: Arc<ApiApprover>,
        slot: OwnedSemaphorePermit,
        log: Option<Arc<EventLog>>,
        created_at: String,
    ) -> Result<Arc<SessionEntry>, ApiError> {
        let mut rx = match handle.subscribe().await {
            Ok(rx) => rx,
            Err(e) => {
                let _ = handle.close().await;
                return Err(e.into());
            }
        };
        let carried = log.is_some();
        // On the store, the log is numbered by the store's `seq` (`sse_store.rs`).
        #[cfg(feature = "postgres")]
        let (log, follower) = match self.stored_log(handle.id(), log) {
            Ok((log, follower)) => (Some(log), Some(follower)),
            Err(log) => (log, None),
        };
        let log = match log {
            // New on the store: its records come as they are committed.
            Some(log) if !carried => log,
            // Back from hibernation: the same log, so its subscribers stay.
            Some(log) => {
                log.push(&hibernate::event(false));
                log
            }
            None => {
                let log = Arc::new(EventLog::new(
                    RING_CAPACITY,
                    self.cfg.ring_bytes,
                    CLIENT_BUFFER,
                ));
                log.push(handle.meta_message());
                log
            }
        };
        let hibernating = Arc::new(AtomicBool::new(false));
        let last_task = Arc::new(super::last_task::LastTask::default());
        let entry = Arc::new(SessionEntry {
            handle,
            policy,
            approvals,
            log: log.clone(),
            last_task: last_task.clone(),
            queue: Default::default(),
            created_at,
            last_active: hibernate::Activity::now(),
            hibernating: hibernating.clone(),
            gate: tokio::sync::RwLock::new(()),
            _slot: slot,
        });
        let id = entry.id().to_string();
        if let Some(w) = self.webhooks() {
            w.watch_approvals(&id, &entry.approvals);
        }
        if let Ok(mut map) = self.sessions.lock() {
            map.insert(id.clone(), entry.clone());
            if map.len() > self.cfg.hibernation.max_resident {
                self.rebalance.notify_one();
            }
        }
        if let Ok(mut closed) = self.closed.lock() {
            closed.remove(&id);
        }
        let me = self.me.clone();
        let pumped = Arc::downgrade(&entry);
        tokio::spawn(async move {
            let mut observer = SessionObserver::default();
            let mut watch = super::last_task::TaskWatch::default();
            while let Some(msg) = rx.recv().await {
                let Some(state) = me.upgrade() else { break };
                if let Some(e) = pumped.upgrade() {
                    e.last_active.touch();
                }
                observer.observe(&msg, &state.metrics);
                watch.observe(&msg, &id, &last_task);
                if let Some(w) = state.webhooks() {
                    w.observe(&id, &msg);
                }
                state.metrics.sse_clients_dropped(log.push_streamed(&msg));
            }
            if hibernating.load(Ordering::SeqCst) {
                return;
            }
            // What was committed last goes out before the log closes.
            #[cfg(feature = "postgres")]
            if let Some(follower) = follower {
                let _ = tokio::time::timeout(super::sse_store::FOLLOWER_END, follower).await;
            }
            #[cfg(feature = "postgres")]
            if let Some(state) = me.upgrade()
                && let Some(moved) = state.moved_event(&id).await
            {
                log.push(&moved);
            }
            log.close();
            tracing::debug!(session = %id, "session stream ended");
            if let Some(state) = me.upgrade() {
                state.forget(&id, &pumped);
            }
        });
        Ok(entry)
    }

    /// Drops a session whose stream ended (closed or crashed), unless it was replaced.
    fn forget(&self, id: &str, entry: &Weak<SessionEntry>) {
        if let Ok(mut map) = self.sessions.lock()
            && map
                .get(id)
                .is_some_and(|e| std::ptr::eq(Arc::as_ptr(e), entry.as_ptr()))
        {
            map.remove(id);
            if let Some(e) = entry.upgrade() {
                e.approvals.close();
            }
        }
    }

    fn in_memory(&self, id: &str) -> Option<Arc<SessionEntry>> {
        self.sessions.lock().ok()?.get(id).cloned()
    }

    /// A served session; one found only on disk is resumed first (with default options).
    pub async fn get(&self, id: &str) -> Result<Arc<SessionEntry>, ApiError> {
        if let Some(e) = self.in_memory(id) {
            e.last_active.touch();
            return Ok(e);
        }
        if let Some(e) = self.wake(id).await? {
            return Ok(e);
        }
        if self.is_closed(id) {
            return Err(ApiError::session_closed(id));
        }
        self.resume(id, OpenOptions::default()).await
    }

    /// Whether `id` was closed with `DELETE` (and not resumed since).
    pub fn is_closed(&self, id: &str) -> bool {
        self.closed.lock().is_ok_and(|c| c.contains(id))
    }

    /// Served sessions, by id.
    pub fn list(&self) -> Vec<Arc<SessionEntry>> {
        let mut list: Vec<Arc<SessionEntry>> = self
            .sessions
            .lock()
            .map(|m| m.values().cloned().collect())
            .unwrap_or_default();
        list.sort_by(|a, b| a.id().cmp(b.id()));
        list
    }

    /// Aborts the running task of a session and denies its pending approvals.
    pub fn abort(&self, entry: &SessionEntry) -> Result<(), crate::error::RookeryError> {
        entry.approvals.deny_all();
        entry.handle.abort()
    }

    /// `DELETE`: closes a served session; one that is closed already or only on disk is left as
    /// it is (no error); an unknown id is 404.
    pub async fn delete(&self, id: &str) -> Result<(), ApiError> {
        if let Some(entry) = self.in_memory(id) {
            return self.close(&entry).await;
        }
        if self.forget_hibernated(id) {
            if let Ok(mut closed) = self.closed.lock() {
                closed.insert(id.to_string());
            }
            return Ok(());
        }
        let known = self.closed.lock().is_ok_and(|c| c.contains(id))
            || match self.in_store(id).await? {
                Some(stored) => stored,
                None => paths::locate_trace(&self.cfg.home, id).is_some(),
            };
        if known {
            Ok(())
        } else {
            Err(ApiError::unknown_session(id))
        }
    }

    /// Whether `id` is served now.
    pub fn is_served(&self, id: &str) -> bool {
        self.in_memory(id).is_some()
    }

    /// Closes a session (its commands and subagents end, its trace stays). It leaves the
    /// directory before its actors are told to stop, so a request from then on gets 404
    /// `session_closed`, never a closing actor; a session whose actor is gone already (closed
    /// by a concurrent `DELETE`, crashed) is closed too.
    pub async fn close(&self, entry: &SessionEntry) -> Result<(), ApiError> {
        let id = entry.id().to_string();
        if let Ok(mut closed) = self.closed.lock() {
            closed.insert(id.clone());
        }
        if let Ok(mut map) = self.sessions.lock()
            && map
                .get(&id)
                .is_some_and(|e| std::ptr::eq(Arc::as_ptr(e), entry))
        {
            map.remove(&id);
        }
        entry.approvals.close();
        if let Err(e) = entry.handle.close().await {
            tracing::debug!(session = %id, "closed already: {e}");
        }
        Ok(())
    }

    /// The answer to a call on `entry`'s session that failed with `e`: 404 `session_closed`
    /// when the session was closed meanwhile (its actor may be gone), else `e`'s own.
    pub fn call_error(&self, entry: &SessionEntry, e: crate::error::RookeryError) -> ApiError {
        if matches!(e, crate::error::RookeryError::Actor(_)) && self.is_closed(entry.id()) {
            ApiError::session_closed(entry.id())
        } else {
            e.into()
        }
    }

    /// Refuses new work, denies every pending approval and closes every session (each running
    /// task gets `abort` and `task_end` in its trace).
    pub async fn shutdown(&self) {
        self.shutting_down.store(true, Ordering::SeqCst);
        for e in self.list() {
            e.approvals.close();
        }
        self.close_hibernated();
        self.host.shutdown().await;
    }
}
