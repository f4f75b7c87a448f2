//! Every way a task ends, as transitions of the turn state machine: an abort (which waits for
//! the running calls), a trace failure, a forced finish on session close, the settling after a
//! panic, and `finish`, through which every ending goes (it pairs the open calls first).
//!
//! Pure like the rest of `machine.rs`: it returns effects and performs none.

use super::{Effect, Fx, Machine, emit_all, stop};
use crate::message::{StopReason, build};

use super::super::carry;
use super::super::close_out::close_open_calls;
use super::super::task::TaskSummary;

impl Machine<'_> {
    /// Starts aborting the running task: stops the stream, approvals and backoff, cancels
    /// tools, and finishes once every running tool has reported.
    pub(crate) fn abort(&mut self, reason: &str) -> Fx {
        let mut fx = Vec::new();
        self.abort_into(&mut fx, reason);
        fx
    }

    pub(super) fn abort_into(&mut self, fx: &mut Fx, reason: &str) {
        if self.compacting {
            fx.push(Effect::AbortCompaction(reason.to_string()));
            return;
        }
        let Some(task) = self.task.as_deref_mut() else {
            return;
        };
        if task.aborting.is_some() {
            return;
        }
        task.aborting = Some(if task.turn.in_backoff && reason == "aborted by user" {
            "aborted during reconnect backoff".to_string()
        } else {
            reason.to_string()
        });
        stop(&mut task.turn, fx);
        if task.turn.running_tools() == 0 {
            self.finalize_abort(fx);
        }
    }

    /// Ends the running task as `failed` with `reason` through the abort path (the trace
    /// cannot be written): tools are cancelled and every call keeps exactly one output.
    pub(crate) fn fail(&mut self, reason: &str) -> Fx {
        let mut fx = Vec::new();
        let Some(task) = self.task.as_deref_mut() else {
            return fx;
        };
        task.end_status = StopReason::Failed;
        if task.aborting.is_some() {
            task.aborting = Some(reason.to_string());
            return fx;
        }
        self.abort_into(&mut fx, reason);
        fx
    }

    /// Finishes an abort now, even if tools are still running (session close).
    pub(crate) fn force_finish_abort(&mut self) -> Fx {
        let mut fx = Vec::new();
        if self.task.as_ref().is_some_and(|t| t.aborting.is_some()) {
            self.finalize_abort(&mut fx);
        }
        fx
    }

    /// After a panic inside the session actor (which then fails; its supervisor writes
    /// `abort` and `task_end`): stop what runs and settle the open calls.
    pub(crate) fn settle_after_panic(&mut self) -> Fx {
        let mut fx = Vec::new();
        if let Some(task) = self.task.as_deref_mut() {
            stop(&mut task.turn, &mut fx);
            emit_all(&mut fx, close_open_calls(&mut task.turn));
        }
        fx
    }

    pub(super) fn finalize_abort(&mut self, fx: &mut Fx) {
        let Some(task) = self.task.as_deref_mut() else {
            return;
        };
        // First, so the carry-over holds exactly the outputs the trace has.
        emit_all(fx, close_open_calls(&mut task.turn));
        let status = task.end_status;
        let reason = task
            .aborting
            .clone()
            .unwrap_or_else(|| "aborted by user".to_string());
        let turn = &task.turn;
        let carry = if turn.completed {
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
        fx.push(Effect::SetCarryOver(carry));
        self.finish_into(fx, status, Some(reason));
    }

    /// Ends the running task: settles every open call (see `close_out`), then `abort` (when
    /// there is a reason) and `task_end`. Every ending goes here.
    pub(crate) fn finish(&mut self, status: StopReason, abort_reason: Option<String>) -> Fx {
        let mut fx = Vec::new();
        self.finish_into(&mut fx, status, abort_reason);
        fx
    }

    pub(super) fn finish_into(
        &mut self,
        fx: &mut Fx,
        status: StopReason,
        abort_reason: Option<String>,
    ) {
        let Some(mut task) = self.task.take() else {
            return;
        };
        emit_all(fx, close_open_calls(&mut task.turn));
        // A record of this task already failed to reach the trace: it did not complete.
        let (status, abort_reason) = match &self.trace_failure {
            Some(failure) if status == StopReason::Completed => {
                (StopReason::Failed, Some(failure.clone()))
            }
            _ => (status, abort_reason),
        };
        if let Some(reason) = &abort_reason {
            fx.push(Effect::Emit(build::abort(Some(reason.clone()))));
        }
        // Only a completed task has an output (a trace failure above makes it failed).
        let output = task
            .output
            .take()
            .filter(|_| status == StopReason::Completed);
        fx.push(Effect::Emit(build::task_end_with(status, output.clone())));
        let summary = TaskSummary {
            status,
            output,
            final_text: task.final_text.take(),
            tool_calls: task.tool_calls,
            abort_reason,
        };
        fx.push(Effect::EndTask { summary, task });
    }
}
