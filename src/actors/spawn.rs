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
    file: Option<TraceFile>,
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
    let meta_message = Arc::new(OmniMessage::session_meta(meta));
    // Opened here, not in the actor: a failure is then a plain error naming the place.
    let file = match file {
        Some(f) => f,
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
    let health = Arc::new(TraceHealth::default());
    health.set_current(trace_path);
    let redactor = super::session::session_redactor(&options);
    let trace = env
        .traces
        .open(file, redactor, health.clone())
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
