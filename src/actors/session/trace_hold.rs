//! The session's hold on its trace writer: the records of one message of a running turn, and of
//! the messages queued while it is handled (e.g. the output of a tool call that was over on its
//! first poll), go out together, with one `write(2)` (see `TraceHandle::hold`).
//!
//! It owns when the hold is taken and released; it never writes, orders or drops a record.
//! Acks (`Flush`, `Written`, `Shutdown`) are never held back, so a session that stops while it
//! holds its trace still gets every record written by its `Shutdown`.

use ractor::ActorRef;

use super::{SessionMsg, SessionState};

/// Takes the hold for `message` when it is a message of a running turn (those never wait on
/// anything slow) and none is held yet. True when this message took it.
pub(super) fn take(state: &mut SessionState, message: &SessionMsg) -> bool {
    holds_trace(message) && take_now(state)
}

/// Takes the hold, when none is held, for a part of a message's handling that never waits
/// (a task's start, once its MCP servers are up). True when this call took it.
pub(super) fn take_now(state: &mut SessionState) -> bool {
    if state.trace_held {
        return false;
    }
    state.trace.hold();
    state.trace_held = true;
    true
}

/// Releases the hold after the messages queued meanwhile: the session sends itself
/// `ReleaseTrace`, which comes behind them. If it cannot (it is stopping), at once.
pub(super) fn release_later(myself: &ActorRef<SessionMsg>, state: &mut SessionState) {
    if myself.cast(SessionMsg::ReleaseTrace).is_err() {
        release(state);
    }
}

/// Releases the hold (the writer then writes what was queued meanwhile).
pub(super) fn release(state: &mut SessionState) {
    if std::mem::take(&mut state.trace_held) {
        let _ = state.trace.release();
    }
}

/// The messages of a running turn; not those whose handling may wait on something slow (a task
/// start with MCP servers to start, a close).
fn holds_trace(message: &SessionMsg) -> bool {
    matches!(
        message,
        SessionMsg::Model { .. }
            | SessionMsg::ModelEvents { .. }
            | SessionMsg::Approved { .. }
            | SessionMsg::HookRecords { .. }
            | SessionMsg::ToolPartial { .. }
            | SessionMsg::ToolDone { .. }
            | SessionMsg::RetryNow { .. }
            | SessionMsg::McpRecord(_)
            | SessionMsg::Command(_)
            | SessionMsg::Notice(_)
    )
}
