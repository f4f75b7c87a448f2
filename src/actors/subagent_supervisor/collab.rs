//! OpenVaala's collaboration tools on the subagent supervisor: `spawn_agent`, `send_message`,
//! `wait_agent`, `interrupt_agent`, `list_agents`, `read_session_history`
//! (`docs/collaboration.md`). They drive the same `SubagentSupervisor` as the PenguinHarness
//! subagent tools: at most 8 children, an idle one may be evicted, a running one never.
//!
//! [`collaboration_tools`] is the one list of the parent-side tools (definition and
//! implementation); the openvaala profile appends it to every registry. A spawned agent gets
//! its own `send_message` (to `parent`) and `wait_agent` from [`child_tools`].
//!
//! Admission, eviction and the children belong to the supervisor; these only ask it.

pub mod agents;
pub mod child_tools;
pub mod messages;
pub mod spawn_agent;

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};

use super::{Child, SubagentSupervisorHandle};
use crate::actors::session::inbox::Inbox;
use crate::tools::registry::ToolDefinitionConfig;
use crate::tools::{Permission, Tool, ToolContext, ToolResult, args};

/// `wait_agent`'s default and bounds, in seconds.
pub const WAIT_DEFAULT_S: u64 = 30;
pub const WAIT_MAX_S: u64 = 600;

/// A failed result with `text` as its note.
pub(crate) fn fail(text: impl Into<String>) -> ToolResult {
    ToolResult::failed().with_note(text)
}

fn schema(props: Value, required: &[&str]) -> Value {
    json!({"type": "object", "properties": props, "required": required})
}

fn def(
    name: &str,
    desc: &str,
    params: Value,
    perm: Permission,
    timeout_ms: i64,
) -> ToolDefinitionConfig {
    let mut d = ToolDefinitionConfig::new(name, desc, params, perm);
    d.timeout_ms = timeout_ms;
    d
}

/// The definition of a collaboration tool (`None` for another name).
pub fn definition(name: &str) -> Option<ToolDefinitionConfig> {
    use Permission::{Read, ReadWrite};
    let target = json!({"type": "string", "description": "An agent_id from spawn_agent (agent-xxxxxxxx), or parent from inside an agent."});
    let d = match name {
        "spawn_agent" => def(
            name,
            "Start a child agent on a task. Returns at once with its agent_id; the agent reports after every round it completes (the report reaches you with your next request). Use wait_agent to wait for reports.",
            schema(
                json!({
                    "task_name": {"type": "string", "description": "A short name for the task (shown in reports and list_agents)."},
                    "message": {"type": "string", "description": "The task: the agent's first message."},
                    "agent_name": {"type": "string", "description": "A configured agent (agents: in the config); default: this agent."},
                    "model": {"type": "string", "description": "A configured model name (models: in the config) or provider/model; default: this agent's model."},
                    "reasoning_effort": {"type": "string", "description": "Passed to providers that take it (low, medium, high, ...)."},
                    "fork_turns": {"description": "none (default), all, or a number: how many of your recent completed turns the agent starts with.", "type": ["string", "integer"]}
                }),
                &["task_name", "message"],
            ),
            ReadWrite,
            120_000,
        ),
        "send_message" => def(
            name,
            "Send a message to an agent (or, from inside an agent, to parent). mode normal starts a new round (queued while the agent is busy); mode steer joins its current round.",
            schema(
                json!({
                    "target": target,
                    "message": {"type": "string", "description": "The text to send."},
                    "mode": {"type": "string", "enum": ["normal", "steer"], "description": "normal (default) or steer."},
                    "model": {"type": "string", "description": "From the next round on, the agent uses this configured model."},
                    "reasoning_effort": {"type": "string", "description": "From the next round on, the agent's reasoning effort."}
                }),
                &["target", "message"],
            ),
            ReadWrite,
            60_000,
        ),
        "wait_agent" => def(
            name,
            "Wait until an agent reports or a message arrives (from an agent or from the user), or the timeout passes. Says why it woke; the report or message itself reaches you with your next request.",
            schema(
                json!({
                    "timeout_seconds": {"type": "integer", "description": "1 to 600 (default 30)."}
                }),
                &[],
            ),
            Read,
            ((WAIT_MAX_S + 10) * 1000) as i64,
        ),
        "interrupt_agent" => def(
            name,
            "Cancel an agent's current round: its running tool calls end aborted and it reports that it was interrupted. The agent stays, idle.",
            schema(json!({"target": target}), &["target"]),
            ReadWrite,
            60_000,
        ),
        "list_agents" => def(
            name,
            "List your agents with their status, rounds, token use and context window.",
            schema(json!({}), &[]),
            Read,
            30_000,
        ),
        "read_session_history" => def(
            name,
            "Read an agent's history, newest first, a page at a time; pass next_cursor as cursor to continue.",
            schema(
                json!({
                    "target": target,
                    "cursor": {"type": "integer", "description": "Where to continue (next_cursor of the previous page); default: the newest entry."},
                    "limit": {"type": "integer", "description": "Entries per page, 1 to 100 (default 20)."}
                }),
                &["target"],
            ),
            Read,
            30_000,
        ),
        _ => return None,
    };
    Some(d)
}

/// The parent-side collaboration tools, each with its definition: what the openvaala profile
/// registers (`tools::profile::assemble` appends them to every openvaala registry).
pub fn collaboration_tools() -> Vec<(ToolDefinitionConfig, Arc<dyn Tool>)> {
    let tools: [(&str, Arc<dyn Tool>); 6] = [
        ("spawn_agent", Arc::new(spawn_agent::SpawnAgent)),
        ("send_message", Arc::new(messages::SendMessage)),
        ("wait_agent", Arc::new(messages::WaitAgent)),
        ("interrupt_agent", Arc::new(agents::InterruptAgent)),
        ("list_agents", Arc::new(agents::ListAgents)),
        ("read_session_history", Arc::new(agents::ReadSessionHistory)),
    ];
    tools
        .into_iter()
        .filter_map(|(name, tool)| definition(name).map(|d| (d, tool)))
        .collect()
}

/// The session's supervisor, or the tool's `unavailable` failure.
pub(crate) fn supervisor(
    ctx: &ToolContext,
    tool: &str,
) -> Result<SubagentSupervisorHandle, ToolResult> {
    if ctx.depth >= 1 {
        return Err(fail(format!(
            "[{tool} error: only the top-level session has agents (depth limit 1)]"
        )));
    }
    ctx.subagents.clone().ok_or_else(|| {
        fail(format!(
            "[{tool} unavailable: no subagent supervisor in this session]"
        ))
    })
}

/// The child `target` names, or the tool's error.
pub(crate) async fn target(
    subagents: &SubagentSupervisorHandle,
    args: &Map<String, Value>,
    tool: &str,
) -> Result<Arc<Child>, ToolResult> {
    let id = args::require_nonblank_str(args, "target", tool).map_err(fail)?;
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
