//! `SubagentSupervisor`: one per (parent) session, the only owner of its subagents. At most 8;
//! admission is decided inside the actor **before** a child starts, so parallel spawns can never
//! exceed the cap. A full registry evicts its least recently used *idle* child; a running child is
//! never evicted (the spawn is refused instead).
//!
//! Children are sessions started linked to this actor through the function the parent session
//! hands it (`SubagentArgs::start`), each with its own trace file. The
//! supervisor never runs a child's turn and never writes the parent's trace except the one
//! `subagent` pointer per child.

pub mod child;
pub mod collab;
pub mod report;
pub use crate::actors::session_api::spec;
pub mod tools;

use std::collections::HashMap;
use std::sync::Arc;

use ractor::{Actor, ActorId, ActorProcessingErr, ActorRef, RpcReplyPort, SupervisionEvent};

use crate::actors::session_api::{
    ForkTurns, Inbox, SessionOptions, SessionRef, StartSession, Subscribers, broadcast,
    report_crash, stop_trace,
};
use crate::error::RookeryError;
use crate::message::{EventPayload, OmniMessage};
use crate::trace::hub::TraceHandle;
use crate::trace::paths;
use crate::trace::writer::TraceMsg;
pub use child::{Child, ChildListing, ParentLink, RoundEnd, exit_note};
pub use spec::{AgentSpawn, ChildRequest, SpecError};

/// Why a spawn was refused.
#[derive(Debug, thiserror::Error)]
pub enum AdmitError {
    /// Every one of the 8 children is running.
    #[error("too many background subagents; poll or finish existing ones first")]
    Full,
    /// The requested agent or model is unknown or cannot be built.
    #[error(transparent)]
    Spec(#[from] SpecError),
    /// The child session could not be started.
    #[error("{0}")]
    Start(#[source] RookeryError),
    /// The supervisor is gone.
    #[error("no subagent session manager available ({0})")]
    Unavailable(String),
}

/// Most subagents per session.
pub const MAX_SUBAGENTS: usize = 8;

/// The refusal when 8 subagents are running.
pub const TOO_MANY: &str =
    "[run_subagent error: too many background subagents; poll or finish existing ones first]";

/// Messages of a [`SubagentSupervisor`].
pub enum SubagentMsg {
    /// Admits and starts a child session for `prompt` (its task is not started yet).
    Admit(
        String,
        Box<ChildRequest>,
        RpcReplyPort<Result<Arc<Child>, AdmitError>>,
    ),
    /// Looks a child up by id and marks it used.
    Get(String, RpcReplyPort<Option<Arc<Child>>>),
    /// Removes a child from the registry (the caller closes it).
    Remove(String, RpcReplyPort<Option<Arc<Child>>>),
    /// Every registered child.
    List(RpcReplyPort<Vec<Arc<Child>>>),
    /// Closes every child (their traces keep what they did), then stops.
    Shutdown(RpcReplyPort<()>),
}

struct Entry {
    child: Arc<Child>,
    trace: TraceHandle,
    subscribers: Subscribers,
}

/// The actor owning one session's subagents: admits up to 8, evicts the least recently used
/// idle one, and closes them all with the session.
pub struct SubagentSupervisor;

/// What a [`SubagentSupervisor`] is started with.
pub struct SubagentArgs {
    /// Starts a child session (handed by the parent session).
    pub start: StartSession,
    /// The child's options: the parent's model, workspace, approver and config, minus the
    /// subagent tools.
    pub template: SessionOptions,
    /// Where the children's messages go.
    pub parent: ParentLink,
    /// The parent's trace (for the `subagent` pointer events).
    pub parent_trace: TraceHandle,
}

/// The state of a [`SubagentSupervisor`]: its children and their registry.
pub struct SubagentState {
    args: SubagentArgs,
    /// Registration order; LRU is by `Child::last_used`.
    entries: Vec<Entry>,
    by_actor: HashMap<ActorId, String>,
}

fn close_child(child: Arc<Child>) {
    child.set_background(false);
    child.approver.deny_all();
    tokio::spawn(async move {
        let _ = child.session.close().await;
    });
}

impl SubagentSupervisor {
    async fn admit(
        myself: &ActorRef<SubagentMsg>,
        state: &mut SubagentState,
        prompt: String,
        req: &ChildRequest,
    ) -> Result<Arc<Child>, AdmitError> {
        let mut options = state.args.template.clone();
        spec::apply(&mut options, req)?;
        if state.entries.len() >= MAX_SUBAGENTS {
            let victim = state
                .entries
                .iter()
                .enumerate()
                .filter(|(_, e)| !e.child.is_running())
                .min_by_key(|(_, e)| e.child.last_used())
                .map(|(i, _)| i);
            match victim {
                Some(i) => {
                    let e = state.entries.remove(i);
                    tracing::debug!(subagent = %e.child.id, "evicting idle subagent");
                    close_child(e.child);
                }
                None => return Err(AdmitError::Full),
            }
        }
        let session_id = paths::new_session_id();
        let agent_id = req.spawn.as_ref().map(|_| {
            loop {
                let id = format!("agent-{:08x}", rand::random::<u32>());
                if !state.entries.iter().any(|e| e.child.id == id) {
                    break id;
                }
            }
        });
        let own = Arc::new(std::sync::OnceLock::new());
        if let Some(id) = &agent_id {
            collab::child_tools::register(
                &mut options.config.tools,
                collab::child_tools::ChildLink {
                    parent: state.args.parent.session.clone(),
                    agent_id: id.clone(),
                    own: own.clone(),
                },
            );
        }
        let approver = Arc::new(child::ChildApprover::new(
            state.args.template.approver.clone(),
            session_id.clone(),
        ));
        options.source = Some("subagent".to_string());
        options.first_prompt = Some(prompt.clone());
        options.depth = 1;
        options.otel_parent = req.otel_parent.clone();
        options.approver = Arc::new(approver.clone());
        let spawned = (state.args.start)(myself.get_cell(), session_id.clone(), options)
            .await
            .map_err(AdmitError::Start)?;
        let tail: String = {
            let chars: Vec<char> = session_id.chars().collect();
            chars[chars.len().saturating_sub(8)..].iter().collect()
        };
        let mut id = agent_id.unwrap_or_else(|| format!("subagent-{tail}"));
        while state.entries.iter().any(|e| e.child.id == id) {
            id = format!("subagent-{:08x}", rand::random::<u32>());
        }
        let _ = own.set(spawned.handle.clone());
        let rx = spawned
            .handle
            .subscribe()
            .await
            .map_err(AdmitError::Start)?;
        let child = Child::new(id, spawned.handle.clone(), &prompt, approver);
        if let Some(spawn) = &req.spawn {
            child.set_agent(&spawn.task_name, req.agent.clone());
        }
        // The child's session_meta passes through: forwarded (tagged) and pointed to.
        let meta = Arc::new(
            spawned
                .handle
                .meta_message()
                .clone()
                .with_origin(&session_id),
        );
        broadcast(&state.args.parent.subscribers, &meta);
        let pointer = OmniMessage::event(EventPayload::Subagent {
            session_id: session_id.clone(),
        });
        let _ = state
            .args
            .parent_trace
            .cast(TraceMsg::Append(Arc::new(pointer)));
        child::spawn_forwarder(child.clone(), rx, state.args.parent.clone());
        state
            .by_actor
            .insert(spawned.handle.actor.get_id(), child.id.clone());
        state.entries.push(Entry {
            child: child.clone(),
            trace: spawned.trace,
            subscribers: spawned.subscribers,
        });
        Ok(child)
    }
}

impl Actor for SubagentSupervisor {
    type Msg = SubagentMsg;
    type State = SubagentState;
    type Arguments = SubagentArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        args: SubagentArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(SubagentState {
            args,
            entries: Vec::new(),
            by_actor: HashMap::new(),
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: SubagentMsg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            SubagentMsg::Admit(prompt, req, reply) => {
                let r = Self::admit(&myself, state, prompt, &req).await;
                if let Ok(child) = &r {
                    child.begin_round();
                }
                let _ = reply.send(r);
            }
            SubagentMsg::Get(id, reply) => {
                let child = state
                    .entries
                    .iter()
                    .find(|e| e.child.id == id)
                    .map(|e| e.child.clone());
                if let Some(c) = &child {
                    c.touch();
                }
                let _ = reply.send(child);
            }
            SubagentMsg::Remove(id, reply) => {
                let pos = state.entries.iter().position(|e| e.child.id == id);
                let _ = reply.send(pos.map(|i| state.entries.remove(i).child));
            }
            SubagentMsg::List(reply) => {
                let _ = reply.send(state.entries.iter().map(|e| e.child.clone()).collect());
            }
            SubagentMsg::Shutdown(reply) => {
                let children: Vec<Arc<Child>> = state.entries.drain(..).map(|e| e.child).collect();
                for c in &children {
                    c.set_background(false);
                    c.approver.deny_all();
                }
                futures::future::join_all(children.iter().map(|c| c.session.close())).await;
                let _ = reply.send(());
                myself.stop(None);
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
                    tracing::error!("a subagent trace actor failed: {err}");
                    return Ok(());
                };
                tracing::error!(subagent = %id, "subagent session failed: {err}");
                if let Some(e) = state.entries.iter().find(|e| e.child.id == id) {
                    e.child.fail(err.to_string());
                    report_crash(&e.trace, &e.subscribers, &err.to_string());
                }
            }
            SupervisionEvent::ActorTerminated(cell, _, _) => {
                if let Some(id) = state.by_actor.remove(&cell.get_id())
                    && let Some(e) = state.entries.iter().find(|e| e.child.id == id)
                {
                    stop_trace(&e.trace);
                }
            }
            _ => {}
        }
        Ok(())
    }
}

/// The handle tools use.
#[derive(Clone)]
pub struct SubagentSupervisorHandle {
    actor: ActorRef<SubagentMsg>,
    /// The parent session (its inbox and fork history, asked from the calling task).
    parent: SessionRef,
}

impl std::fmt::Debug for SubagentSupervisorHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SubagentSupervisorHandle").finish()
    }
}

impl SubagentSupervisorHandle {
    /// Starts the supervisor, linked to `supervisor`.
    pub async fn spawn(
        args: SubagentArgs,
        supervisor: ractor::ActorCell,
    ) -> Result<Self, RookeryError> {
        let parent = args.parent.session.clone();
        let (actor, _) = Actor::spawn_linked(None, SubagentSupervisor, args, supervisor).await?;
        Ok(SubagentSupervisorHandle { actor, parent })
    }

    /// Admits a child for `prompt` as `req` asks (marked running), or says why not.
    pub async fn admit(&self, prompt: &str, req: ChildRequest) -> Result<Arc<Child>, AdmitError> {
        ractor::call!(
            self.actor,
            SubagentMsg::Admit,
            prompt.to_string(),
            Box::new(req)
        )
        .unwrap_or_else(|e| Err(AdmitError::Unavailable(e.to_string())))
    }

    /// The parent session's inbox (what `wait_agent` waits on).
    pub async fn parent_inbox(&self) -> Result<tokio::sync::watch::Receiver<Inbox>, RookeryError> {
        self.parent.inbox().await
    }

    /// The parent's completed tasks chosen by `turns` (`fork_turns`).
    pub async fn parent_fork(
        &self,
        turns: ForkTurns,
    ) -> Result<Vec<crate::message::ModelPayload>, RookeryError> {
        self.parent.fork_history(turns).await
    }

    /// The supervisor actor's id.
    pub fn actor_id(&self) -> ActorId {
        self.actor.get_id()
    }

    /// The child with this id (marked used), if registered.
    pub async fn get(&self, id: &str) -> Option<Arc<Child>> {
        ractor::call!(self.actor, SubagentMsg::Get, id.to_string())
            .ok()
            .flatten()
    }

    /// Removes and closes a child (denying its pending approvals); the child, if it was there.
    pub async fn kill(&self, id: &str) -> Option<Arc<Child>> {
        let child = ractor::call!(self.actor, SubagentMsg::Remove, id.to_string())
            .ok()
            .flatten()?;
        child.set_background(false);
        child.approver.deny_all();
        let _ = child.session.close().await;
        Some(child)
    }

    /// Every registered child.
    pub async fn list(&self) -> Vec<Arc<Child>> {
        ractor::call!(self.actor, SubagentMsg::List).unwrap_or_default()
    }

    /// Closes every child and stops the supervisor.
    pub async fn shutdown(&self) {
        let _ = ractor::call!(self.actor, SubagentMsg::Shutdown);
    }
}
