//! The model flags shared by `run`, `chat` and `serve` (`--script` or `--provider …`) and how
//! they combine with a config's `model:` section into the model the sessions use.
//!
//! Flags win over the config file; `--script` and `--provider` exclude each other.

use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;

use super::CliError;
use crate::config::AgentConfig;
use crate::model::Model;
use crate::model::build::build_model;
use crate::model::model_config::ModelConfig;
use crate::model::scripted::ScriptedModel;

/// The model flags shared by `run`, `chat` and `serve`.
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

const NO_MODEL: &str = "no model configured: pass --script FILE to use the built-in scripted model (see docs/guide/config.md, \"Script format\"), or --provider openai --base-url URL --model NAME for an OpenAI-compatible server, or --provider anthropic --model NAME for Claude";

/// The model of the sessions; also re-assembles `config`'s tools for it (image tools).
pub fn resolve_model(
    args: &ModelArgs,
    config: &mut AgentConfig,
) -> Result<Arc<dyn Model>, CliError> {
    if let Some(script) = &args.script {
        if args.provider.is_some() || args.base_url.is_some() || args.model.is_some() {
            return Err(CliError::usage(
                "pass either --script or --provider/--base-url/--model, not both",
            ));
        }
        // The config's `model.context_window` stays: compaction reads it.
        let mut scripted = ModelConfig::scripted();
        scripted.context_window = config.model.as_ref().and_then(|m| m.context_window);
        config.set_model(scripted)?;
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
            return Err(CliError::usage(
                "--base-url and --model need --provider NAME (e.g. --provider openai)",
            ));
        }
        return Err(CliError::usage(NO_MODEL));
    }
    if cfg.is_scripted() {
        return Err(CliError::usage(
            "the scripted model takes its turns from --script FILE",
        ));
    }
    crate::model::anthropic::apply_defaults(&mut cfg)?;
    cfg.validate()?;
    let model = build_model(&cfg)?;
    warn_unset_key(&cfg);
    config.set_model(cfg)?;
    Ok(model)
}

/// One notice on stderr when the key variable named by `--api-key-env` (or the config) is
/// unset or empty: the requests then carry no key, which is right for a local server and a
/// surprise for a hosted one.
fn warn_unset_key(cfg: &ModelConfig) {
    let Some(var) = cfg.api_key_env.as_deref() else {
        return;
    };
    if std::env::var(var).is_ok_and(|v| !v.trim().is_empty()) {
        return;
    }
    errln!("rookery: note: ${var} is not set (or empty): requests to the model carry no API key");
}
