//! What a model config falls back on per provider when it names no value: the default (public)
//! endpoint and the default API-key variable of each provider that has its own.
//!
//! It sits below both the config (`model_config.rs`, which fills the defaults in) and the
//! providers (which re-export their own names), so neither imports the other. It holds names
//! and constants only: no config type, no client, no I/O.

/// The provider name of OpenAI's own API (`openai`), also what `--base-url` alone implies.
pub(crate) const OPENAI: &str = "openai";
/// OpenAI's public `base_url`, when an `openai` config names none.
pub(crate) const OPENAI_BASE_URL: &str = "https://api.openai.com/v1";
/// The provider name of Anthropic's Messages API (`anthropic`).
pub(crate) const ANTHROPIC: &str = "anthropic";
/// Anthropic's `base_url` when the config names none.
pub(crate) const ANTHROPIC_BASE_URL: &str = "https://api.anthropic.com/v1";
/// The variable Anthropic's key is read from when `api_key_env` is not given.
pub(crate) const ANTHROPIC_API_KEY_ENV: &str = "ANTHROPIC_API_KEY";

/// The endpoint a provider uses when the config names none (`None`: the config must name one).
pub(crate) fn default_base_url(provider: &str) -> Option<&'static str> {
    match provider {
        ANTHROPIC => Some(ANTHROPIC_BASE_URL),
        OPENAI => Some(OPENAI_BASE_URL),
        _ => None,
    }
}

/// The key variable of a provider with its own default (`None`: the OpenAI-compatible default).
pub(crate) fn default_api_key_env(provider: &str) -> Option<&'static str> {
    match provider {
        ANTHROPIC => Some(ANTHROPIC_API_KEY_ENV),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openai_and_anthropic_have_their_public_endpoints() {
        assert_eq!(default_base_url("anthropic"), Some(ANTHROPIC_BASE_URL));
        assert_eq!(default_api_key_env("anthropic"), Some("ANTHROPIC_API_KEY"));
        assert_eq!(
            default_base_url("openai"),
            Some("https://api.openai.com/v1")
        );
        assert_eq!(default_base_url("vllm"), None);
        assert_eq!(default_api_key_env("openai"), None);
        assert_eq!(default_api_key_env("deepseek"), None);
    }
}
