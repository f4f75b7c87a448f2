//! The model flags shared by `run`, `chat` and `serve` (`--script` or `--provider …`) and how
//! they combine with a config's `model:` section into the model the sessions use.
//!
//! Flags win over the providers' environment (`OPENAI_BASE_URL`, `ANTHROPIC_BASE_URL`), which
//! wins over the config file; `--script` and `--provider` exclude each other.

use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;

use super::CliError;
use crate::config::AgentConfig;
use crate::model::Model;
use crate::model::build::build_model;
use crate::model::environment;
use crate::model::model_config::ModelConfig;
use crate::model::scripted::ScriptedModel;

/// The model flags shared by `run`, `chat` and `serve`.
#[derive(Debug, Clone, Default, Args)]
pub struct ModelArgs {
    /// A scripted-model JSON file (the built-in model: no network, no key).
    #[arg(long, value_name = "FILE")]
    pub script: Option<PathBuf>,
    /// `anthropic` (Anthropic's Messages API), or an OpenAI-compatible provider (`openai`,
    /// `deepseek`, `vllm`, …; `openai` when only --base-url is given).
    #[arg(long, value_name = "NAME")]
    pub provider: Option<String>,
    /// The server's base URL; requests go to `{URL}/chat/completions` (`{URL}/messages` for
    /// anthropic). Default: $OPENAI_BASE_URL / $ANTHROPIC_BASE_URL, else
    /// `https://api.openai.com/v1` for openai, `https://api.anthropic.com/v1` for anthropic.
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

const NO_MODEL: &str = "no model configured: pass --script FILE to use the built-in scripted model (see docs/guide/config.md, \"Script format\"), or --base-url URL --model NAME for an OpenAI-compatible server, or --provider openai --model NAME for OpenAI's API, or --provider anthropic --model NAME for Claude";

/// The model of the sessions; also re-assembles `config`'s tools for it (image tools).
///
/// Precedence: the config's `model:` section, then the providers' environment
/// (`OPENAI_BASE_URL`, `ANTHROPIC_BASE_URL`), then the flags; then the provider's defaults (its
/// public endpoint). `--base-url` without `--provider` means an OpenAI-compatible server.
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
    let env = environment::process_env;
    let mut cfg = config.model.clone().unwrap_or_default();
    if let Some(p) = &args.provider {
        cfg.provider = p.clone();
    }
    if cfg.provider.is_empty() {
        let url_in_env =
            env(environment::OPENAI_BASE_URL_ENV).is_some_and(|v| !v.trim().is_empty());
        if args.base_url.is_some() || (args.model.is_some() && url_in_env) {
            cfg.provider = environment::implied_provider().to_string();
        } else if args.model.is_some() {
            return Err(CliError::usage(
                "--model needs --provider NAME (e.g. --provider openai), or --base-url URL for an OpenAI-compatible server",
            ));
        } else {
            return Err(CliError::usage(NO_MODEL));
        }
    }
    if cfg.is_scripted() {
        return Err(CliError::usage(
            "the scripted model takes its turns from --script FILE",
        ));
    }
    environment::apply_environment(&mut cfg, env);
    if let Some(u) = &args.base_url {
        cfg.base_url = Some(u.clone());
    }
    if let Some(m) = &args.model {
        cfg.model = Some(m.clone());
    }
    if let Some(k) = &args.api_key_env {
        cfg.api_key_env = Some(k.clone());
    }
    environment::apply_defaults(&mut cfg)?;
    cfg.validate()?;
    let model = build_model(&cfg)?;
    // Before the first request: a hosted endpoint without a key can only refuse.
    if let Some(notice) = environment::missing_key_notice(&cfg, env) {
        errln!("rookery: note: {notice}");
    }
    config.set_model(cfg)?;
    Ok(model)
}
