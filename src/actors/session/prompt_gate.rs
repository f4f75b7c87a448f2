//! `UserPromptSubmit` between a prompt's arrival (a task to start, a steer) and the session:
//! the hooks run in a spawned task, their answer comes back as `SessionMsg::PromptChecked`;
//! a blocked prompt is answered `PromptBlocked` and never reaches the model, a passed one
//! goes on with the hooks' context queued after it.
//!
//! It owns that detour and when a task may start (`refusal`, `start_now`); the task's input is
//! `turn.rs`'s, queuing a steer is `steer.rs`'s.

use ractor::{ActorRef, RpcReplyPort};

use super::effects;
use super::hook_events::{self, HookSite, PromptCheck};
use super::machine::Effect;
use super::{SessionMsg, SessionState};
use crate::actors::session_api::SteerOutcome;
use crate::error::RookeryError;
use crate::hooks::HookEvent;
use crate::message::Sender;

/// Who waits for the prompt's fate.
pub(crate) enum PromptReply {
    /// A task's start (`start_task`).
    Task(RpcReplyPort<Result<(), RookeryError>>),
    /// A steer.
    Steer(RpcReplyPort<Result<SteerOutcome, RookeryError>>),
}

/// A prompt the hooks have checked.
pub(crate) struct Checked {
    /// The prompt.
    pub(crate) text: String,
    /// Who sent it.
    pub(crate) sender: Option<Sender>,
    /// Who waits.
    pub(crate) reply: PromptReply,
    /// The hooks' answer.
    pub(crate) check: PromptCheck,
}

/// Whether the session's prompts pass `UserPromptSubmit` hooks first.
pub(super) fn wanted(state: &SessionState) -> bool {
    state.options.config.hooks.has(HookEvent::UserPromptSubmit)
}

/// Runs the hooks on `text` in a spawned task; the answer comes back as `PromptChecked`.
pub(super) fn check(
    myself: &ActorRef<SessionMsg>,
    state: &mut SessionState,
    text: String,
    sender: Option<Sender>,
    reply: PromptReply,
) {
    if matches!(reply, PromptReply::Task(_)) {
        state.prompt_pending = true;
    }
    let site = HookSite::of(state);
    let me = myself.clone();
    tokio::spawn(async move {
        let check = hook_events::check_prompt(site, text.clone()).await;
        let checked = Checked {
            text,
            sender,
            reply,
            check,
        };
        if let Err(ractor::MessagingErr::SendErr(SessionMsg::PromptChecked(c))) =
            me.cast(SessionMsg::PromptChecked(Box::new(checked)))
        {
            // The session is gone: its caller hears so.
            let id = me.get_name().unwrap_or_default();
            match c.reply {
                PromptReply::Task(r) => {
                    let _ = r.send(Err(RookeryError::SessionEnded(id)));
                }
                PromptReply::Steer(r) => {
                    let _ = r.send(Err(RookeryError::SessionEnded(id)));
                }
            }
        }
    });
}

/// The hooks answered: a blocked prompt is refused; a passed one starts its task or joins as
/// a steer, its context queued as notices after it.
pub(super) fn on_checked(myself: &ActorRef<SessionMsg>, state: &mut SessionState, c: Checked) {
    if matches!(c.reply, PromptReply::Task(_)) {
        state.prompt_pending = false;
    }
    match c.check {
        PromptCheck::Blocked { reason, records } => {
            for r in records {
                state.emit(r, true);
            }
            tracing::info!(session = %state.id, "prompt blocked by a UserPromptSubmit hook: {reason}");
            let e = || RookeryError::PromptBlocked(reason.clone());
            match c.reply {
                PromptReply::Task(r) => {
                    let _ = r.send(Err(e()));
                }
                PromptReply::Steer(r) => {
                    let _ = r.send(Err(e()));
                }
            }
        }
        PromptCheck::Pass { context, records } => {
            for r in records {
                state.emit(r, true);
            }
            let queue = |state: &mut SessionState| {
                for m in &context {
                    if let Some(p) = m.as_model() {
                        effects::apply(state, Effect::QueueNotice(p.clone()));
                    }
                }
            };
            match c.reply {
                PromptReply::Task(reply) => {
                    start_checked(myself, state, c.text, c.sender, reply, queue)
                }
                PromptReply::Steer(reply) => {
                    super::steer::on_steer_checked(myself, state, c.text, c.sender, reply, queue)
                }
            }
        }
    }
}

/// Why a task cannot start now (`None`: it can).
pub(super) fn refusal(state: &SessionState) -> Option<RookeryError> {
    if let Some(reason) = &state.trace_failure {
        Some(RookeryError::TraceFailed {
            session: state.id.clone(),
            reason: reason.clone(),
        })
    } else if state.task.is_some() || state.prompt_pending {
        Some(RookeryError::SessionBusy(state.id.clone()))
    } else {
        None
    }
}

/// Starts a task on `text`, its first records (its prompt, the tool list, the request's
/// start) going out together, as a turn's do.
pub(super) fn start_now(
    myself: &ActorRef<SessionMsg>,
    state: &mut SessionState,
    text: String,
    sender: Option<Sender>,
) {
    let hold = super::trace_hold::take_now(state);
    super::turn::start_task(myself, state, text, sender);
    if hold {
        super::trace_hold::release_later(myself, state);
    }
}

/// A prompt passed its `UserPromptSubmit` hooks: the task starts (`queue` adds the hooks'
/// context first), or the caller hears why it cannot.
pub(super) fn start_checked(
    myself: &ActorRef<SessionMsg>,
    state: &mut SessionState,
    text: String,
    sender: Option<Sender>,
    reply: RpcReplyPort<Result<(), RookeryError>>,
    queue: impl FnOnce(&mut SessionState),
) {
    if let Some(e) = refusal(state) {
        let _ = reply.send(Err(e));
        return;
    }
    let _ = reply.send(Ok(()));
    queue(state);
    start_now(myself, state, text, sender);
}
