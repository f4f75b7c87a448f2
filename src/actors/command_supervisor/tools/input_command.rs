//! input_command: writes to a registered command's stdin (or sends Ctrl-C as SIGINT to its
//! group, or only polls) and then streams its output for a window (`docs/tools.md#input_command`). A command
//! found over is removed from the registry with its exit note; interrupting the call only ends
//! the poll, never the command.
//!
//! Texts and verdicts only: the command actor does the I/O, the supervisor owns the registry.

use serde_json::{Map, Value};

use super::exec_command::{aborted, exit_result, fail, with_sandbox_note, yield_window};
use crate::actors::command_supervisor::Collected;
use crate::actors::command_supervisor::CommandSupervisorHandle;
use crate::tools::args::{opt_str, require_str};
use crate::tools::{ToolContext, ToolResult};

const CTRL_C: &str = "\u{3}";

pub(super) async fn run(
    commands: Option<CommandSupervisorHandle>,
    ctx: ToolContext,
    args: Map<String, Value>,
) -> ToolResult {
    let tool = ctx.definition.name.clone();
    let Some(commands) = commands else {
        return fail(
            &ctx,
            "[input_command unavailable: no command session manager configured]",
        );
    };
    let id = match require_str(&args, "process_id", &tool) {
        Ok(id) => id.to_string(),
        Err(e) => return fail(&ctx, e.to_string()),
    };
    // A non-string `chars` is an empty poll.
    let chars = opt_str(&args, "chars").unwrap_or("");
    if chars.contains(CTRL_C) && chars != CTRL_C {
        return fail(
            &ctx,
            "[input_command error: chars mixes U+0003 (Ctrl-C) with other content; send \"\\u0003\" alone to interrupt]",
        );
    }
    let default_ms = if chars.is_empty() { 120_000.0 } else { 250.0 };
    let window = yield_window(&args, default_ms, ctx.definition.timeout_ms);
    let Some(lease) = commands.lease(&id).await else {
        return fail(
            &ctx,
            format!(
                "[input_command error: unknown process_id {id} (the session may have exited and been cleared)]"
            ),
        );
    };
    if chars == CTRL_C {
        lease.interrupt();
    } else if !chars.is_empty() {
        lease.write(chars.as_bytes().to_vec());
    }
    let mut emit = |text: String| ctx.emit(text);
    match lease.collect(window, &ctx.cancel, &mut emit).await {
        Collected::Exited(exit) => {
            let note = commands.sandbox_note(&exit, lease.is_escalated());
            lease.remove();
            with_sandbox_note(exit_result(&exit), note)
        }
        Collected::Running => ToolResult::completed()
            .with_note(format!("[process still running with process_id {id}]")),
        Collected::Cancelled => aborted(),
    }
}
