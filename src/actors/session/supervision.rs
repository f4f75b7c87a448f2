//! What the session actor does when one of its children ends (the command and subagent
//! supervisors, the MCP connections) and how it words a panic of its own handler.
//!
//! A child's end never ends the session: its tools then answer "unavailable". It only forgets
//! the child and logs; it does not touch the running task.

use ractor::SupervisionEvent;

use super::SessionState;

/// A child of the session stopped or failed.
pub(super) fn on_child_event(state: &mut SessionState, event: SupervisionEvent) {
    // The children are the command and subagent supervisors; losing one must not end the
    // session: its tools then answer "unavailable".
    let (cell, err) = match event {
        SupervisionEvent::ActorFailed(cell, err) => (cell, Some(err.to_string())),
        SupervisionEvent::ActorTerminated(cell, ..) => (cell, None),
        _ => return,
    };
    let id = cell.get_id();
    if state
        .commands
        .as_ref()
        .is_some_and(|c| c.actor().get_id() == id)
    {
        state.commands = None;
        state.wants_commands = false;
        if let Some(err) = err {
            tracing::error!(session = %state.id, "command supervisor failed: {err}");
        }
    } else if state.mcp.as_ref().is_some_and(|m| m.owns(id)) {
        if let Some(err) = err {
            tracing::error!(session = %state.id, "an MCP connection failed: {err}");
        }
    } else if state.subagents.as_ref().is_some_and(|s| s.actor_id() == id) {
        state.subagents = None;
        state.wants_subagents = false;
        if let Some(err) = err {
            tracing::error!(session = %state.id, "subagent supervisor failed: {err}");
        }
    }
}

/// The text of a panic payload (as ractor reports a panic in a handler).
pub(super) fn panic_text(payload: Box<dyn std::any::Any + Send>) -> String {
    match payload.downcast::<String>() {
        Ok(s) => *s,
        Err(p) => match p.downcast::<&str>() {
            Ok(s) => s.to_string(),
            Err(_) => "Unknown panic occurred which couldn't be coerced to a string".to_string(),
        },
    }
}
