//! The model section of the configuration (`model:` in the `--config` YAML, or the `--provider`
//! flags): which provider, endpoint, model and key variable, limits, vision, and extra fields
//! passed through into every request body. [`build_model`](super::build::build_model) turns it into a model.
//!
//! This module parses and validates; it never reads the API key (the provider does, when it is
//! built) and never talks to the network.
//!
//! Extra request fields: the well-known sampling and reasoning parameters
//! ([`PASSTHROUGH_KEYS`], e.g. `temperature: 0.2`, `max_tokens: 4096`) may be written directly
//! under `model:`; anything else goes under an explicit `extra:` map (`extra: {top_k: 20}`).
//! Both end up in [`ModelConfig::extra`]. Any other key under `model:` is an error, so a typo
//! such as `base_ur:` is reported instead of being sent to the provider.

use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};

use super::error::ModelSetupError;
use super::provider_defaults;

/// Body keys Rookery sets itself in an OpenAI-compatible request; `extra` may not override them.
pub const RESERVED_BODY_KEYS: [&str; 5] =
    ["model", "messages", "stream", "stream_options", "tools"];

/// The environment variable the API key is read from when `api_key_env` is not given.
pub const DEFAULT_API_KEY_ENV: &str = "OPENAI_API_KEY";
/// `context_window` when the config names none.
pub const DEFAULT_CONTEXT_WINDOW: u64 = 128_000;
/// `idle_timeout_ms` when the config names none.
pub const DEFAULT_IDLE_TIMEOUT_MS: u64 = 120_000;
/// `max_response_bytes` when the config names none (8 MiB).
pub const DEFAULT_MAX_RESPONSE_BYTES: u64 = 8 * 1024 * 1024;

/// Request-body fields accepted directly under `model:` (everything else goes under `extra:`).
pub const PASSTHROUGH_KEYS: [&str; 32] = [
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "max_tokens",
    "max_completion_tokens",
    "presence_penalty",
    "frequency_penalty",
    "repetition_penalty",
    "seed",
    "stop",
    "n",
    "reasoning_effort",
    "reasoning",
    "thinking",
    "enable_thinking",
    "chat_template_kwargs",
    "response_format",
    "parallel_tool_calls",
    "tool_choice",
    "logit_bias",
    "user",
    "service_tier",
    "verbosity",
    "logprobs",
    "top_logprobs",
    "store",
    "metadata",
    "prompt_cache_key",
    "safety_identifier",
    "include_reasoning",
    "web_search_options",
];

const FIELDS: [&str; 11] = [
    "provider",
    "base_url",
    "model",
    "api_key_env",
    "context_window",
    "vision",
    "vision_model",
    "request_timeout_ms",
    "idle_timeout_ms",
    "max_response_bytes",
    "extra",
];

/// The model configuration. `provider` is `scripted` (the built-in model, from `--script`) or
/// the name of an OpenAI-compatible provider (`openai`, `deepseek`, …: any other name is served
/// by the OpenAI-compatible client and reported as-is in `session_meta`), or `anthropic`
/// (Anthropic's Messages API, see [`super::anthropic`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ModelConfig {
    /// `scripted`, `anthropic`, or the name of an OpenAI-compatible provider.
    pub provider: String,
    /// e.g. `https://api.openai.com/v1`; requests go to `{base_url}/chat/completions`.
    pub base_url: Option<String>,
    /// The provider's model name (required for HTTP providers).
    pub model: Option<String>,
    /// The variable holding the API key (default `OPENAI_API_KEY`). Unset: no `Authorization`.
    pub api_key_env: Option<String>,
    /// Default 128000.
    pub context_window: Option<u64>,
    /// The model accepts images: sessions get `read_image` (else `describe_image`).
    pub vision: bool,
    /// The model `describe_image` asks, on the same endpoint.
    pub vision_model: Option<String>,
    /// A cap on one whole request, stream included (default: none).
    pub request_timeout_ms: Option<u64>,
    /// Longest wait for the next byte, response headers included (default 120000).
    pub idle_timeout_ms: Option<u64>,
    /// Cap on one response's text, thinking and tool arguments together (default 8 MiB); a
    /// response over it fails `malformed`.
    pub max_response_bytes: Option<u64>,
    /// Merged into every request body (`temperature`, `max_tokens`, …).
    pub extra: Map<String, Value>,
}

impl ModelConfig {
    /// An OpenAI-compatible config with the defaults.
    pub fn openai(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        ModelConfig {
            provider: "openai".to_string(),
            base_url: Some(base_url.into()),
            model: Some(model.into()),
            ..ModelConfig::default()
        }
    }

    /// The built-in scripted model.
    pub fn scripted() -> Self {
        ModelConfig {
            provider: "scripted".to_string(),
            ..ModelConfig::default()
        }
    }

    /// True for the built-in scripted model.
    pub fn is_scripted(&self) -> bool {
        self.provider == "scripted"
    }

    /// The name of the variable holding the API key: the configured one, else the provider's
    /// default, else `OPENAI_API_KEY`.
    pub fn api_key_env(&self) -> &str {
        let default = provider_defaults::default_api_key_env(&self.provider);
        self.api_key_env
            .as_deref()
            .unwrap_or(default.unwrap_or(DEFAULT_API_KEY_ENV))
    }

    /// Sets `base_url` to the provider's default endpoint when the config names none and the
    /// provider has one (`openai`, `anthropic`).
    pub fn fill_default_base_url(&mut self) {
        if self.base_url.as_deref().is_none_or(|u| u.trim().is_empty())
            && let Some(url) = provider_defaults::default_base_url(&self.provider)
        {
            self.base_url = Some(url.to_string());
        }
    }

    /// The context window in tokens (default 128000).
    pub fn context_window(&self) -> u64 {
        self.context_window.unwrap_or(DEFAULT_CONTEXT_WINDOW)
    }

    /// The longest wait for the next byte, in milliseconds (default 120000).
    pub fn idle_timeout_ms(&self) -> u64 {
        self.idle_timeout_ms.unwrap_or(DEFAULT_IDLE_TIMEOUT_MS)
    }

    /// The cap on one response, in bytes (default 8 MiB).
    pub fn max_response_bytes(&self) -> usize {
        let max = self
            .max_response_bytes
            .unwrap_or(DEFAULT_MAX_RESPONSE_BYTES);
        usize::try_from(max).unwrap_or(usize::MAX)
    }

    /// Checks what serde cannot; the message names the problem.
    pub fn validate(&self) -> Result<(), ModelSetupError> {
        self.validate_section()?;
        if self.is_scripted() {
            return Ok(());
        }
        let p = &self.provider;
        let base_url = self.base_url.as_deref().filter(|s| !s.trim().is_empty());
        let model = self.model.as_deref().filter(|s| !s.trim().is_empty());
        if base_url.is_none() || model.is_none() {
            return Err(ModelSetupError::MissingEndpoint {
                provider: p.clone(),
            });
        }
        Ok(())
    }

    /// The checks of a config file's `model:` section, which may leave `base_url` and `model`
    /// to the `--base-url` and `--model` flags: everything [`Self::validate`] checks except
    /// that those two are present.
    pub fn validate_section(&self) -> Result<(), ModelSetupError> {
        let p = &self.provider;
        let valid_name = !p.is_empty()
            && p.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"-_.".contains(&b));
        if !valid_name {
            return Err(ModelSetupError::BadProvider(p.clone()));
        }
        if self.is_scripted() {
            return Ok(());
        }
        if let Some(base_url) = self.base_url.as_deref().filter(|s| !s.trim().is_empty())
            && !(base_url.starts_with("http://") || base_url.starts_with("https://"))
        {
            return Err(ModelSetupError::BadBaseUrl(base_url.to_string()));
        }
        if self
            .api_key_env
            .as_deref()
            .is_some_and(|v| v.is_empty() || v.contains('='))
        {
            return Err(ModelSetupError::BadKeyVariable);
        }
        if self.context_window == Some(0) {
            return Err(ModelSetupError::Zero("context_window"));
        }
        if self.idle_timeout_ms == Some(0) {
            return Err(ModelSetupError::Zero("idle_timeout_ms"));
        }
        if self.request_timeout_ms == Some(0) {
            return Err(ModelSetupError::Zero("request_timeout_ms"));
        }
        if self.max_response_bytes == Some(0) {
            return Err(ModelSetupError::Zero("max_response_bytes"));
        }
        if self
            .vision_model
            .as_deref()
            .is_some_and(|m| m.trim().is_empty())
        {
            return Err(ModelSetupError::EmptyVisionModel);
        }
        if let Some(key) = self
            .extra
            .keys()
            .find(|k| RESERVED_BODY_KEYS.contains(&k.as_str()))
        {
            return Err(ModelSetupError::ReservedExtra(key.clone()));
        }
        Ok(())
    }
}

impl<'de> Deserialize<'de> for ModelConfig {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let map = Map::<String, Value>::deserialize(deserializer)?;
        from_map(map).map_err(serde::de::Error::custom)
    }
}

/// Why a `model:` section does not read (the texts users see; serde reports them as its own).
#[derive(Debug, thiserror::Error)]
pub enum ModelSectionError {
    /// A known field with a value of the wrong type or range.
    #[error("model.{key}: {source}")]
    Field {
        /// The field.
        key: String,
        /// Serde's reason.
        #[source]
        source: serde_json::Error,
    },
    /// The section has no `provider`.
    #[error("model.provider is missing")]
    MissingProvider,
    /// A key that is neither a field nor a request field (`known`: the fields, listed).
    #[error(
        "unknown field `{key}` in model (known: {known}, and request fields such as temperature or \
         max_tokens; put other request fields under `extra:`)"
    )]
    UnknownField {
        /// The unknown key.
        key: String,
        /// The known fields, comma-separated.
        known: String,
    },
}

fn from_map(mut map: Map<String, Value>) -> Result<ModelConfig, ModelSectionError> {
    fn take<T: serde::de::DeserializeOwned>(
        map: &mut Map<String, Value>,
        key: &str,
    ) -> Result<Option<T>, ModelSectionError> {
        match map.remove(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => {
                serde_json::from_value(v)
                    .map(Some)
                    .map_err(|source| ModelSectionError::Field {
                        key: key.to_string(),
                        source,
                    })
            }
        }
    }
    let provider: String = take(&mut map, "provider")?.ok_or(ModelSectionError::MissingProvider)?;
    let mut cfg = ModelConfig {
        provider,
        base_url: take(&mut map, "base_url")?,
        model: take(&mut map, "model")?,
        api_key_env: take(&mut map, "api_key_env")?,
        context_window: take(&mut map, "context_window")?,
        vision: take(&mut map, "vision")?.unwrap_or(false),
        vision_model: take(&mut map, "vision_model")?,
        request_timeout_ms: take(&mut map, "request_timeout_ms")?,
        idle_timeout_ms: take(&mut map, "idle_timeout_ms")?,
        max_response_bytes: take(&mut map, "max_response_bytes")?,
        extra: take(&mut map, "extra")?.unwrap_or_default(),
    };
    cfg.fill_default_base_url();
    for (key, value) in map {
        if PASSTHROUGH_KEYS.contains(&key.as_str()) {
            cfg.extra.insert(key, value);
        } else {
            return Err(ModelSectionError::UnknownField {
                key,
                known: FIELDS.join(", "),
            });
        }
    }
    Ok(cfg)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn yaml(text: &str) -> Result<ModelConfig, serde_yaml::Error> {
        serde_yaml::from_str::<ModelConfig>(text)
    }

    #[test]
    fn a_section_may_leave_base_url_and_model_to_the_flags() {
        let cfg =
            yaml("provider: vllm\nmax_response_bytes: 1024\nreasoning_effort: low\n").unwrap();
        assert_eq!(cfg.max_response_bytes(), 1024);
        assert_eq!(cfg.extra.get("reasoning_effort"), Some(&json!("low")));
        cfg.validate_section().unwrap();
        assert_eq!(
            cfg.validate().err().map(|e| e.to_string()).as_deref(),
            Some("model provider \"vllm\" needs a base_url and a model")
        );
        let bad = yaml("provider: vllm\nbase_url: localhost:8000\n").unwrap();
        assert!(bad.validate_section().is_err());
        let zero = yaml("provider: vllm\nmax_response_bytes: 0\n").unwrap();
        assert_eq!(
            zero.validate_section()
                .err()
                .map(|e| e.to_string())
                .as_deref(),
            Some("model.max_response_bytes must be at least 1")
        );
        assert_eq!(
            yaml("provider: openai\n").unwrap().max_response_bytes(),
            8 * 1024 * 1024
        );
    }

    #[test]
    fn defaults() {
        let cfg = yaml("provider: openai\nbase_url: http://localhost:8000/v1\nmodel: m\n").unwrap();
        assert_eq!(cfg.api_key_env(), "OPENAI_API_KEY");
        assert_eq!(cfg.context_window(), 128_000);
        assert_eq!(cfg.idle_timeout_ms(), 120_000);
        assert!(!cfg.vision);
        assert!(cfg.extra.is_empty());
        assert_eq!(cfg, ModelConfig::openai("http://localhost:8000/v1", "m"));
    }

    #[test]
    fn bad_yaml_names_the_field() {
        let e = yaml("provider: openai\nbase_ur: x\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with(
                "unknown field `base_ur` in model (known: provider, base_url, model, api_key_env, context_window, \
                 vision, vision_model, request_timeout_ms, idle_timeout_ms, max_response_bytes, extra, and request fields such as \
                 temperature or max_tokens; put other request fields under `extra:`)"
            ),
            "{e}"
        );
        let e = yaml("base_url: x\n").unwrap_err().to_string();
        assert!(e.starts_with("model.provider is missing"), "{e}");
        let e = yaml("provider: openai\nvision: maybe\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("model.vision: invalid type: string \"maybe\", expected a boolean"),
            "{e}"
        );
        let e = yaml("provider: openai\ncontext_window: -1\n")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("model.context_window: invalid value"), "{e}");
    }
}
