//! `rookery config show [session flags]`: the config a `run` or `chat` with the same flags would
//! get, as YAML, each value followed by the layer it came from (default, user, project or
//! `--config` file, env, flag), secrets masked. Exit 0, or 2 when a layer cannot be used (the
//! same error `run` would print).
//!
//! It reads the layers through `config::loader` and adds the flags and the providers' own
//! variables for display; it must not build a model or start a session.

use std::process::ExitCode;

use clap::{Args, Subcommand};
use serde_yaml::{Mapping, Value};

use super::{CliError, SessionArgs};
use crate::config::ConfigError;
use crate::config::layers::{Layer, Merged, get, set};
use crate::config::show;
use crate::model::environment;
use crate::model::model_config::ModelConfig;
use crate::trace::paths;

/// The flags of `rookery config`.
#[derive(Debug, Clone, Args)]
pub struct ConfigArgs {
    /// What to do.
    #[command(subcommand)]
    pub action: ConfigAction,
}

/// The subcommands of `rookery config`.
#[derive(Debug, Clone, Subcommand)]
pub enum ConfigAction {
    /// Print the merged config of a session started with these flags, each value with the
    /// layer it came from (secrets masked).
    Show(ConfigShowArgs),
}

/// The flags of `rookery config show`: those of `run` and `chat`.
#[derive(Debug, Clone, Args)]
pub struct ConfigShowArgs {
    /// The session's flags.
    #[command(flatten)]
    pub session: SessionArgs,
}

/// `rookery config …`.
pub fn config(args: &ConfigArgs) -> Result<ExitCode, CliError> {
    match &args.action {
        ConfigAction::Show(show_args) => {
            outln!("{}", shown(&show_args.session)?);
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// The text `config show` prints.
pub fn shown(args: &SessionArgs) -> Result<String, CliError> {
    let workspace = match &args.workspace {
        Some(w) => w.clone(),
        None => std::env::current_dir()
            .map_err(|e| CliError::startup_io("cannot read the current directory", e))?,
    };
    if !workspace.is_dir() {
        return Err(ConfigError::Workspace(workspace).into());
    }
    let home = paths::rookery_home(args.home.as_deref());
    let loaded = super::run::load_layers(args, &workspace, &home)?;
    let mut merged = Merged::default();
    merged.merge(&show::defaults(), &Layer::Default);
    merged.merge(
        &Value::Mapping(loaded.merged.value.clone()),
        &Layer::Default,
    );
    // The origins of the files and the environment, not "default".
    merged.origins.extend(loaded.merged.origins.clone());
    merged.layers = std::iter::once(Layer::Default)
        .chain(loaded.merged.layers.iter().cloned())
        .collect();
    for (flag, tree) in flag_overlays(args) {
        merged.merge(&tree, &Layer::Flag(flag.to_string()));
    }
    model_environment(&mut merged, args);
    let mut out = format!(
        "# rookery config show: the config of a session in {}\n# layers, lowest first:\n",
        std::path::absolute(&workspace)
            .unwrap_or_else(|_| workspace.clone())
            .display()
    );
    for layer in &merged.layers {
        out.push_str(&format!("#   {layer}\n"));
    }
    out.push_str(&format!(
        "# traces go to {} (--home, else $ROOKERY_HOME, else ~/.rookery)\n",
        home.display()
    ));
    out.push_str(&show::render(&merged));
    Ok(out.trim_end().to_string())
}

/// The flags that set a config key, each as a one-key tree.
fn flag_overlays(args: &SessionArgs) -> Vec<(&'static str, Value)> {
    let m = &args.model;
    let text = |s: &str| Value::String(s.to_string());
    let mut flags: Vec<(&'static str, &[&str], Value)> = Vec::new();
    if m.script.is_some() {
        flags.push(("--script", &["model", "provider"], text("scripted")));
    }
    if let Some(p) = &m.provider {
        flags.push(("--provider", &["model", "provider"], text(p)));
    }
    if let Some(u) = &m.base_url {
        flags.push(("--base-url", &["model", "base_url"], text(u)));
    }
    if let Some(n) = &m.model {
        flags.push(("--model", &["model", "model"], text(n)));
    }
    if let Some(k) = &m.api_key_env {
        flags.push(("--api-key-env", &["model", "api_key_env"], text(k)));
    }
    if let Some(n) = args.max_turns {
        flags.push(("--max-turns", &["max_turns"], Value::Number(n.into())));
    }
    if let Some(p) = args.tools_profile {
        flags.push(("--tools-profile", &["tools", "profile"], text(p.name())));
    }
    if let Some(mode) = args.sandbox.mode {
        flags.push(("--sandbox", &["sandbox", "mode"], serialized(&mode)));
    }
    if let Some(net) = args.sandbox.network {
        flags.push((
            "--sandbox-network",
            &["sandbox", "network"],
            serialized(&net),
        ));
    }
    flags
        .into_iter()
        .map(|(flag, path, value)| {
            let mut tree = Mapping::new();
            set(&mut tree, path, value);
            (flag, Value::Mapping(tree))
        })
        .collect()
}

fn serialized(v: &impl serde::Serialize) -> Value {
    serde_yaml::to_value(v).unwrap_or(Value::Null)
}

/// What the model gets from the providers' variables and defaults, as `run` applies them:
/// `OPENAI_BASE_URL` / `ANTHROPIC_BASE_URL` (below the flags), then the public endpoint and the
/// default key variable of a provider that has them.
fn model_environment(merged: &mut Merged, args: &SessionArgs) {
    let provider = match get(&merged.value, &["model", "provider"]).and_then(Value::as_str) {
        Some(p) => p.to_string(),
        None if args.model.base_url.is_some() => environment::implied_provider().to_string(),
        None => return,
    };
    fn put(merged: &mut Merged, key: &str, value: &str, layer: Layer) {
        let mut tree = Mapping::new();
        set(&mut tree, &["model", key], Value::String(value.to_string()));
        merged.merge(&Value::Mapping(tree), &layer);
    }
    if provider == "scripted" {
        return;
    }
    let base_url = args.model.base_url.is_some();
    if let Some(var) = environment::base_url_variable(&provider)
        && !base_url
        && let Some(url) = environment::process_env(var).filter(|v| !v.trim().is_empty())
    {
        put(merged, "base_url", url.trim(), Layer::Env(var.to_string()));
    }
    let mut cfg = ModelConfig {
        provider,
        ..ModelConfig::default()
    };
    if get(&merged.value, &["model", "base_url"]).is_none() {
        cfg.fill_default_base_url();
        if let Some(url) = cfg.base_url.clone() {
            put(merged, "base_url", &url, Layer::Default);
        }
    }
    if get(&merged.value, &["model", "api_key_env"]).is_none() {
        put(merged, "api_key_env", cfg.api_key_env(), Layer::Default);
    }
    // Drop the layers `put` added: they are in the header already (or are defaults).
    let mut seen = Vec::new();
    merged.layers.retain(|l| {
        let new = !seen.contains(l);
        seen.push(l.clone());
        new
    });
}
