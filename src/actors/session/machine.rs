//! The turn state machine of a session, as pure transitions: request → stream → sequential
//! approvals → concurrent tools → outputs in call order → next request, with reconnects within
//! the retry budget, max turns, abort with calls running, and the task's end.
//!
//! Each transition takes the task's state (through [`Machine`]) and one input — a request to
//! begin, a model event, an approval verdict, a tool output, the end of a backoff, an abort —
//! updates the state and RETURNS the [`Effect`]s it wants, in order. It never spawns, casts,
//! records or streams: the session actor carries the effects out (`effects.rs`). So every rule
//! here is unit-tested without actors or processes (`machine/tests.rs`). The endings (abort,
//! failure, close, panic, finish) are in `machine/ending.rs`; the output schema's check before
//! a task completes is `machine/output_check.rs`.
//!
//! The effects on the conversation (`Commit`, `SetCarryOver`, `OpenTask`, `ReplaceContext`,
//! `QueueSteer`, `QueueNotice`) are also how the turn, compaction and steering change it: the
//! executor is its only writer.
//!
//! The hooks of other concerns stay outside: compaction (`compaction.rs`), steering and notices
//! (`steer.rs`, `inbox.rs`) and MCP tool lists (`mcp_sync.rs`) are reached through effects
//! ([`Effect::NextRequest`], [`Effect::SyncMcp`], [`Effect::AbortCompaction`],
//! [`Effect::RequestCompleted`]) or checked by the executor before a transition.

use crate::config::RetryPolicy;
use crate::message::{EventType, ModelPayload, OmniMessage, Role, StopReason, Usage, build};
use crate::model::{ModelEvent, ModelOutcome};
use crate::tools::close_out::ToolCallInfo;

use super::carry;
use super::close_out::close_open_calls;
use super::gate::Verdict;
use super::task::{self, Call, Task, TaskSummary, Turn};

/// What a transition wants done, carried out in order by the executor.
pub(crate) enum Effect {
    /// Stream to the subscribers and append to the trace.
    Emit(OmniMessage),
    /// Drop the last N completed tasks from the context (`rollback`; the session is idle).
    Rollback(usize),
    /// Stream to the subscribers only (a partial).
    Stream(OmniMessage),
    /// The session's carry-over (the next task's first input) becomes this.
    SetCarryOver(Vec<ModelPayload>),
    /// Hold the request of `turn`/`attempt` until the MCP servers' tool lists are known; the
    /// answer begins the request again.
    SyncMcp { turn: u64, attempt: u32 },
    /// Truncate the history to its committed part, append `input` and start the model stream
    /// of `turn` (its events come back tagged with `turn`).
    StartStream { turn: u64, input: Vec<ModelPayload> },
    /// The task would end after `turn`: ask the Stop hooks first (`active`: a Stop hook
    /// already made it go on; `allowed`: one more continuation is within the cap).
    CheckStop {
        turn: u64,
        active: bool,
        allowed: bool,
    },
    /// Ask the gate (policy, hooks, approver) about call `idx` of `turn`.
    AskApproval {
        turn: u64,
        idx: usize,
        tool_call_id: String,
        name: String,
        arguments: String,
    },
    /// Run call `idx` of `turn` (its output comes back tagged with `turn` and `idx`).
    RunCall {
        turn: u64,
        idx: usize,
        info: ToolCallInfo,
        /// PreToolUse context, appended to the output.
        context: Vec<String>,
    },
    /// A request completed with this usage (the compaction triggers look at it).
    RequestCompleted(Usage),
    /// Append what the request produced to the history and mark all of it committed.
    Commit(Vec<ModelPayload>),
    /// Cancel the tools of the current attempt.
    CancelTools,
    /// Stop the stream, the approval and the backoff of the task, and cancel its tools.
    StopBackground,
    /// Begin the next attempt of `turn` after `wait_ms`.
    RetryAfter { turn: u64, wait_ms: u64 },
    /// A new attempt starts: its tools get a fresh cancel token, the backoff is over.
    NewAttempt,
    /// Assemble the next request's input (these outputs, then steers and notices), compact
    /// first when due, then continue the task with it ([`Machine::next_turn`]).
    NextRequest(Vec<ModelPayload>),
    /// The task runs a compaction: abort that instead, with this reason.
    AbortCompaction(String),
    /// The task is over (it is no longer the session's): stop what still runs for it, keep
    /// the summary and answer the idle waiters (a completed task's span of the history is
    /// closed).
    EndTask {
        summary: TaskSummary,
        task: Box<Task>,
    },
    /// A task starts: its input begins at the committed end of the history (`turn.rs`).
    OpenTask,
    /// A completed compaction replaced the context: the history and the task spans are gone
    /// (`compaction.rs`).
    ReplaceContext,
    /// A steer waits for the next input-assembly point (`steer.rs`).
    QueueSteer(ModelPayload),
    /// A notice (or an agent's input) waits for the next input-assembly point.
    QueueNotice(ModelPayload),
}

/// The task's state and what the transitions read of the session.
pub(crate) struct Machine<'a> {
    pub(crate) task: &'a mut Option<Box<Task>>,
    /// Completed requests over the session's life (`max_turns` counts them).
    pub(crate) turns: &'a mut u64,
    pub(crate) session_usage: &'a mut Usage,
    /// The id the next turn or attempt gets.
    pub(crate) next_turn_id: &'a mut u64,
    /// `max_turns` (`<= 0`: unlimited).
    pub(crate) max_turns: i64,
    pub(crate) retry: RetryPolicy,
    /// Steers or notices wait for the next input-assembly point.
    pub(crate) input_waiting: bool,
    /// The session has MCP servers; their lists are in the registry for `mcp_synced`.
    pub(crate) mcp_servers: bool,
    pub(crate) mcp_synced: Option<(u64, u32)>,
    /// A compaction runs for the task.
    pub(crate) compacting: bool,
    /// The trace's first failed write, if one failed.
    pub(crate) trace_failure: Option<String>,
    /// Stop (or SubagentStop) hooks are configured: a task about to end asks them first.
    pub(crate) stop_hooks: bool,
    /// `hooks_max_stop_continuations`.
    pub(crate) max_stop_continuations: u32,
}

type Fx = Vec<Effect>;

fn stop(turn: &mut Turn, fx: &mut Fx) {
    turn.approving = false;
    turn.in_backoff = false;
    fx.push(Effect::StopBackground);
}

fn emit_all(fx: &mut Fx, records: Vec<OmniMessage>) {
    fx.extend(records.into_iter().map(Effect::Emit));
}

impl Machine<'_> {
    fn new_turn(&mut self, input: Vec<ModelPayload>) -> Turn {
        let id = *self.next_turn_id;
        *self.next_turn_id += 1;
        Turn::new(id, input)
    }

    /// A task starts on `input` (the caller checked that none runs).
    pub(crate) fn start(&mut self, input: Vec<ModelPayload>) -> Fx {
        let turn = self.new_turn(input);
        *self.task = Some(Box::new(Task::new(turn)));
        self.begin_request()
    }

    /// The running task goes on with a new request on `input`.
    pub(crate) fn next_turn(&mut self, input: Vec<ModelPayload>) -> Fx {
        let next = self.new_turn(input);
        if let Some(task) = self.task.as_mut() {
            task.turn = next;
        }
        self.begin_request()
    }

    /// Sends the current turn's request (checking `max_turns` on a first attempt).
    pub(crate) fn begin_request(&mut self) -> Fx {
        let mut fx = Vec::new();
        self.begin(&mut fx);
        fx
    }

    fn begin(&mut self, fx: &mut Fx) {
        let max = self.max_turns;
        let Some(task) = self.task.as_deref_mut() else {
            return;
        };
        let turn = &task.turn;
        if turn.attempt == 1 && max > 0 && *self.turns >= max as u64 {
            let text = format!("[reached max turns ({max}); stopping]");
            fx.push(Effect::SetCarryOver(turn.base_input.clone()));
            let partial = |t, text: &str, stop| build::partial_text(t, text, stop);
            fx.push(Effect::Stream(partial(
                EventType::Start,
                "",
                StopReason::Completed,
            )));
            fx.push(Effect::Stream(partial(
                EventType::Delta,
                &text,
                StopReason::Completed,
            )));
            fx.push(Effect::Stream(partial(
                EventType::Stop,
                "",
                StopReason::Failed,
            )));
            fx.push(Effect::Emit(build::assistant_text(
                text,
                StopReason::Failed,
            )));
            self.finish_into(fx, StopReason::Failed, None);
            return;
        }
        if self.mcp_servers && self.mcp_synced != Some((turn.id, turn.attempt)) {
            fx.push(Effect::SyncMcp {
                turn: turn.id,
                attempt: turn.attempt,
            });
            return;
        }
        fx.push(Effect::Emit(build::request_begin()));
        fx.push(Effect::StartStream {
            turn: turn.id,
            input: turn.input(),
        });
    }

    /// One event of the model stream of `turn` (stale turns are ignored).
    pub(crate) fn on_model_event(&mut self, turn: u64, event: ModelEvent) -> Fx {
        let mut fx = Vec::new();
        let Some(task) = task::live(self.task, turn) else {
            return fx;
        };
        match event {
            ModelEvent::Partial(p) => fx.push(Effect::Stream(OmniMessage::model(p))),
            ModelEvent::Usage(u) => task.turn.usage = u,
            ModelEvent::Complete(p) => {
                if let ModelPayload::Text {
                    role: Role::Assistant,
                    text,
                    ..
                } = &p
                {
                    task.final_text = Some(text.clone());
                }
                if let ModelPayload::ToolCall {
                    name,
                    arguments,
                    tool_call_id,
                    stop_reason: StopReason::Completed,
                    ..
                } = &p
                {
                    task.turn.calls.push(Call {
                        id: tool_call_id.clone(),
                        name: name.clone(),
                        arguments: arguments.clone(),
                        output: None,
                        running: false,
                    });
                    task.tool_calls += 1;
                    task.turn
                        .approval_queue
                        .push_back(task.turn.calls.len() - 1);
                }
                task.turn.produced.push(p.clone());
                fx.push(Effect::Emit(OmniMessage::model(p)));
                self.pump_approvals(&mut fx);
            }
            ModelEvent::End(outcome) => self.on_stream_end(&mut fx, outcome),
        }
        fx
    }

    /// Asks about the next queued call, unless one is being decided or the task aborts.
    fn pump_approvals(&mut self, fx: &mut Fx) {
        let Some(task) = self.task.as_deref_mut() else {
            return;
        };
        if task.turn.approving || task.aborting.is_some() {
            return;
        }
        let Some(idx) = task.turn.approval_queue.pop_front() else {
            return;
        };
        let Some(call) = task.turn.calls.get(idx) else {
            return;
        };
        fx.push(Effect::AskApproval {
            turn: task.turn.id,
            idx,
            tool_call_id: call.id.clone(),
            name: call.name.clone(),
            arguments: call.arguments.clone(),
        });
        task.turn.approving = true;
    }

    fn on_stream_end(&mut self, fx: &mut Fx, outcome: ModelOutcome) {
        let retry = self.retry;
        let Some(task) = self.task.as_deref_mut() else {
            return;
        };
        let attempt = task.turn.attempt;
        if outcome.status == StopReason::Completed {
            let usage = task.turn.usage;
            self.session_usage.add(&usage);
            *self.turns += 1;
            fx.push(Effect::RequestCompleted(usage));
            task.turn.completed = true;
            // The history already ends with this request's input (see `StartStream`).
            fx.push(Effect::Commit(task.turn.produced.clone()));
            fx.push(Effect::Emit(build::token_usage(*self.session_usage, usage)));
            let attempt_field = (attempt > 1).then_some(attempt);
            fx.push(Effect::Emit(build::request_end(
                StopReason::Completed,
                None,
                attempt_field,
                None,
            )));
            self.maybe_finish_turn(fx);
            return;
        }
        let detail = outcome
            .error_message
            .clone()
            .unwrap_or_else(|| "unknown".to_string());
        let retryable = matches!(
            outcome.status,
            StopReason::Failed | StopReason::Timeout | StopReason::Malformed
        ) && !outcome.permanent;
        if retryable && attempt <= retry.max_retries {
            let wait = outcome
                .retry_after_ms
                .unwrap_or(0)
                .max(retry.backoff_ms(attempt));
            // Tools of a failed attempt are cancelled; what the attempt produced is transcribed.
            fx.push(Effect::CancelTools);
            let turn = &mut task.turn;
            let outputs = turn.outputs_in_call_order();
            let mut produced = std::mem::take(&mut turn.produced);
            turn.failed_produced.append(&mut produced);
            turn.retry_note = carry::retry_transcript(&turn.failed_produced, &outputs);
            turn.in_backoff = true;
            fx.push(Effect::RetryAfter {
                turn: turn.id,
                wait_ms: wait,
            });
            fx.push(Effect::Emit(build::request_end(
                outcome.status,
                Some(detail),
                Some(attempt),
                Some(wait),
            )));
            return;
        }
        stop(&mut task.turn, fx);
        fx.push(Effect::SetCarryOver(task.turn.input()));
        fx.push(Effect::Emit(build::request_end(
            outcome.status,
            Some(detail.clone()),
            Some(attempt),
            None,
        )));
        let reason = if !retryable {
            format!("llm request error: {detail}")
        } else {
            let n = retry.max_retries;
            match outcome.status {
                StopReason::Malformed => format!("malformed response failed after {n} retries"),
                StopReason::Timeout => format!("reconnect failed after {n} retries"),
                _ => format!("llm request failed after {n} retries: {detail}"),
            }
        };
        self.finish_into(fx, StopReason::Failed, Some(reason));
    }

    /// The backoff of `turn` is over: the next attempt begins under a fresh id (late events of
    /// the failed attempt are then ignored), after its open calls are settled.
    pub(crate) fn on_retry_now(&mut self, turn: u64) -> Fx {
        let mut fx = Vec::new();
        let next_id = *self.next_turn_id;
        let Some(task) = task::live(self.task, turn) else {
            return fx;
        };
        let turn = &mut task.turn;
        turn.in_backoff = false;
        // An approval still being decided belongs to the failed attempt: its verdict would come
        // back under the old id and be ignored, so the new attempt must not wait on it.
        turn.approving = false;
        emit_all(&mut fx, close_open_calls(turn));
        turn.id = next_id;
        turn.attempt += 1;
        turn.produced.clear();
        turn.calls.clear();
        turn.approval_queue.clear();
        turn.usage = Usage::default();
        *self.next_turn_id += 1;
        fx.push(Effect::NewAttempt);
        self.begin(&mut fx);
        fx
    }

    /// The gate decided call `idx` of `turn`: record the decision, then run the call or give
    /// it the denial as its output; then the next approval, or the next request.
    pub(crate) fn on_approved(&mut self, turn: u64, idx: usize, mut verdict: Verdict) -> Fx {
        let mut fx = Vec::new();
        let Some(task) = task::live(self.task, turn) else {
            return fx;
        };
        task.turn.approving = false;
        let Some(call) = task.turn.calls.get_mut(idx) else {
            return fx;
        };
        let call_id = call.id.clone();
        let allowed = verdict.decision == crate::message::Decision::Allow;
        let info = ToolCallInfo {
            tool_call_id: call.id.clone(),
            name: call.name.clone(),
            // A PreToolUse hook's `updatedInput` replaces the arguments the call runs with.
            arguments: verdict
                .arguments
                .take()
                .unwrap_or_else(|| call.arguments.clone()),
        };
        if allowed {
            call.running = true;
        }
        emit_all(&mut fx, std::mem::take(&mut verdict.records));
        fx.push(Effect::Emit(verdict.record(&call_id)));
        if let Some(grant) = verdict.grant.take() {
            fx.push(Effect::Emit(grant));
        }
        let context = std::mem::take(&mut verdict.context);
        if allowed {
            fx.push(Effect::RunCall {
                turn,
                idx,
                info,
                context,
            });
        } else {
            let out = build::tool_call_output(
                call_id,
                verdict.denial.clone(),
                Vec::new(),
                StopReason::Aborted,
            );
            set_output(task, idx, &out);
            fx.push(Effect::Emit(out));
        }
        self.pump_approvals(&mut fx);
        self.maybe_finish_turn(&mut fx);
        fx
    }

    /// Call `idx` of `turn` reported its (scrubbed) output.
    pub(crate) fn on_tool_done(&mut self, turn: u64, idx: usize, output: OmniMessage) -> Fx {
        let mut fx = Vec::new();
        let Some(task) = self.task.as_deref_mut().filter(|t| t.turn.id == turn) else {
            return fx;
        };
        if task.turn.calls.get(idx).is_none_or(|c| c.output.is_some()) {
            return fx;
        }
        set_output(task, idx, &output);
        fx.push(Effect::Emit(output));
        if task.aborting.is_some() {
            if task.turn.running_tools() == 0 {
                self.finalize_abort(&mut fx);
            }
        } else {
            self.maybe_finish_turn(&mut fx);
        }
        fx
    }

    /// A notice or steer arrived: a running task picks it up at its next input-assembly point.
    pub(crate) fn on_notice(&mut self) -> Fx {
        let mut fx = Vec::new();
        if self.task.as_ref().is_some_and(|t| t.aborting.is_none()) {
            self.maybe_finish_turn(&mut fx);
        }
        fx
    }

    /// The Stop hooks answered for `turn`: the task goes on with `input` (a hook's reason,
    /// already recorded), or ends (`None`). Stale answers are ignored.
    pub(crate) fn on_stop_checked(&mut self, turn: u64, input: Option<ModelPayload>) -> Fx {
        let mut fx = Vec::new();
        let Some(task) = task::live(self.task, turn) else {
            return fx;
        };
        if task.stop_checked != Some(turn) {
            return fx;
        }
        match input {
            Some(p) => {
                task.stop_continuations += 1;
                fx.push(Effect::NextRequest(vec![p]));
            }
            None => self.complete_into(&mut fx),
        }
        fx
    }

    /// When the stream completed and every call has its output: the next request on the
    /// outputs in call order, or the task's end when there is nothing more to send.
    fn maybe_finish_turn(&mut self, fx: &mut Fx) {
        let Some(task) = self.task.as_deref() else {
            return;
        };
        let turn = &task.turn;
        if !turn.completed || turn.calls.iter().any(|c| c.output.is_none()) {
            return;
        }
        if turn.calls.is_empty() && !self.input_waiting {
            if self.stop_hooks {
                // Asked once per turn; while they run, the task waits for their answer.
                if task.stop_checked != Some(turn.id) {
                    fx.push(Effect::CheckStop {
                        turn: turn.id,
                        active: task.stop_continuations > 0,
                        allowed: task.stop_continuations < self.max_stop_continuations,
                    });
                    if let Some(task) = self.task.as_deref_mut() {
                        task.stop_checked = Some(task.turn.id);
                    }
                }
                return;
            }
            self.complete_into(fx);
            return;
        }
        fx.push(Effect::NextRequest(turn.outputs_in_call_order()));
    }
}

fn set_output(task: &mut Task, idx: usize, out: &OmniMessage) {
    if let (Some(p), Some(call)) = (out.as_model(), task.turn.calls.get_mut(idx)) {
        call.output = Some(p.clone());
        call.running = false;
    }
}

mod ending;
mod output_check;

#[cfg(test)]
mod tests;
