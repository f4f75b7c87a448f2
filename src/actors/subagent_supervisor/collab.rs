//! OpenVaala's collaboration tools on the subagent supervisor: `spawn_agent`, `send_message`,
//! `wait_agent`, `interrupt_agent`, `list_agents`, `read_session_history`
//! (`docs/collaboration.md`). They drive the same `SubagentSupervisor` as the PenguinHarness
//! subagent tools: at most 8 children, an idle one may be evicted, a running one never.
//!
//! The openvaala profile binds the six names to `ServiceKind::Subagents` (their texts are in
//! `tools::profile`); [`SubagentTools`](super::tools::SubagentTools) dispatches each call to its
//! module here with the session's supervisor and depth. A spawned agent gets its own
//! `send_message` (to `parent`) and `wait_agent` from [`child_tools`]: local tools, because
//! they reach the parent and the agent's own session, not a supervisor of the agent's session.
//!
//! Admission, eviction and the children belong to the supervisor; these only ask it.

pub mod agents;
pub mod child_tools;
pub mod messages;
pub mod spawn_agent;
pub mod switch;

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value};

use super::{Child, SubagentSupervisorHandle};
use crate::actors::session_api::Inbox;
use crate::tools::{ToolContext, ToolResult, args};

pub use crate::tools::profile::{WAIT_DEFAULT_S, WAIT_MAX_S};

/// A failed result with `text` as its note.
pub(crate) fn fail(text: impl Into<String>) -> ToolResult {
    ToolResult::failed().with_note(text)
}

/// The session's supervisor, or the tool's `unavailable` failure.
pub(crate) fn supervisor(
    subagents: Option<SubagentSupervisorHandle>,
    depth: u32,
    tool: &str,
) -> Result<SubagentSupervisorHandle, ToolResult> {
    if depth >= 1 {
        return Err(fail(format!(
            "[{tool} error: only the top-level session has agents (depth limit 1)]"
        )));
    }
    subagents.ok_or_else(|| {
        fail(format!(
            "[{tool} unavailable: no subagent supervisor in this session]"
        ))
    })
}

/// The child `target` names (of the session's supervisor, see [`supervisor`]), or the tool's
/// error.
pub(crate) async fn target(
    subagents: Option<SubagentSupervisorHandle>,
    depth: u32,
    args: &Map<String, Value>,
    tool: &str,
) -> Result<Arc<Child>, ToolResult> {
    let subagents = supervisor(subagents, depth, tool)?;
    let id = args::require_nonblank_str(args, "target", tool).map_err(|e| fail(e.to_string()))?;
    if id == "parent" {
        return Err(fail(format!(
            "[{tool} error: this session has no parent; target is an agent_id from spawn_agent]"
        )));
    }
    subagents.get(id).await.ok_or_else(|| {
        fail(format!(
            "[{tool} error: unknown target {id} (list_agents shows your agents; an idle agent may have been closed to make room)]"
        ))
    })
}

/// `timeout_seconds` of `wait_agent`, or its error.
pub(crate) fn wait_timeout(args: &Map<String, Value>) -> Result<Duration, ToolResult> {
    let secs = match args.get("timeout_seconds") {
        None | Some(Value::Null) => WAIT_DEFAULT_S,
        Some(v) => match v
            .as_u64()
            .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
        {
            Some(n) if (1..=WAIT_MAX_S).contains(&n) => n,
            _ => {
                return Err(fail(format!(
                    "[wait_agent error: timeout_seconds must be a whole number from 1 to {WAIT_MAX_S} (got {v})]"
                )));
            }
        },
    };
    Ok(Duration::from_secs(secs))
}

/// Waits on `inbox` until something arrives that the model has not been given, the timeout
/// passes or the call is cancelled; the text of why it woke.
pub(crate) async fn wait_inbox(
    ctx: &ToolContext,
    mut inbox: tokio::sync::watch::Receiver<Inbox>,
    timeout: Duration,
) -> ToolResult {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let now = inbox.borrow_and_update().clone();
        if now.waiting() {
            ctx.emit(format!(
                "woke: {}; it reaches you with your next request",
                now.last
            ));
            return ToolResult::completed();
        }
        tokio::select! {
            changed = inbox.changed() => {
                if changed.is_err() {
                    return fail("[wait_agent error: the session is closing]");
                }
            }
            _ = tokio::time::sleep_until(deadline) => {
                ctx.emit(format!(
                    "timed out after {} s: no report or message arrived",
                    timeout.as_secs()
                ));
                return ToolResult::completed();
            }
            _ = ctx.cancel.cancelled() => {
                return ToolResult {
                    stop_reason: Some(crate::message::StopReason::Aborted),
                    ..ToolResult::default()
                };
            }
        }
    }
}
