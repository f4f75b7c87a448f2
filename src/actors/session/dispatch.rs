//! Approval and dispatch of a turn's tool calls, as the executor of the machine's
//! `AskApproval` and `RunCall` effects: the gate decides one call at a time (at once when its
//! answer is ready on the first poll, as for an approval mode without hooks; else in its own task,
//! which casts back); each approved call runs through the close-out in its own task, which casts
//! back.
//!
//! Which call is asked about next, and what a verdict or an output changes, is decided by
//! `machine.rs`. Runs inside the session actor's `handle`.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use futures::FutureExt;
use ractor::ActorRef;

use super::budget;
use super::effects::{machine, run};
use super::gate;
use super::services;
use super::turn::live_task;
use super::{SessionMsg, SessionState};
use crate::approval::ApprovalRequest;
use crate::message::{OmniMessage, StopReason, build};
use crate::tools::close_out::{self, ToolCallInfo};

/// Carries out `Effect::AskApproval`: the gate decides call `idx` of `turn`. A verdict ready on
/// the first poll (policy or mode decided, no hook or person to wait on) is returned, for the
/// executor to apply once the current effects are carried out (as the cast would be, without
/// the task and the hop); otherwise the decision goes on in its own task, which casts it back.
pub(super) fn ask_approval(
    myself: &ActorRef<SessionMsg>,
    state: &mut SessionState,
    turn: u64,
    idx: usize,
    tool_call_id: String,
    name: String,
    arguments: String,
) -> Option<gate::Verdict> {
    state.otel.approval_begin(&tool_call_id);
    let request = ApprovalRequest {
        permission: state.options.config.tools.permission(&name),
        tool_call_id,
        name,
        arguments,
        origin: Vec::new(),
    };
    let gate = gate::Gate::of(state);
    // Policy, then PreToolUse hooks, then the approver (see `gate`).
    let mut decide = Box::pin(gate.decide(request));
    let mut first_poll = Context::from_waker(Waker::noop());
    if let Poll::Ready(verdict) = decide.as_mut().poll(&mut first_poll) {
        return Some(verdict);
    }
    let me = myself.clone();
    // Polled again by the task, the future registers the task's waker.
    let approving = tokio::spawn(async move {
        let verdict = Box::new(decide.await);
        let _ = me.cast(SessionMsg::Approved { turn, idx, verdict });
    });
    if let Some(task) = state.task.as_mut() {
        task.turn.io.approving = Some(approving);
    }
    None
}

/// The name of call `idx` of the live turn `turn`.
pub(crate) fn live_call_name(state: &mut SessionState, turn: u64, idx: usize) -> Option<String> {
    live_task(state, turn).and_then(|t| t.turn.calls.get(idx).map(|c| c.name.clone()))
}

pub(crate) fn on_approved(
    myself: &ActorRef<SessionMsg>,
    state: &mut SessionState,
    turn: u64,
    idx: usize,
    verdict: gate::Verdict,
) {
    let fx = machine(state).on_approved(turn, idx, verdict);
    run(myself, state, fx);
}

/// Carries out `Effect::RunCall`: the call runs through the close-out (after its slot of the
/// session's budget) and casts its output back. A call that is over on its first poll (a small
/// file read in place, a refusal) ends right here, in the session's own task: no task to spawn,
/// schedule and wake. Any other goes on in its own task, which polls it again.
pub(super) fn spawn_tool(
    myself: &ActorRef<SessionMsg>,
    state: &SessionState,
    turn: u64,
    idx: usize,
    info: ToolCallInfo,
    context: Vec<String>,
) {
    let Some(cancel) = state.task.as_ref().map(|t| t.turn.io.cancel.clone()) else {
        return;
    };
    // A session whose trace is no longer this process's (its lease moved) runs no more tools;
    // the call still gets its one output (the session is being stopped).
    if let Some(reason) = state.trace_health.fenced() {
        let output = build::tool_call_output(
            info.tool_call_id,
            format!("[not run: {reason}]"),
            Vec::new(),
            StopReason::Failed,
        );
        let _ = myself.cast(SessionMsg::ToolDone { turn, idx, output });
        return;
    }
    let workspace = state.options.workspace.clone();
    // A service-bound tool is bound to this session's own service now.
    let tool = (state.options.config.tools.get(&info.name))
        .map(|t| t.bind(|kind| services::service(state, kind)));
    let claude_code = tool.as_ref().and_then(|t| t.definition.claude_code);
    let after = gate::Gate::of(state);
    let after = after
        .has_after(&info.name, claude_code.map(|c| c.name), &context)
        .then_some(after);
    let hook_call = crate::hooks::HookCall {
        tool_use_id: info.tool_call_id.clone(),
        tool_name: info.name.clone(),
        arguments: info.arguments.clone(),
        claude_code,
    };
    let records_me = myself.clone();
    let path_ticket = Some(state.path_locks.ticket());
    let otel = state.otel.tool_span(&info.tool_call_id);
    let scope = state.tool_scope.clone();
    let me = myself.clone();
    let partial_me = myself.clone();
    let emit: Arc<dyn Fn(OmniMessage) + Send + Sync> = Arc::new(move |msg| {
        let _ = partial_me.cast(SessionMsg::ToolPartial { turn, msg });
    });
    // Entered here, in call order; waited for in the task.
    let admission = state.budget.enter();
    let max_parallel = state.budget.max();
    let mut call = Box::pin(async move {
        let call_id = info.tool_call_id.clone();
        let admitted = match budget::admit(admission, &cancel, &call_id, max_parallel, emit).await {
            Ok(admitted) => admitted,
            Err(output) => {
                let output = *output;
                let _ = me.cast(SessionMsg::ToolDone { turn, idx, output });
                return;
            }
        };
        let env = crate::tools::ToolEnv {
            workspace,
            path_ticket,
            scope,
            otel,
        };
        let started = std::time::Instant::now();
        let run = close_out::execute(info, tool, env, cancel.clone(), admitted.emit.clone());
        let output = AssertUnwindSafe(run)
            .catch_unwind()
            .await
            .unwrap_or_else(|p| {
                let msg = crate::tools::panic_message(p);
                build::tool_call_output(
                    call_id,
                    format!("[tool error] {msg}"),
                    Vec::new(),
                    StopReason::Failed,
                )
            });
        // PostToolUse hooks (not for a cancelled call: its task is ending).
        let output = match after.filter(|_| !cancel.is_cancelled()) {
            Some(gate) => {
                let (output, records) = gate.after(hook_call, output, started, context).await;
                if !records.is_empty() {
                    let _ = records_me.cast(SessionMsg::HookRecords { turn, records });
                }
                output
            }
            None => output,
        };
        // The call is over: the next waiting call may start.
        let output = admitted.finish(output);
        let _ = me.cast(SessionMsg::ToolDone { turn, idx, output });
    });
    let mut first_poll = Context::from_waker(Waker::noop());
    if call.as_mut().poll(&mut first_poll).is_pending() {
        // Polled again by the task, the call registers the task's waker.
        tokio::spawn(call);
    }
}

pub(crate) fn on_tool_done(
    myself: &ActorRef<SessionMsg>,
    state: &mut SessionState,
    turn: u64,
    idx: usize,
    output: OmniMessage,
) {
    // Scrubbed before the model, the trace or a subscriber sees it.
    let output = state.scrubbed(output);
    let fx = machine(state).on_tool_done(turn, idx, output);
    run(myself, state, fx);
}
