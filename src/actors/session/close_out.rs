//! The pairing guarantee of a session: every `tool_call` of the running turn that has no
//! `tool_call_output` yet gets exactly one, written to the trace (and streamed) before the
//! task's `abort` and `task_end`.
//!
//! This is the one place that closes calls on an ending path (abort, session close, host
//! shutdown, max turns, a failed request, a trace failure, a panic inside the actor): every
//! ending goes through `Machine::finish` (`machine.rs`), which calls [`close_open_calls`]
//! first. It must not end the task itself or touch the history; it only settles outputs and
//! returns the records to write.

use crate::message::{Decision, OmniMessage, StopReason, build};

use super::carry::INTERRUPTED_PLACEHOLDER;
use super::task::Turn;

/// Output of a call that was still waiting for its approval (or queued behind one) when its
/// task ended: the same text as a call the user denied.
pub(super) const DENIED_OUTPUT: &str = "Tool call denied by user.";

/// Gives every call of `turn` without an output exactly one, in call order, and returns the
/// records to write: a call that was never approved gets an `approval_decision` `deny` and
/// [`DENIED_OUTPUT`]; an approved call whose tool has not reported gets
/// [`INTERRUPTED_PLACEHOLDER`] (late reports of that tool are then ignored). Both are
/// `stop_reason: aborted`. Nothing when every call is paired.
pub(super) fn close_open_calls(turn: &mut Turn) -> Vec<OmniMessage> {
    let mut records: Vec<OmniMessage> = Vec::new();
    for call in turn.calls.iter_mut().filter(|c| c.output.is_none()) {
        let text = if call.running {
            INTERRUPTED_PLACEHOLDER
        } else {
            records.push(build::approval_decision(Decision::Deny, call.id.clone()));
            DENIED_OUTPUT
        };
        let out = build::tool_call_output(call.id.clone(), text, Vec::new(), StopReason::Aborted);
        call.output = out.as_model().cloned();
        call.running = false;
        records.push(out);
    }
    turn.approval_queue.clear();
    records
}
