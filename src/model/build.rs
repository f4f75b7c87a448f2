//! Building the model a config names: the one place that knows every provider's
//! implementation, so `model_config.rs` (the config) and the providers (which read it) do not
//! import each other.

use std::sync::Arc;

use super::Model;
use super::anthropic::{self, AnthropicModel};
use super::model_config::ModelConfig;
use super::openai::OpenAiModel;
use crate::error::ConfigError;

/// Builds the model of a non-scripted config (the scripted model comes from `--script FILE`).
pub fn build_model(cfg: &ModelConfig) -> Result<Arc<dyn Model>, ConfigError> {
    if cfg.is_scripted() {
        return Err(ConfigError::Other(
            "--provider scripted takes its turns from --script FILE".to_string(),
        ));
    }
    if cfg.provider == anthropic::PROVIDER {
        return Ok(Arc::new(AnthropicModel::new(cfg.clone())?));
    }
    Ok(Arc::new(OpenAiModel::new(cfg.clone())?))
}
