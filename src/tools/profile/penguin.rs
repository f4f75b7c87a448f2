//! The penguin profile (the default): PenguinHarness's tool surface (`docs/tools.md`). Every
//! tool of the profile is found from here in one step:
//!
//! | tool | definition | code |
//! |---|---|---|
//! | `read_file` | `definitions.rs` | `read_file.rs`, `read_file/` |
//! | `edit_file` | `definitions.rs` | `edit_file.rs`, `edit_file/` |
//! | `write_file` | `definitions.rs` | `write_file.rs`, `write_file/` |
//! | `apply_patch` | `definitions.rs` | `apply_patch.rs`, `apply_patch/` (openvaala's too) |
//! | `read_image`, `describe_image` | `definitions.rs` | `read_image.rs`, `describe_image.rs`; picked per model by [`image_tools`] |
//! | `exec_command`, `input_command`, `kill_command`, `list_commands` | `definitions.rs` (the shell text argument included) | served by the command supervisor: `src/actors/command_supervisor/tools/<tool>.rs` |
//! | `run_subagent`, `input_subagent`, `kill_subagent`, `list_subagents` | `definitions.rs` | served by the subagent supervisor: `src/actors/subagent_supervisor/tools/<tool>.rs` |
//!
//! `bindings.rs` says how each builtin runs (local code or a session service); [`assemble`]
//! builds a session's registry from both tables. The shared building blocks of the file tools
//! (`file_target`, `fs_atomic`, `secret_guard`, `path_locks`, …) stay in `src/tools/`: they are
//! named once below, so the tools reach them as `super::…`. Nothing here imports `src/actors/`.

pub mod apply_patch;
mod bindings;
mod definitions;
pub mod describe_image;
pub mod edit_file;
pub mod read_file;
pub mod read_image;
pub mod write_file;

use std::sync::Arc;

pub use bindings::builtin_binding;
pub use definitions::{BUILTIN_NAMES, default_definition};

use crate::model::model_config::ModelConfig;
use crate::model::openai::OpenAiModel;
use crate::tools::binding::ToolBinding;
use crate::tools::registry::{BuiltinEntry, ToolListError, ToolRegistry};
// The shared building blocks the profile's tools use, named once for them (`super::…`).
use crate::tools::{
    Placement, Tool, ToolContext, ToolDefinitionConfig, ToolReply, ToolResult, args, canonical,
    capped_read, definition, diff_render, file_target, fs_atomic, image_source, opened_at,
    path_hint, path_locks, resolve_path, run_file_work, secret_guard,
};

/// Every builtin this build implements, with the default definitions.
pub fn builtin_registry() -> ToolRegistry {
    let mut reg = ToolRegistry::empty();
    for name in BUILTIN_NAMES {
        if let (Some(def), Some(binding)) = (default_definition(name), builtin_binding(name)) {
            reg.register_binding(def, binding);
        }
    }
    reg
}

/// The list of a config's `tools.builtin`, replacing the default list wholesale.
/// An unknown or unavailable name is an error naming it.
pub fn from_entries(entries: &[BuiltinEntry]) -> Result<ToolRegistry, ToolListError> {
    assemble(Some(entries), Vec::new())
}

/// The tools of a session: the default list (`entries: None`) or a config's `tools.builtin`,
/// with the model's image tool from `image_tools` (`read_image` for vision models, else
/// `describe_image`). A configured image tool the model does not use is left out.
pub fn assemble(
    entries: Option<&[BuiltinEntry]>,
    image_tools: Vec<(ToolDefinitionConfig, Arc<dyn Tool>)>,
) -> Result<ToolRegistry, ToolListError> {
    let Some(entries) = entries else {
        let mut reg = builtin_registry();
        for (def, tool) in image_tools {
            reg.register(def, tool);
        }
        return Ok(reg);
    };
    let mut reg = ToolRegistry::empty();
    for entry in entries {
        let (name, ov) = match entry {
            BuiltinEntry::Name(n) => (n.as_str(), None),
            BuiltinEntry::Override(o) => (o.name.as_str(), Some(o)),
        };
        let known = default_definition(name).ok_or_else(|| ToolListError::UnknownTool {
            name: name.to_string(),
            known: BUILTIN_NAMES.join(", "),
        })?;
        let (mut def, binding) = if known.for_model.is_some() {
            match image_tools.iter().find(|(d, _)| d.name == name) {
                Some((d, t)) => (d.clone(), ToolBinding::Local(t.clone())),
                None => continue,
            }
        } else {
            let binding = builtin_binding(name)
                .ok_or_else(|| ToolListError::UnavailableTool(name.to_string()))?;
            (known, binding)
        };
        if let Some(o) = ov {
            o.apply(&mut def);
        }
        reg.register_binding(def, binding);
    }
    Ok(reg)
}

/// The one image tool a model gets: `read_image` when `cfg.vision` (the image goes to the model
/// itself), else `describe_image` (asking `cfg.vision_model` on the same endpoint; without one,
/// the tool answers with a failed text saying none is configured). Definitions are the defaults.
pub fn image_tools(cfg: &ModelConfig) -> Vec<(ToolDefinitionConfig, Arc<dyn Tool>)> {
    if cfg.vision {
        return default_definition("read_image")
            .map(|def| (def, Arc::new(read_image::ReadImageTool) as Arc<dyn Tool>))
            .into_iter()
            .collect();
    }
    let client = match (&cfg.vision_model, cfg.is_scripted()) {
        (Some(_), false) => match OpenAiModel::new(cfg.clone()) {
            Ok(model) => Some(Arc::new(model)),
            Err(e) => {
                tracing::warn!("describe_image: no vision client: {e}");
                None
            }
        },
        _ => None,
    };
    default_definition("describe_image")
        .map(|def| {
            (
                def,
                Arc::new(describe_image::DescribeImageTool::new(client)) as Arc<dyn Tool>,
            )
        })
        .into_iter()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::ServiceKind;

    #[test]
    fn unknown_name_is_an_error_naming_it() {
        let err = from_entries(&[BuiltinEntry::Name("reed_file".into())])
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("reed_file"), "{err}");
    }

    #[test]
    fn the_registry_answers_which_service_serves_a_tool() {
        let reg = builtin_registry();
        assert_eq!(
            reg.bound_to(&ServiceKind::Commands),
            [
                "exec_command",
                "input_command",
                "kill_command",
                "list_commands"
            ]
        );
        assert_eq!(
            reg.bound_to(&ServiceKind::Subagents),
            [
                "run_subagent",
                "input_subagent",
                "kill_subagent",
                "list_subagents"
            ]
        );
        assert_eq!(reg.service_of("read_file"), None);
        assert!(reg.uses(&ServiceKind::Commands));
        let files = from_entries(&[BuiltinEntry::Name("read_file".into())])
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(!files.uses(&ServiceKind::Commands));
        assert!(!files.uses(&ServiceKind::Subagents));
    }
}
