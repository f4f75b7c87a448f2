//! Where the answers of the lifecycle hooks that run beside the session go: `SessionStart` at
//! a root session's start, and the outcome (records, context for the model) of a hook run in
//! the background (`PreCompact`, `SessionStart` after a compaction).
//!
//! It only feeds the answers in (records written, context queued as a notice); running the
//! hooks is `hook_events.rs`'s job. Kept apart from it so the gate's imports never reach the
//! turn machine.

use super::SessionState;
use super::hook_events::{HookSite, session_start};
use crate::hooks::HookEvent;
use crate::message::OmniMessage;

/// Runs `run` (a lifecycle hook run) in a spawned task when the session has hooks; what it
/// returns (records, context) comes back as `SessionMsg::HookOutcome`.
pub(crate) fn in_background<F, Fut>(
    myself: &ractor::ActorRef<super::SessionMsg>,
    state: &SessionState,
    run: F,
) where
    F: FnOnce(HookSite) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = (Vec<OmniMessage>, Option<OmniMessage>)> + Send,
{
    if state.options.config.hooks.is_empty() {
        return;
    }
    let site = HookSite::of(state);
    let me = myself.clone();
    tokio::spawn(async move {
        let (records, context) = run(site).await;
        if !records.is_empty() || context.is_some() {
            let _ = me.cast(super::SessionMsg::HookOutcome { records, context });
        }
    });
}

/// At a root session's start: its `SessionStart` hooks (`startup`, or `resume`) run before
/// it takes anything; their context waits for the first task's input, after its prompt.
pub(crate) async fn on_session_start(state: &mut SessionState) {
    if state.options.depth > 0 || !state.options.config.hooks.has(HookEvent::SessionStart) {
        return;
    }
    let source = if state.options.resume.is_some() {
        "resume"
    } else {
        "startup"
    };
    let site = HookSite::of(state);
    let (records, context) = session_start(&site, source).await;
    for r in records {
        state.emit(r, true);
    }
    if let Some(p) = context.as_ref().and_then(OmniMessage::as_model) {
        super::effects::apply(state, super::machine::Effect::QueueNotice(p.clone()));
    }
}

/// What a background hook run left (`SessionMsg::HookOutcome`): its records are written, its
/// context joins the running task at its next input (or the next task) as a notice.
pub(crate) fn on_outcome(
    myself: &ractor::ActorRef<super::SessionMsg>,
    state: &mut SessionState,
    records: Vec<OmniMessage>,
    context: Option<OmniMessage>,
) {
    for r in records {
        state.emit(r, true);
    }
    if let Some(p) = context.as_ref().and_then(OmniMessage::as_model) {
        super::effects::apply(state, super::machine::Effect::QueueNotice(p.clone()));
        super::turn::on_notice(myself, state);
    }
}
