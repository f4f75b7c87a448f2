//! `send_message`'s `model` / `reasoning_effort` for an agent (`docs/collaboration.md#send_message`):
//! the arguments as a [`ModelChoice`], and the check or switch on the agent's session with the
//! texts the parent's model reads.
//!
//! Resolution and the switch itself belong to the agent's session (`session/model_switch.rs`);
//! this only checks arguments and words the outcome.

use serde_json::{Map, Value};

use crate::actors::session_api::{ModelChoice, SessionHandle, SwitchError};

/// A bad `model` or `reasoning_effort` argument (the text is the tool output).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadSwitch {
    /// A `model` that is not a name or `provider/model` (the value given).
    #[error(
        "[send_message error: model must be a name from the config's models: or provider/model (got {0})]"
    )]
    Model(String),
    /// A `reasoning_effort` that is not a word (the value given).
    #[error(
        "[send_message error: reasoning_effort must be a word such as low, medium or high (got {0})]"
    )]
    Effort(String),
}

/// The model switch `args` ask for (`None`: neither `model` nor `reasoning_effort`).
pub fn choice(args: &Map<String, Value>) -> Result<Option<ModelChoice>, BadSwitch> {
    let model = match args.get("model") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.trim().is_empty() => None,
        Some(Value::String(s)) => Some(s.trim().to_string()),
        Some(v) => return Err(BadSwitch::Model(v.to_string())),
    };
    let reasoning_effort = match args.get("reasoning_effort") {
        None | Some(Value::Null) => None,
        Some(Value::String(s))
            if !s.is_empty() && s.len() <= 16 && s.bytes().all(|b| b.is_ascii_lowercase()) =>
        {
            Some(s.clone())
        }
        Some(v) => return Err(BadSwitch::Effort(v.to_string())),
    };
    Ok(
        (model.is_some() || reasoning_effort.is_some()).then_some(ModelChoice {
            model,
            reasoning_effort,
        }),
    )
}

/// Why a switch was refused (the text is the tool output; the agent keeps its model).
#[derive(Debug, thiserror::Error)]
pub enum SwitchRefused {
    /// The name is unknown or its model cannot be built.
    #[error("[send_message error: {source}; {id} keeps its model and the message was not sent]")]
    Spec {
        /// The agent's id.
        id: String,
        /// Why the model cannot be used.
        source: crate::actors::subagent_supervisor::spec::SpecError,
    },
    /// The agent's session is gone.
    #[error("[send_message error: {0}]")]
    Session(crate::error::RookeryError),
}

/// Checks `choice` on the agent's session (`apply`: switches it from its next request on);
/// the line the tool output ends with, or why the switch was refused.
pub async fn switch(
    session: &SessionHandle,
    id: &str,
    choice: ModelChoice,
    apply: bool,
    when: &str,
) -> Result<String, SwitchRefused> {
    let named = choice.model.is_some();
    match session.switch_model(choice, apply).await {
        Ok(s) if s.changed => Ok(format!(
            "model: {}/{} ({when})",
            s.info.provider, s.info.model_id
        )),
        Ok(s) => Ok(format!(
            "model: {}/{} (unchanged: {})",
            s.info.provider,
            s.info.model_id,
            if named {
                "it already runs on this model"
            } else {
                "its model takes no reasoning_effort"
            }
        )),
        Err(SwitchError::Spec(source)) => Err(SwitchRefused::Spec {
            id: id.to_string(),
            source,
        }),
        Err(SwitchError::Session(e)) => Err(SwitchRefused::Session(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn c(v: Value) -> Result<Option<ModelChoice>, BadSwitch> {
        choice(v.as_object().unwrap())
    }

    #[test]
    fn model_and_effort_are_checked() {
        assert_eq!(c(json!({})), Ok(None));
        assert_eq!(
            c(json!({"model": " fast ", "reasoning_effort": "high"})),
            Ok(Some(ModelChoice {
                model: Some("fast".into()),
                reasoning_effort: Some("high".into()),
            }))
        );
        assert_eq!(c(json!({"model": 3})), Err(BadSwitch::Model("3".into())));
        assert!(
            c(json!({"reasoning_effort": "HIGH"}))
                .unwrap_err()
                .to_string()
                .contains("reasoning_effort must be a word")
        );
    }
}
