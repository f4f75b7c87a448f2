//! The command tools (`exec_command`, `input_command`, `kill_command`, `list_commands`) and
//! [`CommandTools`], the [`ToolService`] through which the session's command supervisor serves
//! them (`docs/architecture.md#service-bindings`). The registry binds these names to
//! [`ServiceKind::Commands`](crate::tools::ServiceKind::Commands); the session binds each call to its own supervisor.
//!
//! They build tool output only; processes, buffers and the registry of commands belong to the
//! command actors and their supervisor.

pub mod exec_command;
pub mod input_command;
pub mod kill_command;
pub mod list_commands;

use futures::future::BoxFuture;
use serde_json::{Map, Value};

use super::CommandSupervisorHandle;
use crate::tools::{ToolContext, ToolResult, ToolService, not_served};

/// The command tools of one session, served by its supervisor. Without one (not configured, or
/// it failed) each tool answers that it is unavailable.
#[derive(Clone)]
pub struct CommandTools {
    commands: Option<CommandSupervisorHandle>,
}

impl CommandTools {
    /// The command tools over `commands` (`None`: every call answers that commands are
    /// unavailable).
    pub fn new(commands: Option<CommandSupervisorHandle>) -> Self {
        CommandTools { commands }
    }
}

impl ToolService for CommandTools {
    fn call(
        &self,
        tool: &str,
        ctx: ToolContext,
        args: Map<String, Value>,
    ) -> BoxFuture<'static, ToolResult> {
        let commands = self.commands.clone();
        match tool {
            "exec_command" => Box::pin(exec_command::run(commands, ctx, args)),
            "input_command" => Box::pin(input_command::run(commands, ctx, args)),
            "kill_command" => Box::pin(kill_command::run(commands, ctx, args)),
            "list_commands" => Box::pin(list_commands::run(commands, ctx)),
            other => {
                let result = not_served(&ctx, other);
                Box::pin(async move { result })
            }
        }
    }
}
