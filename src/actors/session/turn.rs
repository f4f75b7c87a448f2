//! The turn loop's entry points in the session actor: each message of the loop (a task to
//! start, a model event, the end of a backoff, a notice, an abort, a trace failure) is handed
//! to the pure transitions of `machine.rs`, whose effects `effects.rs` carries out.
//!
//! What belongs to the input assembly stays here: a task's first input (carry-over, steers,
//! the prompt, notices), the next request's input (outputs, steers, notices, through
//! compaction), and the compaction's placeholder task. Every function runs inside the session
//! actor's `handle` and returns at once.

use ractor::ActorRef;

use super::effects::{Queue, apply, machine, run, run_local, take};
use super::machine::Effect;
use super::task::{self, Task, Turn};
use super::{SessionMsg, SessionState};
use crate::message::{ModelPayload, OmniMessage, StopReason, build};
use crate::model::ModelEvent;

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
    apply(state, Effect::OpenTask);
    match &state.redactor {
        Some(r) => state.otel.task_begin(&r.redact(&text)),
        None => state.otel.task_begin(&text),
    }
    let mut input = take(state, Queue::CarryOver);
    // Steers left by an aborted task come before the new prompt, as the trace has them.
    input.extend(super::steer::take(state));
    let user = build::user_text(text, sender);
    if let Some(p) = user.as_model() {
        input.push(p.clone());
    }
    if state.options.depth > 0 || state.options.stream_prompt {
        // A child's prompt is streamed too: its parent's subscribers get it origin-tagged.
        state.emit(user, true);
    } else {
        state.record_only(&user);
    }
    input.extend(deliver_notices(state));
    // With MCP servers the list is announced once their tools are known (`mcp_sync`).
    if !state.tools_announced && state.mcp.is_none() {
        state.tools_announced = true;
        state.emit(build::tool_list_ready(state.tool_specs.clone()), true);
    }
    let fx = machine(state).start(input);
    let schema = super::output_schema::take(state);
    if let Some(task) = state.task.as_deref_mut() {
        task.output_schema = schema;
    }
    run(myself, state, fx);
}

/// The task would end after `turn`: its Stop hooks run in a spawned task, their answer comes
/// back as `SessionMsg::StopChecked`.
pub(super) fn check_stop(
    myself: &ActorRef<SessionMsg>,
    state: &mut SessionState,
    turn: u64,
    active: bool,
    allowed: bool,
) {
    let site = super::hook_events::HookSite::of(state);
    let subagent = state.options.depth > 0;
    let me = myself.clone();
    tokio::spawn(async move {
        let check = super::hook_events::check_stop(site, subagent, active, allowed).await;
        let _ = me.cast(SessionMsg::StopChecked { turn, check });
    });
}

/// The Stop hooks answered for `turn`: their records are written; a reason to go on is fed to
/// the model as a user-side text and the task goes on, else it ends.
pub(crate) fn on_stop_checked(
    myself: &ActorRef<SessionMsg>,
    state: &mut SessionState,
    turn: u64,
    check: super::hook_events::StopCheck,
) {
    if live_task(state, turn).is_none() {
        return;
    }
    for r in check.records {
        state.emit(r, true);
    }
    let input = check.continue_with.and_then(|reason| {
        let msg = build::user_text(
            format!("Stop hook feedback:\n{reason}"),
            Some(crate::message::Sender::Harness),
        );
        let p = msg.as_model().cloned();
        state.emit(msg, true);
        p
    });
    let fx = machine(state).on_stop_checked(turn, input);
    run(myself, state, fx);
}

/// Sends the current turn's request (checking `max_turns` on a first attempt).
pub(super) fn begin_request(myself: &ActorRef<SessionMsg>, state: &mut SessionState) {
    let fx = machine(state).begin_request();
    run(myself, state, fx);
}

pub(super) fn live_task(state: &mut SessionState, turn: u64) -> Option<&mut Task> {
    task::live(&mut state.task, turn)
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
    let fx = machine(state).on_model_event(turn, event);
    run(myself, state, fx);
}

pub(crate) fn on_retry_now(myself: &ActorRef<SessionMsg>, state: &mut SessionState, turn: u64) {
    if super::compaction::owns(state, turn) {
        return super::compaction::on_retry_now(myself, state);
    }
    let fx = machine(state).on_retry_now(turn);
    run(myself, state, fx);
}

/// Streams and records the queued background notices and returns them as input.
fn deliver_notices(state: &mut SessionState) -> Vec<ModelPayload> {
    let notices = take(state, Queue::Notices);
    for n in &notices {
        state.emit(OmniMessage::model(n.clone()), true);
    }
    notices
}

/// A notice arrived: a running task picks it up at its next input-assembly point; an idle
/// session keeps it for the next task.
pub(crate) fn on_notice(myself: &ActorRef<SessionMsg>, state: &mut SessionState) {
    let fx = machine(state).on_notice();
    run(myself, state, fx);
}

/// The turn is over and the task goes on (`Effect::NextRequest`): its outputs in call order,
/// then the waiting steers (recorded on receipt, before the notices delivered now: trace
/// order) and notices become the next request's input, after a compaction when one is due.
pub(super) fn next_request(
    myself: &ActorRef<SessionMsg>,
    state: &mut SessionState,
    outputs: Vec<ModelPayload>,
) {
    let mut next_input = outputs;
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
    let fx = machine(state).next_turn(input);
    run(myself, state, fx);
}

/// Starts aborting the running task: stops the stream, approvals and backoff, cancels tools,
/// and finishes once every running tool has reported.
pub(crate) fn abort(myself: &ActorRef<SessionMsg>, state: &mut SessionState, reason: &str) {
    let fx = machine(state).abort(reason);
    run(myself, state, fx);
}

/// Ends the running task as `failed` with `reason` through the abort path (used when the
/// trace cannot be written): tools are cancelled and every call keeps exactly one output.
pub(crate) fn fail(myself: &ActorRef<SessionMsg>, state: &mut SessionState, reason: &str) {
    let fx = machine(state).fail(reason);
    run(myself, state, fx);
}

/// After a panic inside the session actor (which then fails; its supervisor writes `abort` and
/// `task_end`): stops the running task's stream, approvals and tools and settles its open
/// calls, so every call of the trace keeps exactly one output.
pub(crate) fn settle_after_panic(state: &mut SessionState) {
    let fx = machine(state).settle_after_panic();
    run_local(state, fx);
}

/// Finishes an abort now, even if tools are still running (session close).
pub(crate) fn force_finish_abort(state: &mut SessionState) {
    let fx = machine(state).force_finish_abort();
    run_local(state, fx);
}

/// A task stands for a compaction that runs before (or without) one: the session is busy.
pub(super) fn hold_task(state: &mut SessionState) {
    if state.task.is_none() {
        let id = state.next_turn_id;
        state.next_turn_id += 1;
        state.task = Some(Box::new(Task::new(Turn::new(id, Vec::new()))));
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
    let fx = machine(state).finish(status, Some(reason));
    run_local(state, fx);
}
