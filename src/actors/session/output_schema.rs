//! How a task gets its output schema: a `StartStructured` request becomes a plain `StartTask`
//! whose schema waits in the session state until the task opens (`turn::start_task` takes it).
//!
//! It only routes the request and holds the schema; the check of the final answer is the
//! machine's (`machine/output_check.rs`), the schema itself `session_api/output_schema.rs`.
//! It must not start, refuse or answer a task itself: the `StartTask` path does.

use super::{SessionMsg, SessionState, prompt_gate};
use crate::actors::session_api::{OutputSchema, SessionRequest};

/// Rewrites `StartStructured` into `StartTask`, keeping its schema for the task it starts. A
/// start without a schema (a plain task or a steer that starts one) clears a leftover. Nothing
/// changes while the start would be refused (a task runs or the trace failed).
pub(super) fn route(state: &mut SessionState, message: SessionMsg) -> SessionMsg {
    let idle = prompt_gate::refusal(state).is_none();
    match message {
        SessionMsg::Request(SessionRequest::StartStructured(text, schema, reply)) => {
            if idle {
                state.next_output_schema = Some(schema);
            }
            SessionMsg::Request(SessionRequest::StartTask(text, None, reply))
        }
        SessionMsg::Request(SessionRequest::StartTask(..) | SessionRequest::Steer(..)) => {
            if idle {
                state.next_output_schema = None;
            }
            message
        }
        other => other,
    }
}

/// The schema of the task that opens now, if its start carried one.
pub(super) fn take(state: &mut SessionState) -> Option<OutputSchema> {
    state.next_output_schema.take()
}
