//! `run_subagent`: start a child session on a prompt and collect its answer (`docs/tools.md#run_subagent`).
//! Admission belongs to the subagent supervisor; this tool only asks for it.

use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::{Map, Value};

use super::subagent_window::{Window, approval_hint, collect, finished_result, yield_ms};
use crate::actors::subagent_supervisor::SubagentSupervisorHandle;
use crate::message::{Sender, StopReason};
use crate::tools::{ToolContext, ToolResult, args};

/// The `run_subagent` tool: starts a subagent on a prompt and collects its answer.
pub struct RunSubagentTool;

fn fail(text: impl Into<String>) -> ToolResult {
    ToolResult::failed().with_note(text)
}

impl RunSubagentTool {
    pub(super) fn call(
        subagents: Option<SubagentSupervisorHandle>,
        ctx: ToolContext,
        args: Map<String, Value>,
        depth: u32,
    ) -> BoxFuture<'static, ToolResult> {
        Box::pin(async move {
            let prompt = match args::opt_str(&args, "prompt") {
                Some(p) if !p.trim().is_empty() => p.to_string(),
                _ => {
                    return fail("[run_subagent error: missing required string argument `prompt`]");
                }
            };
            if depth >= 1 {
                return fail(
                    "[run_subagent error: subagent depth limit 1 reached; not spawning another subagent]",
                );
            }
            let Some(subagents) = subagents else {
                return fail("[run_subagent unavailable: no subagent runner configured]");
            };
            let background = args::flag(&args, "run_in_background");
            let window = yield_ms(&args, 300_000, ctx.definition.timeout_ms);
            let mut request = match super::model_choice::run_subagent_request(&args) {
                Ok(r) => r,
                Err(e) => return fail(e.to_string()),
            };
            request.otel_parent = ctx.env.otel.clone();
            let child = match subagents.admit(&prompt, request).await {
                Ok(c) => c,
                Err(e) => return fail(super::model_choice::run_subagent_refusal(&e)),
            };
            child.set_background(background);
            if let Err(e) = child
                .session
                .start_task_as(prompt, Some(Sender::ParentAgent))
                .await
            {
                subagents.kill(&child.id).await;
                return fail(format!("[run_subagent error: {e}]"));
            }
            if background {
                return ToolResult::completed().with_note(format!(
                    "[subagent running in background with subagent_id {}; its completion will arrive as a user message — no need to poll. Use input_subagent to interact or kill_subagent to stop it]",
                    child.id
                ));
            }
            match collect(&ctx, &child, Duration::from_millis(window)).await {
                Window::Finished => {
                    let result = finished_result(&child, None);
                    subagents.kill(&child.id).await;
                    result
                }
                Window::StillRunning => ToolResult::completed().with_note(format!(
                    "[subagent running with subagent_id {}; use input_subagent to poll for progress or send a follow-up prompt]{}",
                    child.id,
                    approval_hint(&child)
                )),
                Window::Cancelled => {
                    subagents.kill(&child.id).await;
                    ToolResult {
                        stop_reason: Some(StopReason::Aborted),
                        ..ToolResult::default()
                    }
                }
            }
        })
    }
}
