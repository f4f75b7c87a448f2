//! Hooks in Claude Code's convention: `PreToolUse` and `PostToolUse` commands configured in the
//! agent config (`hooks:`) or a `--hooks FILE`, run for the tool calls their matcher names.
//!
//! This module runs hooks and combines their answers; where they sit in the loop, and what is
//! recorded, is the session's business (`actors::session::gate`). It must not touch the trace.

pub(crate) mod config;
pub mod protocol;
pub(crate) mod runner;

pub use config::{HookCommand, HookConfigError, HookEvent, HooksConfig};
pub use protocol::{Combined, HookCall, HookContext, Permission, ToolResponse};
pub use runner::HookEnv;

/// Runs the hooks of `event` that match the call (all in parallel) and combines their answers.
/// `None` when no hook matches.
pub async fn run_event(
    config: &HooksConfig,
    event: HookEvent,
    ctx: &HookContext,
    env: &HookEnv,
    call: &HookCall,
    response: Option<&ToolResponse>,
) -> Option<Combined> {
    let hooks = config.matching(event, &call.tool_name);
    if hooks.is_empty() {
        return None;
    }
    let input = protocol::input(ctx, event, call, response);
    let runs = runner::run_all(&hooks, &input, env).await;
    Some(protocol::combine(event, &runs))
}
