//! Spawning a session under a given supervisor (the host for user sessions, a subagent
//! supervisor for children, through the function the session hands it), with its trace file
//! handed to one of the host's trace writers.
//!
//! Owns the order of a session's start: trace file opened, locked and taken over by its writer
//! first, then the session actor, whose first record is its `session_meta`. It keeps no state
//! of its own.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use ractor::{Actor, ActorCell};

use super::session::{SessionActor, SessionArgs, SessionHandle, SessionOptions, Subscribers};
use super::session_api::{SessionRef, StartSession};
use crate::config::ConfigError;
use crate::error::{RookeryError, TraceOpenError};
use crate::message::OmniMessage;
use crate::trace::file::TraceFile;
use crate::trace::health::TraceHealth;
use crate::trace::hub::TraceWriters;
use crate::trace::paths;
use crate::trace::sink::Sink;
use crate::trace::writer::TraceStats;

/// What every session of a host shares: where traces go, the writers that own them and the
/// byte counter.
#[derive(Clone, Debug)]
pub struct SessionEnv {
    /// The Rookery home traces go under.
    pub home: PathBuf,
    /// The host's trace counters.
    pub trace_stats: Arc<TraceStats>,
    /// The host's pool of trace writers.
    pub traces: TraceWriters,
    /// The `postgres` trace store, when the host uses it instead of the files under `home`.
    #[cfg(feature = "postgres")]
    pub store: Option<crate::store::PgStore>,
}

/// A resumed session's trace, opened (and owned) before its records were read.
pub(crate) enum OpenedTrace {
    /// A trace file, opened and locked.
    File(TraceFile),
    /// A session in the store whose lease was just taken.
    #[cfg(feature = "postgres")]
    Store(crate::store::lease::Taken),
}

pub use super::session_api::MetaWrite;
pub(crate) use super::session_api::{StartedSession as SpawnedSession, report_crash, stop_trace};

/// Opens the trace at `path` for appending and takes the session's owner lock on it.
pub(crate) fn open_locked(id: &str, path: &std::path::Path) -> Result<TraceFile, RookeryError> {
    lock_opened(id, TraceFile::open(path)?)
}

/// [`open_locked`] for a new session's trace, which is not there yet (see
/// [`TraceFile::create`]).
fn create_locked(id: &str, path: &std::path::Path) -> Result<TraceFile, RookeryError> {
    lock_opened(id, TraceFile::create(path)?)
}

fn lock_opened(id: &str, mut file: TraceFile) -> Result<TraceFile, RookeryError> {
    file.lock().map_err(|e| RookeryError::from_lock(id, e))?;
    Ok(file)
}

/// Validates the workspace, then spawns the trace actor and the session actor linked to
/// `supervisor`. `id` must be unused. `file` is the trace already opened and locked (resume);
/// without it the trace is opened and locked here.
pub(crate) async fn spawn_session(
    supervisor: ActorCell,
    env: &SessionEnv,
    id: String,
    mut options: SessionOptions,
    file: Option<OpenedTrace>,
    meta_write: MetaWrite,
) -> Result<SpawnedSession, RookeryError> {
    options.workspace = crate::tools::canonical::canonical_workspace(&options.workspace)
        .ok_or_else(|| ConfigError::Workspace(options.workspace.clone()))?;
    // Before the trace is touched: a sandbox that cannot be had means no session at all.
    options.sandbox = crate::sandbox::SessionSandbox::start(
        &options.config.sandbox,
        &options.workspace,
        &env.home,
        std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .map(PathBuf::from)
            .as_deref(),
    )?;
    let (trace_path, meta) = match &options.resume {
        Some(r) => (
            paths::locate_trace(&env.home, &id)
                .unwrap_or_else(|| paths::trace_path(&env.home, &id)),
            r.meta.clone(),
        ),
        None => (
            paths::trace_path(&env.home, &id),
            super::session::session_meta(&id, &options),
        ),
    };
    let health = Arc::new(TraceHealth::default());
    #[cfg(feature = "postgres")]
    if let Some(store) = &env.store {
        let taken = match file {
            Some(OpenedTrace::Store(taken)) => taken,
            _ => crate::store::lease::take_new(store, &session_row(&id, &meta, &options)).await?,
        };
        let trace = crate::store::append::PgTrace::start(store.clone(), taken, health.clone());
        let lease = trace.lease().clone();
        let sink = Sink::remote(crate::store::append::boxed(trace));
        let spawned =
            spawn_with(supervisor, env, id, options, sink, health, meta, meta_write).await?;
        stop_when_lost(lease, &spawned.handle);
        return Ok(spawned);
    }
    // Opened here, not in the actor: a failure is then a plain error naming the place.
    let file = match file {
        Some(OpenedTrace::File(f)) => f,
        #[cfg(feature = "postgres")]
        Some(OpenedTrace::Store(_)) => {
            return Err(RookeryError::Trace(std::io::Error::other(
                "a session of the store resumed by a host without a store",
            )));
        }
        None => if options.resume.is_some() {
            open_locked(&id, &trace_path)
        } else {
            create_locked(&id, &trace_path)
        }
        .map_err(|e| match e {
            RookeryError::Trace(source) => RookeryError::TraceOpen(if options.resume.is_some() {
                TraceOpenError::Open {
                    path: trace_path.clone(),
                    source,
                }
            } else {
                TraceOpenError::Create {
                    home: env.home.clone(),
                    source,
                }
            }),
            other => other,
        })?,
    };
    health.set_current(trace_path);
    spawn_with(
        supervisor,
        env,
        id,
        options,
        Sink::File(file),
        health,
        meta,
        meta_write,
    )
    .await
}

/// Spawns the session actor on an opened trace sink.
#[allow(clippy::too_many_arguments)]
async fn spawn_with(
    supervisor: ActorCell,
    env: &SessionEnv,
    id: String,
    options: SessionOptions,
    sink: Sink,
    health: Arc<TraceHealth>,
    meta: crate::message::SessionMeta,
    meta_write: MetaWrite,
) -> Result<SpawnedSession, RookeryError> {
    let meta_message = Arc::new(OmniMessage::session_meta(meta));
    health.set_current(sink.place());
    let redactor = super::session::session_redactor(&options);
    let trace = env
        .traces
        .open(sink, redactor, health.clone())
        .map_err(|e| RookeryError::Trace(std::io::Error::other(e)))?;
    let subscribers: Subscribers = Arc::new(Mutex::new(Vec::new()));
    let sandbox = (options.config.sandbox.mode, options.config.sandbox.network);
    let spawned = Actor::spawn_linked(
        None,
        SessionActor,
        SessionArgs {
            id: id.clone(),
            options,
            trace: trace.clone(),
            subscribers: subscribers.clone(),
            meta: meta_message.clone(),
            start_child: start_child(env),
            trace_health: health.clone(),
            meta_write,
        },
        supervisor,
    )
    .await;
    let (actor, _) = match spawned {
        Ok(s) => s,
        Err(e) => {
            stop_trace(&trace);
            return Err(e.into());
        }
    };
    Ok(SpawnedSession {
        handle: SessionHandle {
            id,
            closing: Arc::default(),
            meta_message,
            actor: SessionRef(actor.get_derived()),
            trace: trace.clone(),
            trace_health: health,
            sandbox,
        },
        trace,
        subscribers,
    })
}

/// What a new session's row in the store shows (from its `session_meta`; a subagent's
/// `parent` from its options).
#[cfg(feature = "postgres")]
fn session_row(
    id: &str,
    meta: &crate::message::SessionMeta,
    options: &SessionOptions,
) -> crate::store::lease::SessionRow {
    let tool_profile = serde_json::to_value(meta)
        .ok()
        .and_then(|v| v.get("tool_profile")?.as_str().map(str::to_string))
        .unwrap_or_default();
    crate::store::lease::SessionRow {
        id: id.to_string(),
        parent: options.parent.clone(),
        workspace: meta.workspace.clone(),
        tool_profile,
        model: format!("{}/{}", meta.provider, meta.model_id),
        approval_mode: meta.approval_mode.clone().unwrap_or_default(),
    }
}

/// Stops the session at once when its lease is lost (another node took it, or it could not be
/// renewed): its commands die with it and it never runs another tool.
#[cfg(feature = "postgres")]
fn stop_when_lost(lease: Arc<crate::store::lease::Lease>, handle: &super::session::SessionHandle) {
    let actor = handle.actor.clone();
    tokio::spawn(async move {
        lease.ended().await;
        if let Some(reason) = lease.lost_reason() {
            tracing::warn!("[store] stopping session {}: {reason}", lease.session_id);
            actor.stop(Some(reason));
        }
    });
}

/// The function a session's subagent supervisor starts its children with: a session spawned
/// under `env`, its `session_meta` written at once.
fn start_child(env: &SessionEnv) -> StartSession {
    let env = env.clone();
    Arc::new(move |supervisor, id, options| {
        let env = env.clone();
        Box::pin(async move {
            spawn_session(supervisor, &env, id, options, None, MetaWrite::AtOnce).await
        })
    })
}
