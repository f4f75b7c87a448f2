//! Hooks in Claude Code's convention: commands configured in the agent config (`hooks:`), a
//! `--hooks FILE` or a `--settings FILE`, run for the tool calls their matcher names (by
//! Rookery's name or Claude Code's: `PreToolUse`, `PostToolUse`, `PermissionRequest`) and for
//! the session's lifecycle (`UserPromptSubmit`, `Stop`, `SubagentStop`, `SessionStart`,
//! `SessionEnd`, `PreCompact`, `Notification`). Hooks from a file see calls in Claude Code's
//! view (`claude_view`), those of the agent config as Rookery names them.
//!
//! This module runs hooks and combines their answers; where they sit in the loop, and what is
//! recorded, is the session's business (`actors::session::gate`). It must not touch the trace.

pub mod claude_view;
pub mod config;
pub mod protocol;
pub(crate) mod runner;

pub use config::{HookCommand, HookConfigError, HookEvent, HookView, HooksConfig};
pub use protocol::{Combined, HookCall, HookContext, Permission, ToolResponse};
pub use runner::HookEnv;

/// Runs the hooks of `event`, an event about no tool call, whose matcher takes `subject` (a
/// `SessionStart` source, a `PreCompact` trigger, a `Notification` type; ignored by the
/// events without a matcher), all in parallel, with `fields` added to their input, and
/// combines their answers. `None` when no hook matches.
pub async fn run_lifecycle(
    config: &HooksConfig,
    event: HookEvent,
    subject: &str,
    ctx: &HookContext,
    env: &HookEnv,
    fields: serde_json::Map<String, serde_json::Value>,
) -> Option<Combined> {
    let hooks = config.matching(event, subject, None);
    if hooks.is_empty() {
        return None;
    }
    let input = serde_json::to_vec(&protocol::event_input(ctx, event, fields)).unwrap_or_default();
    let inputs = vec![input; hooks.len()];
    let runs = runner::run_all(&hooks, &inputs, env).await;
    Some(protocol::combine(event, &runs))
}

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
    let alias = call.claude_code.map(|c| c.name);
    let hooks = config.matching(event, &call.tool_name, alias);
    if hooks.is_empty() {
        return None;
    }
    let bytes = |view| {
        serde_json::to_vec(&protocol::input(ctx, event, call, response, view)).unwrap_or_default()
    };
    let (mut rookery, mut claude) = (None, None);
    let inputs: Vec<Vec<u8>> = hooks
        .iter()
        .map(|h| match h.view {
            HookView::Rookery => rookery.get_or_insert_with(|| bytes(h.view)).clone(),
            HookView::ClaudeCode => claude.get_or_insert_with(|| bytes(h.view)).clone(),
        })
        .collect();
    let runs = runner::run_all(&hooks, &inputs, env).await;
    let mut combined = protocol::combine(event, &runs);
    // An `updatedInput` in Claude Code's shape becomes the tool's own arguments.
    if let (Some(cc), Some(by), Some((_, new))) = (
        &call.claude_code,
        combined.updated_by,
        combined.updated_input.as_mut(),
    ) && hooks
        .get(by)
        .is_some_and(|h| h.view == HookView::ClaudeCode)
    {
        *new = claude_view::updated_input(cc, &protocol::arguments_value(call), new);
    }
    Some(combined)
}
