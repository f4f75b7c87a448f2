//! The openvaala profile: OpenVaala's file and command tools (`docs/tools-openvaala.md`) and its
//! collaboration tools (`docs/collaboration.md`). Every tool of the profile is found from here
//! in one step:
//!
//! | tool | definition | code |
//! |---|---|---|
//! | `read_file` | `definitions.rs` | `read_file.rs`, `read_file/` (tested as defined in `read_file_tests.rs`) |
//! | `apply_patch` | `definitions.rs` (penguin's, uncapped) | penguin's: `../penguin/apply_patch.rs` |
//! | `bash`, `read_command_output`, `write_stdin`, `stop_command`, `list_commands` | `definitions.rs` (the shell text argument included) | served by the command supervisor: `src/actors/command_supervisor/openvaala.rs` |
//! | `spawn_agent`, `send_message`, `wait_agent`, `interrupt_agent`, `list_agents`, `read_session_history` | `collab_definitions.rs` | served by the subagent supervisor: `src/actors/subagent_supervisor/collab/` |
//!
//! The profile's tool lists and its assembly are `tools/profile.rs`'s. The shared building
//! blocks its tools use stay in `src/tools/`: they are named once below, so the tools reach them
//! as `super::…`. Nothing here imports `src/actors/`.

mod collab_definitions;
mod definitions;
pub mod read_file;
#[cfg(test)]
mod read_file_tests;

pub use collab_definitions::{WAIT_DEFAULT_S, WAIT_MAX_S, collaboration_definition};
pub use definitions::openvaala_definition;

// The shared building blocks the profile's tools use, named once for them (`super::…`).
use crate::tools::{Tool, ToolContext, ToolResult, args, canonical, resolve_path, session_scope};
