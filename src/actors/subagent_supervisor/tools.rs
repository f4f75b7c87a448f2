//! The subagent tools (`run_subagent`, `input_subagent`, `kill_subagent`, `list_subagents`),
//! their shared collect window, and [`SubagentTools`], the [`ToolService`] through which the
//! session's subagent supervisor serves them and OpenVaala's collaboration tools
//! (`spawn_agent`, ..., in `super::collab`) (`docs/architecture.md#service-bindings`). The
//! registry binds these names to [`ServiceKind::Subagents`](crate::tools::ServiceKind::Subagents); the session binds each call to its
//! own supervisor.
//!
//! Admission, eviction and the children belong to the supervisor; these only ask it.

pub mod input_subagent;
pub mod kill_subagent;
pub mod model_choice;
pub mod run_subagent;
pub mod subagent_window;

use futures::future::BoxFuture;
use serde_json::{Map, Value};

use super::SubagentSupervisorHandle;
use super::collab::{agents, messages, spawn_agent};
use crate::tools::{ToolContext, ToolResult, ToolService, not_served};

/// The subagent tools of one session, served by its supervisor. Without one (a child session,
/// or it failed) each tool answers that it is unavailable.
#[derive(Clone)]
pub struct SubagentTools {
    subagents: Option<SubagentSupervisorHandle>,
    /// The session's depth: 0 for a user session, 1 for a subagent.
    depth: u32,
}

impl SubagentTools {
    /// The subagent tools over `subagents` (`None`: every call answers that they are
    /// unavailable) for a session at `depth`.
    pub fn new(subagents: Option<SubagentSupervisorHandle>, depth: u32) -> Self {
        SubagentTools { subagents, depth }
    }
}

impl ToolService for SubagentTools {
    fn call(
        &self,
        tool: &str,
        ctx: ToolContext,
        args: Map<String, Value>,
    ) -> BoxFuture<'static, ToolResult> {
        let subagents = self.subagents.clone();
        match tool {
            "run_subagent" => run_subagent::RunSubagentTool::call(subagents, ctx, args, self.depth),
            "input_subagent" => input_subagent::InputSubagentTool::call(subagents, ctx, args),
            "kill_subagent" => kill_subagent::KillSubagentTool::call(subagents, ctx, args),
            "list_subagents" => kill_subagent::ListSubagentsTool::call(subagents, ctx, args),
            "spawn_agent" => spawn_agent::SpawnAgent::call(subagents, self.depth, ctx, args),
            "send_message" => messages::SendMessage::call(subagents, self.depth, ctx, args),
            "wait_agent" => messages::WaitAgent::call(subagents, self.depth, ctx, args),
            "interrupt_agent" => agents::InterruptAgent::call(subagents, self.depth, ctx, args),
            "list_agents" => agents::ListAgents::call(subagents, self.depth, ctx, args),
            "read_session_history" => {
                agents::ReadSessionHistory::call(subagents, self.depth, ctx, args)
            }
            other => {
                let result = not_served(&ctx, other);
                Box::pin(async move { result })
            }
        }
    }
}
