//! `kill_subagent` and `list_subagents`: stop and remove a subagent (denying its pending
//! approvals; its own trace keeps its work), and list the session's subagents.

use futures::future::BoxFuture;
use serde_json::{Map, Value};

use crate::actors::subagent_supervisor::SubagentSupervisorHandle;
use crate::tools::{ToolContext, ToolResult, args};

/// The `kill_subagent` tool: stops a subagent and removes it.
pub struct KillSubagentTool;

/// The `list_subagents` tool: the registered subagents.
pub struct ListSubagentsTool;

fn fail(text: impl Into<String>) -> ToolResult {
    ToolResult::failed().with_note(text)
}

impl KillSubagentTool {
    pub(super) fn call(
        subagents: Option<SubagentSupervisorHandle>,
        ctx: ToolContext,
        args: Map<String, Value>,
    ) -> BoxFuture<'static, ToolResult> {
        Box::pin(async move {
            let id = match args::require_nonblank_str(&args, "subagent_id", "kill_subagent") {
                Ok(id) => id.to_string(),
                Err(e) => return fail(e.to_string()),
            };
            let Some(subagents) = subagents else {
                return fail("[kill_subagent unavailable: no subagent session manager available]");
            };
            let unknown = || {
                fail(format!(
                    "[kill_subagent error: unknown subagent_id {id} (the session may have finished and been cleared)]"
                ))
            };
            let Some(child) = subagents.get(&id).await else {
                return unknown();
            };
            let was_running = child.is_running();
            child.set_background(false);
            ctx.emit(child.take_text());
            if subagents.kill(&id).await.is_none() {
                return unknown();
            }
            let note = if was_running {
                format!(
                    "[subagent {id} aborted and removed; its own trace keeps the work done so far]"
                )
            } else {
                format!("[subagent {id} was idle; session removed]")
            };
            ToolResult::completed().with_note(note)
        })
    }
}

impl ListSubagentsTool {
    pub(super) fn call(
        subagents: Option<SubagentSupervisorHandle>,
        ctx: ToolContext,
        _args: Map<String, Value>,
    ) -> BoxFuture<'static, ToolResult> {
        Box::pin(async move {
            let Some(subagents) = subagents else {
                return ToolResult::completed().with_note("[no subagents]");
            };
            let list = subagents.list().await;
            if list.is_empty() {
                return ToolResult::completed().with_note("[no subagents]");
            }
            let lines: Vec<String> = list
                .iter()
                .map(|c| {
                    let l = c.listing();
                    format!(
                        "{}  {}  turns {}  tokens {}  {}",
                        l.id,
                        if l.running { "running" } else { "idle" },
                        l.turns,
                        l.tokens,
                        l.label
                    )
                })
                .collect();
            ctx.emit(lines.join("\n"));
            ToolResult::completed()
        })
    }
}
