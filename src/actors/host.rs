//! The `Host` actor (one per process): the session directory, session creation and the
//! supervision of every session and trace actor.
//!
//! Trace actors are the host's children, not the session's: ractor kills an actor's children when
//! it stops, and a session that panics must still get its `abort` record written. The host never
//! runs a turn and never writes a trace record except that crash report.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use ractor::{Actor, ActorId, ActorProcessingErr, ActorRef, RpcReplyPort, SupervisionEvent};

use super::session::{
    SessionActor, SessionArgs, SessionHandle, SessionOptions, Subscribers, broadcast,
};
use crate::error::{ConfigError, RookeryError};
use crate::message::{OmniMessage, StopReason, build};
use crate::trace::paths;
use crate::trace::writer::{TraceActor, TraceArgs, TraceMsg, TraceStats};

/// Messages of the host actor.
pub enum HostMsg {
    CreateSession(
        Box<SessionOptions>,
        RpcReplyPort<Result<SessionHandle, RookeryError>>,
    ),
    GetSession(String, RpcReplyPort<Option<SessionHandle>>),
    ListSessions(RpcReplyPort<Vec<SessionHandle>>),
}

struct Entry {
    handle: SessionHandle,
    trace: ActorRef<TraceMsg>,
    subscribers: Subscribers,
}

pub struct HostActor;

pub struct HostState {
    home: PathBuf,
    sessions: HashMap<String, Entry>,
    by_actor: HashMap<ActorId, String>,
    trace_stats: Arc<TraceStats>,
}

fn stop_trace(trace: &ActorRef<TraceMsg>) {
    let (tx, _rx) = ractor::concurrency::oneshot();
    let _ = trace.cast(TraceMsg::Shutdown(tx.into()));
}

impl HostActor {
    async fn create(
        myself: &ActorRef<HostMsg>,
        state: &mut HostState,
        options: SessionOptions,
    ) -> Result<SessionHandle, RookeryError> {
        if !options.workspace.is_dir() {
            return Err(ConfigError::Workspace(options.workspace.clone()).into());
        }
        let mut options = options;
        options.workspace = options
            .workspace
            .canonicalize()
            .map_err(|_| ConfigError::Workspace(options.workspace.clone()))?;
        let mut id = paths::new_session_id();
        while state.sessions.contains_key(&id) {
            id = paths::new_session_id();
        }
        let trace_path = paths::trace_path(&state.home, &id);
        let meta = Arc::new(super::session::session_meta(&id, &options));
        let meta_message = Arc::new(OmniMessage::session_meta(meta.as_ref().clone()));
        let (trace, _) = Actor::spawn_linked(
            None,
            TraceActor,
            TraceArgs {
                path: trace_path.clone(),
                stats: state.trace_stats.clone(),
            },
            myself.get_cell(),
        )
        .await?;
        let subscribers: Subscribers = Arc::new(Mutex::new(Vec::new()));
        let spawned = Actor::spawn_linked(
            None,
            SessionActor,
            SessionArgs {
                id: id.clone(),
                options,
                trace: trace.clone(),
                trace_path: trace_path.clone(),
                subscribers: subscribers.clone(),
                meta: meta_message.clone(),
            },
            myself.get_cell(),
        )
        .await;
        let (actor, _) = match spawned {
            Ok(s) => s,
            Err(e) => {
                stop_trace(&trace);
                return Err(e.into());
            }
        };
        let handle = SessionHandle {
            id: id.clone(),
            meta,
            meta_message,
            actor: actor.clone(),
            trace_path,
        };
        state.by_actor.insert(actor.get_id(), id.clone());
        state.sessions.insert(
            id,
            Entry {
                handle: handle.clone(),
                trace,
                subscribers,
            },
        );
        Ok(handle)
    }
}

impl Actor for HostActor {
    type Msg = HostMsg;
    type State = HostState;
    type Arguments = (PathBuf, Arc<TraceStats>);

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        (home, trace_stats): (PathBuf, Arc<TraceStats>),
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(HostState {
            home,
            sessions: HashMap::new(),
            by_actor: HashMap::new(),
            trace_stats,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: HostMsg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            HostMsg::CreateSession(options, reply) => {
                let result = Self::create(&myself, state, *options).await;
                let _ = reply.send(result);
            }
            HostMsg::GetSession(id, reply) => {
                let _ = reply.send(state.sessions.get(&id).map(|e| e.handle.clone()));
            }
            HostMsg::ListSessions(reply) => {
                let mut list: Vec<SessionHandle> =
                    state.sessions.values().map(|e| e.handle.clone()).collect();
                list.sort_by(|a, b| a.id.cmp(&b.id));
                let _ = reply.send(list);
            }
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        _myself: ActorRef<Self::Msg>,
        event: SupervisionEvent,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match event {
            SupervisionEvent::ActorFailed(cell, err) => {
                let Some(id) = state.by_actor.remove(&cell.get_id()) else {
                    tracing::error!("trace actor failed: {err}");
                    return Ok(());
                };
                tracing::error!(session = %id, "session actor failed: {err}");
                if let Some(entry) = state.sessions.remove(&id) {
                    let reason = format!("session actor failed: {err}");
                    for msg in [
                        build::abort(Some(reason)),
                        build::task_end(StopReason::Failed),
                    ] {
                        let msg = Arc::new(msg);
                        let _ = entry.trace.cast(TraceMsg::Append(msg.clone()));
                        broadcast(&entry.subscribers, &msg);
                    }
                    stop_trace(&entry.trace);
                    if let Ok(mut subs) = entry.subscribers.lock() {
                        subs.clear();
                    }
                }
            }
            SupervisionEvent::ActorTerminated(cell, _, _) => {
                if let Some(id) = state.by_actor.remove(&cell.get_id())
                    && let Some(entry) = state.sessions.remove(&id)
                {
                    stop_trace(&entry.trace);
                }
            }
            _ => {}
        }
        Ok(())
    }
}

/// The public handle on a host: creates and finds sessions.
#[derive(Clone)]
pub struct Host {
    actor: ActorRef<HostMsg>,
    home: PathBuf,
    trace_stats: Arc<TraceStats>,
}

impl Host {
    /// Starts a host writing traces under `home` (`<home>/traces/…`).
    pub async fn start(home: impl Into<PathBuf>) -> Result<Host, RookeryError> {
        let home = home.into();
        let trace_stats = Arc::new(TraceStats::default());
        let (actor, _) = Actor::spawn(None, HostActor, (home.clone(), trace_stats.clone())).await?;
        Ok(Host {
            actor,
            home,
            trace_stats,
        })
    }

    pub fn home(&self) -> &std::path::Path {
        &self.home
    }

    /// Creates a session; its trace starts with `session_meta`.
    pub async fn create_session(
        &self,
        options: SessionOptions,
    ) -> Result<SessionHandle, RookeryError> {
        ractor::call!(self.actor, HostMsg::CreateSession, Box::new(options))?
    }

    pub async fn session(&self, id: &str) -> Result<Option<SessionHandle>, RookeryError> {
        Ok(ractor::call!(
            self.actor,
            HostMsg::GetSession,
            id.to_string()
        )?)
    }

    /// Bytes written to all traces of this host so far.
    pub fn trace_bytes(&self) -> u64 {
        self.trace_stats
            .bytes_written
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    pub async fn sessions(&self) -> Result<Vec<SessionHandle>, RookeryError> {
        Ok(ractor::call!(self.actor, HostMsg::ListSessions)?)
    }

    /// Closes every session (aborting running tasks, writing out traces) and stops the host.
    pub async fn shutdown(&self) {
        if let Ok(list) = self.sessions().await {
            futures::future::join_all(list.iter().map(|s| s.close())).await;
        }
        self.actor.stop(None);
    }
}

/// Builds a message for tests of crash reporting.
#[doc(hidden)]
pub fn _assert_send(_: &OmniMessage) {}
