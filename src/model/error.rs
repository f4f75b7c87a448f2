//! `ModelSetupError`: why a model cannot be built from its configuration (a `model:` section,
//! a script file, the provider's key or HTTP client).
//!
//! It names what is wrong in the library's terms (`model.base_url`, a path), never a
//! command-line flag (the CLI words the variants it has flags for). It must not wrap the
//! config's error: the config wraps it (`config::ConfigError::Model`).

use std::path::PathBuf;

/// A model set-up error: the CLI prints it on one line and exits 2.
#[derive(Debug, thiserror::Error)]
pub enum ModelSetupError {
    /// A script file that cannot be read.
    #[error("cannot read {path}: {source}")]
    ReadScript {
        /// The script file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A script file that does not parse.
    #[error("invalid script {path}: {source}")]
    InvalidScript {
        /// The script file.
        path: PathBuf,
        /// What does not parse, and where.
        #[source]
        source: Box<super::script_error::ScriptError>,
    },
    /// A model provider that talks HTTP, configured without its endpoint or model name.
    #[error("model provider \"{provider}\" needs a base_url and a model")]
    MissingEndpoint {
        /// The provider named in the config.
        provider: String,
    },
    /// A provider with a default endpoint, configured without a model name.
    #[error("model provider \"{provider}\" needs a model")]
    MissingModel {
        /// The provider named in the config.
        provider: String,
    },
    /// `model.base_url` is not an http(s) URL.
    #[error("model.base_url must start with http:// or https:// (got \"{0}\")")]
    BadBaseUrl(String),
    /// `model.api_key_env` is empty or not a variable name.
    #[error("model.api_key_env must name an environment variable")]
    BadKeyVariable,
    /// The scripted provider asked for as an HTTP model: its turns come from a script file.
    #[error("the scripted model takes its turns from a script file")]
    ScriptedNeedsScript,
    /// The API key's value cannot be sent in an HTTP header.
    #[error("the API key in ${var} contains characters not allowed in an HTTP header")]
    KeyNotHeader {
        /// The name of the key variable (never its value).
        var: String,
    },
    /// The provider's HTTP client could not be built.
    #[error("cannot build the HTTP client: {0}")]
    HttpClient(#[source] reqwest::Error),
    /// `model.provider` is not a lowercase provider name.
    #[error(
        "invalid model provider \"{0}\": use \"openai\", \"scripted\" or another lowercase provider name"
    )]
    BadProvider(String),
    /// A count or limit of the `model:` section set to 0 (`context_window`, a timeout, ...).
    #[error("model.{0} must be at least 1")]
    Zero(&'static str),
    /// `model.vision_model` given but blank.
    #[error("model.vision_model must not be empty")]
    EmptyVisionModel,
    /// A `model.extra` key that rookery writes itself.
    #[error("model.extra.{0} cannot be set: rookery sets it")]
    ReservedExtra(String),
    /// The anthropic model built from another provider's config.
    #[error("provider \"{0}\" is not the anthropic provider")]
    NotAnthropic(String),
    /// `model.vision_model` on the anthropic provider, which reads images itself.
    #[error(
        "model.vision_model is not used by the anthropic provider: Claude models read images themselves; set `vision: true` instead"
    )]
    AnthropicVisionModel,
    /// The OpenAI-compatible model built from the scripted provider's config.
    #[error("the scripted provider is not an OpenAI-compatible endpoint")]
    ScriptedNotOpenAi,
    /// `model.max_tokens` not a positive integer.
    #[error("model.max_tokens must be a positive integer")]
    BadMaxTokens,
    /// `model.thinking.budget_tokens` missing or not an integer.
    #[error("model.thinking.budget_tokens must be an integer (at least 1024)")]
    BadThinkingBudget,
    /// `model.thinking.budget_tokens` below the API's minimum.
    #[error("model.thinking.budget_tokens must be at least 1024")]
    SmallThinkingBudget,
    /// `model.thinking.budget_tokens` not below `max_tokens`.
    #[error("model.thinking.budget_tokens ({budget}) must be less than max_tokens ({max_tokens})")]
    ThinkingOverMaxTokens {
        /// The configured `budget_tokens`.
        budget: u64,
        /// The request's `max_tokens`.
        max_tokens: u64,
    },
    /// `model.thinking` of no known type.
    #[error("model.thinking must be {{type: enabled, budget_tokens: N}} or {{type: disabled}}")]
    BadThinking,
    /// `model.stop` neither a string nor a list.
    #[error("model.stop must be a string or a list of strings")]
    BadStop,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_texts_name_no_flags() {
        for e in [
            ModelSetupError::MissingEndpoint {
                provider: "vllm".into(),
            },
            ModelSetupError::MissingModel {
                provider: "anthropic".into(),
            },
            ModelSetupError::BadBaseUrl("x".into()),
            ModelSetupError::BadKeyVariable,
            ModelSetupError::ScriptedNeedsScript,
        ] {
            assert!(!e.to_string().contains("--"), "{e}");
        }
    }
}
