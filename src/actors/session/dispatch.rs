//! Approval and dispatch of a turn's tool calls: one approval at a time in call order, each
//! approved call run through the close-out in its own task, outputs recorded as they finish.
//!
//! Runs inside the session actor's `handle`; every wait is a spawned task that casts back.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::FutureExt;
use ractor::ActorRef;
use tokio_util::sync::CancellationToken;

use super::budget;
use super::gate;
use super::services;
use super::turn::{finalize_abort, live_task, maybe_finish_turn};
use super::{SessionMsg, SessionState};
use crate::approval::ApprovalRequest;
use crate::message::{Decision, OmniMessage, StopReason, build};
use crate::tools::close_out::{self, ToolCallInfo};

pub(super) fn pump_approvals(myself: &ActorRef<SessionMsg>, state: &mut SessionState) {
    let registry = &state.options.config.tools;
    let Some(task) = state.task.as_mut() else {
        return;
    };
    if task.turn.approving.is_some() || task.aborting.is_some() {
        return;
    }
    let Some(idx) = task.turn.approval_queue.pop_front() else {
        return;
    };
    let call = &task.turn.calls[idx];
    let request = ApprovalRequest {
        tool_call_id: call.id.clone(),
        name: call.name.clone(),
        arguments: call.arguments.clone(),
        permission: registry.permission(&call.name),
        origin: Vec::new(),
    };
    let me = myself.clone();
    let turn = task.turn.id;
    let gate = gate::Gate::of(state);
    let Some(task) = state.task.as_mut() else {
        return;
    };
    // Policy, then PreToolUse hooks, then the approver (see `gate`).
    task.turn.approving = Some(tokio::spawn(async move {
        let verdict = Box::new(gate.decide(request).await);
        let _ = me.cast(SessionMsg::Approved { turn, idx, verdict });
    }));
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
    mut verdict: gate::Verdict,
) {
    let Some(task) = live_task(state, turn) else {
        return;
    };
    task.turn.approving = None;
    let Some(call) = task.turn.calls.get_mut(idx) else {
        return;
    };
    let call_id = call.id.clone();
    let denial = (verdict.decision != Decision::Allow).then(|| verdict.denial.clone());
    let info = ToolCallInfo {
        tool_call_id: call.id.clone(),
        name: call.name.clone(),
        // A PreToolUse hook's `updatedInput` replaces the arguments the call runs with.
        arguments: verdict
            .arguments
            .take()
            .unwrap_or_else(|| call.arguments.clone()),
    };
    if denial.is_none() {
        call.running = true;
    }
    let cancel = task.turn.cancel.clone();
    for record in std::mem::take(&mut verdict.records) {
        state.emit(record, true);
    }
    state.emit(verdict.record(&call_id), true);
    let context = std::mem::take(&mut verdict.context);
    match denial {
        Some(text) => {
            let out = build::tool_call_output(call_id, text, Vec::new(), StopReason::Aborted);
            set_output(state, idx, &out);
            state.emit(out, true);
        }
        None => spawn_tool(myself, state, turn, idx, info, cancel, context),
    }
    pump_approvals(myself, state);
    maybe_finish_turn(myself, state);
}

pub(super) fn spawn_tool(
    myself: &ActorRef<SessionMsg>,
    state: &SessionState,
    turn: u64,
    idx: usize,
    info: ToolCallInfo,
    cancel: CancellationToken,
    context: Vec<String>,
) {
    let workspace = state.options.workspace.clone();
    // A service-bound tool is bound to this session's own service now.
    let tool = (state.options.config.tools.get(&info.name))
        .map(|t| t.bind(|kind| services::service(state, kind)));
    let after = gate::Gate::of(state);
    let after = after.has_after(&info.name, &context).then_some(after);
    let hook_call = crate::hooks::HookCall {
        tool_use_id: info.tool_call_id.clone(),
        tool_name: info.name.clone(),
        arguments: info.arguments.clone(),
    };
    let records_me = myself.clone();
    let path_ticket = Some(state.path_locks.ticket());
    let scope = state.tool_scope.clone();
    let me = myself.clone();
    let partial_me = myself.clone();
    let emit: Arc<dyn Fn(OmniMessage) + Send + Sync> = Arc::new(move |msg| {
        let _ = partial_me.cast(SessionMsg::ToolPartial { turn, msg });
    });
    // Entered here, in call order; waited for in the task.
    let admission = state.budget.enter();
    let max_parallel = state.budget.max();
    tokio::spawn(async move {
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
}

pub(super) fn set_output(state: &mut SessionState, idx: usize, out: &OmniMessage) {
    if let (Some(task), Some(p)) = (state.task.as_mut(), out.as_model())
        && let Some(call) = task.turn.calls.get_mut(idx)
    {
        call.output = Some(p.clone());
        call.running = false;
    }
}

pub(crate) fn on_tool_done(
    myself: &ActorRef<SessionMsg>,
    state: &mut SessionState,
    turn: u64,
    idx: usize,
    output: OmniMessage,
) {
    let Some(task) = state.task.as_mut().filter(|t| t.turn.id == turn) else {
        return;
    };
    if task.turn.calls.get(idx).is_none_or(|c| c.output.is_some()) {
        return;
    }
    let aborting = task.aborting.is_some();
    // Scrubbed before the model, the trace or a subscriber sees it.
    let output = state.scrubbed(output);
    set_output(state, idx, &output);
    state.emit(output, true);
    if aborting {
        if state
            .task
            .as_ref()
            .is_some_and(|t| t.turn.running_tools() == 0)
        {
            finalize_abort(state);
        }
    } else {
        maybe_finish_turn(myself, state);
    }
}
