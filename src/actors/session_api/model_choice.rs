//! A request to switch a session's model (`ModelChoice`), what the session runs on after it
//! (`Switched`) and why a switch was refused (`SwitchError`).
//!
//! Plain data; the session applies a switch (`actors/session/model_switch.rs`), and
//! [`super::spec`] resolves a choice.

use super::spec::SpecError;
use crate::error::RookeryError;
use crate::model::ModelInfo;

/// What a switch asks for: a `models:` name or `provider/model`, and/or a reasoning effort.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModelChoice {
    /// A `models:` name or `provider/model`.
    pub model: Option<String>,
    /// A reasoning effort (`low`, `medium`, `high`, …).
    pub reasoning_effort: Option<String>,
}

/// The session's model after a switch (or after a check of one).
#[derive(Debug, Clone, PartialEq)]
pub struct Switched {
    /// `provider`, `model_id` and context window of the model the choice names (the current
    /// one when nothing changes).
    pub info: ModelInfo,
    /// False when the choice changes nothing (a scripted model takes no effort; the model the
    /// session already runs on without a new effort).
    pub changed: bool,
}

/// Why a switch was not made; the session keeps its model.
#[derive(Debug, thiserror::Error)]
pub enum SwitchError {
    /// The name is unknown or its model cannot be built (the text the model reads).
    #[error(transparent)]
    Spec(#[from] SpecError),
    /// The session is gone.
    #[error(transparent)]
    Session(#[from] RookeryError),
}
