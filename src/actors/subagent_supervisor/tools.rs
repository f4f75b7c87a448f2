//! The subagent tools (`run_subagent`, `input_subagent`, `kill_subagent`, `list_subagents`) and
//! their shared collect window: the texts and verdicts of the calls the subagent supervisor
//! serves (`docs/tools.md`).
//!
//! Admission, eviction and the children belong to the supervisor; these only ask it.

pub mod input_subagent;
pub mod kill_subagent;
pub mod model_choice;
pub mod run_subagent;
pub mod subagent_window;
