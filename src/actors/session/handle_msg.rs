//! The session actor's dispatch: each [`SessionMsg`] handed to the module that owns it (the
//! turn, the gate, steering, compaction, MCP sync, hooks, supervision of its children).
//!
//! It routes only: the work lives in the sibling modules, and it holds no state of its own.

use ractor::{ActorProcessingErr, ActorRef};

use super::{
    SUBSCRIBER_CAPACITY, SessionMsg, SessionState, SessionStatus, compaction, dispatch, effects,
    hook_events, hook_outcomes, inbox, machine, mcp_sync, mode, model_switch, output_schema,
    prompt_gate, rollback, services, steer, trace_hold, turn,
};
use crate::actors::command_supervisor::CommandEvent;
use crate::actors::session_api::{SessionRequest, fanout_channel};
use crate::message::{Decision, EventPayload, OmniMessage, Sender, build};
use crate::trace::writer::TraceMsg;

pub(super) async fn handle_msg(
    myself: ActorRef<SessionMsg>,
    message: SessionMsg,
    state: &mut SessionState,
) -> Result<(), ActorProcessingErr> {
    let message = output_schema::route(state, message);
    {
        match message {
            SessionMsg::Request(SessionRequest::Subscribe(reply)) => {
                let (tx, rx) = fanout_channel(SUBSCRIBER_CAPACITY);
                if let Ok(mut subs) = state.subscribers.lock() {
                    subs.push(tx);
                }
                let _ = reply.send(rx);
            }
            SessionMsg::Request(SessionRequest::StartTask(text, sender, reply)) => {
                if let Some(e) = prompt_gate::refusal(state) {
                    let _ = reply.send(Err(e));
                } else if prompt_gate::wanted(state) {
                    let reply = prompt_gate::PromptReply::Task(reply);
                    prompt_gate::check(&myself, state, text, sender, reply);
                } else {
                    let _ = reply.send(Ok(()));
                    Box::pin(mcp_sync::start(&myself, state)).await;
                    prompt_gate::start_now(&myself, state, text, sender);
                }
            }
            SessionMsg::Request(SessionRequest::StartStructured(_, _, reply)) => {
                // `output_schema::route` made it a `StartTask` above; never here.
                let _ = reply.send(Err(crate::error::RookeryError::InvalidInput(
                    "structured task start was not routed".to_string(),
                )));
            }
            SessionMsg::PromptChecked(checked) => {
                if matches!(checked.reply, prompt_gate::PromptReply::Task(_)) {
                    Box::pin(mcp_sync::start(&myself, state)).await;
                }
                prompt_gate::on_checked(&myself, state, *checked);
            }
            SessionMsg::Request(SessionRequest::Abort) => {
                turn::abort(&myself, state, "aborted by user")
            }
            SessionMsg::Request(SessionRequest::JoinTrace(tp)) => {
                state.otel.join_trace(&tp, state.task.is_some())
            }
            SessionMsg::Request(SessionRequest::ApiAction { action, by, mode }) => state.emit(
                OmniMessage::event(EventPayload::ApiAction { action, by, mode }),
                true,
            ),
            SessionMsg::Request(SessionRequest::Schedule(record)) => {
                state.emit(OmniMessage::event(record.into_event()), true)
            }
            SessionMsg::Request(SessionRequest::Compact(reply)) => {
                let _ = reply.send(compaction::request(&myself, state));
            }
            SessionMsg::Request(SessionRequest::Rollback(tasks, reply)) => {
                let _ = reply.send(rollback::request(state, tasks));
            }
            SessionMsg::Request(SessionRequest::Inbox(reply)) => {
                let _ = reply.send(state.inbox.subscribe());
            }
            SessionMsg::Request(SessionRequest::Fork(turns, reply)) => {
                let _ = reply.send(inbox::fork(state, turns));
            }
            SessionMsg::Request(SessionRequest::AgentInput { text, what }) => {
                if let Some(p) = build::user_text(text, Some(Sender::Harness)).as_model() {
                    effects::apply(state, machine::Effect::QueueNotice(p.clone()));
                }
                inbox::arrived(state, &what);
                turn::on_notice(&myself, state);
            }
            SessionMsg::Request(SessionRequest::Poke(what)) => inbox::arrived(state, &what),
            SessionMsg::Request(SessionRequest::SwitchModel(choice, apply, reply)) => {
                let _ = reply.send(model_switch::on_switch(state, &choice, apply));
            }
            SessionMsg::Request(SessionRequest::Steer(text, sender, reply)) => {
                steer::on_steer(&myself, state, text, sender, reply)
            }
            SessionMsg::Request(SessionRequest::WaitIdle(reply)) => {
                if state.task.is_none() {
                    let _ = reply.send(state.last_summary.clone());
                } else {
                    state.idle_waiters.push(reply);
                }
            }
            SessionMsg::Request(SessionRequest::Status(reply)) => {
                let status = if state.task.is_some() {
                    SessionStatus::Running
                } else if state.trace_failure.is_some() {
                    SessionStatus::Failed
                } else {
                    SessionStatus::Idle
                };
                let _ = reply.send(status);
            }
            SessionMsg::Request(SessionRequest::Close(reply)) => {
                if state.task.is_some() {
                    turn::abort(&myself, state, "session closed");
                    turn::force_finish_abort(state);
                }
                let subagents = state.subagents.take();
                let commands = state.commands.take();
                let mcp = state.mcp.take();
                let trace = state.trace.clone();
                let site = hook_events::HookSite::of(state);
                // Boxed: keeps the actor's (always allocated) future small.
                Box::pin(async move {
                    hook_events::session_end(&site, "exit").await;
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
            SessionMsg::Request(SessionRequest::LiveCounts(reply)) => {
                let commands = state.commands.clone();
                let subagents = state.subagents.clone();
                // Counted outside the actor: the supervisors answer from their own mailboxes.
                tokio::spawn(async move {
                    let commands = match &commands {
                        Some(c) => c.list().await.len(),
                        None => 0,
                    };
                    let subagents = match &subagents {
                        Some(s) => s.list().await.len(),
                        None => 0,
                    };
                    let _ = reply.send((commands, subagents));
                });
            }
            SessionMsg::Command(CommandEvent::Evicted { process_id, status }) => {
                state.emit(
                    OmniMessage::event(EventPayload::CommandEvicted { process_id, status }),
                    true,
                );
            }
            SessionMsg::Command(CommandEvent::Completed { notice_text })
            | SessionMsg::Request(SessionRequest::Notice(notice_text)) => {
                if let Some(p) = build::user_text(notice_text, Some(Sender::Harness)).as_model() {
                    effects::apply(state, machine::Effect::QueueNotice(p.clone()));
                }
                inbox::arrived(state, "a background task finished");
                turn::on_notice(&myself, state);
            }
            SessionMsg::ApprovalModeChanged(m) => mode::on_change(state, m),
            SessionMsg::GrantRevoked(id) => mode::on_revoke(state, id),
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
            SessionMsg::ReleaseTrace => trace_hold::release(state),
            SessionMsg::HookOutcome { records, context } => {
                hook_outcomes::on_outcome(&myself, state, records, context)
            }
            SessionMsg::StopChecked { turn, check } => {
                turn::on_stop_checked(&myself, state, turn, check)
            }
            SessionMsg::Request(SessionRequest::InjectPanic) => {
                panic!("injected session actor panic (test hook)")
            }
        }
        Ok(())
    }
}
