//! The providers' own environment, as their SDKs read it: `OPENAI_BASE_URL` and
//! `ANTHROPIC_BASE_URL` name the endpoint of `openai` and `anthropic` (the keys,
//! `OPENAI_API_KEY` and `ANTHROPIC_API_KEY`, are the default key variables of
//! [`ModelConfig::api_key_env`]); the defaults a provider with a public endpoint falls back on;
//! and the one-line notice for a public endpoint that would be called without a key.
//!
//! It reads variables through the lookup it is given and changes a [`ModelConfig`]; it never
//! reads a key's value into the config, prints, or talks to the network. The precedence
//! (config file < environment < flags) is the caller's: apply the environment after the file
//! and before the flags.

use url::Url;

use super::error::ModelSetupError;
use super::model_config::ModelConfig;
use super::provider_defaults::{self, ANTHROPIC, OPENAI};

/// The variable naming `openai`'s endpoint (the OpenAI SDK's).
pub const OPENAI_BASE_URL_ENV: &str = "OPENAI_BASE_URL";
/// The variable naming `anthropic`'s endpoint (the Anthropic SDK's).
pub const ANTHROPIC_BASE_URL_ENV: &str = "ANTHROPIC_BASE_URL";

/// The variable that names `provider`'s endpoint, for the providers that have one.
pub fn base_url_variable(provider: &str) -> Option<&'static str> {
    match provider {
        OPENAI => Some(OPENAI_BASE_URL_ENV),
        ANTHROPIC => Some(ANTHROPIC_BASE_URL_ENV),
        _ => None,
    }
}

/// A variable's value when it is set and not blank (trimmed).
fn value(env: &impl Fn(&str) -> Option<String>, name: &str) -> Option<String> {
    env(name)
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

/// The process environment, as [`apply_environment`] and [`missing_key_notice`] take it.
pub fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// Sets `cfg.base_url` from its provider's variable (`OPENAI_BASE_URL` for `openai`,
/// `ANTHROPIC_BASE_URL` for `anthropic`) when that is set and not blank; returns the variable
/// used. Other providers are left alone: an OpenAI-compatible server under another name has
/// its own URL.
pub fn apply_environment(
    cfg: &mut ModelConfig,
    env: impl Fn(&str) -> Option<String>,
) -> Option<&'static str> {
    let var = base_url_variable(&cfg.provider)?;
    let url = value(&env, var)?;
    cfg.base_url = Some(url);
    Some(var)
}

/// The provider `--base-url URL` (or `OPENAI_BASE_URL` with a model) implies when none is
/// named: the OpenAI-compatible client.
pub fn implied_provider() -> &'static str {
    OPENAI
}

/// The defaults of a config about to be validated: the public endpoint of a provider that has
/// one (`openai`, `anthropic`) when it names none, and then the model such a provider needs.
pub fn apply_defaults(cfg: &mut ModelConfig) -> Result<(), ModelSetupError> {
    if provider_defaults::default_base_url(&cfg.provider).is_none() {
        return Ok(());
    }
    cfg.fill_default_base_url();
    if cfg.model.as_deref().is_none_or(|m| m.trim().is_empty()) {
        return Err(ModelSetupError::MissingModel {
            provider: cfg.provider.clone(),
        });
    }
    Ok(())
}

/// Whether `cfg` calls its provider's public endpoint (the host of its default base URL), where
/// a request without a key can only fail.
pub fn is_public_endpoint(cfg: &ModelConfig) -> bool {
    let host = |u: &str| Url::parse(u.trim()).ok()?.host_str().map(str::to_string);
    match (
        provider_defaults::default_base_url(&cfg.provider).and_then(host),
        cfg.base_url.as_deref().and_then(host),
    ) {
        (Some(public), Some(used)) => public == used,
        _ => false,
    }
}

/// The notice to print before the first request when the key variable is unset or blank and
/// that matters: a variable the config named explicitly, or a public endpoint. `None` for a
/// local server given by URL with the default variable unset (it needs no key).
pub fn missing_key_notice(
    cfg: &ModelConfig,
    env: impl Fn(&str) -> Option<String>,
) -> Option<String> {
    let var = cfg.api_key_env();
    if value(&env, var).is_some() {
        return None;
    }
    let url = cfg.base_url.as_deref().unwrap_or_default();
    if is_public_endpoint(cfg) {
        return Some(format!(
            "${var} is not set (or empty): requests to {url} carry no API key and will be refused (set it, or name another variable with --api-key-env)"
        ));
    }
    cfg.api_key_env
        .is_some()
        .then(|| format!("${var} is not set (or empty): requests to the model carry no API key"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        }
    }

    fn cfg(provider: &str, base_url: Option<&str>) -> ModelConfig {
        ModelConfig {
            provider: provider.into(),
            base_url: base_url.map(str::to_string),
            model: Some("m".into()),
            ..ModelConfig::default()
        }
    }

    #[test]
    fn the_base_url_variables_apply_to_their_provider_only() {
        let vars = env(&[
            ("OPENAI_BASE_URL", " http://127.0.0.1:9/v1 "),
            ("ANTHROPIC_BASE_URL", "http://127.0.0.1:8/v1"),
        ]);
        let mut c = cfg("openai", Some("https://api.openai.com/v1"));
        assert_eq!(apply_environment(&mut c, &vars), Some("OPENAI_BASE_URL"));
        assert_eq!(c.base_url.as_deref(), Some("http://127.0.0.1:9/v1"));
        let mut c = cfg("anthropic", None);
        assert_eq!(apply_environment(&mut c, &vars), Some("ANTHROPIC_BASE_URL"));
        assert_eq!(c.base_url.as_deref(), Some("http://127.0.0.1:8/v1"));
        let mut c = cfg("vllm", Some("http://gpu:8000/v1"));
        assert_eq!(apply_environment(&mut c, &vars), None);
        assert_eq!(c.base_url.as_deref(), Some("http://gpu:8000/v1"));
        let mut c = cfg("openai", None);
        assert_eq!(
            apply_environment(&mut c, env(&[("OPENAI_BASE_URL", " ")])),
            None
        );
        assert_eq!(c.base_url, None);
    }

    #[test]
    fn openai_and_anthropic_default_to_their_public_endpoints() {
        let mut c = cfg("openai", None);
        apply_defaults(&mut c).unwrap();
        assert_eq!(c.base_url.as_deref(), Some("https://api.openai.com/v1"));
        assert!(is_public_endpoint(&c));
        let mut c = cfg("anthropic", Some("http://127.0.0.1:1/v1"));
        apply_defaults(&mut c).unwrap();
        assert!(!is_public_endpoint(&c));
        let mut c = cfg("openai", None);
        c.model = None;
        assert_eq!(
            apply_defaults(&mut c).unwrap_err().to_string(),
            "model provider \"openai\" needs a model"
        );
        let mut c = cfg("vllm", None);
        apply_defaults(&mut c).unwrap();
        assert_eq!(c.base_url, None);
    }

    #[test]
    fn a_missing_key_is_noticed_for_public_endpoints_and_named_variables() {
        let public = cfg("openai", Some("https://api.openai.com/v1/"));
        let notice = missing_key_notice(&public, env(&[])).unwrap();
        assert!(notice.starts_with("$OPENAI_API_KEY is not set"), "{notice}");
        assert!(notice.contains("https://api.openai.com/v1/"), "{notice}");
        assert_eq!(
            missing_key_notice(&public, env(&[("OPENAI_API_KEY", "sk-x")])),
            None
        );
        let claude = cfg("anthropic", Some("https://api.anthropic.com/v1"));
        let notice = missing_key_notice(&claude, env(&[])).unwrap();
        assert!(
            notice.starts_with("$ANTHROPIC_API_KEY is not set"),
            "{notice}"
        );
        // A local server given by URL needs no key.
        let local = cfg("openai", Some("http://127.0.0.1:8000/v1"));
        assert_eq!(missing_key_notice(&local, env(&[])), None);
        // A variable named on purpose and unset is still worth a line.
        let mut named = local;
        named.api_key_env = Some("MY_KEY".into());
        assert_eq!(
            missing_key_notice(&named, env(&[])).as_deref(),
            Some("$MY_KEY is not set (or empty): requests to the model carry no API key")
        );
    }
}
