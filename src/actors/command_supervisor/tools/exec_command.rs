//! exec_command: runs `bash -lc <cmd>` through the session's command supervisor and streams its
//! output for up to `yield_time_ms` (`docs/tools.md#exec_command`, `#yield-windows`). A command that ends inside the window
//! is never registered and its whole group is killed; one still running is registered and keeps
//! running with a `proc-xxxxxxxx` id; `run_in_background` registers at once and arms the
//! completion notice.
//!
//! It builds the texts and the verdict only; processes, buffers and the registry belong to the
//! command actors and their supervisor. Also home of the helpers the other command tools share.

use std::time::Duration;

use serde_json::{Map, Value};

use crate::actors::command_supervisor::CommandSupervisorHandle;
use crate::actors::command_supervisor::notice::crowded_note;
use crate::actors::command_supervisor::{
    CROWDED_AT, Collected, CommandStyle, MAX_COMMANDS, StartRequest,
};
use crate::message::StopReason;
use crate::process::ExitInfo;
use crate::tools::args::{finite_number, flag, opt_str, require_str};
use crate::tools::{ToolContext, ToolResult};

/// Default window of exec_command.
const DEFAULT_YIELD_MS: f64 = 60_000.0;

/// Emits `text` and returns a failed result.
pub(crate) fn fail(ctx: &ToolContext, text: impl Into<String>) -> ToolResult {
    ctx.emit(text);
    ToolResult::failed()
}

/// The window of `docs/tools.md#yield-windows`: `min(max(raw or default, 250), max(timeoutMs - 1000, 250))`,
/// unbounded above when the tool has no timeout. Non-numbers (numeric strings too) count as
/// absent.
pub(crate) fn yield_window(
    args: &Map<String, Value>,
    default_ms: f64,
    timeout_ms: i64,
) -> Duration {
    let raw = finite_number(args, "yield_time_ms").unwrap_or(default_ms);
    let low = raw.max(250.0);
    let ms = if timeout_ms > 0 {
        low.min(((timeout_ms - 1000) as f64).max(250.0))
    } else {
        low
    };
    // `as` saturates; a year is "forever" for a tool call.
    Duration::from_millis(ms.floor() as u64).min(Duration::from_secs(365 * 24 * 3600))
}

/// The verdict for a command that is over: exit 0 completes silently, anything else fails with
/// its note.
pub(crate) fn exit_result(exit: &ExitInfo) -> ToolResult {
    let result = if exit.is_failure() {
        ToolResult::failed()
    } else {
        ToolResult::completed()
    };
    match exit.note() {
        Some(note) => result.with_note(note),
        None => result,
    }
}

/// `result` with the sandbox's note after its own (`note`: see
/// [`CommandSupervisorHandle::sandbox_note`]).
pub(crate) fn with_sandbox_note(result: ToolResult, note: Option<String>) -> ToolResult {
    let Some(note) = note else { return result };
    let joined = match &result.note {
        Some(own) => format!("{own}\n{note}"),
        None => note,
    };
    result.with_note(joined)
}

/// An interrupted call (the close-out adds the interrupt note).
pub(crate) fn aborted() -> ToolResult {
    ToolResult {
        stop_reason: Some(StopReason::Aborted),
        ..ToolResult::default()
    }
}

fn with_crowding(note: String, registered: usize) -> String {
    if registered >= CROWDED_AT {
        format!("{note}\n{}", crowded_note(registered, MAX_COMMANDS))
    } else {
        note
    }
}

pub(super) async fn run(
    commands: Option<CommandSupervisorHandle>,
    ctx: ToolContext,
    args: Map<String, Value>,
) -> ToolResult {
    let tool = ctx.definition.name.clone();
    let Some(commands) = commands else {
        return fail(
            &ctx,
            "[exec_command unavailable: no command session manager configured]",
        );
    };
    let cmd = match require_str(&args, "cmd", &tool) {
        Ok(c) => c.to_string(),
        Err(e) => return fail(&ctx, e.to_string()),
    };
    let cwd = match opt_str(&args, "workdir").filter(|w| !w.is_empty()) {
        Some(w) => ctx.resolve(w),
        None => ctx.env.workspace.clone(),
    };
    let window = yield_window(&args, DEFAULT_YIELD_MS, ctx.definition.timeout_ms);
    let background = flag(&args, "run_in_background");
    let escalated = crate::tools::escalation::requires_escalation(&args);
    let req = StartRequest {
        cmd,
        cwd,
        tty: flag(&args, "tty"),
        background,
        style: CommandStyle::Windowed,
        escalated,
        traceparent: ctx.env.otel.traceparent().map(|t| t.to_string()),
    };
    let started = match commands.start(req).await {
        Ok(s) => s,
        Err(e) => return fail(&ctx, format!("[spawn error: {e}]")),
    };
    let lease = started.lease;
    let id = lease.id().to_string();
    tracing::debug!(tool = %tool, %id, background, "command started");

    if background {
        let note = format!(
            "[command running in background with process_id {id}; its completion will arrive as a user message — no need to poll. Use input_command to interact or kill_command to stop it]"
        );
        return ToolResult::completed()
            .with_note(with_crowding(note, started.registered.unwrap_or(0)));
    }

    let mut emit = |text: String| ctx.emit(text);
    match lease.collect(window, &ctx.cancel, &mut emit).await {
        Collected::Exited(exit) => {
            // Dropping the lease discards the command: its whole group is killed.
            drop(lease);
            with_sandbox_note(exit_result(&exit), commands.sandbox_note(&exit, escalated))
        }
        Collected::Running => match lease.register().await {
            Some(n) => ToolResult::completed().with_note(with_crowding(
                format!(
                    "[process running with process_id {id}; use input_command to send input or poll for output]"
                ),
                n,
            )),
            None => ToolResult::failed().with_note(format!(
                "[process {id} was stopped: command session manager disposed]"
            )),
        },
        Collected::Cancelled => {
            drop(lease);
            aborted()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn yield_clamping() {
        let ms = |v: Value, t: i64| yield_window(&obj(v), 60_000.0, t).as_millis();
        assert_eq!(ms(json!({}), 120_000), 60_000);
        assert_eq!(ms(json!({"yield_time_ms": 10}), 120_000), 250);
        assert_eq!(ms(json!({"yield_time_ms": 1e9}), 120_000), 119_000);
        assert_eq!(ms(json!({"yield_time_ms": "5000"}), 120_000), 60_000);
        assert_eq!(ms(json!({"yield_time_ms": 999.9}), 120_000), 999);
        assert_eq!(ms(json!({"yield_time_ms": 5000}), 500), 250);
        assert_eq!(ms(json!({"yield_time_ms": 1e7}), 0), 10_000_000);
    }

    #[test]
    fn exit_verdicts() {
        assert_eq!(exit_result(&ExitInfo::Code(0)), ToolResult::completed());
        assert_eq!(
            exit_result(&ExitInfo::Code(2)),
            ToolResult::failed().with_note("[exit code: 2]")
        );
        assert_eq!(
            exit_result(&ExitInfo::Signal(9)),
            ToolResult::failed().with_note("[terminated by signal SIGKILL]")
        );
    }
}
