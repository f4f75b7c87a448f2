//! The definitions (descriptions and parameter schemas) of OpenVaala's collaboration tools
//! (`docs/collaboration.md`). Texts only: the subagent supervisor serves the tools
//! (`ServiceKind::Subagents`); a spawned agent's own `send_message` and `wait_agent` take the
//! same texts.

use serde_json::{Value, json};

use crate::tools::registry::{Permission, ToolDefinitionConfig};

/// `wait_agent`'s default and bounds, in seconds.
pub const WAIT_DEFAULT_S: u64 = 30;
/// `wait_agent`'s largest timeout, in seconds.
pub const WAIT_MAX_S: u64 = 600;

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
pub fn collaboration_definition(name: &str) -> Option<ToolDefinitionConfig> {
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
        )
        .known_as("Task", &[("prompt", "message"), ("description", "task_name")]),
        "send_message" => def(
            name,
            "Send a message to an agent (or, from inside an agent, to parent). mode normal starts a new round (queued while the agent is busy); mode steer joins its current round.",
            schema(
                json!({
                    "target": target,
                    "message": {"type": "string", "description": "The text to send."},
                    "mode": {"type": "string", "enum": ["normal", "steer"], "description": "normal (default) or steer."},
                    "model": {"type": "string", "description": "Switch the agent to this model (a name from the config's models:, or provider/model of one): the round this message starts runs on it (mode normal), or the running round from its next request (mode steer). The agent keeps its history."},
                    "reasoning_effort": {"type": "string", "description": "The agent's reasoning effort from then on (low, medium, high, ...), with model or for its current model."}
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
