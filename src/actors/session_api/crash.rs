//! The crash report of a session: what its supervisor (the host, or a subagent supervisor for
//! a child) writes and streams when the session actor failed, and the stop of its trace file.
//!
//! It writes only through the session's `TraceHandle` and its subscribers; it never touches the
//! failed actor.

use std::sync::Arc;

use super::{Subscribers, broadcast};
use crate::message::{StopReason, build};
use crate::trace::hub::TraceHandle;
use crate::trace::writer::TraceMsg;

/// Asks a session's trace writer to write out and close its file, without waiting.
pub(crate) fn stop_trace(trace: &TraceHandle) {
    trace.stop();
}

/// Ends a crashed session's stream and trace with `abort` and `task_end(failed)`. A session
/// whose handler panicked has already settled its open tool calls (their outputs are ahead of
/// these records in the trace's mailbox).
pub(crate) fn report_crash(trace: &TraceHandle, subscribers: &Subscribers, err: &str) {
    let reason = format!("session actor failed: {err}");
    for msg in [
        build::abort(Some(reason)),
        build::task_end(StopReason::Failed),
    ] {
        let msg = Arc::new(msg);
        let _ = trace.cast(TraceMsg::Append(msg.clone()));
        broadcast(subscribers, &msg);
    }
    stop_trace(trace);
    if let Ok(mut subs) = subscribers.lock() {
        subs.clear();
    }
}
