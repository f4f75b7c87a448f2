//! Building the model a config names: the one place that knows every provider's
//! implementation, so `model_config.rs` (the config) and the providers (which read it) do not
//! import each other.

use std::sync::Arc;

use super::Model;
use super::anthropic::{self, AnthropicModel};
use super::error::ModelSetupError;
use super::model_config::ModelConfig;
use super::openai::OpenAiModel;

/// Builds the model of a non-scripted config (the scripted model comes from `--script FILE`).
pub fn build_model(cfg: &ModelConfig) -> Result<Arc<dyn Model>, ModelSetupError> {
    if cfg.is_scripted() {
        return Err(ModelSetupError::ScriptedNeedsScript);
    }
    if cfg.provider == anthropic::PROVIDER {
        return Ok(Arc::new(AnthropicModel::new(cfg.clone())?));
    }
    Ok(Arc::new(OpenAiModel::new(cfg.clone())?))
}
