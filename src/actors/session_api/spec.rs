//! What a spawn asks for beyond its prompt ([`ChildRequest`]: a configured agent, a model, a
//! reasoning effort, forked history) and how it becomes the child's [`SessionOptions`]
//! ([`apply`]), resolved against the parent's config (`agents:` / `models:`); [`resolve_model`] is
//! the same resolution for a running session's model switch (`send_message` with `model`).
//!
//! Pure resolution: it builds the child's model object (no I/O) but starts nothing and never
//! decides admission.

use std::sync::Arc;

use super::SessionOptions;
use crate::config::catalog::{CatalogError, with_reasoning_effort};
use crate::message::ModelPayload;
use crate::model::Model;
use crate::model::build::build_model;
use crate::model::model_config::ModelConfig;

/// How a spawn's child differs from its parent.
#[derive(Debug, Clone, Default)]
pub struct ChildRequest {
    /// A name from `agents:` (its system prompt, tools and model).
    pub agent: Option<String>,
    /// A name from `models:`, or `provider/model` of one of them (or of the parent's model).
    pub model: Option<String>,
    /// `reasoning_effort`, sent to OpenAI-compatible providers as a top-level request field.
    pub reasoning_effort: Option<String>,
    /// History copied into the child before its prompt (`fork_turns`).
    pub history: Vec<ModelPayload>,
    /// Tool names the child must keep even when its agent's `tools:` omits them.
    pub keep_tools: Vec<String>,
    /// Set by `spawn_agent`: the child is an agent (`agent-<8 hex>`, a report per round,
    /// `send_message` and `wait_agent` of its own).
    pub spawn: Option<AgentSpawn>,
    /// The span of the tool call that starts the child: its tasks' spans become its children.
    pub otel_parent: crate::telemetry::OtelSpan,
}

/// What `spawn_agent` adds to a spawn.
#[derive(Debug, Clone, Default)]
pub struct AgentSpawn {
    /// The task name `spawn_agent` gave.
    pub task_name: String,
}

/// Why a spawn's request cannot be met (its text is the tool's error).
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    /// The agent or model name is not in the config.
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    /// The named model cannot be built.
    #[error("cannot build model \"{name}\": {source}")]
    Build {
        /// The model's name.
        name: String,
        /// Why it cannot be built.
        #[source]
        source: crate::model::error::ModelSetupError,
    },
}

/// `provider/model` of the session's model.
pub fn current_pair(options: &SessionOptions) -> String {
    let info = options.model.info();
    format!("{}/{}", info.provider, info.model_id)
}

/// A model a request resolved to: the reference it came from, its config (with the reasoning
/// effort applied) and the model built from it.
#[derive(Clone)]
pub struct ResolvedModel {
    /// The `models:` name or `provider/model` given (or the session's own pair).
    pub name: String,
    /// The resolved model configuration.
    pub config: ModelConfig,
    /// The model built from it.
    pub model: Arc<dyn Model>,
}

impl std::fmt::Debug for ResolvedModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResolvedModel")
            .field("name", &self.name)
            .finish()
    }
}

/// The model `model_ref` / `reasoning_effort` name for a session with `options`, resolved
/// against its `models:` catalog: a name or `provider/model` of an entry; the session's own
/// `provider/model` (or no name) with an effort keeps its model with that effort. `Ok(None)`:
/// nothing to change (no name and no effort, or a scripted model, which takes no effort).
pub fn resolve_model(
    options: &SessionOptions,
    model_ref: Option<&str>,
    reasoning_effort: Option<&str>,
) -> Result<Option<ResolvedModel>, SpecError> {
    let catalog = &options.config.catalog;
    let own = current_pair(options);
    let chosen: Option<(String, ModelConfig)> = match model_ref {
        Some(r) if r == own && !catalog.models.contains_key(r) => options
            .config
            .model
            .clone()
            .filter(|_| reasoning_effort.is_some())
            .map(|m| (r.to_string(), m)),
        Some(r) => Some((r.to_string(), catalog.model(r)?.clone())),
        None => options
            .config
            .model
            .clone()
            .filter(|m| reasoning_effort.is_some() && !m.is_scripted())
            .map(|m| (own, m)),
    };
    let Some((name, cfg)) = chosen.filter(|(_, cfg)| !cfg.is_scripted()) else {
        return Ok(None);
    };
    let config = with_reasoning_effort(cfg, reasoning_effort);
    let model = build_model(&config).map_err(|source| SpecError::Build {
        name: name.clone(),
        source,
    })?;
    Ok(Some(ResolvedModel {
        name,
        config,
        model,
    }))
}

/// Applies `req` to `options` (the parent's, minus the subagent tools).
pub fn apply(options: &mut SessionOptions, req: &ChildRequest) -> Result<(), SpecError> {
    let catalog = options.config.catalog.clone();
    let agent = req.agent.as_deref().map(|a| catalog.agent(a)).transpose()?;
    let model_ref = req
        .model
        .clone()
        .or_else(|| agent.and_then(|a| a.model.clone()));
    if let Some(resolved) = resolve_model(
        options,
        model_ref.as_deref(),
        req.reasoning_effort.as_deref(),
    )? {
        options.model = resolved.model;
        options.config.model = Some(resolved.config);
    }
    if let Some(agent) = agent {
        if let Some(p) = &agent.system_prompt {
            options.config.system_prompt = p.clone();
        }
        if let Some(keep) = &agent.tools {
            for name in options.config.tools.names() {
                if !keep.contains(&name) && !req.keep_tools.contains(&name) {
                    options.config.tools.remove(&name);
                }
            }
        }
    }
    options.forked_history = Arc::new(req.history.clone());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::AgentConfig;
    use crate::model::scripted::ScriptedModel;

    fn options(yaml: &str) -> SessionOptions {
        let model = Arc::new(ScriptedModel::from_json_str("{\"turns\":[]}").unwrap());
        let mut o = SessionOptions::new("/", model);
        o.config = AgentConfig::from_yaml(yaml).unwrap();
        o
    }

    const YAML: &str = "models:\n  fast:\n    provider: openai\n    base_url: http://127.0.0.1:9/v1\n    model: mini\nagents:\n  reader:\n    system_prompt: only read\n    tools: [read_file]\n    model: fast\n";

    #[test]
    fn an_agent_brings_its_prompt_tools_and_model() {
        let mut o = options(YAML);
        let req = ChildRequest {
            agent: Some("reader".into()),
            reasoning_effort: Some("low".into()),
            keep_tools: vec!["write_file".into()],
            ..ChildRequest::default()
        };
        apply(&mut o, &req).unwrap();
        assert_eq!(o.config.system_prompt, "only read");
        assert_eq!(o.config.tools.names(), vec!["read_file", "write_file"]);
        assert_eq!(o.model.info().model_id, "mini");
        let m = o.config.model.unwrap();
        assert_eq!(
            m.extra.get("reasoning_effort"),
            Some(&serde_json::json!("low"))
        );
    }

    #[test]
    fn unknown_names_are_errors_and_no_request_keeps_the_parent() {
        let mut o = options(YAML);
        let e = apply(
            &mut o,
            &ChildRequest {
                model: Some("huge".into()),
                ..ChildRequest::default()
            },
        )
        .unwrap_err();
        assert!(e.to_string().starts_with("unknown model \"huge\""), "{e}");
        let e = apply(
            &mut o,
            &ChildRequest {
                agent: Some("writer".into()),
                ..ChildRequest::default()
            },
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "unknown agent \"writer\" (configured agents: reader)"
        );
        apply(&mut o, &ChildRequest::default()).unwrap();
        assert_eq!(o.model.info().provider, "scripted");
    }
}
