//! The approval mode as part of the session: the session records the mode of its
//! `PolicyApprover` (in `session_meta`, and one `approval_mode_changed` per later change,
//! whoever changes it), and a resumed session takes back the mode its trace recorded last
//! unless the caller chose one (fail closed: `always-ask` when the trace cannot tell). The
//! policy's grants likewise: restored from the trace on resume, each revocation recorded as
//! `approval_grant_revoked`.
//!
//! It decides nothing about calls (the approver does) and writes only through the session's
//! `emit`.

use ractor::ActorRef;
use tokio_util::sync::CancellationToken;

use super::{SessionMsg, SessionState};
use crate::approval::{ApprovalMode, Approver};
use crate::message::{EventPayload, OmniMessage};
use crate::trace::resume::ResumeState;

/// The mode a resumed session continues with when its caller did not choose one.
pub(crate) fn recorded_mode(resumed: &ResumeState) -> ApprovalMode {
    resumed
        .approval_mode
        .as_deref()
        .and_then(|m| m.parse().ok())
        .unwrap_or(ApprovalMode::AlwaysAsk)
}

/// On resume: an approver whose mode the caller did not choose takes the recorded one.
pub(crate) fn restore(approver: &dyn Approver, resumed: &ResumeState) {
    if let Some(policy) = approver.policy() {
        for grant in &resumed.grants {
            policy.grants().restore(grant.clone());
        }
    }
    if let Some(policy) = approver.policy()
        && !policy.is_explicit()
    {
        let mode = recorded_mode(resumed);
        tracing::debug!("approval mode {mode} restored from the trace");
        policy.set_mode(mode);
    }
}

/// At session start: records the mode when the trace does not already say it (a resumed
/// session with another mode than recorded, or none recorded), then watches for changes.
/// Returns the token that stops the watcher (cancelled when the session's state drops).
pub(super) fn start(
    myself: &ActorRef<SessionMsg>,
    state: &mut SessionState,
) -> Option<CancellationToken> {
    let policy = state.options.approver.policy()?;
    let current = policy.mode();
    state.approval_mode = match &state.options.resume {
        Some(r) => r.approval_mode.as_deref().and_then(|m| m.parse().ok()),
        None => Some(current),
    };
    let mut rx = policy.subscribe();
    let me = myself.clone();
    policy.grants().on_revoke(Box::new(move |id| {
        let _ = me.cast(SessionMsg::GrantRevoked(id.to_string()));
    }));
    on_change(state, current);
    let stop = CancellationToken::new();
    let stopped = stop.clone();
    let me = myself.clone();
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = stopped.cancelled() => break,
                changed = rx.changed() => {
                    if changed.is_err() {
                        break;
                    }
                    let mode = *rx.borrow_and_update();
                    if me.cast(SessionMsg::ApprovalModeChanged(mode)).is_err() {
                        break;
                    }
                }
            }
        }
    });
    Some(stop)
}

/// Records the revocation of a grant.
pub(super) fn on_revoke(state: &mut SessionState, grant_id: String) {
    state.emit(
        OmniMessage::event(EventPayload::ApprovalGrantRevoked { grant_id }),
        true,
    );
}

/// Records `mode` unless it is the mode recorded last.
pub(super) fn on_change(state: &mut SessionState, mode: ApprovalMode) {
    if state.approval_mode == Some(mode) {
        return;
    }
    state.approval_mode = Some(mode);
    state.emit(
        OmniMessage::event(EventPayload::ApprovalModeChanged {
            mode: mode.as_str().to_string(),
        }),
        true,
    );
}
