//! `spawn_agent`: starts a child agent on a task and returns at once with its `agent_id`
//! (`docs/collaboration.md#spawn_agent`). Admission (≤ 8, never evicting a running child)
//! belongs to the supervisor; names are resolved there against `agents:` / `models:`.

use futures::future::BoxFuture;
use serde_json::{Map, Value};

use super::super::SubagentSupervisorHandle;
use super::{fail, supervisor};
use crate::actors::session_api::ForkTurns;
use crate::actors::subagent_supervisor::{AdmitError, AgentSpawn, ChildRequest};
use crate::message::Sender;
use crate::tools::{ToolContext, ToolResult, args};

/// The `spawn_agent` tool: starts a named agent on a task.
pub struct SpawnAgent;

/// A `fork_turns` that is neither `none`, `all` nor a whole number (the text is the tool output).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("[spawn_agent error: fork_turns must be none, all or a whole number of turns (got {got})]")]
pub struct BadForkTurns {
    /// The value given, as JSON.
    pub got: String,
}

/// `fork_turns`: `none` (default), `all`, or a whole number ≥ 0.
pub fn fork_turns(args: &Map<String, Value>) -> Result<ForkTurns, BadForkTurns> {
    let bad = |v: &Value| BadForkTurns { got: v.to_string() };
    match args.get("fork_turns") {
        None | Some(Value::Null) => Ok(ForkTurns::None),
        Some(Value::String(s)) => match s.trim() {
            "" | "none" => Ok(ForkTurns::None),
            "all" => Ok(ForkTurns::All),
            n => n
                .parse::<usize>()
                .map(|n| {
                    if n == 0 {
                        ForkTurns::None
                    } else {
                        ForkTurns::Last(n)
                    }
                })
                .map_err(|_| bad(&Value::String(s.clone()))),
        },
        Some(v) => match v.as_u64() {
            Some(0) => Ok(ForkTurns::None),
            Some(n) => Ok(ForkTurns::Last(n as usize)),
            None => Err(bad(v)),
        },
    }
}

/// A `reasoning_effort` that is not a short lowercase word (`got`: the value given, as JSON).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "[spawn_agent error: reasoning_effort must be a word such as low, medium or high (got {got})]"
)]
pub struct BadEffort {
    /// The value given.
    pub got: String,
}

/// A `reasoning_effort` value: a short lowercase word.
fn effort(args: &Map<String, Value>) -> Result<Option<String>, BadEffort> {
    match args.get("reasoning_effort") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s))
            if !s.is_empty() && s.len() <= 16 && s.bytes().all(|b| b.is_ascii_lowercase()) =>
        {
            Ok(Some(s.clone()))
        }
        Some(v) => Err(BadEffort { got: v.to_string() }),
    }
}

fn opt_name(args: &Map<String, Value>, key: &str) -> Option<String> {
    args::opt_str(args, key)
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

impl SpawnAgent {
    pub(in crate::actors::subagent_supervisor) fn call(
        subagents: Option<SubagentSupervisorHandle>,
        depth: u32,
        ctx: ToolContext,
        args: Map<String, Value>,
    ) -> BoxFuture<'static, ToolResult> {
        Box::pin(async move {
            if depth >= 1 {
                return fail(
                    "[spawn_agent error: an agent cannot spawn agents (depth limit 1); ask your parent with send_message]",
                );
            }
            let task_name = match args::require_nonblank_str(&args, "task_name", "spawn_agent") {
                Ok(t) => t.trim().to_string(),
                Err(e) => return fail(e.to_string()),
            };
            let message = match args::require_nonblank_str(&args, "message", "spawn_agent") {
                Ok(m) => m.to_string(),
                Err(e) => return fail(e.to_string()),
            };
            let turns = match fork_turns(&args) {
                Ok(t) => t,
                Err(e) => return fail(e.to_string()),
            };
            let reasoning_effort = match effort(&args) {
                Ok(e) => e,
                Err(e) => return fail(e.to_string()),
            };
            let subagents = match supervisor(subagents, depth, "spawn_agent") {
                Ok(s) => s,
                Err(r) => return r,
            };
            let history = match subagents.parent_fork(turns).await {
                Ok(h) => h,
                Err(e) => return fail(format!("[spawn_agent error: cannot copy turns: {e}]")),
            };
            let forked = history.len();
            let agent = opt_name(&args, "agent_name");
            let request = ChildRequest {
                agent: agent.clone(),
                model: opt_name(&args, "model"),
                reasoning_effort,
                history,
                spawn: Some(AgentSpawn {
                    task_name: task_name.clone(),
                }),
                otel_parent: ctx.env.otel.clone(),
                ..ChildRequest::default()
            };
            let child = match subagents.admit(&message, request).await {
                Ok(c) => c,
                Err(AdmitError::Full) => {
                    return fail(
                        "[spawn_agent error: 8 agents are running (the limit); wait for a report (wait_agent) or interrupt one (interrupt_agent) first]",
                    );
                }
                Err(e) => return fail(format!("[spawn_agent error: {e}]")),
            };
            if let Err(e) = child
                .session
                .start_task_as(message, Some(Sender::ParentAgent))
                .await
            {
                subagents.kill(&child.id).await;
                return fail(format!("[spawn_agent error: {e}]"));
            }
            let meta = child.session.meta();
            ctx.emit(format!(
                "agent_id: {}\nstatus: running\ntask_name: {task_name}\nagent: {}\nmodel: {}/{}\nforked messages: {forked}\nIt reports after every round it completes; reports reach you with your next request. wait_agent waits for one.",
                child.id,
                agent.as_deref().unwrap_or("(this agent's)"),
                meta.provider,
                meta.model_id,
            ));
            ToolResult::completed()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fork_turns_takes_none_all_and_numbers() {
        let f = |v: Value| fork_turns(json!({ "fork_turns": v }).as_object().unwrap());
        assert_eq!(f(json!("none")), Ok(ForkTurns::None));
        assert_eq!(f(json!("all")), Ok(ForkTurns::All));
        assert_eq!(f(json!(2)), Ok(ForkTurns::Last(2)));
        assert_eq!(f(json!("3")), Ok(ForkTurns::Last(3)));
        assert!(
            f(json!("some"))
                .unwrap_err()
                .to_string()
                .contains("fork_turns must be")
        );
        assert!(f(json!(-1)).is_err());
        assert_eq!(fork_turns(&Map::new()), Ok(ForkTurns::None));
    }
}
