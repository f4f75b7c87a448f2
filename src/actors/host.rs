//! The `Host` actor (one per process): the session directory, session creation and the
//! supervision of every session and of the host's trace writers (`trace::hub`).
//!
//! The trace writers are the host's children, not a session's: ractor kills an actor's children
//! when it stops, and a session that panics must still get its `abort` record written. The host never
//! runs a turn and never writes a trace record except that crash report.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use ractor::{
    Actor, ActorId, ActorProcessingErr, ActorRef, ActorStatus, RpcReplyPort, SupervisionEvent,
};

use super::session::{SessionHandle, SessionOptions, Subscribers};
use super::spawn::{
    MetaWrite, OpenedTrace, SessionEnv, open_locked, report_crash, spawn_session, stop_trace,
};
use crate::error::RookeryError;
use crate::trace::hub::{POOL_SIZE, TraceHandle, TraceWriters};
use crate::trace::paths;
use crate::trace::resume::resume_from_file_off_runtime;
use crate::trace::writer::{TraceMsg, TraceStats};

/// Messages of the host actor.
pub enum HostMsg {
    /// Creates a session; its `session_meta` is written as `MetaWrite` says.
    CreateSession(
        Box<SessionOptions>,
        MetaWrite,
        RpcReplyPort<Result<SessionHandle, RookeryError>>,
    ),
    /// Rebuilds a session from its trace under its old id, appending to the same file.
    ResumeSession(
        String,
        Box<SessionOptions>,
        RpcReplyPort<Result<SessionHandle, RookeryError>>,
    ),
    /// The session with this id, if the host has it.
    GetSession(String, RpcReplyPort<Option<SessionHandle>>),
    /// Every session of the host.
    ListSessions(RpcReplyPort<Vec<SessionHandle>>),
}

struct Entry {
    handle: SessionHandle,
    trace: TraceHandle,
    subscribers: Subscribers,
}

/// The actor behind a [`crate::Host`]: registers its sessions and starts and resumes them.
pub struct HostActor;

/// The state of a [`HostActor`]: the shared session environment and the sessions by id.
pub struct HostState {
    env: SessionEnv,
    sessions: HashMap<String, Entry>,
    by_actor: HashMap<ActorId, String>,
}

impl HostActor {
    async fn create(
        myself: &ActorRef<HostMsg>,
        state: &mut HostState,
        options: SessionOptions,
        meta_write: MetaWrite,
    ) -> Result<SessionHandle, RookeryError> {
        let mut id = paths::new_session_id();
        while state.sessions.contains_key(&id) {
            id = paths::new_session_id();
        }
        Self::register(myself, state, id, options, None, meta_write).await
    }

    async fn resume(
        myself: &ActorRef<HostMsg>,
        state: &mut HostState,
        id: String,
        mut options: SessionOptions,
    ) -> Result<SessionHandle, RookeryError> {
        if let Some(e) = state.sessions.get(&id) {
            let closing = e.handle.closing.load(std::sync::atomic::Ordering::SeqCst);
            if !closing && e.handle.actor.get_status() == ActorStatus::Running {
                return Ok(e.handle.clone());
            }
            // Closing or closed, its termination not handled yet: forget it now, once its close
            // has ended and its trace writer has written out and released the session's lock.
            if let Some(e) = state.sessions.remove(&id) {
                state.by_actor.remove(&e.handle.actor.get_id());
                let _ = e.handle.close().await;
                let _ = ractor::call!(e.trace, TraceMsg::Shutdown);
            }
        }
        if !paths::is_valid_session_id(&id) {
            return Err(RookeryError::UnknownSession(id));
        }
        #[cfg(feature = "postgres")]
        if let Some(store) = state.env.store.clone() {
            return Self::resume_stored(myself, state, &store, id, options).await;
        }
        let path = paths::locate_trace(&state.env.home, &id)
            .ok_or_else(|| RookeryError::UnknownSession(id.clone()))?;
        // The owner lock first: a trace another process appends to is neither read nor opened.
        let file = open_locked(&id, &path)?;
        // Read on the blocking pool: a large trace must not hold an async worker.
        let resumed = resume_from_file_off_runtime(path).await?;
        Self::apply_resumed(&mut options, resumed)?;
        Self::register(
            myself,
            state,
            id,
            options,
            Some(OpenedTrace::File(file)),
            MetaWrite::AtOnce,
        )
        .await
    }

    /// Resumes a session of the store: its lease first (so no other node appends while its
    /// records are read), then its trace.
    #[cfg(feature = "postgres")]
    async fn resume_stored(
        myself: &ActorRef<HostMsg>,
        state: &mut HostState,
        store: &crate::store::PgStore,
        id: String,
        mut options: SessionOptions,
    ) -> Result<SessionHandle, RookeryError> {
        use crate::store::StoreError;
        let taken = match crate::store::lease::take_existing(store, &id).await {
            Err(StoreError::UnknownSession(_)) => return Err(RookeryError::UnknownSession(id)),
            taken => taken?,
        };
        let resumed = async {
            let resumed = Self::stored_state(store, &id, &taken).await?;
            Self::apply_resumed(&mut options, resumed)
        }
        .await;
        if let Err(e) = resumed {
            // Given back at once: the next try need not wait for the lease to run out.
            if let Err(e) = crate::store::lease::release(store, &taken.lease).await {
                tracing::warn!("[store] cannot give up the lease of {id}: {e}");
            }
            return Err(e);
        }
        Self::register(
            myself,
            state,
            id,
            options,
            Some(OpenedTrace::Store(taken)),
            MetaWrite::AtOnce,
        )
        .await
    }

    /// The resume state of stored session `id`, whose lease was just `taken`. Taken from a
    /// holder that died (its lease ran out without a release), the failover records
    /// (`node_lost.rs`) are built from that holder's records and counted in the state, for the
    /// session to append first, under the new epoch.
    #[cfg(feature = "postgres")]
    async fn stored_state(
        store: &crate::store::PgStore,
        id: &str,
        taken: &crate::store::lease::Taken,
    ) -> Result<crate::trace::resume::ResumeState, RookeryError> {
        use crate::trace::resume::{ResumeFileError, resume_from_bytes};
        let trace = crate::store::listing::read_trace(store, id).await?;
        let resumed =
            resume_from_bytes(&trace.earlier, &trace.latest).map_err(ResumeFileError::Records)?;
        let Some(lost) = &taken.abandoned else {
            return Ok(resumed);
        };
        let holder = crate::store::listing::read_epoch(store, id, lost.epoch).await?;
        let holder = crate::trace::reader::parse_trace_bytes(&holder).records;
        let first = super::node_lost::takeover_records(&resumed.unpaired, &lost.node, &holder);
        if first.is_empty() {
            return Ok(resumed);
        }
        tracing::warn!(
            session = %id,
            "[store] node {} lost the session (epoch {}); recording {} failover records",
            lost.node,
            lost.epoch,
            first.len()
        );
        let mut latest = trace.latest;
        for record in &first {
            latest.extend(crate::trace::writer::record_line(record).unwrap_or_default());
        }
        let mut resumed =
            resume_from_bytes(&trace.earlier, &latest).map_err(ResumeFileError::Records)?;
        resumed.append_first = first;
        Ok(resumed)
    }

    /// Sets up `options` for a session rebuilt from its trace.
    fn apply_resumed(
        options: &mut SessionOptions,
        resumed: crate::trace::resume::ResumeState,
    ) -> Result<(), RookeryError> {
        // A session never comes back looser than it was: the recorded sandbox, or a stricter
        // one asked for.
        options.config.sandbox = crate::sandbox::SandboxPolicy::within(
            options.resume_sandbox.apply(&resumed.sandbox),
            &resumed.sandbox,
        )?;
        options.source = resumed.meta.source.clone();
        options.owner = resumed.meta.owner.clone();
        super::session::restore_mode(options.approver.as_ref(), &resumed);
        options.resume = Some(Arc::new(resumed));
        Ok(())
    }

    async fn register(
        myself: &ActorRef<HostMsg>,
        state: &mut HostState,
        id: String,
        options: SessionOptions,
        file: Option<OpenedTrace>,
        meta_write: MetaWrite,
    ) -> Result<SessionHandle, RookeryError> {
        let spawned = spawn_session(
            myself.get_cell(),
            &state.env,
            id.clone(),
            options,
            file,
            meta_write,
        )
        .await?;
        let handle = spawned.handle.clone();
        state.by_actor.insert(handle.actor.get_id(), id.clone());
        state.sessions.insert(
            id,
            Entry {
                handle: handle.clone(),
                trace: spawned.trace,
                subscribers: spawned.subscribers,
            },
        );
        Ok(handle)
    }
}

impl Actor for HostActor {
    type Msg = HostMsg;
    type State = HostState;
    type Arguments = HostArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: HostArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        let HostArgs {
            home, trace_stats, ..
        } = args;
        // The writers are the host's children too: they outlive a crashed session.
        let traces =
            TraceWriters::start(Some(myself.get_cell()), POOL_SIZE, trace_stats.clone()).await?;
        Ok(HostState {
            env: SessionEnv {
                home,
                trace_stats,
                traces,
                #[cfg(feature = "postgres")]
                store: args.store,
            },
            sessions: HashMap::new(),
            by_actor: HashMap::new(),
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: HostMsg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            HostMsg::CreateSession(options, meta_write, reply) => {
                let result = Self::create(&myself, state, *options, meta_write).await;
                let _ = reply.send(result);
            }
            HostMsg::ResumeSession(id, options, reply) => {
                let result = Self::resume(&myself, state, id, *options).await;
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
                    tracing::error!("trace writer failed: {err}");
                    return Ok(());
                };
                tracing::error!(session = %id, "session actor failed: {err}");
                if let Some(entry) = state.sessions.remove(&id) {
                    report_crash(&entry.trace, &entry.subscribers, &err.to_string());
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

/// What a host starts with.
pub struct HostArgs {
    /// The Rookery home.
    pub home: PathBuf,
    /// The counters of its trace writers.
    pub trace_stats: Arc<TraceStats>,
    /// The `postgres` trace store its sessions live in, instead of files under `home`.
    #[cfg(feature = "postgres")]
    pub store: Option<crate::store::PgStore>,
}

/// The public handle on a host: creates and finds sessions.
#[derive(Clone)]
pub struct Host {
    actor: ActorRef<HostMsg>,
    home: PathBuf,
    trace_stats: Arc<TraceStats>,
    #[cfg(feature = "postgres")]
    store: Option<crate::store::PgStore>,
}

impl Host {
    /// Starts a host writing traces under `home` (`<home>/traces/…`).
    pub async fn start(home: impl Into<PathBuf>) -> Result<Host, RookeryError> {
        Self::start_on(HostArgs {
            home: home.into(),
            trace_stats: Arc::default(),
            #[cfg(feature = "postgres")]
            store: None,
        })
        .await
    }

    /// Starts a host whose sessions live in `store` (their traces, listing and leases; see
    /// `docs/guide/store.md`); `home` still holds what is not a trace (sandbox temp dirs).
    #[cfg(feature = "postgres")]
    pub async fn start_with_store(
        home: impl Into<PathBuf>,
        store: crate::store::PgStore,
    ) -> Result<Host, RookeryError> {
        Self::start_on(HostArgs {
            home: home.into(),
            trace_stats: Arc::default(),
            store: Some(store),
        })
        .await
    }

    async fn start_on(args: HostArgs) -> Result<Host, RookeryError> {
        let home = args.home.clone();
        // Traces are private (0700 directories, 0600 files); a failure here is reported by the
        // first trace that cannot be opened.
        if let Err(e) = crate::trace::private::prepare(&home) {
            tracing::debug!("cannot prepare the traces of {}: {e}", home.display());
        }
        let trace_stats = args.trace_stats.clone();
        #[cfg(feature = "postgres")]
        let store = args.store.clone();
        let (actor, _) = Actor::spawn(None, HostActor, args).await?;
        Ok(Host {
            actor,
            home,
            trace_stats,
            #[cfg(feature = "postgres")]
            store,
        })
    }

    /// The `postgres` trace store the host's sessions live in, if it uses one.
    #[cfg(feature = "postgres")]
    pub fn store(&self) -> Option<&crate::store::PgStore> {
        self.store.as_ref()
    }

    /// The Rookery home the host's traces go under.
    pub fn home(&self) -> &std::path::Path {
        &self.home
    }

    /// Creates a session; its trace starts with `session_meta`, which is in the file (written,
    /// not synced) when this returns, so a crash of the process right after leaves a session
    /// that can be resumed.
    pub async fn create_session(
        &self,
        options: SessionOptions,
    ) -> Result<SessionHandle, RookeryError> {
        let handle = self.create(options, MetaWrite::AtOnce).await?;
        handle.flush_trace().await?;
        Ok(handle)
    }

    /// Creates a session whose first task its caller starts next (after subscribing, if it
    /// wants the events): the `session_meta` goes out with that task's first records, one
    /// trace write instead of two. Until the session handles a message other than
    /// `subscribe` (the task's start, a close) or its trace is flushed, the meta is queued,
    /// not written, so a crash in between leaves an empty trace file; use
    /// [`Self::create_session`] for a session that may wait for its first task.
    pub async fn create_session_for_task(
        &self,
        options: SessionOptions,
    ) -> Result<SessionHandle, RookeryError> {
        self.create(options, MetaWrite::WithFirstTask).await
    }

    async fn create(
        &self,
        options: SessionOptions,
        meta_write: MetaWrite,
    ) -> Result<SessionHandle, RookeryError> {
        ractor::call!(
            self.actor,
            HostMsg::CreateSession,
            Box::new(options),
            meta_write
        )?
    }

    /// Resumes a session from its trace (`docs/protocol.md#resume`: committed turns, pairing intact,
    /// placeholders for unanswered calls) and appends to the same file. A live session is
    /// returned as it is. `options` gives the model, approver and config to continue with; its
    /// workspace must exist.
    pub async fn resume_session(
        &self,
        session_id: &str,
        options: SessionOptions,
    ) -> Result<SessionHandle, RookeryError> {
        ractor::call!(
            self.actor,
            HostMsg::ResumeSession,
            session_id.to_string(),
            Box::new(options)
        )?
    }

    /// The session with this id, if the host has it.
    pub async fn session(&self, id: &str) -> Result<Option<SessionHandle>, RookeryError> {
        Ok(ractor::call!(
            self.actor,
            HostMsg::GetSession,
            id.to_string()
        )?)
    }

    /// `write(2)` calls (batches of whole records) made to all traces of this host so far.
    pub fn trace_writes(&self) -> u64 {
        self.trace_stats
            .batches
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Bytes written to all traces of this host so far.
    pub fn trace_bytes(&self) -> u64 {
        self.trace_stats
            .bytes_written
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Every session of the host.
    pub async fn sessions(&self) -> Result<Vec<SessionHandle>, RookeryError> {
        Ok(ractor::call!(self.actor, HostMsg::ListSessions)?)
    }

    /// Closes every session (aborting running tasks, writing out traces) and stops the host.
    pub async fn shutdown(&self) {
        if let Ok(list) = self.sessions().await {
            // A bounded number of closes in flight: closing many sessions stays cheap in memory.
            use futures::StreamExt;
            // Each close owns its handle: a future borrowing from the list through a closure
            // is not `Send` (the CLI's commands run on a worker, see `main.rs`).
            futures::stream::iter(list.into_iter().map(|s| async move { s.close().await }))
                .buffer_unordered(256)
                .for_each(|_| async {})
                .await;
        }
        self.actor.stop(None);
    }
}
