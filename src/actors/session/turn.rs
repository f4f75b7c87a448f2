//! The turn state machine of a session: request → stream → sequential approvals → concurrent
//! tools → reordered outputs → next request, with reconnects, max turns and abort carry-over.
//!
//! Every function here runs inside the session actor's `handle` and returns at once: waiting is
//! done by spawned tasks that cast back to the actor with the turn id.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::{FutureExt, StreamExt};
use ractor::ActorRef;
use tokio_util::sync::CancellationToken;

use super::carry;
use super::task::{Call, Task, new_turn};
use super::{SessionMsg, SessionState};
use crate::message::{EventType, ModelPayload, OmniMessage, Role, StopReason, Usage, build};
use crate::model::{ModelEvent, ModelOutcome, ModelRequest};

/// Starts a task with the user's text (the caller checked that none runs).
pub(crate) fn start_task(
    myself: &ActorRef<SessionMsg>,
    state: &mut SessionState,
    text: String,
    sender: Option<crate::message::Sender>,
) {
    let Some((text, sender)) = super::compaction::before_task(myself, state, text, sender) else {
        return;
    };
    super::inbox::task_started(state);
    let mut input = std::mem::take(&mut state.carry_over);
    // Steers left by an aborted task come before the new prompt, as the trace has them.
    input.extend(super::steer::take(state));
    let user = build::user_text(text, sender);
    if let Some(p) = user.as_model() {
        input.push(p.clone());
    }
    if state.options.depth > 0 {
        // A child's prompt is streamed too: its parent's subscribers get it origin-tagged.
        state.emit(user, true);
    } else {
        state.record_only(&user);
    }
    input.extend(deliver_notices(state));
    // With MCP servers the list is announced once their tools are known (`mcp_sync`).
    if !state.tools_announced && state.mcp.is_none() {
        state.tools_announced = true;
        state.emit(
            build::tool_list_ready(state.tool_specs.as_ref().clone()),
            true,
        );
    }
    let turn = new_turn(state, input);
    state.task = Some(Box::new(Task {
        turn,
        aborting: None,
        end_status: StopReason::Aborted,
        tool_calls: 0,
        final_text: None,
    }));
    begin_request(myself, state);
}

/// Sends the current turn's request (checking `max_turns` on a first attempt).
pub(super) fn begin_request(myself: &ActorRef<SessionMsg>, state: &mut SessionState) {
    let max = state.options.config.max_turns;
    let Some(task) = state.task.as_mut() else {
        return;
    };
    if task.turn.attempt == 1 && max > 0 && state.turns >= max as u64 {
        let text = format!("[reached max turns ({max}); stopping]");
        state.carry_over = task.turn.base_input.clone();
        state.emit(
            build::partial_text(EventType::Start, "", StopReason::Completed),
            false,
        );
        state.emit(
            build::partial_text(EventType::Delta, text.clone(), StopReason::Completed),
            false,
        );
        state.emit(
            build::partial_text(EventType::Stop, "", StopReason::Failed),
            false,
        );
        state.emit(build::assistant_text(text, StopReason::Failed), true);
        finish_task(state, StopReason::Failed, None);
        return;
    }
    if super::mcp_sync::hold_request(myself, state) {
        return;
    }
    let Some(task) = state.task.as_mut() else {
        return;
    };
    // Uncommitted input of an earlier attempt goes; this attempt's input is appended in place
    // (a copy happens only if an old request still holds the history).
    let history = Arc::make_mut(&mut state.history);
    history.truncate(state.committed);
    history.extend(task.turn.base_input.iter().cloned());
    history.extend(task.turn.retry_note.iter().cloned());
    let request = ModelRequest {
        system_prompt: state.system_prompt.clone(),
        history: state.history.clone(),
        tools: state.tool_specs.clone(),
    };
    let turn_id = task.turn.id;
    state.emit(build::request_begin(), true);
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
        task.turn.stream = Some(handle);
    }
}

pub(super) fn live_task(state: &mut SessionState, turn: u64) -> Option<&mut Task> {
    state
        .task
        .as_deref_mut()
        .filter(|t| t.turn.id == turn && t.aborting.is_none())
}

pub(crate) fn on_model_event(
    myself: &ActorRef<SessionMsg>,
    state: &mut SessionState,
    turn: u64,
    event: ModelEvent,
) {
    if super::compaction::owns(state, turn) {
        return super::compaction::on_event(myself, state, event);
    }
    let Some(task) = live_task(state, turn) else {
        return;
    };
    match event {
        ModelEvent::Partial(p) => state.emit(OmniMessage::model(p), false),
        ModelEvent::Usage(u) => task.turn.usage = u,
        ModelEvent::Complete(p) => {
            if let ModelPayload::Text {
                role: Role::Assistant,
                text,
                ..
            } = &p
            {
                task.final_text = Some(text.clone());
            }
            if let ModelPayload::ToolCall {
                name,
                arguments,
                tool_call_id,
                stop_reason: StopReason::Completed,
                ..
            } = &p
            {
                task.turn.calls.push(Call {
                    id: tool_call_id.clone(),
                    name: name.clone(),
                    arguments: arguments.clone(),
                    output: None,
                    running: false,
                });
                task.tool_calls += 1;
                task.turn
                    .approval_queue
                    .push_back(task.turn.calls.len() - 1);
            }
            task.turn.produced.push(p.clone());
            state.emit(OmniMessage::model(p), true);
            super::dispatch::pump_approvals(myself, state);
        }
        ModelEvent::End(outcome) => on_stream_end(myself, state, outcome),
    }
}

fn on_stream_end(myself: &ActorRef<SessionMsg>, state: &mut SessionState, outcome: ModelOutcome) {
    let retry = state.options.config.retry;
    let Some(task) = state.task.as_mut() else {
        return;
    };
    task.turn.stream = None;
    let attempt = task.turn.attempt;
    if outcome.status == StopReason::Completed {
        let usage = task.turn.usage;
        state.session_usage.add(&usage);
        state.turns += 1;
        super::compaction::after_request(state, &usage);
        let Some(task) = state.task.as_mut() else {
            return;
        };
        let session_usage = state.session_usage;
        task.turn.completed = true;
        // The history already ends with this request's input (see `begin_request`).
        let history = Arc::make_mut(&mut state.history);
        history.extend(task.turn.produced.iter().cloned());
        state.committed = history.len();
        state.emit(build::token_usage(session_usage, usage), true);
        let attempt_field = (attempt > 1).then_some(attempt);
        state.emit(
            build::request_end(StopReason::Completed, None, attempt_field, None),
            true,
        );
        maybe_finish_turn(myself, state);
        return;
    }
    let detail = outcome
        .error_message
        .clone()
        .unwrap_or_else(|| "unknown".to_string());
    let retryable = matches!(
        outcome.status,
        StopReason::Failed | StopReason::Timeout | StopReason::Malformed
    ) && !outcome.permanent;
    if retryable && attempt <= retry.max_retries {
        let wait = outcome
            .retry_after_ms
            .unwrap_or(0)
            .max(retry.backoff_ms(attempt));
        // Tools of a failed attempt are cancelled; what the attempt produced is transcribed.
        task.turn.cancel.cancel();
        let outputs = task.turn.outputs_in_call_order();
        let mut produced = std::mem::take(&mut task.turn.produced);
        task.turn.failed_produced.append(&mut produced);
        task.turn.retry_note = carry::retry_transcript(&task.turn.failed_produced, &outputs);
        let me = myself.clone();
        let turn_id = task.turn.id;
        task.turn.backoff = Some(tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_millis(wait)).await;
            let _ = me.cast(SessionMsg::RetryNow { turn: turn_id });
        }));
        state.emit(
            build::request_end(outcome.status, Some(detail), Some(attempt), Some(wait)),
            true,
        );
        return;
    }
    task.turn.stop_background();
    state.carry_over = task.turn.input();
    state.emit(
        build::request_end(outcome.status, Some(detail.clone()), Some(attempt), None),
        true,
    );
    let reason = if !retryable {
        format!("llm request error: {detail}")
    } else {
        let n = retry.max_retries;
        match outcome.status {
            StopReason::Malformed => format!("malformed response failed after {n} retries"),
            StopReason::Timeout => format!("reconnect failed after {n} retries"),
            _ => format!("llm request failed after {n} retries: {detail}"),
        }
    };
    finish_task(state, StopReason::Failed, Some(reason));
}

pub(crate) fn on_retry_now(myself: &ActorRef<SessionMsg>, state: &mut SessionState, turn: u64) {
    if super::compaction::owns(state, turn) {
        return super::compaction::on_retry_now(myself, state);
    }
    let next_id = state.next_turn_id;
    let Some(task) = live_task(state, turn) else {
        return;
    };
    task.turn.backoff = None;
    // Calls of the failed attempt that are still open are settled now: their late reports are
    // ignored from here on.
    super::close_out::close_open_calls(state);
    let Some(task) = live_task(state, turn) else {
        return;
    };
    // A fresh id so late events of the failed attempt are ignored.
    task.turn.id = next_id;
    task.turn.attempt += 1;
    task.turn.produced.clear();
    task.turn.calls.clear();
    task.turn.approval_queue.clear();
    task.turn.cancel = CancellationToken::new();
    task.turn.usage = Usage::default();
    state.next_turn_id += 1;
    begin_request(myself, state);
}

/// Streams and records the queued background notices and returns them as input.
fn deliver_notices(state: &mut SessionState) -> Vec<ModelPayload> {
    let notices = std::mem::take(&mut state.pending_notices);
    for n in &notices {
        state.emit(OmniMessage::model(n.clone()), true);
    }
    notices
}

/// A notice arrived: a running task picks it up at its next input-assembly point; an idle
/// session keeps it for the next task.
pub(crate) fn on_notice(myself: &ActorRef<SessionMsg>, state: &mut SessionState) {
    if state.task.as_ref().is_some_and(|t| t.aborting.is_none()) {
        maybe_finish_turn(myself, state);
    }
}

pub(super) fn maybe_finish_turn(myself: &ActorRef<SessionMsg>, state: &mut SessionState) {
    let Some(task) = state.task.as_mut() else {
        return;
    };
    let turn = &task.turn;
    if !turn.completed || turn.calls.iter().any(|c| c.output.is_none()) {
        return;
    }
    if turn.calls.is_empty() && state.pending_notices.is_empty() && state.pending_steers.is_empty()
    {
        finish_task(state, StopReason::Completed, None);
        return;
    }
    let mut next_input = turn.outputs_in_call_order();
    // Steers were recorded on receipt, before the notices delivered now: trace order.
    next_input.extend(super::steer::take(state));
    next_input.extend(deliver_notices(state));
    let Some(next_input) = super::compaction::before_request(myself, state, next_input) else {
        return;
    };
    continue_task(myself, state, next_input);
}

/// The running task goes on with a new request on `input`.
pub(super) fn continue_task(
    myself: &ActorRef<SessionMsg>,
    state: &mut SessionState,
    input: Vec<ModelPayload>,
) {
    let next = new_turn(state, input);
    if let Some(task) = state.task.as_mut() {
        task.turn = next;
    }
    begin_request(myself, state);
}

/// Starts aborting the running task: stops the stream, approvals and backoff, cancels tools,
/// and finishes once every running tool has reported.
pub(crate) fn abort(_myself: &ActorRef<SessionMsg>, state: &mut SessionState, reason: &str) {
    if super::compaction::is_active(state) {
        return super::compaction::abort(state, reason);
    }
    let Some(task) = state.task.as_mut() else {
        return;
    };
    if task.aborting.is_some() {
        return;
    }
    let in_backoff = task.turn.backoff.is_some();
    task.aborting = Some(if in_backoff && reason == "aborted by user" {
        "aborted during reconnect backoff".to_string()
    } else {
        reason.to_string()
    });
    task.turn.stop_background();
    if task.turn.running_tools() == 0 {
        finalize_abort(state);
    }
}

/// Ends the running task as `failed` with `reason` through the abort path (used when the
/// trace cannot be written): tools are cancelled and every call keeps exactly one output.
pub(crate) fn fail(myself: &ActorRef<SessionMsg>, state: &mut SessionState, reason: &str) {
    let Some(task) = state.task.as_mut() else {
        return;
    };
    task.end_status = StopReason::Failed;
    if task.aborting.is_some() {
        task.aborting = Some(reason.to_string());
        return;
    }
    abort(myself, state, reason);
}

/// After a panic inside the session actor (which then fails; its supervisor writes `abort` and
/// `task_end`): stops the running task's stream, approvals and tools and settles its open
/// calls, so every call of the trace keeps exactly one output.
pub(crate) fn settle_after_panic(state: &mut SessionState) {
    if let Some(task) = state.task.as_mut() {
        task.turn.stop_background();
    }
    super::close_out::close_open_calls(state);
}

/// Finishes an abort now, even if tools are still running (session close).
pub(crate) fn force_finish_abort(state: &mut SessionState) {
    if state.task.as_ref().is_some_and(|t| t.aborting.is_some()) {
        finalize_abort(state);
    }
}

pub(super) fn finalize_abort(state: &mut SessionState) {
    // First, so the carry-over holds exactly the outputs the trace has.
    super::close_out::close_open_calls(state);
    let Some(task) = state.task.as_mut() else {
        return;
    };
    let status = task.end_status;
    let reason = task
        .aborting
        .clone()
        .unwrap_or_else(|| "aborted by user".to_string());
    let turn = &task.turn;
    state.carry_over = if turn.completed {
        // Case A: the calls are committed; each keeps exactly one output.
        turn.calls
            .iter()
            .map(|c| {
                c.output
                    .clone()
                    .unwrap_or_else(|| carry::placeholder(&c.id))
            })
            .collect()
    } else {
        // Case B: nothing of this request is committed; flatten it for the model.
        carry::flatten_aborted(&turn.input(), &turn.produced, &turn.outputs_in_call_order())
    };
    finish_task(state, status, Some(reason));
}

/// Ends the running task: settles every open call (see `close_out`), then writes `abort` (when
/// there is a reason) and `task_end`, and answers the idle waiters. Every ending goes here.
pub(super) fn finish_task(
    state: &mut SessionState,
    status: StopReason,
    abort_reason: Option<String>,
) {
    super::close_out::close_open_calls(state);
    let Some(mut task) = state.task.take() else {
        return;
    };
    task.turn.stop_background();
    // A record of this task already failed to reach the trace: it did not complete.
    let (status, abort_reason) = match state.trace_health.failure() {
        Some(failure) if status == StopReason::Completed => {
            (StopReason::Failed, Some(failure.to_string()))
        }
        _ => (status, abort_reason),
    };
    if let Some(reason) = &abort_reason {
        state.emit(build::abort(Some(reason.clone())), true);
    }
    state.emit(build::task_end(status), true);
    let summary = super::TaskSummary {
        status,
        final_text: task.final_text.take(),
        tool_calls: task.tool_calls,
        abort_reason,
    };
    if status == StopReason::Completed {
        super::inbox::task_completed(state);
    }
    state.last_summary = Some(summary.clone());
    for w in state.idle_waiters.drain(..) {
        let _ = w.send(Some(summary.clone()));
    }
}

/// A task stands for a compaction that runs before (or without) one: the session is busy.
pub(super) fn hold_task(state: &mut SessionState) {
    if state.task.is_none() {
        let turn = new_turn(state, Vec::new());
        state.task = Some(Box::new(Task {
            turn,
            aborting: None,
            end_status: StopReason::Aborted,
            tool_calls: 0,
            final_text: None,
        }));
    }
}

/// Ends a held task without records (an idle session's compaction is over).
pub(super) fn release_task(state: &mut SessionState) {
    state.task = None;
    for w in state.idle_waiters.drain(..) {
        let _ = w.send(state.last_summary.clone());
    }
}

/// Ends the running task with `status` and `reason` (a compaction that did not complete).
pub(super) fn end_task(state: &mut SessionState, status: StopReason, reason: String) {
    finish_task(state, status, Some(reason));
}
