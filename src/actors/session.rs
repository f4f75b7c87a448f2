//! `SessionActor`: one agent session — the turn loop, its history and carry-over, approvals and
//! tool dispatch — and (in `handle.rs`) `SessionHandle`, the public handle on it.
//!
//! The actor never awaits I/O in `handle`: the model stream, each approval and each tool call run
//! in spawned tasks that `cast` their results back tagged with the turn id, so stale results of an
//! aborted or retried attempt are ignored. The trace is written only through its
//! `TraceHandle` (the host's trace writer owns the file).

mod budget;
mod carry;
mod close_out;
mod compaction;
mod compaction_text;
mod dispatch;
mod fanout;
mod gate;
mod handle;
pub mod inbox;
mod mcp_sync;
mod mode;
mod output;
mod secrets;
mod services;
mod steer;
mod turn;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use std::panic::AssertUnwindSafe;

use futures::FutureExt;
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort, SupervisionEvent};

use crate::actors::command_supervisor::{CommandEvent, CommandSupervisorHandle};
use crate::actors::subagent_supervisor::SubagentSupervisorHandle;
use crate::approval::Approver;
use crate::config::AgentConfig;
use crate::error::RookeryError;
use crate::message::{
    Decision, EventPayload, ModelPayload, OmniMessage, Sender, SessionMeta, Usage, build,
};
use crate::model::{Model, ModelEvent, ModelSession, ModelSessionContext};
use crate::tools::ServiceKind;
use crate::trace::health::TraceHealth;
use crate::trace::hub::TraceHandle;
use crate::trace::resume::ResumeState;
use crate::trace::writer::TraceMsg;

pub use compaction::CompactStart;
pub use handle::SessionHandle;
pub(crate) use mode::restore as restore_mode;
pub(crate) use secrets::redactor as session_redactor;
pub use steer::{SteerOutcome, steering_text};
use turn::Task;
pub use turn::TaskSummary;

pub(crate) use fanout::MessageSender;
pub use fanout::{MessageReceiver, SUBSCRIBER_CAPACITY, TryRecvError};

/// The senders of every subscriber; shared with the host so it can report a crashed session.
pub(crate) type Subscribers = Arc<Mutex<Vec<MessageSender>>>;

/// Sends `msg` to every live subscriber without waiting (a full queue drops its oldest),
/// dropping closed ones.
pub(crate) fn broadcast(subs: &Subscribers, msg: &Arc<OmniMessage>) {
    if let Ok(mut subs) = subs.lock() {
        subs.retain(|s| s.send(msg.clone()));
    }
}

/// What a caller gives to create a session.
#[derive(Clone)]
pub struct SessionOptions {
    /// Must exist; relative tool paths resolve against it.
    pub workspace: PathBuf,
    pub model: Arc<dyn Model>,
    /// Decides each tool call. The library default ([`crate::approval::DenyAllApprover`]) denies all.
    pub approver: Arc<dyn Approver>,
    pub config: AgentConfig,
    /// `session_meta.source` (`subagent`, `schedule`); `None` for a user session.
    pub source: Option<String>,
    /// A subagent's prompt (the scripted model picks its `children` entry by it).
    pub first_prompt: Option<String>,
    /// 0 for a user session, 1 for a subagent (which gets no subagent tools).
    pub depth: u32,
    /// Continue from a trace instead of starting fresh (set by `Host::resume_session`).
    pub resume: Option<Arc<ResumeState>>,
    /// Extra environment of the session's shell commands (e.g. `HOME`); the hardened keys
    /// still win.
    pub command_env: Vec<(String, String)>,
    /// Secret values besides the provider key (e.g. the serve token): scrubbed from the trace
    /// and the stream, and never in a command's environment.
    pub secrets: Vec<String>,
    /// Recorded in `session_meta` so the session can be reopened without its flags. On a
    /// resume whose `reopened_with` is set, a new `session_meta` with these values is appended.
    pub launch: crate::message::launch::Launch,
    /// Completed turns copied in before the first task (a spawned agent's `fork_turns`):
    /// recorded as one `forked_history` event and sent first with every request.
    pub forked_history: Arc<Vec<ModelPayload>>,
}

impl SessionOptions {
    pub fn new(workspace: impl Into<PathBuf>, model: Arc<dyn Model>) -> Self {
        SessionOptions {
            workspace: workspace.into(),
            model,
            approver: Arc::new(crate::approval::DenyAllApprover),
            config: AgentConfig::default(),
            source: None,
            first_prompt: None,
            depth: 0,
            resume: None,
            command_env: Vec::new(),
            secrets: Vec::new(),
            launch: Default::default(),
            forked_history: Default::default(),
        }
    }
}

/// A session's background services.
#[derive(Clone, Debug, Default)]
pub struct SessionServices {
    pub commands: Option<CommandSupervisorHandle>,
    pub subagents: Option<SubagentSupervisorHandle>,
}

/// Idle, running, or failed (its trace can no longer be written; it takes no new task).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionStatus {
    Idle,
    Running,
    Failed,
}

/// Messages of the session actor. The variants after `Close` are internal.
pub enum SessionMsg {
    Subscribe(RpcReplyPort<MessageReceiver>),
    /// Starts a task with a user text (`sender` marks who wrote it, e.g. a parent agent).
    StartTask(
        String,
        Option<Sender>,
        RpcReplyPort<Result<(), RookeryError>>,
    ),
    Abort,
    /// Compacts the context now (idle) or before the next request (a task runs).
    Compact(RpcReplyPort<Result<CompactStart, RookeryError>>),
    /// A receiver of the session's inbox (`wait_agent`).
    Inbox(RpcReplyPort<tokio::sync::watch::Receiver<inbox::Inbox>>),
    /// The history of completed tasks a spawned agent starts with (`fork_turns`).
    Fork(inbox::ForkTurns, RpcReplyPort<Vec<ModelPayload>>),
    /// A text for the model from a collaborating agent (a report or a message), delivered at
    /// the next input-assembly point like a notice; `what` describes it for `wait_agent`.
    AgentInput {
        text: String,
        what: String,
    },
    /// Wakes `wait_agent` (a message was queued for this session elsewhere).
    Poke(String),
    /// Steers the running task (or starts one when idle): see `steer.rs`.
    Steer(
        String,
        Option<Sender>,
        RpcReplyPort<Result<SteerOutcome, RookeryError>>,
    ),
    /// Replies when no task runs (at once if idle) with the last task's summary.
    WaitIdle(RpcReplyPort<Option<TaskSummary>>),
    Status(RpcReplyPort<SessionStatus>),
    /// Aborts a running task, flushes and closes the trace, stops the actor.
    Close(RpcReplyPort<()>),
    Model {
        turn: u64,
        event: ModelEvent,
    },
    /// Consecutive events of one stream, handled in order as if sent one by one.
    ModelEvents {
        turn: u64,
        events: Vec<ModelEvent>,
    },
    Approved {
        turn: u64,
        idx: usize,
        verdict: Box<gate::Verdict>,
    },
    /// Hook records (`hook_error`) of a call of turn `turn`, written before its output.
    HookRecords {
        turn: u64,
        records: Vec<OmniMessage>,
    },
    ToolPartial {
        turn: u64,
        msg: OmniMessage,
    },
    ToolDone {
        turn: u64,
        idx: usize,
        output: OmniMessage,
    },
    RetryNow {
        turn: u64,
    },
    /// An event of the session's command supervisor.
    Command(CommandEvent),
    /// A `[background_task_done]` text to deliver at the next input-assembly point.
    Notice(String),
    /// The session's command and subagent supervisors (for counts and metrics).
    Services(RpcReplyPort<SessionServices>),
    /// The approver's mode changed (recorded as `approval_mode_changed`).
    ApprovalModeChanged(crate::approval::ApprovalMode),
    /// The trace actor could not write a record (`trace write failed: …`).
    TraceFailed(String),
    /// A trace record of one of the session's MCP connections.
    McpRecord(OmniMessage),
    /// The MCP servers' tool lists for the request of `turn` / `attempt`.
    McpSynced {
        turn: u64,
        attempt: u32,
        replies: Vec<crate::mcp::connection::SyncReply>,
    },
    /// Test hook: makes `handle` panic.
    #[doc(hidden)]
    InjectPanic,
}

/// Start-up arguments (built by the host).
pub struct SessionArgs {
    pub id: String,
    pub options: SessionOptions,
    pub trace: TraceHandle,
    pub trace_path: PathBuf,
    pub subscribers: Subscribers,
    /// The `session_meta` record, written first.
    pub meta: Arc<OmniMessage>,
    /// Where child sessions' traces go.
    pub env: crate::actors::spawn::SessionEnv,
    /// Reports the first failed trace write.
    pub trace_health: Arc<TraceHealth>,
}

/// The `session_meta` of a new session.
pub(crate) fn session_meta(id: &str, options: &SessionOptions) -> SessionMeta {
    let info = options.model.info();
    SessionMeta {
        session_id: id.to_string(),
        provider: info.provider,
        model_id: info.model_id,
        model_context_window: info.context_window,
        system_prompt: options.config.system_prompt.clone(),
        agent_state: options.workspace.display().to_string(),
        workspace: options.workspace.display().to_string(),
        source: options.source.clone(),
        approval_mode: options
            .approver
            .policy()
            .map(|p| p.mode().as_str().to_string()),
        launch: Box::new(crate::message::launch::Launch {
            tool_profile: Some(options.config.profile.name().to_string()),
            ..options.launch.clone()
        }),
    }
}

pub struct SessionActor;

/// The actor's state: conversation, counters and the running task.
pub struct SessionState {
    pub(crate) id: String,
    pub(crate) options: SessionOptions,
    pub(crate) trace: TraceHandle,
    pub(crate) subscribers: Subscribers,
    pub(crate) model: Box<dyn ModelSession>,
    /// The conversation sent with each request: the committed turns, then (while a request is
    /// out) that request's input. Shared with the request, so a request costs no copy of it.
    pub(crate) history: Arc<Vec<ModelPayload>>,
    /// How much of `history` is committed (completed turns); the rest is dropped before the next
    /// request is assembled.
    pub(crate) committed: usize,
    pub(crate) carry_over: Vec<ModelPayload>,
    pub(crate) session_usage: Usage,
    pub(crate) turns: u64,
    pub(crate) next_turn_id: u64,
    pub(crate) tools_announced: bool,
    /// Boxed: an idle session keeps only a pointer.
    pub(crate) task: Option<Box<Task>>,
    pub(crate) last_summary: Option<TaskSummary>,
    pub(crate) idle_waiters: Vec<RpcReplyPort<Option<TaskSummary>>>,
    pub(crate) tool_specs: Arc<Vec<serde_json::Value>>,
    pub(crate) system_prompt: Arc<str>,
    /// The session's background commands (when a command tool is configured).
    pub(crate) commands: Option<CommandSupervisorHandle>,
    /// The session's subagents (when a subagent tool is configured, at depth 0).
    pub(crate) subagents: Option<SubagentSupervisorHandle>,
    /// A command tool is configured and its supervisor has not failed (spawned lazily).
    pub(crate) wants_commands: bool,
    /// A subagent tool is configured (depth 0) and its supervisor has not failed.
    pub(crate) wants_subagents: bool,
    /// Serializes the calls that write one file, in call order.
    pub(crate) path_locks: crate::tools::path_locks::PathLocks,
    /// What this session's tool calls share (`tools::session_scope`).
    pub(crate) tool_scope: crate::tools::session_scope::SessionScope,
    /// Where child sessions' traces go.
    pub(crate) env: crate::actors::spawn::SessionEnv,
    /// `[background_task_done]` notices waiting for the next input-assembly point.
    pub(crate) pending_notices: Vec<ModelPayload>,
    /// The approval mode the trace recorded last (`None`: none yet).
    pub(crate) approval_mode: Option<crate::approval::ApprovalMode>,
    /// Scrubs the session's secrets from what it records and streams (`None`: no secrets).
    pub(crate) redactor: Option<Arc<crate::redact::Redactor>>,
    /// Stops the approval-mode watcher when the session's state drops.
    pub(crate) _mode_watch: Option<tokio_util::sync::DropGuard>,
    /// Set once the trace could not be written: no new task starts.
    pub(crate) trace_failure: Option<String>,
    /// The trace writer's report of a failed write (read when a task ends).
    pub(crate) trace_health: Arc<TraceHealth>,
    /// At most `tools.max_parallel` tool calls run at once; the others wait in call order.
    pub(crate) budget: budget::ToolBudget,
    /// The session's trace file (hooks get it as `transcript_path`).
    pub(crate) trace_path: PathBuf,
    /// The session's MCP servers (`None`: none configured, or a subagent).
    pub(crate) mcp: Option<Box<crate::mcp::McpSet>>,
    /// The request (turn id, attempt) whose MCP tool lists are in the registry.
    pub(crate) mcp_synced: Option<(u64, u32)>,
    /// Compaction triggers and the compaction in progress (`compaction.rs`).
    pub(crate) compaction: compaction::Compaction,
    /// Steers received while a task runs, waiting for the next input-assembly point.
    pub(crate) pending_steers: Vec<ModelPayload>,
    /// What arrived for the model (steers, notices, reports, messages): wakes `wait_agent`.
    pub(crate) inbox: Arc<tokio::sync::watch::Sender<inbox::Inbox>>,
    /// Where the running task's input begins in `history`.
    pub(crate) task_start: usize,
    /// `(start, end)` of every completed task in `history` (`fork_turns`).
    pub(crate) completed_tasks: Vec<(usize, usize)>,
}

impl Actor for SessionActor {
    type Msg = SessionMsg;
    type State = SessionState;
    type Arguments = SessionArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: SessionArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        let SessionArgs {
            id,
            options,
            trace,
            trace_path,
            subscribers,
            meta,
            env,
            trace_health,
        } = args;
        let me = myself.clone();
        trace_health.on_failure(move |text| {
            let _ = me.cast(SessionMsg::TraceFailed(text.to_string()));
        });
        let model = options.model.open(&ModelSessionContext {
            session_id: id.clone(),
            is_subagent: options.depth > 0,
            first_prompt: options.first_prompt.clone(),
            next_call_index: options.resume.as_ref().map_or(0, |r| r.next_call_index),
            requests_made: options.resume.as_ref().map_or(0, |r| r.requests),
        });
        // A resumed session appends to its existing trace, which already starts with its meta.
        match &options.resume {
            None => {
                let _ = trace.cast(TraceMsg::Append(meta));
                if !options.forked_history.is_empty() {
                    let fork = OmniMessage::event(EventPayload::ForkedHistory {
                        messages: options.forked_history.as_ref().clone(),
                    });
                    let _ = trace.cast(TraceMsg::Append(Arc::new(fork)));
                }
            }
            // Reopened with overriding flags: the values now in use are recorded.
            Some(r) if options.launch.reopened_with.is_some() => {
                let mut meta = session_meta(&id, &options);
                meta.source = r.meta.source.clone();
                // The mode stays recorded by `approval_mode_changed` only.
                meta.approval_mode = None;
                meta.launch.script_position = meta.launch.script.as_ref().map(|_| r.requests);
                let _ = trace.cast(TraceMsg::Append(Arc::new(OmniMessage::session_meta(meta))));
            }
            Some(_) => {}
        }
        let resumed = options.resume.clone();
        let tool_specs = options.config.tools.shared_model_specs();
        // The command and subagent supervisors are spawned on the first call of one of their
        // tools (an idle session costs two actors: itself and its trace actor).
        let wants_commands = options.config.tools.uses(&ServiceKind::Commands)
            || options.config.tools.uses(&ServiceKind::OpenVaalaCommands);
        let wants_subagents =
            options.depth == 0 && options.config.tools.uses(&ServiceKind::Subagents);
        let system_prompt: Arc<str> = Arc::from(options.config.system_prompt.as_str());
        let redactor = secrets::redactor(&options);
        let budget = budget::ToolBudget::new(options.config.max_parallel);
        let mcp = mcp_sync::set_for(&options);
        let forked = options.forked_history.clone();
        let mut state = SessionState {
            id,
            options,
            trace,
            subscribers,
            model,
            committed: resumed.as_ref().map_or(forked.len(), |r| r.history.len()),
            history: match &resumed {
                Some(r) => Arc::new(r.history.clone()),
                None => forked,
            },
            carry_over: resumed
                .as_ref()
                .map(|r| r.carry_over.clone())
                .unwrap_or_default(),
            session_usage: resumed
                .as_ref()
                .map_or(Usage::default(), |r| r.session_usage),
            turns: resumed.as_ref().map_or(0, |r| r.turns),
            next_turn_id: 1,
            tools_announced: resumed.as_ref().is_some_and(|r| r.tools_announced),
            task: None,
            last_summary: None,
            idle_waiters: Vec::new(),
            tool_specs,
            system_prompt,
            commands: None,
            subagents: None,
            wants_commands,
            wants_subagents,
            path_locks: Default::default(),
            tool_scope: Default::default(),
            env,
            pending_notices: Vec::new(),
            approval_mode: None,
            redactor,
            _mode_watch: None,
            trace_failure: None,
            trace_health,
            budget,
            trace_path,
            mcp,
            mcp_synced: None,
            compaction: compaction::Compaction::resumed(resumed.as_ref().map_or(0, |r| r.turns)),
            pending_steers: Vec::new(),
            inbox: Arc::new(tokio::sync::watch::channel(inbox::Inbox::default()).0),
            task_start: 0,
            completed_tasks: Vec::new(),
        };
        state._mode_watch = mode::start(&myself, &mut state).map(|t| t.drop_guard());
        Ok(state)
    }

    async fn handle_supervisor_evt(
        &self,
        _myself: ActorRef<Self::Msg>,
        event: SupervisionEvent,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        // The children are the command and subagent supervisors; losing one must not end the
        // session: its tools then answer "unavailable".
        let (cell, err) = match event {
            SupervisionEvent::ActorFailed(cell, err) => (cell, Some(err.to_string())),
            SupervisionEvent::ActorTerminated(cell, ..) => (cell, None),
            _ => return Ok(()),
        };
        let id = cell.get_id();
        if state
            .commands
            .as_ref()
            .is_some_and(|c| c.actor().get_id() == id)
        {
            state.commands = None;
            state.wants_commands = false;
            if let Some(err) = err {
                tracing::error!(session = %state.id, "command supervisor failed: {err}");
            }
        } else if state.mcp.as_ref().is_some_and(|m| m.owns(id)) {
            if let Some(err) = err {
                tracing::error!(session = %state.id, "an MCP connection failed: {err}");
            }
        } else if state.subagents.as_ref().is_some_and(|s| s.actor_id() == id) {
            state.subagents = None;
            state.wants_subagents = false;
            if let Some(err) = err {
                tracing::error!(session = %state.id, "subagent supervisor failed: {err}");
            }
        }
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: SessionMsg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        // Boxed: the actor's loop future (allocated for the session's whole life) then holds a
        // pointer instead of the largest handler state.
        let handled = AssertUnwindSafe(Box::pin(handle_msg(myself, message, state)))
            .catch_unwind()
            .await;
        handled.unwrap_or_else(|panic| {
            // The actor fails; its supervisor writes `abort` and `task_end`. The open calls
            // are settled first, so every call of the trace keeps exactly one output.
            turn::settle_after_panic(state);
            Err(panic_text(panic).into())
        })
    }
}

/// The text of a panic payload (as ractor reports a panic in a handler).
fn panic_text(payload: Box<dyn std::any::Any + Send>) -> String {
    match payload.downcast::<String>() {
        Ok(s) => *s,
        Err(p) => match p.downcast::<&str>() {
            Ok(s) => s.to_string(),
            Err(_) => "Unknown panic occurred which couldn't be coerced to a string".to_string(),
        },
    }
}

async fn handle_msg(
    myself: ActorRef<SessionMsg>,
    message: SessionMsg,
    state: &mut SessionState,
) -> Result<(), ActorProcessingErr> {
    {
        match message {
            SessionMsg::Subscribe(reply) => {
                let (tx, rx) = fanout::channel(SUBSCRIBER_CAPACITY);
                if let Ok(mut subs) = state.subscribers.lock() {
                    subs.push(tx);
                }
                let _ = reply.send(rx);
            }
            SessionMsg::StartTask(text, sender, reply) => {
                if let Some(reason) = &state.trace_failure {
                    let _ = reply.send(Err(RookeryError::TraceFailed {
                        session: state.id.clone(),
                        reason: reason.clone(),
                    }));
                } else if state.task.is_some() {
                    let _ = reply.send(Err(RookeryError::SessionBusy(state.id.clone())));
                } else {
                    let _ = reply.send(Ok(()));
                    Box::pin(mcp_sync::start(&myself, state)).await;
                    turn::start_task(&myself, state, text, sender);
                }
            }
            SessionMsg::Abort => turn::abort(&myself, state, "aborted by user"),
            SessionMsg::Compact(reply) => {
                let _ = reply.send(compaction::request(&myself, state));
            }
            SessionMsg::Inbox(reply) => {
                let _ = reply.send(state.inbox.subscribe());
            }
            SessionMsg::Fork(turns, reply) => {
                let _ = reply.send(inbox::fork(state, turns));
            }
            SessionMsg::AgentInput { text, what } => {
                if let Some(p) = build::user_text(text, Some(Sender::Harness)).as_model() {
                    state.pending_notices.push(p.clone());
                }
                inbox::arrived(state, &what);
                turn::on_notice(&myself, state);
            }
            SessionMsg::Poke(what) => inbox::arrived(state, &what),
            SessionMsg::Steer(text, sender, reply) => {
                steer::on_steer(&myself, state, text, sender, reply)
            }
            SessionMsg::WaitIdle(reply) => {
                if state.task.is_none() {
                    let _ = reply.send(state.last_summary.clone());
                } else {
                    state.idle_waiters.push(reply);
                }
            }
            SessionMsg::Status(reply) => {
                let status = if state.task.is_some() {
                    SessionStatus::Running
                } else if state.trace_failure.is_some() {
                    SessionStatus::Failed
                } else {
                    SessionStatus::Idle
                };
                let _ = reply.send(status);
            }
            SessionMsg::Close(reply) => {
                if state.task.is_some() {
                    turn::abort(&myself, state, "session closed");
                    turn::force_finish_abort(state);
                }
                let subagents = state.subagents.take();
                let commands = state.commands.take();
                let mcp = state.mcp.take();
                let trace = state.trace.clone();
                // Boxed: keeps the actor's (always allocated) future small.
                Box::pin(async move {
                    if let Some(mut mcp) = mcp {
                        mcp.shutdown().await;
                    }
                    if let Some(subagents) = subagents {
                        subagents.shutdown().await;
                    }
                    if let Some(commands) = commands {
                        commands.shutdown().await;
                    }
                    let _ = ractor::call!(trace, TraceMsg::Shutdown);
                })
                .await;
                let _ = reply.send(());
                myself.stop(None);
            }
            SessionMsg::Model { turn, event } => turn::on_model_event(&myself, state, turn, event),
            SessionMsg::ModelEvents { turn, events } => {
                for event in events {
                    turn::on_model_event(&myself, state, turn, event);
                }
            }
            SessionMsg::Approved { turn, idx, verdict } => {
                if verdict.decision == Decision::Allow
                    && let Some(name) = dispatch::live_call_name(state, turn, idx)
                {
                    Box::pin(services::ensure(&myself, state, &name)).await;
                }
                dispatch::on_approved(&myself, state, turn, idx, *verdict)
            }
            SessionMsg::HookRecords { turn, records } => {
                if state.task.as_ref().is_some_and(|t| t.turn.id == turn) {
                    for r in records {
                        state.emit(r, true);
                    }
                }
            }
            SessionMsg::ToolPartial { turn, msg } => {
                if state.task.as_ref().is_some_and(|t| t.turn.id == turn) {
                    state.emit(msg, false);
                }
            }
            SessionMsg::ToolDone { turn, idx, output } => {
                dispatch::on_tool_done(&myself, state, turn, idx, output)
            }
            SessionMsg::RetryNow { turn } => turn::on_retry_now(&myself, state, turn),
            SessionMsg::Services(reply) => {
                let _ = reply.send(SessionServices {
                    commands: state.commands.clone(),
                    subagents: state.subagents.clone(),
                });
            }
            SessionMsg::Command(CommandEvent::Evicted { process_id, status }) => {
                state.emit(
                    OmniMessage::event(EventPayload::CommandEvicted { process_id, status }),
                    true,
                );
            }
            SessionMsg::Command(CommandEvent::Completed { notice_text })
            | SessionMsg::Notice(notice_text) => {
                if let Some(p) = build::user_text(notice_text, Some(Sender::Harness)).as_model() {
                    state.pending_notices.push(p.clone());
                }
                inbox::arrived(state, "a background task finished");
                turn::on_notice(&myself, state);
            }
            SessionMsg::ApprovalModeChanged(m) => mode::on_change(state, m),
            SessionMsg::TraceFailed(reason) => {
                tracing::info!(session = %state.id, "{reason}; the session takes no new task");
                state.trace_failure = Some(reason.clone());
                turn::fail(&myself, state, &reason);
            }
            SessionMsg::McpRecord(msg) => state.emit(msg, true),
            SessionMsg::McpSynced {
                turn,
                attempt,
                replies,
            } => mcp_sync::on_synced(&myself, state, turn, attempt, replies),
            SessionMsg::InjectPanic => panic!("injected session actor panic (test hook)"),
        }
        Ok(())
    }
}
