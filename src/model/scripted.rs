//! The scripted model (stub, being written).
use std::path::Path;
use crate::error::ConfigError;
use crate::model::{Model, ModelInfo, ModelSession, ModelSessionContext};
pub struct ScriptedModel;
impl ScriptedModel {
    pub fn from_file(_p: &Path) -> Result<Self, ConfigError> { Err(ConfigError::Other("stub".into())) }
}
impl Model for ScriptedModel {
    fn info(&self) -> ModelInfo { ModelInfo { provider: "scripted".into(), model_id: "scripted".into(), context_window: 1.into() } }
    fn open(&self, _c: &ModelSessionContext) -> Box<dyn ModelSession> { unimplemented!() }
}
