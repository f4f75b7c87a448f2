//! Steering: a user (or parent agent) text that joins the running task at its next
//! input-assembly point (after the running calls finish, before the next request).
//!
//! A steer is recorded in the trace and streamed the moment it is received, as a user text
//! wrapped in `[user_steering]…[/user_steering]`; resume therefore treats it as pending user
//! input (it joins the next request, or the next task when none ran). Live, it waits in the
//! conversation's steer queue (`conversation.rs`, written through the executor's
//! `Effect::QueueSteer`) until the turn loop takes it. With no task running, a steer starts one
//! with its text as the prompt.
//!
//! This module owns the steer's reception; it must not drive the turn loop beyond starting a
//! task through `turn::start_task`.

use ractor::{ActorRef, RpcReplyPort};

use super::effects::{self, Queue};
use super::machine::Effect;
use super::{SessionMsg, SessionState, turn};
use crate::actors::session_api::{SteerOutcome, steering_text};
use crate::error::RookeryError;
use crate::message::{ModelPayload, Sender, build};

/// Handles `SessionMsg::Steer`.
pub(super) fn on_steer(
    myself: &ActorRef<SessionMsg>,
    state: &mut SessionState,
    text: String,
    sender: Option<Sender>,
    reply: RpcReplyPort<Result<SteerOutcome, RookeryError>>,
) {
    if let Some(reason) = &state.trace_failure {
        let _ = reply.send(Err(RookeryError::TraceFailed {
            session: state.id.clone(),
            reason: reason.clone(),
        }));
        return;
    }
    if super::prompt_gate::wanted(state) {
        let reply = super::prompt_gate::PromptReply::Steer(reply);
        super::prompt_gate::check(myself, state, text, sender, reply);
        return;
    }
    on_steer_checked(myself, state, text, sender, reply, |_| {});
}

/// A steer that passed its `UserPromptSubmit` hooks (or had none): it starts a task when none
/// runs, else joins the running one; `queue` adds the hooks' context after it.
pub(super) fn on_steer_checked(
    myself: &ActorRef<SessionMsg>,
    state: &mut SessionState,
    text: String,
    sender: Option<Sender>,
    reply: RpcReplyPort<Result<SteerOutcome, RookeryError>>,
    queue: impl FnOnce(&mut SessionState),
) {
    if let Some(reason) = &state.trace_failure {
        let _ = reply.send(Err(RookeryError::TraceFailed {
            session: state.id.clone(),
            reason: reason.clone(),
        }));
        return;
    }
    if state.task.is_none() && state.prompt_pending {
        let _ = reply.send(Err(RookeryError::SessionBusy(state.id.clone())));
        return;
    }
    if state.task.is_none() {
        queue(state);
        let _ = reply.send(Ok(SteerOutcome::Started));
        turn::start_task(myself, state, text, sender);
        return;
    }
    let msg = build::user_text(steering_text(&text), sender);
    if let Some(p) = msg.as_model() {
        effects::apply(state, Effect::QueueSteer(p.clone()));
    }
    // Recorded (and streamed) on receipt: the trace shows it before the request it joins.
    state.emit(msg, true);
    queue(state);
    tracing::debug!(session = %state.id, "steer queued");
    super::inbox::arrived(state, "the user steered");
    let _ = reply.send(Ok(SteerOutcome::Queued));
}

/// Takes the waiting steers (already recorded and streamed on receipt) as input: an
/// input-assembly point, so every arrival so far counts as delivered.
pub(super) fn take(state: &mut SessionState) -> Vec<ModelPayload> {
    super::inbox::delivered(state);
    effects::take(state, Queue::Steers)
}
