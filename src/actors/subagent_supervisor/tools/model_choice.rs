//! The model and agent arguments of `run_subagent` (`provider` + `model_id`, `agent_id`,
//! `thinking_level`) as a [`ChildRequest`], with the reference's error texts.
//!
//! Only argument checking: names are resolved by the supervisor against the config.

use serde_json::{Map, Value};

use crate::actors::subagent_supervisor::{AdmitError, ChildRequest, TOO_MANY};
use crate::tools::args;

/// The levels `thinking_level` takes (sent as `reasoning_effort`).
const LEVELS: [&str; 5] = ["low", "medium", "high", "xhigh", "max"];

/// A bad model argument of `run_subagent` (the text is the tool output).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelArgError {
    /// Only one of `provider` and `model_id`.
    #[error(
        "[run_subagent error: `model_id` and `provider` must be given together (a model reference is the pair), or both omitted to inherit the parent session's model]"
    )]
    HalfPair,
    /// A `thinking_level` that is not one of the levels (the value given, as JSON).
    #[error(
        "[run_subagent error: invalid `thinking_level` {0}; use one of low / medium / high / xhigh / max, or omit it to inherit the parent session's level]"
    )]
    ThinkingLevel(String),
}

/// `run_subagent`'s request, or the error of a bad argument.
pub fn run_subagent_request(args: &Map<String, Value>) -> Result<ChildRequest, ModelArgError> {
    let model_id = args::opt_str(args, "model_id").filter(|s| !s.trim().is_empty());
    let provider = args::opt_str(args, "provider").filter(|s| !s.trim().is_empty());
    let model = match (provider, model_id) {
        (Some(p), Some(m)) => Some(format!("{p}/{m}")),
        (None, None) => None,
        _ => {
            return Err(ModelArgError::HalfPair);
        }
    };
    let reasoning_effort = match args.get("thinking_level") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if LEVELS.contains(&s.as_str()) => Some(s.clone()),
        Some(other) => {
            return Err(ModelArgError::ThinkingLevel(other.to_string()));
        }
    };
    Ok(ChildRequest {
        agent: args::opt_str(args, "agent_id")
            .filter(|s| !s.trim().is_empty())
            .map(str::to_string),
        model,
        reasoning_effort,
        ..ChildRequest::default()
    })
}

/// The text of a refused `run_subagent` spawn.
pub fn run_subagent_refusal(e: &AdmitError) -> String {
    match e {
        AdmitError::Full => TOO_MANY.to_string(),
        AdmitError::Unavailable(detail) => {
            format!("[run_subagent unavailable: no subagent session manager available] ({detail})")
        }
        AdmitError::Spec(crate::actors::subagent_supervisor::SpecError::Catalog(
            crate::config::catalog::CatalogError::UnknownAgent { name, .. },
        )) => format!(
            "[run_subagent error: subagent error: agent \"{name}\" does not exist or is not accessible]"
        ),
        other => format!("[run_subagent error: {other}]"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn req(v: Value) -> Result<ChildRequest, ModelArgError> {
        run_subagent_request(v.as_object().unwrap())
    }

    #[test]
    fn the_pair_goes_together_and_levels_are_checked() {
        let r = req(json!({"provider": "openai", "model_id": "mini", "thinking_level": "high"}))
            .unwrap();
        assert_eq!(r.model.as_deref(), Some("openai/mini"));
        assert_eq!(r.reasoning_effort.as_deref(), Some("high"));
        assert!(
            req(json!({"provider": "openai"}))
                .unwrap_err()
                .to_string()
                .contains("must be given together")
        );
        assert!(
            req(json!({"thinking_level": "huge"}))
                .unwrap_err()
                .to_string()
                .contains("invalid `thinking_level` \"huge\"")
        );
        assert!(
            req(json!({"thinking_level": null}))
                .unwrap()
                .reasoning_effort
                .is_none()
        );
    }
}
