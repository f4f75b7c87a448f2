//! The session's hold on its trace writer: the records of one message of a running turn, and of
//! the messages queued while it is handled (e.g. the output of a tool call that was over on its
//! first poll), go out together, with one `write(2)` (see `TraceHandle::hold`).
//!
//! A session created for a task that follows at once (`Host::create_session_for_task`) holds
//! its trace from its start, so its `session_meta` goes out with that task's first records: the
//! first message it handles other than a `Subscribe` takes that hold over and releases it.
//!
//! It owns when the hold is taken and released; it never writes, orders or drops a record.
//! Acks (`Flush`, `Written`, `Shutdown`) are never held back, so a session that stops while it
//! holds its trace still gets every record written by its `Shutdown`.

use ractor::ActorRef;

use super::{SessionMsg, SessionState};
use crate::actors::session_api::MetaWrite;
use crate::actors::session_api::SessionRequest;
use crate::trace::hub::TraceHandle;

/// Whether, and until when, the session holds its trace writer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Held {
    #[default]
    No,
    /// Until the `ReleaseTrace` the session sent itself.
    UntilRelease,
    /// Since the session's start, until its first message other than a `Subscribe` is handled.
    UntilFirstMessage,
}

/// At the start of a session, before its first record: holds the trace when a new session's
/// meta is to go out with its first task.
pub(super) fn at_start(trace: &TraceHandle, meta_write: MetaWrite, resumed: bool) -> Held {
    if resumed || meta_write == MetaWrite::AtOnce {
        return Held::No;
    }
    trace.hold();
    Held::UntilFirstMessage
}

/// Takes the hold for `message` when it is a message of a running turn (those never wait on
/// anything slow) and none is held yet. True when this message took it.
/// The session's first message (other than a `Subscribe`) takes over the hold of its start.
pub(super) fn take(state: &mut SessionState, message: &SessionMsg) -> bool {
    if state.trace_held == Held::UntilFirstMessage
        && !matches!(message, SessionMsg::Request(SessionRequest::Subscribe(_)))
    {
        state.trace_held = Held::UntilRelease;
        return true;
    }
    holds_trace(message) && take_now(state)
}

/// Takes the hold, when none is held, for a part of a message's handling that never waits
/// (a task's start, once its MCP servers are up). True when this call took it.
pub(super) fn take_now(state: &mut SessionState) -> bool {
    if state.trace_held != Held::No {
        return false;
    }
    state.trace.hold();
    state.trace_held = Held::UntilRelease;
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
    if std::mem::take(&mut state.trace_held) != Held::No {
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
            | SessionMsg::Request(SessionRequest::Notice(_))
    )
}
