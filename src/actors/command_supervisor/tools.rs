//! The command tools (`exec_command`, `input_command`, `kill_command`, `list_commands`): the
//! texts and verdicts of the calls the command supervisor serves (`docs/tools.md`).
//!
//! They build tool output only; processes, buffers and the registry belong to the command
//! actors and their supervisor.

pub mod exec_command;
pub mod input_command;
pub mod kill_command;
pub mod list_commands;
