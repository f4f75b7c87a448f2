//! Why a subagent could not be admitted. Each variant's text is the tool output the model sees
//! (`[run_subagent error: …]`); the source error is kept for logs.
//!
//! It owns the error type only; it must not decide admissions.

use crate::error::{ActorError, RookeryError};

/// A refused or failed admission of a child session.
#[derive(Debug, thiserror::Error)]
pub enum SubagentError {
    /// Every one of the 8 places holds a running child.
    #[error(
        "[run_subagent error: too many background subagents; poll or finish existing ones first]"
    )]
    TooMany,
    /// The child session could not be started or subscribed to.
    #[error("[run_subagent error: {0}]")]
    Start(#[source] RookeryError),
    /// The subagent supervisor did not answer.
    #[error("[run_subagent unavailable: no subagent session manager available] ({0})")]
    Unavailable(#[source] ActorError),
}
