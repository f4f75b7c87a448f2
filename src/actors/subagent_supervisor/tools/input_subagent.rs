//! `input_subagent`: poll a subagent or send it a follow-up prompt on the same child session
//! (`docs/tools.md#input_subagent`). Interrupting the call ends only the poll; the child keeps running.

use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::{Map, Value};

use super::subagent_window::{Window, approval_hint, collect, finished_result, yield_ms};
use crate::actors::subagent_supervisor::SubagentSupervisorHandle;
use crate::message::{Sender, StopReason};
use crate::tools::{ToolContext, ToolResult, args};

/// The `input_subagent` tool: sends a follow-up prompt to a subagent and collects its answer.
pub struct InputSubagentTool;

fn fail(text: impl Into<String>) -> ToolResult {
    ToolResult::failed().with_note(text)
}

impl InputSubagentTool {
    pub(super) fn call(
        subagents: Option<SubagentSupervisorHandle>,
        ctx: ToolContext,
        args: Map<String, Value>,
    ) -> BoxFuture<'static, ToolResult> {
        Box::pin(async move {
            let id = match args::require_nonblank_str(&args, "subagent_id", "input_subagent") {
                Ok(id) => id.to_string(),
                Err(e) => return fail(e.to_string()),
            };
            let Some(subagents) = subagents else {
                return fail("[input_subagent unavailable: no subagent session manager available]");
            };
            let Some(child) = subagents.get(&id).await else {
                return fail(format!(
                    "[input_subagent error: unknown subagent_id {id} (the session may have finished and been cleared)]"
                ));
            };
            let prompt = args::opt_str(&args, "prompt").unwrap_or("").to_string();
            let default = if prompt.is_empty() { 10_000 } else { 300_000 };
            let window = yield_ms(&args, default, ctx.definition.timeout_ms);
            let steer = match args::opt_str(&args, "mode").unwrap_or("normal") {
                "normal" => false,
                "steer" => true,
                other => {
                    return fail(format!(
                        "[input_subagent error: invalid mode {other}; use normal or steer]"
                    ));
                }
            };
            if !prompt.is_empty() && steer && child.is_running() {
                // Joins the running round at its next input-assembly point; then poll.
                match child
                    .session
                    .steer_as(prompt.clone(), Some(Sender::ParentAgent))
                    .await
                {
                    Ok(crate::actors::session_api::SteerOutcome::Started) => child.begin_round(),
                    Ok(_) => {}
                    Err(e) => return fail(format!("[input_subagent error: {e}]")),
                }
            } else if !prompt.is_empty() {
                if child.is_running() {
                    return fail(format!(
                        "[input_subagent error: subagent {id} is still running; poll with an empty prompt to collect progress first]"
                    ));
                }
                child.begin_round();
                if let Err(e) = child
                    .session
                    .start_task_as(prompt, Some(Sender::ParentAgent))
                    .await
                {
                    return fail(format!("[input_subagent error: {e}]"));
                }
            }
            match collect(&ctx, &child, Duration::from_millis(window)).await {
                Window::Finished => finished_result(
                    &child,
                    Some(format!(
                        "[subagent idle with subagent_id {id}; send a follow-up prompt to continue]"
                    )),
                ),
                Window::StillRunning => ToolResult::completed().with_note(format!(
                    "[subagent still running with subagent_id {id}]{}",
                    approval_hint(&child)
                )),
                Window::Cancelled => ToolResult {
                    stop_reason: Some(StopReason::Aborted),
                    ..ToolResult::default()
                },
            }
        })
    }
}
