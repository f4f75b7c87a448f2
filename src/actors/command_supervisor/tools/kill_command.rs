//! kill_command: stops a registered command (`docs/tools.md#kill_command`). It disarms the completion notice
//! and unregisters the command first, passes on any unread output, then kills the process group
//! (SIGTERM, SIGKILL after a grace period) and reports whether the command was still running.
//!
//! Texts and verdicts only: the kill itself is the command's process guard's job.

use serde_json::{Map, Value};

use super::exec_command::fail;
use crate::actors::command_supervisor::CommandSupervisorHandle;
use crate::tools::args::require_str;
use crate::tools::{ToolContext, ToolResult};

pub(super) async fn run(
    commands: Option<CommandSupervisorHandle>,
    ctx: ToolContext,
    args: Map<String, Value>,
) -> ToolResult {
    let tool = ctx.definition.name.clone();
    let Some(commands) = commands else {
        return fail(
            &ctx,
            "[kill_command unavailable: no command session manager configured]",
        );
    };
    let id = match require_str(&args, "process_id", &tool) {
        Ok(id) => id.to_string(),
        Err(e) => return fail(&ctx, e.to_string()),
    };
    let Some((lease, known_exit)) = commands.take(&id).await else {
        return fail(
            &ctx,
            format!(
                "[kill_command error: unknown process_id {id} (the session may have exited and been cleared)]"
            ),
        );
    };
    let unread = lease.drain().await;
    ctx.emit(unread.text);
    let exit = unread.exit.or(known_exit);
    // Dropping the lease removes the command and kills its group.
    drop(lease);
    let note = match exit {
        Some(exit) => format!(
            "[process {id} had already exited ({}); session removed]",
            exit.detail()
        ),
        None => format!(
            "[process {id} killed (SIGTERM to the process group, SIGKILL after a grace period)]"
        ),
    };
    ToolResult::completed().with_note(note)
}
