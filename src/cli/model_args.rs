//! The model flags shared by `run`, `chat` and `serve` (`--script` or `--provider …`) and how
//! they combine with a config's `model:` section into the model the sessions use.
//!
//! Flags win over the config file; `--script` and `--provider` exclude each other.

use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;

use crate::config::AgentConfig;
use crate::error::ConfigError;
use crate::model::Model;
use crate::model::build::build_model;
use crate::model::model_config::ModelConfig;
use crate::model::scripted::ScriptedModel;

#[derive(Debug, Clone, Default, Args)]
pub struct ModelArgs {
    /// A scripted-model JSON file (the built-in model: no network, no key).
    #[arg(long, value_name = "FILE")]
    pub script: Option<PathBuf>,
    /// `anthropic` (Anthropic's Messages API), or an OpenAI-compatible provider (`openai`,
    /// `deepseek`, `vllm`, …).
    #[arg(long, value_name = "NAME")]
    pub provider: Option<String>,
    /// The server's base URL; requests go to `{URL}/chat/completions` (`{URL}/messages` for
    /// anthropic, default `https://api.anthropic.com/v1`).
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// The model name sent to the server.
    #[arg(long, value_name = "NAME")]
    pub model: Option<String>,
    /// The environment variable holding the API key (default OPENAI_API_KEY, ANTHROPIC_API_KEY
    /// for anthropic; unset = no key).
    #[arg(long, value_name = "VAR")]
    pub api_key_env: Option<String>,
}

const NO_MODEL: &str = "no model configured: pass --script FILE to use the built-in scripted model (see README, \"Script format\"), or --provider openai --base-url URL --model NAME for an OpenAI-compatible server, or --provider anthropic --model NAME for Claude";

/// The model of the sessions; also re-assembles `config`'s tools for it (image tools).
pub fn resolve_model(
    args: &ModelArgs,
    config: &mut AgentConfig,
) -> Result<Arc<dyn Model>, ConfigError> {
    if let Some(script) = &args.script {
        if args.provider.is_some() || args.base_url.is_some() || args.model.is_some() {
            return Err(ConfigError::Other(
                "pass either --script or --provider/--base-url/--model, not both".to_string(),
            ));
        }
        config.set_model(ModelConfig::scripted())?;
        return Ok(Arc::new(ScriptedModel::from_file(script)?));
    }
    let mut cfg = config.model.clone().unwrap_or_default();
    if let Some(p) = &args.provider {
        cfg.provider = p.clone();
    }
    if let Some(u) = &args.base_url {
        cfg.base_url = Some(u.clone());
    }
    if let Some(m) = &args.model {
        cfg.model = Some(m.clone());
    }
    if let Some(k) = &args.api_key_env {
        cfg.api_key_env = Some(k.clone());
    }
    if cfg.provider.is_empty() {
        if cfg.base_url.is_some() || cfg.model.is_some() {
            return Err(ConfigError::Other(
                "--base-url and --model need --provider NAME (e.g. --provider openai)".to_string(),
            ));
        }
        return Err(ConfigError::Other(NO_MODEL.to_string()));
    }
    if cfg.is_scripted() {
        return Err(ConfigError::Other(
            "the scripted model takes its turns from --script FILE".to_string(),
        ));
    }
    crate::model::anthropic::apply_defaults(&mut cfg)?;
    cfg.validate()?;
    let model = build_model(&cfg)?;
    config.set_model(cfg)?;
    Ok(model)
}
