//! The collect window shared by run_subagent and input_subagent: stream a child's answer text
//! into the call's output until its round ends, the window elapses or the call is cancelled,
//! and the texts that describe the outcome.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value};

use crate::actors::subagent_supervisor::{Child, exit_note};
use crate::message::StopReason;
use crate::tools::{ToolContext, ToolResult, args};

/// How a window ended.
pub enum Window {
    /// The child's round ended.
    Finished,
    /// The window elapsed with the round still running.
    StillRunning,
    /// The call was cancelled.
    Cancelled,
}

/// `yield_time_ms` clamped per `docs/tools.md#yield-windows` against the tool's timeout.
pub fn yield_ms(args: &Map<String, Value>, default: u64, timeout_ms: i64) -> u64 {
    let raw = args::finite_number(args, "yield_time_ms").map_or(default as f64, |n| n);
    let low = raw.max(250.0);
    let capped = if timeout_ms > 0 {
        low.min(((timeout_ms - 1000) as f64).max(250.0))
    } else {
        low
    };
    capped as u64
}

/// Streams the child's text into the output until the round ends, `window` passes or the
/// call is cancelled.
pub async fn collect(ctx: &ToolContext, child: &Arc<Child>, window: Duration) -> Window {
    let deadline = tokio::time::Instant::now() + window;
    let mut watch = child.watch();
    loop {
        ctx.emit(child.take_text());
        if !child.is_running() {
            return Window::Finished;
        }
        tokio::select! {
            changed = watch.changed() => {
                if changed.is_err() {
                    return Window::Finished;
                }
            }
            _ = tokio::time::sleep_until(deadline) => {
                ctx.emit(child.take_text());
                return Window::StillRunning;
            }
            _ = ctx.cancel.cancelled() => return Window::Cancelled,
        }
    }
}

/// ` [subagent is waiting for approval of <n> tool call(s); poll to review]` or "".
pub fn approval_hint(child: &Child) -> String {
    match child.approver.pending() {
        0 => String::new(),
        n => format!(" [subagent is waiting for approval of {n} tool call(s); poll to review]"),
    }
}

/// The result of a finished round: failed with the exit note, or completed.
pub fn finished_result(child: &Child, idle_suffix: Option<String>) -> ToolResult {
    let (failed, note) = child
        .finished()
        .map(|end| exit_note(&end))
        .unwrap_or((false, String::new()));
    let mut text = if note.is_empty() {
        String::new()
    } else {
        format!("[{note}]")
    };
    if let Some(s) = idle_suffix {
        if !text.is_empty() {
            text.push(' ');
        }
        text.push_str(&s);
    }
    let mut r = if failed {
        ToolResult::failed()
    } else {
        ToolResult::completed()
    };
    if !text.is_empty() {
        r.note = Some(text);
    }
    if !failed {
        r.stop_reason = Some(StopReason::Completed);
    }
    r
}
