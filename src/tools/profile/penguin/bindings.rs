//! How each penguin builtin runs in this build (`docs/tools.md#default-tool-table`): local code
//! or the session service that serves it. The builtins' default definitions and the table's
//! order are `definitions.rs`'s. It must not hold registry state or run tools; the profile
//! assembles the registry from it.

use std::sync::Arc;

use crate::tools::binding::{ServiceKind, ToolBinding};
use crate::tools::{BlockingTool, Tool};

/// How a builtin runs, when this build has it: the file tools are local, the command and
/// subagent tools are served by the session's supervisors.
pub fn builtin_binding(name: &str) -> Option<ToolBinding> {
    let local = |tool: Arc<dyn Tool>| Some(ToolBinding::Local(tool));
    match name {
        "read_file" => local(Arc::new(super::read_file::ReadFile)),
        "edit_file" => local(Arc::new(
            BlockingTool::new(super::edit_file::edit_file)
                .writing(crate::tools::path_locks::file_path_keys),
        )),
        "write_file" => local(Arc::new(
            BlockingTool::new(super::write_file::write_file)
                .writing(crate::tools::path_locks::file_path_keys),
        )),
        "apply_patch" => local(Arc::new(super::apply_patch::ApplyPatch)),
        "exec_command" | "input_command" | "kill_command" | "list_commands" => {
            Some(ToolBinding::Service(ServiceKind::Commands))
        }
        "run_subagent" | "input_subagent" | "kill_subagent" | "list_subagents" => {
            Some(ToolBinding::Service(ServiceKind::Subagents))
        }
        _ => None,
    }
}
