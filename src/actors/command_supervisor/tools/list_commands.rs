//! list_commands (permission `r`): one line per registered background command — process_id,
//! `running` or `exited (<detail>)`, seconds since its last use and the first line of the command
//! — or `[no background commands]`. Listing does not count as a use.
//!
//! Read-only: it never changes the registry.

use futures::future::BoxFuture;
use serde_json::{Map, Value};

use super::exec_command::fail;
use crate::tools::{Tool, ToolContext, ToolResult};

/// The list_commands tool.
pub struct ListCommandsTool;

impl Tool for ListCommandsTool {
    fn call(&self, ctx: ToolContext, _args: Map<String, Value>) -> BoxFuture<'static, ToolResult> {
        Box::pin(run(ctx))
    }
}

async fn run(ctx: ToolContext) -> ToolResult {
    let Some(commands) = ctx.commands.clone() else {
        return fail(
            &ctx,
            "[list_commands unavailable: no command session manager configured]",
        );
    };
    let list = commands.list().await;
    if list.is_empty() {
        ctx.emit("[no background commands]");
    } else {
        let lines: Vec<String> = list.iter().map(|l| l.line()).collect();
        ctx.emit(lines.join("\n"));
    }
    ToolResult::completed()
}
