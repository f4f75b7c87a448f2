//! The executor of the turn state machine: carries out, in order, the [`Effect`]s a transition
//! of `machine.rs` returned — streams and records messages, starts the model stream, asks the
//! gate, runs calls, arms the backoff, hands over to compaction, steering and MCP hooks, and
//! ends the task.
//!
//! It decides nothing about the turn loop (the machine does); it only does what it is told,
//! inside the actor's `handle`, and every wait it starts is a spawned task that casts back
//! tagged with the turn id.
//!
//! It is the only writer of the session's [`Conversation`]: the session holds it in
//! [`ExecutorOwned`], whose inner value only this file reaches; everyone else reads it through
//! `Deref`. The turn, compaction, steering and notices change it through effects
//! ([`run`], [`run_local`], [`apply`]) and take its queues through [`take`].

use std::panic::AssertUnwindSafe;

use futures::{FutureExt, StreamExt};
use ractor::ActorRef;
use tokio_util::sync::CancellationToken;

use super::conversation::Conversation;
use super::machine::{Effect, Machine};
use super::{SessionMsg, SessionState, compaction, dispatch, mcp_sync, services, turn};
use crate::message::{Decision, ModelPayload, StopReason};
use crate::model::{ModelEvent, ModelOutcome, ModelRequest};

/// The session's conversation: readable by every file of the session (`Deref`), writable only
/// by this executor (its field is private to this file).
pub(crate) struct ExecutorOwned(Conversation);

impl ExecutorOwned {
    pub(super) fn new(conversation: Conversation) -> Self {
        ExecutorOwned(conversation)
    }
}

impl std::ops::Deref for ExecutorOwned {
    type Target = Conversation;

    fn deref(&self) -> &Conversation {
        &self.0
    }
}

/// A queue of the conversation the turn loop empties at an input-assembly point.
pub(super) enum Queue {
    CarryOver,
    Steers,
    Notices,
}

/// Takes everything waiting in `queue`, in order.
pub(super) fn take(state: &mut SessionState, queue: Queue) -> Vec<ModelPayload> {
    let conversation = &mut state.conversation.0;
    match queue {
        Queue::CarryOver => conversation.take_carry_over(),
        Queue::Steers => conversation.take_steers(),
        Queue::Notices => conversation.take_notices(),
    }
}

/// The machine over the session's running task, with what it reads of the session now.
pub(super) fn machine(state: &mut SessionState) -> Machine<'_> {
    let compacting = compaction::is_active(state);
    Machine {
        task: &mut state.task,
        turns: &mut state.turns,
        session_usage: &mut state.session_usage,
        next_turn_id: &mut state.next_turn_id,
        max_turns: state.options.config.max_turns,
        retry: state.options.config.retry,
        input_waiting: state.conversation.input_waiting(),
        mcp_servers: state.mcp.is_some(),
        mcp_synced: state.mcp_synced,
        compacting,
        trace_failure: state.trace_health.failure().map(str::to_string),
        stop_hooks: state.options.config.hooks.has(if state.options.depth > 0 {
            crate::hooks::HookEvent::SubagentStop
        } else {
            crate::hooks::HookEvent::Stop
        }),
        max_stop_continuations: state.options.config.hooks_max_stop_continuations,
    }
}

/// Carries out `fx` in order. A verdict the gate gives at once is queued in
/// `state.ready_verdicts`, for [`apply_ready_verdicts`] after the current message.
pub(super) fn run(myself: &ActorRef<SessionMsg>, state: &mut SessionState, fx: Vec<Effect>) {
    for effect in fx {
        let Some(effect) = apply_local(state, effect) else {
            continue;
        };
        match effect {
            Effect::SyncMcp { turn, attempt } => mcp_sync::sync(myself, state, turn, attempt),
            Effect::StartStream { turn, input } => start_stream(myself, state, turn, input),
            Effect::AskApproval {
                turn,
                idx,
                tool_call_id,
                name,
                arguments,
            } => {
                let verdict =
                    dispatch::ask_approval(myself, state, turn, idx, tool_call_id, name, arguments);
                if let Some(verdict) = verdict {
                    state.ready_verdicts.push_back((turn, idx, verdict));
                }
            }
            Effect::RunCall {
                turn,
                idx,
                info,
                context,
            } => dispatch::spawn_tool(myself, state, turn, idx, info, context),
            Effect::RetryAfter { turn, wait_ms } => {
                let me = myself.clone();
                let backoff = tokio::spawn(async move {
                    tokio::time::sleep(std::time::Duration::from_millis(wait_ms)).await;
                    let _ = me.cast(SessionMsg::RetryNow { turn });
                });
                if let Some(task) = state.task.as_mut() {
                    task.turn.io.backoff = Some(backoff);
                }
            }
            Effect::NextRequest(outputs) => turn::next_request(myself, state, outputs),
            Effect::CheckStop {
                turn,
                active,
                allowed,
            } => turn::check_stop(myself, state, turn, active, allowed),
            // `apply_local` carried out the others.
            _ => {}
        }
    }
}

/// Applies the verdicts the gate gave at once, in the order asked, as cast-back verdicts would
/// be (the ones they lead to included). A call whose supervisor is not started yet goes through
/// the actor's async handler of the verdict instead.
pub(super) fn apply_ready_verdicts(myself: &ActorRef<SessionMsg>, state: &mut SessionState) {
    while let Some((turn, idx, verdict)) = state.ready_verdicts.pop_front() {
        let starts_service = verdict.decision == Decision::Allow
            && dispatch::live_call_name(state, turn, idx)
                .is_some_and(|name| services::needs_start(state, &name));
        if starts_service {
            let verdict = Box::new(verdict);
            let _ = myself.cast(SessionMsg::Approved { turn, idx, verdict });
            continue;
        }
        let fx = machine(state).on_approved(turn, idx, verdict);
        run(myself, state, fx);
    }
}

/// Carries out `fx` on an ending path that has no actor reference at hand (compaction's end,
/// session close, a panic). Those transitions only ever return effects on the session's own
/// state; any other is logged and dropped.
pub(super) fn run_local(state: &mut SessionState, fx: Vec<Effect>) {
    for effect in fx {
        if apply_local(state, effect).is_some() {
            tracing::error!(session = %state.id, "a turn effect needing the actor was dropped");
        }
    }
}

/// Carries out one effect that needs only the session's state (a change of the conversation).
pub(super) fn apply(state: &mut SessionState, effect: Effect) {
    run_local(state, vec![effect]);
}

/// Carries out an effect that needs only the session's state; returns the others.
fn apply_local(state: &mut SessionState, effect: Effect) -> Option<Effect> {
    match effect {
        Effect::Emit(msg) => state.emit(msg, true),
        Effect::Stream(msg) => state.emit(msg, false),
        Effect::SetCarryOver(carry) => state.conversation.0.set_carry_over(carry),
        Effect::RequestCompleted(usage) => compaction::after_request(state, &usage),
        Effect::Commit(produced) => state.conversation.0.commit(produced),
        Effect::OpenTask => state.conversation.0.open_task(),
        Effect::ReplaceContext => state.conversation.0.replace_context(),
        Effect::Rollback(tasks) => {
            state.conversation.0.rollback(tasks);
        }
        Effect::QueueSteer(steer) => state.conversation.0.queue_steer(steer),
        Effect::QueueNotice(notice) => state.conversation.0.queue_notice(notice),
        Effect::CancelTools => {
            if let Some(task) = state.task.as_mut() {
                task.turn.io.cancel.cancel();
            }
        }
        Effect::StopBackground => {
            if let Some(task) = state.task.as_mut() {
                task.turn.io.stop();
            }
        }
        Effect::NewAttempt => {
            if let Some(task) = state.task.as_mut() {
                task.turn.io.backoff = None;
                if let Some(pending) = task.turn.io.approving.take() {
                    pending.abort();
                }
                task.turn.io.cancel = CancellationToken::new();
            }
        }
        Effect::AbortCompaction(reason) => compaction::abort(state, &reason),
        Effect::EndTask { summary, mut task } => {
            task.turn.io.stop();
            if summary.status == StopReason::Completed {
                state.conversation.0.close_task();
            }
            state.last_summary = Some(summary.clone());
            for w in state.idle_waiters.drain(..) {
                let _ = w.send(Some(summary.clone()));
            }
        }
        other => return Some(other),
    }
    None
}

/// Puts `input` after the committed history and starts the model stream of `turn`.
fn start_stream(
    myself: &ActorRef<SessionMsg>,
    state: &mut SessionState,
    turn_id: u64,
    input: Vec<ModelPayload>,
) {
    // Uncommitted input of an earlier attempt goes; this attempt's input is appended in place
    // (a copy happens only if an old request still holds the history).
    let history = state.conversation.0.begin_request(input);
    let request = ModelRequest {
        system_prompt: state.system_prompt.clone(),
        history,
        tools: state.tool_specs.clone(),
    };
    let schema = state.task.as_deref().and_then(|t| t.output_schema.as_ref());
    state
        .model
        .set_output_schema(schema.map(crate::actors::session_api::OutputSchema::schema));
    if let Some(tp) = state.otel.request_span().traceparent() {
        state.model.set_traceparent(Some(&tp.to_string()));
    }
    let stream = state.model.stream(request);
    let me = myself.clone();
    let handle = tokio::spawn(async move {
        let drive = async {
            let mut stream = stream;
            while let Some(event) = stream.next().await {
                let mut is_end = matches!(event, ModelEvent::End(_));
                // The events the stream already holds (one read's worth) go in one message.
                let mut events = Vec::new();
                while !is_end {
                    match stream.next().now_or_never() {
                        Some(Some(more)) => {
                            is_end = matches!(more, ModelEvent::End(_));
                            events.push(more);
                        }
                        _ => break,
                    }
                }
                let msg = if events.is_empty() {
                    SessionMsg::Model {
                        turn: turn_id,
                        event,
                    }
                } else {
                    events.insert(0, event);
                    SessionMsg::ModelEvents {
                        turn: turn_id,
                        events,
                    }
                };
                if me.cast(msg).is_err() || is_end {
                    return true;
                }
            }
            false
        };
        let ended = AssertUnwindSafe(drive).catch_unwind().await;
        let outcome = match ended {
            Ok(true) => return,
            Ok(false) => {
                ModelOutcome::error(StopReason::Malformed, "model stream ended without a finish")
            }
            Err(_) => ModelOutcome::error(StopReason::Failed, "model stream panicked"),
        };
        let _ = me.cast(SessionMsg::Model {
            turn: turn_id,
            event: ModelEvent::End(outcome),
        });
    });
    if let Some(task) = state.task.as_mut() {
        task.turn.io.stream = Some(handle);
    }
}
