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

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn yaml(text: &str) -> Result<ModelConfig, serde_yaml::Error> {
        serde_yaml::from_str::<ModelConfig>(text)
    }

    #[test]
    fn yaml_with_passthrough_and_extra() {
        let cfg = yaml(
            "provider: deepseek\nbase_url: https://api.deepseek.com/v1/\nmodel: deepseek-chat\n\
             api_key_env: DEEPSEEK_API_KEY\ncontext_window: 64000\nvision: false\nvision_model: vl\n\
             idle_timeout_ms: 5000\ntemperature: 0.2\nmax_tokens: 4096\nextra:\n  top_k: 20\n",
        )
        .unwrap();
        assert_eq!(cfg.provider, "deepseek");
        assert_eq!(cfg.api_key_env(), "DEEPSEEK_API_KEY");
        assert_eq!(cfg.context_window(), 64000);
        assert_eq!(cfg.idle_timeout_ms(), 5000);
        assert_eq!(cfg.vision_model.as_deref(), Some("vl"));
        assert_eq!(
            Value::Object(cfg.extra.clone()),
            json!({"top_k": 20, "temperature": 0.2, "max_tokens": 4096})
        );
        cfg.validate().unwrap();
        let model = OpenAiModel::new(cfg).unwrap();
        assert_eq!(model.url(), "https://api.deepseek.com/v1/chat/completions");
        let info = model.info();
        assert_eq!(
            (info.provider.as_str(), info.model_id.as_str()),
            ("deepseek", "deepseek-chat")
        );
        assert_eq!(info.context_window, json!(64000));
    }

    #[test]
    fn validation_messages() {
        // In the library's own wording (`cli::error` words the same errors with their flags).
        let check = |cfg: ModelConfig| cfg.validate().err().map(|e| e.to_string());
        let mut cfg = ModelConfig {
            provider: "openai".into(),
            ..ModelConfig::default()
        };
        assert_eq!(
            check(cfg.clone()).as_deref(),
            Some("model provider \"openai\" needs a base_url and a model")
        );
        cfg.base_url = Some("api.openai.com".into());
        cfg.model = Some("gpt".into());
        assert_eq!(
            check(cfg.clone()).as_deref(),
            Some("model.base_url must start with http:// or https:// (got \"api.openai.com\")")
        );
        cfg.base_url = Some("https://api.openai.com/v1".into());
        assert_eq!(check(cfg.clone()), None);
        let mut c = cfg.clone();
        c.api_key_env = Some(String::new());
        assert_eq!(
            check(c).as_deref(),
            Some("model.api_key_env must name an environment variable")
        );
        let mut c = cfg.clone();
        c.idle_timeout_ms = Some(0);
        assert_eq!(
            check(c).as_deref(),
            Some("model.idle_timeout_ms must be at least 1")
        );
        let mut c = cfg.clone();
        c.extra.insert("stream".into(), json!(false));
        assert_eq!(
            check(c).as_deref(),
            Some("model.extra.stream cannot be set: rookery sets it")
        );
        let mut c = cfg.clone();
        c.provider = "Open AI".into();
        assert_eq!(
            check(c).as_deref(),
            Some(
                "invalid model provider \"Open AI\": use \"openai\", \"scripted\" or another lowercase provider name"
            )
        );
        let scripted = ModelConfig {
            provider: "scripted".into(),
            ..ModelConfig::default()
        };
        assert_eq!(check(scripted.clone()), None);
        assert_eq!(
            build_model(&scripted)
                .err()
                .map(|e| e.to_string())
                .as_deref(),
            Some("the scripted model takes its turns from a script file")
        );
        assert!(build_model(&cfg).is_ok());
    }
}
