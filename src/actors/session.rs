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
mod conversation;
mod dispatch;
mod effects;
mod gate;
mod handle_msg;
mod hook_events;
mod hook_outcomes;
pub mod inbox;
mod machine;
mod mcp_sync;
mod mode;
pub mod model_switch;
mod otel_spans;
mod output;
mod output_schema;
mod partials;
mod prompt_gate;
mod rollback;
mod secrets;
mod services;
mod steer;
mod supervision;
mod task;
mod trace_hold;
mod turn;

use std::sync::Arc;

use std::panic::AssertUnwindSafe;

use futures::FutureExt;
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort, SupervisionEvent};

use crate::actors::command_supervisor::{CommandEvent, CommandSupervisorHandle};
use crate::actors::subagent_supervisor::SubagentSupervisorHandle;
use crate::message::{EventPayload, OmniMessage, Usage};

use crate::model::{ModelEvent, ModelSession, ModelSessionContext};
use crate::tools::ServiceKind;
use crate::trace::health::TraceHealth;
use crate::trace::hub::TraceHandle;
use crate::trace::writer::TraceMsg;

use crate::actors::session_api::SessionRequest;
pub use crate::actors::session_api::{
    CompactStart, MessageReceiver, SUBSCRIBER_CAPACITY, SessionHandle, SessionOptions,
    SessionStatus, SteerOutcome, TaskSummary, TryRecvError, steering_text,
};
pub(crate) use crate::actors::session_api::{Subscribers, broadcast, session_meta};
pub(crate) use mode::restore as restore_mode;
pub(crate) use secrets::redactor as session_redactor;
use task::Task;

/// Messages of the session actor: the requests others send ([`SessionRequest`]), then its
/// internal ones (private to `actors/session/`).
pub(crate) enum SessionMsg {
    Request(SessionRequest),
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
    /// The approver's mode changed (recorded as `approval_mode_changed`).
    ApprovalModeChanged(crate::approval::ApprovalMode),
    /// A grant of the session's policy was revoked (recorded).
    GrantRevoked(String),
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
    /// The `UserPromptSubmit` hooks answered about a prompt (`prompt_gate.rs`).
    PromptChecked(Box<prompt_gate::Checked>),
    /// The `Stop` hooks answered about ending the task of `turn`.
    StopChecked {
        turn: u64,
        check: hook_events::StopCheck,
    },
    /// What a lifecycle hook run in the background left: records to write, context for the
    /// model (queued as a notice).
    HookOutcome {
        records: Vec<OmniMessage>,
        context: Option<OmniMessage>,
    },
    /// Releases the trace writer held since a message of a turn (see `trace_hold.rs`): sent to
    /// itself at the end of that message, it comes after every message queued meanwhile.
    ReleaseTrace,
}

impl From<SessionRequest> for SessionMsg {
    fn from(request: SessionRequest) -> Self {
        SessionMsg::Request(request)
    }
}

impl TryFrom<SessionMsg> for SessionRequest {
    type Error = ();

    fn try_from(msg: SessionMsg) -> Result<Self, ()> {
        match msg {
            SessionMsg::Request(request) => Ok(request),
            _ => Err(()),
        }
    }
}

/// Start-up arguments (built by the host).
pub(crate) struct SessionArgs {
    pub id: String,
    pub options: SessionOptions,
    pub trace: TraceHandle,
    pub subscribers: Subscribers,
    /// The `session_meta` record, written first.
    pub meta: Arc<OmniMessage>,
    /// Starts child sessions (handed to the subagent supervisor).
    pub start_child: crate::actors::session_api::StartSession,
    /// Reports the first failed trace write.
    pub trace_health: Arc<TraceHealth>,
    /// When a new session's `session_meta` is written.
    pub meta_write: crate::actors::session_api::MetaWrite,
}

pub(crate) struct SessionActor;

/// The actor's state: conversation, counters and the running task.
pub(crate) struct SessionState {
    pub(crate) id: String,
    pub(crate) options: SessionOptions,
    pub(crate) trace: TraceHandle,
    pub(crate) subscribers: Subscribers,
    pub(crate) model: Box<dyn ModelSession>,
    /// History, committed part, carry-over, task bounds, waiting steers and notices: read by
    /// all, written only by the effects executor (`conversation.rs`, `effects.rs`).
    pub(crate) conversation: effects::ExecutorOwned,
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
    /// Starts child sessions (handed to the subagent supervisor).
    pub(crate) start_child: crate::actors::session_api::StartSession,
    /// The approval mode the trace recorded last (`None`: none yet).
    pub(crate) approval_mode: Option<crate::approval::ApprovalMode>,
    /// Scrubs the session's secrets from what it records and streams (`None`: no secrets).
    pub(crate) redactor: Option<Arc<crate::redact::Redactor>>,
    /// The open partial streams' held-back ends (scrubbed across their pieces).
    pub(crate) partials: std::sync::Mutex<partials::PartialScrubs>,
    /// Stops the approval-mode watcher when the session's state drops.
    pub(crate) _mode_watch: Option<tokio_util::sync::DropGuard>,
    /// Set once the trace could not be written: no new task starts.
    pub(crate) trace_failure: Option<String>,
    /// The trace writer's report of a failed write (read when a task ends).
    pub(crate) trace_health: Arc<TraceHealth>,
    /// At most `tools.max_parallel` tool calls run at once; the others wait in call order.
    pub(crate) budget: budget::ToolBudget,
    /// The session's MCP servers (`None`: none configured, or a subagent).
    pub(crate) mcp: Option<Box<crate::mcp::McpSet>>,
    /// The request (turn id, attempt) whose MCP tool lists are in the registry.
    pub(crate) mcp_synced: Option<(u64, u32)>,
    /// Compaction triggers and the compaction in progress (`compaction.rs`).
    pub(crate) compaction: compaction::Compaction,
    /// Verdicts the gate gave on its first poll, applied once the current message is handled.
    pub(crate) ready_verdicts: std::collections::VecDeque<(u64, usize, gate::Verdict)>,
    /// What arrived for the model (steers, notices, reports, messages): wakes `wait_agent`.
    pub(crate) inbox: inbox::InboxSignal,
    /// The `model_switched` record in force (repeated in the files of later rotations).
    pub(crate) model_switch: Option<Box<OmniMessage>>,
    /// Whether the session holds its trace writer back (`trace_hold.rs`).
    pub(crate) trace_held: trace_hold::Held,
    /// A task's prompt is with its `UserPromptSubmit` hooks: no other task starts meanwhile.
    pub(crate) prompt_pending: bool,
    /// The output schema of the task being started (`output_schema.rs`).
    pub(crate) next_output_schema: Option<crate::actors::session_api::OutputSchema>,
    /// The session's OpenTelemetry spans (empty with export off; `otel_spans.rs`).
    pub(crate) otel: otel_spans::SessionSpans,
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
            mut options,
            trace,
            subscribers,
            meta,
            start_child,
            trace_health,
            meta_write,
        } = args;
        let me = myself.clone();
        trace_health.on_failure(move |text| {
            let _ = me.cast(SessionMsg::TraceFailed(text.to_string()));
        });
        let model_switch = model_switch::on_resume(&id, &mut options);
        let mut model = options.model.open(&ModelSessionContext {
            session_id: id.clone(),
            is_subagent: options.depth > 0,
            first_prompt: options.first_prompt.clone(),
            next_call_index: options.resume.as_ref().map_or(0, |r| r.next_call_index),
            requests_made: options.resume.as_ref().map_or(0, |r| r.requests),
        });
        model_switch::seed_resumed(model.as_mut(), &options);
        let trace_held = trace_hold::at_start(&trace, meta_write, options.resume.is_some());
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
        // A takeover's failover records (the holder's node died) come first, then the calls
        // the trace left in flight (the process died) get their placeholder output recorded
        // once, now: the trace is paired, and the next resume reads it back.
        for record in options.resume.iter().flat_map(|r| r.append_first.iter()) {
            let _ = trace.cast(TraceMsg::Append(Arc::new(record.clone())));
        }
        for id in options.resume.iter().flat_map(|r| r.unpaired.iter()) {
            let output = OmniMessage::model(crate::trace::resume::placeholder(id));
            let _ = trace.cast(TraceMsg::Append(Arc::new(output)));
        }
        let resumed = options.resume.clone();
        let tool_specs = options.config.tools.shared_model_specs();
        // The command and subagent supervisors are spawned on the first call of one of their
        // tools (an idle session costs two actors: itself and its trace actor).
        let wants_commands = options.config.tools.uses(&ServiceKind::Commands)
            || options.config.tools.uses(&ServiceKind::DetachedCommands);
        let wants_subagents =
            options.depth == 0 && options.config.tools.uses(&ServiceKind::Subagents);
        let system_prompt: Arc<str> = Arc::from(options.config.system_prompt.as_str());
        let redactor = secrets::redactor(&options);
        let budget = budget::ToolBudget::new(options.config.max_parallel);
        let mcp = mcp_sync::set_for(&options);
        let forked = options.forked_history.clone();
        let tool_scope = crate::tools::session_scope::SessionScope::with_sandbox(
            options
                .sandbox
                .as_ref()
                .map(|s| Arc::new(s.layout().clone())),
        );
        let otel = {
            let info = options.model.info();
            let agent = options.source.as_deref().unwrap_or("rookery");
            otel_spans::SessionSpans::new(
                &id,
                agent,
                &info.provider,
                &info.model_id,
                options.otel_parent.clone(),
            )
        };
        let mut state = SessionState {
            id,
            options,
            trace,
            subscribers,
            model,
            conversation: effects::ExecutorOwned::new(conversation::Conversation::new(
                match &resumed {
                    Some(r) => Arc::new(r.history.clone()),
                    None => forked,
                },
                resumed
                    .as_ref()
                    .map(|r| r.carry_over.clone())
                    .unwrap_or_default(),
                resumed
                    .as_ref()
                    .map(|r| r.completed_tasks.clone())
                    .unwrap_or_default(),
            )),
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
            tool_scope,
            start_child,
            approval_mode: None,
            redactor,
            partials: Default::default(),
            _mode_watch: None,
            trace_held,
            trace_failure: None,
            trace_health,
            budget,
            mcp,
            mcp_synced: None,
            compaction: compaction::Compaction::resumed(resumed.as_ref().map_or(0, |r| r.turns)),
            ready_verdicts: std::collections::VecDeque::new(),
            inbox: inbox::InboxSignal::default(),
            model_switch,
            prompt_pending: false,
            next_output_schema: None,
            otel,
        };
        state._mode_watch = mode::start(&myself, &mut state).map(|t| t.drop_guard());
        hook_outcomes::on_session_start(&mut state).await;
        Ok(state)
    }

    async fn handle_supervisor_evt(
        &self,
        _myself: ActorRef<Self::Msg>,
        event: SupervisionEvent,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        supervision::on_child_event(state, event);
        Ok(())
    }

    /// The whole handler, its message included, is boxed: the actor's loop future, allocated for
    /// the session's whole life, then holds a pointer instead of the largest handler state and a
    /// `SessionMsg` (about 1.1 kB of every idle session).
    fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: SessionMsg,
        state: &mut Self::State,
    ) -> impl Future<Output = Result<(), ActorProcessingErr>> + Send {
        Box::pin(async move {
            // The records of a message of a turn, and of the messages queued while it is
            // handled, go out together (see `trace_hold.rs`).
            let hold = trace_hold::take(state, &message);
            let handled = AssertUnwindSafe(async {
                let handled = handle_msg::handle_msg(myself.clone(), message, state).await;
                // Verdicts the gate gave at once are applied after the whole message, where a
                // cast-back verdict would be at the earliest.
                effects::apply_ready_verdicts(&myself, state);
                handled
            })
            .catch_unwind()
            .await;
            if hold {
                trace_hold::release_later(&myself, state);
            }
            handled.unwrap_or_else(|panic| {
                // The actor fails; its supervisor writes `abort` and `task_end`. The open calls
                // are settled first, so every call of the trace keeps exactly one output.
                turn::settle_after_panic(state);
                Err(supervision::panic_text(panic).into())
            })
        })
    }
}
