//! What a session found only on disk reopens with when the server was started without a model:
//! the model, config and launch details its trace recorded in its last `session_meta` (the
//! scripted model's script, or the provider, base URL, model name and key variable name; the
//! config file). The scripted model's position is the library's resume (`trace/resume.rs`).
//!
//! It reads the trace and the recorded files; it never writes a trace nor starts a session.

use std::path::Path;
use std::sync::Arc;

use crate::config::AgentConfig;
use crate::config::ConfigError;
use crate::message::launch::Launch;
use crate::message::{OmniMessage, Payload, SessionMeta};
use crate::model::Model;
use crate::model::build::build_model;
use crate::model::model_config::ModelConfig;
use crate::model::scripted::ScriptedModel;

/// A recorded session's model, config and launch details.
pub struct Recorded {
    /// The model the trace records, built again.
    pub model: Arc<dyn Model>,
    /// The agent config the trace records (or the server's).
    pub config: AgentConfig,
    /// The launch details to record in the reopened session's `session_meta`.
    pub launch: Launch,
}

/// The last root `session_meta` of the trace at `path` (a reopen appends one with the values
/// then in use), if any. Only the lines that name `session_meta` are parsed (from the end), so a
/// long trace costs one read, not one parse per record.
pub fn last_meta(path: &Path) -> Option<SessionMeta> {
    const NEEDLE: &str = "\"session_meta\"";
    let bytes = std::fs::read(path).ok()?;
    let text = String::from_utf8_lossy(&bytes);
    text.rmatch_indices(NEEDLE)
        .map(|(at, _)| {
            let start = text[..at].rfind('\n').map_or(0, |i| i + 1);
            let end = text[at..].find('\n').map_or(text.len(), |i| at + i);
            &text[start..end]
        })
        .filter_map(|line| OmniMessage::from_json(line).ok())
        .filter(|r| !r.has_origin())
        .find_map(|r| match r.payload {
            Payload::SessionMeta(m) => Some(*m),
            _ => None,
        })
}

/// The model and config `meta` records; `Ok(None)` when it records no model to rebuild (a
/// trace written before launch details were recorded, or by the library with its own model).
pub fn recorded(meta: &SessionMeta) -> Result<Option<Recorded>, ConfigError> {
    let launch = &meta.launch;
    let mut config = match &launch.config {
        Some(path) => AgentConfig::from_file(Path::new(path))?,
        None => AgentConfig::default(),
    };
    let model: Arc<dyn Model> = if meta.provider == "scripted" {
        let Some(script) = &launch.script else {
            return Ok(None);
        };
        config.set_model(ModelConfig::scripted())?;
        Arc::new(ScriptedModel::from_file(Path::new(script))?)
    } else if !meta.provider.is_empty() && launch.base_url.is_some() {
        let mut cfg = config.model.clone().unwrap_or_default();
        cfg.provider = meta.provider.clone();
        cfg.base_url = launch.base_url.clone();
        if !meta.model_id.is_empty() {
            cfg.model = Some(meta.model_id.clone());
        }
        if launch.api_key_env.is_some() {
            cfg.api_key_env = launch.api_key_env.clone();
        }
        crate::model::anthropic::apply_defaults(&mut cfg)?;
        cfg.validate()?;
        let model = build_model(&cfg)?;
        config.set_model(cfg)?;
        model
    } else {
        return Ok(None);
    };
    let mut launch = (**launch).clone();
    launch.reopened_with = None;
    Ok(Some(Recorded {
        model,
        config,
        launch,
    }))
}
