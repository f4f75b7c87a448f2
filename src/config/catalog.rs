//! The `agents:` and `models:` sections of the agent config: named models (each a `model:`
//! section) and named agents (a system prompt, a tool list, a model name), and the lookups the
//! subagent tools make (`spawn_agent`'s `agent_name` / `model`, `run_subagent`'s
//! `provider` + `model_id`).
//!
//! This module parses, validates and resolves names to configs; it builds no model and starts
//! nothing (the caller builds the model of a resolved config).

use std::collections::BTreeMap;

use serde::Deserialize;

use super::ConfigError;
use crate::model::model_config::ModelConfig;

/// The collaboration tools (their names are known to `agents.*.tools`).
pub const COLLABORATION_TOOLS: [&str; 6] = [
    "spawn_agent",
    "send_message",
    "wait_agent",
    "interrupt_agent",
    "list_agents",
    "read_session_history",
];

/// One entry of `agents:`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentSpec {
    /// Replaces the session's system prompt in the child.
    #[serde(default)]
    pub system_prompt: Option<String>,
    /// The child's tools, chosen from the session's tools (absent: all of them).
    #[serde(default)]
    pub tools: Option<Vec<String>>,
    /// A name from `models:` (absent: the session's model).
    #[serde(default)]
    pub model: Option<String>,
}

/// `agents:` and `models:`, validated against each other.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Catalog {
    /// The named models (`models:`).
    pub models: BTreeMap<String, ModelConfig>,
    /// The named agents (`agents:`).
    pub agents: BTreeMap<String, AgentSpec>,
}

/// A name the model gave that the config does not know (its text is the tool's error).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CatalogError {
    /// The model asked for an agent the config does not have.
    #[error("unknown agent \"{name}\" (configured agents: {known})")]
    UnknownAgent {
        /// The name asked for.
        name: String,
        /// The configured agents, listed.
        known: String,
    },
    /// The model asked for a model the config does not have.
    #[error(
        "unknown model \"{name}\" (configured models: {known}; or give provider/model of one of them)"
    )]
    UnknownModel {
        /// The name asked for.
        name: String,
        /// The configured models, listed.
        known: String,
    },
}

fn known(names: impl Iterator<Item = String>) -> String {
    let list: Vec<String> = names.collect();
    if list.is_empty() {
        "none".to_string()
    } else {
        list.join(", ")
    }
}

impl Catalog {
    /// Checks every model section and every agent's model name and tool names
    /// (`is_tool` says whether a tool name exists).
    pub fn validate(&self, is_tool: impl Fn(&str) -> bool) -> Result<(), ConfigError> {
        for (name, m) in &self.models {
            m.validate_section()
                .map_err(|source| ConfigError::NamedModel {
                    name: name.clone(),
                    source,
                })?;
            if m.is_scripted() {
                return Err(ConfigError::NamedScripted(name.clone()));
            }
        }
        for (name, agent) in &self.agents {
            if let Some(model) = &agent.model
                && !self.models.contains_key(model)
            {
                return Err(ConfigError::AgentModel {
                    agent: name.clone(),
                    model: model.clone(),
                    known: known(self.models.keys().cloned()),
                });
            }
            for tool in agent.tools.iter().flatten() {
                if !is_tool(tool) {
                    return Err(ConfigError::AgentTool {
                        agent: name.clone(),
                        tool: tool.clone(),
                    });
                }
            }
        }
        Ok(())
    }

    /// The agent called `name`.
    pub fn agent(&self, name: &str) -> Result<&AgentSpec, CatalogError> {
        self.agents
            .get(name)
            .ok_or_else(|| CatalogError::UnknownAgent {
                name: name.to_string(),
                known: known(self.agents.keys().cloned()),
            })
    }

    /// A model by its name in `models:`, or by `provider/model` of one of its entries.
    pub fn model(&self, reference: &str) -> Result<&ModelConfig, CatalogError> {
        if let Some(m) = self.models.get(reference) {
            return Ok(m);
        }
        if let Some((provider, model)) = reference.split_once('/')
            && let Some(m) = self.pair(provider, model)
        {
            return Ok(m);
        }
        Err(CatalogError::UnknownModel {
            name: reference.to_string(),
            known: self.model_names(),
        })
    }

    /// The entry of `models:` whose provider and model are these.
    pub fn pair(&self, provider: &str, model_id: &str) -> Option<&ModelConfig> {
        self.models
            .values()
            .find(|m| m.provider == provider && m.model.as_deref() == Some(model_id))
    }

    /// `name (provider/model), …` or `none`.
    pub fn model_names(&self) -> String {
        known(
            self.models.iter().map(|(n, m)| {
                format!("{n} ({}/{})", m.provider, m.model.as_deref().unwrap_or("?"))
            }),
        )
    }
}

/// `cfg` with `reasoning_effort` set as a top-level request field (OpenAI-compatible
/// providers take it; other providers get `cfg` unchanged).
pub fn with_reasoning_effort(mut cfg: ModelConfig, effort: Option<&str>) -> ModelConfig {
    if let Some(e) = effort
        && !cfg.is_scripted()
        && cfg.provider != crate::model::anthropic::PROVIDER
    {
        cfg.extra.insert(
            "reasoning_effort".to_string(),
            serde_json::Value::String(e.to_string()),
        );
    }
    cfg
}

#[cfg(test)]
mod tests {
    use super::*;

    fn catalog() -> Catalog {
        let yaml = "models:\n  fast:\n    provider: openai\n    base_url: http://127.0.0.1:1/v1\n    model: mini\nagents:\n  reviewer:\n    system_prompt: review\n    tools: [read_file]\n    model: fast\n";
        #[derive(Deserialize)]
        struct Doc {
            models: BTreeMap<String, ModelConfig>,
            agents: BTreeMap<String, AgentSpec>,
        }
        let d: Doc = serde_yaml::from_str(yaml).unwrap();
        Catalog {
            models: d.models,
            agents: d.agents,
        }
    }

    #[test]
    fn names_and_pairs_resolve_and_unknown_names_list_the_known_ones() {
        let c = catalog();
        assert!(c.validate(|t| t == "read_file").is_ok());
        assert_eq!(c.model("fast").unwrap().model.as_deref(), Some("mini"));
        assert_eq!(
            c.model("openai/mini").unwrap().model.as_deref(),
            Some("mini")
        );
        assert_eq!(
            c.model("slow").unwrap_err().to_string(),
            "unknown model \"slow\" (configured models: fast (openai/mini); or give provider/model of one of them)"
        );
        assert_eq!(
            c.agent("writer").unwrap_err().to_string(),
            "unknown agent \"writer\" (configured agents: reviewer)"
        );
        let e = c.validate(|_| false).unwrap_err().to_string();
        assert_eq!(e, "agents.reviewer.tools: unknown tool \"read_file\"");
        let mut bad = c;
        bad.agents.get_mut("reviewer").unwrap().model = Some("nope".into());
        let e = bad.validate(|_| true).unwrap_err().to_string();
        assert!(
            e.starts_with("agents.reviewer.model: unknown model \"nope\""),
            "{e}"
        );
    }

    #[test]
    fn reasoning_effort_is_a_top_level_field_for_openai_compatible_models() {
        let c = catalog();
        let m = with_reasoning_effort(c.model("fast").unwrap().clone(), Some("high"));
        assert_eq!(
            m.extra.get("reasoning_effort"),
            Some(&serde_json::json!("high"))
        );
        let s = with_reasoning_effort(ModelConfig::scripted(), Some("high"));
        assert!(s.extra.is_empty());
    }
}
