//! list_commands (permission `r`): one line per registered background command — process_id,
//! `running` or `exited (<detail>)`, seconds since its last use and the first line of the command
//! — or `[no background commands]`. Listing does not count as a use.
//!
//! Read-only: it never changes the registry.

use super::exec_command::fail;
use crate::actors::command_supervisor::CommandSupervisorHandle;
use crate::tools::{ToolContext, ToolResult};

pub(super) async fn run(commands: Option<CommandSupervisorHandle>, ctx: ToolContext) -> ToolResult {
    let Some(commands) = commands else {
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
