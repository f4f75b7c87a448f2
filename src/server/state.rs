//! The server's shared state: the `Host`, the served sessions (each with its approval policy,
//! its API approver and its event log), the defaults from the command line, and the metrics.
//!
//! It owns the server's session directory (creation, implicit resume of sessions found on disk,
//! close, shutdown, the `--max-sessions` cap) and the one pump per session that numbers its
//! messages. It never runs a turn and never writes a trace: the library does both.

use std::collections::{HashMap, HashSet};
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use axum::http::StatusCode;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::approver::ApiApprover;
use super::error::ApiError;
use super::guard::GuardConfig;
use super::metrics::{Metrics, SessionObserver};
use super::session_config::ConfigDir;
use super::sse::{CLIENT_BUFFER, EventLog, RING_CAPACITY};
use crate::Host;
use crate::actors::session::{SessionHandle, SessionOptions};
use crate::approval::{ApprovalMode, PolicyApprover};
use crate::config::AgentConfig;
use crate::message::{OmniMessage, SessionMeta, now_timestamp};
use crate::model::Model;
use crate::trace::paths;

/// What the command line gives the server.
pub struct ServerConfig {
    pub home: PathBuf,
    pub model: Arc<dyn Model>,
    /// The agent config of sessions that name none.
    pub config: AgentConfig,
    /// The bearer token every route but `/healthz` needs, if any.
    pub token: Option<String>,
    /// Host, Origin and body rules of the API.
    pub guard: GuardConfig,
    /// Where named session configs live (`--config-dir`).
    pub config_dir: Option<ConfigDir>,
    /// Sessions served at once, at most (`--max-sessions`).
    pub max_sessions: usize,
    /// `--hooks FILE`: run for every served session, besides its config's own.
    pub hooks: Arc<crate::hooks::HooksConfig>,
}

/// One served session.
pub struct SessionEntry {
    pub handle: SessionHandle,
    pub policy: Arc<PolicyApprover>,
    pub approvals: Arc<ApiApprover>,
    pub log: Arc<EventLog>,
    pub created_at: String,
    /// The session's place under `--max-sessions`, given back when the entry goes.
    _slot: OwnedSemaphorePermit,
}

impl SessionEntry {
    pub fn id(&self) -> &str {
        self.handle.id()
    }
}

/// How a session is to be opened (create or resume).
#[derive(Default)]
pub struct OpenOptions {
    pub workspace: Option<PathBuf>,
    pub approval_mode: Option<ApprovalMode>,
    /// The request's config, resolved (`session_config.rs`); `None`: the server's.
    pub config: Option<AgentConfig>,
    /// `tools_profile` of the request: overrides the config's.
    pub tools_profile: Option<crate::tools::profile::ToolProfile>,
}

pub struct ServerState {
    pub host: Host,
    pub cfg: ServerConfig,
    pub metrics: Metrics,
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
    me: Weak<ServerState>,
}

/// The first record of a trace when it is a `session_meta`.
pub fn read_trace_meta(path: &Path) -> Option<SessionMeta> {
    let file = std::fs::File::open(path).ok()?;
    let mut line = String::new();
    std::io::BufReader::new(file).read_line(&mut line).ok()?;
    match OmniMessage::from_json(line.trim_end()).ok()?.payload {
        crate::message::Payload::SessionMeta(m) => Some(m),
        _ => None,
    }
}

impl ServerState {
    pub fn new(host: Host, cfg: ServerConfig) -> Arc<Self> {
        let slots = Arc::new(Semaphore::new(cfg.max_sessions.min(Semaphore::MAX_PERMITS)));
        if let Some(token) = &cfg.token {
            crate::redact::redact_in_logs(token);
        }
        Arc::new_cyclic(|me| ServerState {
            host,
            cfg,
            slots,
            approval_ids: Arc::new(AtomicU64::new(0)),
            metrics: Metrics::default(),
            sessions: Mutex::new(HashMap::new()),
            closed: Mutex::new(HashSet::new()),
            resume_lock: tokio::sync::Mutex::new(()),
            shutting_down: AtomicBool::new(false),
            me: me.clone(),
        })
    }

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
    ) -> Result<(SessionOptions, Arc<PolicyApprover>, Arc<ApiApprover>), ApiError> {
        let config = match &open.config {
            Some(config) => {
                let mut config = config.clone();
                config.hooks = Arc::new(config.hooks.merged(&self.cfg.hooks));
                config
            }
            None => self.cfg.config.clone(),
        };
        let mut config = config;
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
        let mut options = SessionOptions::new(workspace, self.cfg.model.clone());
        options.config = config;
        options.approver = policy.clone();
        // The token never reaches a command's environment, the trace or the stream.
        options.secrets.extend(self.cfg.token.clone());
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
        let (options, policy, approvals) = self.options(workspace, &open)?;
        let slot = self.slot()?;
        let handle = self
            .host
            .create_session(options)
            .await
            .map_err(ApiError::session_start)?;
        self.register(handle, policy, approvals, slot).await
    }

    /// Subscribes to a new session once, starts its pump and lists it.
    async fn register(
        &self,
        handle: SessionHandle,
        policy: Arc<PolicyApprover>,
        approvals: Arc<ApiApprover>,
        slot: OwnedSemaphorePermit,
    ) -> Result<Arc<SessionEntry>, ApiError> {
        let mut rx = match handle.subscribe().await {
            Ok(rx) => rx,
            Err(e) => {
                let _ = handle.close().await;
                return Err(e.into());
            }
        };
        let log = Arc::new(EventLog::new(RING_CAPACITY, CLIENT_BUFFER));
        log.push(handle.meta_message());
        let entry = Arc::new(SessionEntry {
            handle,
            policy,
            approvals,
            log: log.clone(),
            created_at: now_timestamp(),
            _slot: slot,
        });
        let id = entry.id().to_string();
        if let Ok(mut map) = self.sessions.lock() {
            map.insert(id.clone(), entry.clone());
        }
        if let Ok(mut closed) = self.closed.lock() {
            closed.remove(&id);
        }
        let me = self.me.clone();
        let pumped = Arc::downgrade(&entry);
        tokio::spawn(async move {
            let mut observer = SessionObserver::default();
            while let Some(msg) = rx.recv().await {
                let Some(state) = me.upgrade() else { break };
                observer.observe(&msg, &state.metrics);
                state.metrics.sse_clients_dropped(log.push(&msg));
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
            return Ok(e);
        }
        if self.closed.lock().is_ok_and(|c| c.contains(id)) {
            return Err(ApiError::new(
                StatusCode::NOT_FOUND,
                "session_closed",
                format!("session {id} was closed; POST /v1/sessions/{id}/resume reopens it"),
            ));
        }
        self.resume(id, OpenOptions::default()).await
    }

    /// Resumes a session from its trace (a session already served is returned as it is).
    pub async fn resume(&self, id: &str, open: OpenOptions) -> Result<Arc<SessionEntry>, ApiError> {
        let _guard = self.resume_lock.lock().await;
        if let Some(e) = self.in_memory(id) {
            return Ok(e);
        }
        self.check_open()?;
        let Some(trace) = paths::locate_trace(&self.cfg.home, id) else {
            return Err(ApiError::unknown_session(id));
        };
        let workspace = match open.workspace.clone() {
            Some(w) => w,
            None => match read_trace_meta(&trace) {
                Some(meta) => PathBuf::from(meta.workspace),
                None => {
                    return Err(ApiError::new(
                        StatusCode::UNPROCESSABLE_ENTITY,
                        "unreadable_trace",
                        format!(
                            "cannot resume {id}: {} has no session_meta",
                            trace.display()
                        ),
                    ));
                }
            },
        };
        let mut open = open;
        if open.tools_profile.is_none() {
            // The session keeps the tool profile its trace recorded.
            open.tools_profile = read_trace_meta(&trace)
                .and_then(|m| m.launch.tool_profile.and_then(|p| p.parse().ok()));
        }
        let (options, policy, approvals) = self.options(workspace, &open)?;
        let slot = self.slot()?;
        let handle = self
            .host
            .resume_session(id, options)
            .await
            .map_err(ApiError::session_start)?;
        tracing::info!(session = %id, "resumed from {}", trace.display());
        self.register(handle, policy, approvals, slot).await
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
    pub fn abort(&self, entry: &SessionEntry) -> Result<(), ApiError> {
        entry.approvals.deny_all();
        entry.handle.abort().map_err(ApiError::from)
    }

    /// `DELETE`: closes a served session; one that is closed already or only on disk is left as
    /// it is (no error); an unknown id is 404.
    pub async fn delete(&self, id: &str) -> Result<(), ApiError> {
        if let Some(entry) = self.in_memory(id) {
            return self.close(&entry).await;
        }
        let known = self.closed.lock().is_ok_and(|c| c.contains(id))
            || paths::locate_trace(&self.cfg.home, id).is_some();
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

    /// Closes a session (its commands and subagents end, its trace stays).
    pub async fn close(&self, entry: &SessionEntry) -> Result<(), ApiError> {
        let id = entry.id().to_string();
        if let Ok(mut closed) = self.closed.lock() {
            closed.insert(id.clone());
        }
        entry.approvals.close();
        let result = entry.handle.close().await;
        if let Ok(mut map) = self.sessions.lock() {
            map.remove(&id);
        }
        result.map_err(ApiError::from)
    }

    /// Refuses new work, denies every pending approval and closes every session (each running
    /// task gets `abort` and `task_end` in its trace).
    pub async fn shutdown(&self) {
        self.shutting_down.store(true, Ordering::SeqCst);
        for e in self.list() {
            e.approvals.close();
        }
        self.host.shutdown().await;
    }
}
