//! The webhook flags of `rookery serve` and their check: a signing secret from the variable
//! `--webhook-secret-env` names (unset or empty refuses the start), http(s) URLs, origins
//! without a path. What the webhooks do is `crate::server::webhooks`.

use std::time::Duration;

use clap::Args;

use super::CliError;
use crate::server::webhooks::{WebhookConfig, WebhookConfigError, origin_of, parse_url};

/// `rookery serve`'s webhook flags.
#[derive(Debug, Clone, Args)]
pub struct WebhookArgs {
    /// POST every session's `task_end` and each approval that starts waiting to URL, signed
    /// (needs --webhook-secret-env).
    #[arg(long, value_name = "URL")]
    pub webhook: Option<String>,
    /// The environment variable holding the webhooks' signing secret.
    #[arg(long, value_name = "VAR")]
    pub webhook_secret_env: Option<String>,
    /// An origin (`scheme://host[:port]`) a session's own `webhook` URL may have (repeatable;
    /// needs --webhook-secret-env).
    #[arg(long, value_name = "ORIGIN")]
    pub webhook_allow: Vec<String>,
    /// How long one delivery attempt may take, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 10_000)]
    pub webhook_timeout_ms: u64,
    /// Retries of a failed delivery (an error, a timeout or a non-2xx answer).
    #[arg(long, value_name = "N", default_value_t = 5)]
    pub webhook_retries: u32,
    /// The wait before the first retry, in milliseconds, doubled before each next one (at most
    /// 5 minutes).
    #[arg(long, value_name = "MS", default_value_t = 1_000)]
    pub webhook_backoff_ms: u64,
}

impl WebhookArgs {
    /// The webhook configuration, `None` without any webhook flag; a bad flag, or a secret
    /// variable unset or empty, is a usage error (exit 2).
    pub fn config(&self) -> Result<Option<WebhookConfig>, CliError> {
        self.checked().map_err(|e| CliError::usage(e.to_string()))
    }

    fn checked(&self) -> Result<Option<WebhookConfig>, WebhookConfigError> {
        let url = self
            .webhook
            .as_deref()
            .map(|u| parse_url("--webhook", u))
            .transpose()?;
        let allow = self
            .webhook_allow
            .iter()
            .map(|o| allowed_origin(o))
            .collect::<Result<Vec<_>, _>>()?;
        let Some(var) = &self.webhook_secret_env else {
            return match (&url, allow.is_empty()) {
                (Some(_), _) => Err(WebhookConfigError::NoSecret { flag: "--webhook" }),
                (None, false) => Err(WebhookConfigError::NoSecret {
                    flag: "--webhook-allow",
                }),
                (None, true) => Ok(None),
            };
        };
        let secret = match std::env::var(var) {
            Ok(v) if !v.is_empty() => v,
            _ => return Err(WebhookConfigError::EmptySecret { var: var.clone() }),
        };
        if self.webhook_timeout_ms == 0 {
            return Err(WebhookConfigError::ZeroTimeout);
        }
        Ok(Some(WebhookConfig {
            url,
            allow,
            secret,
            timeout: Duration::from_millis(self.webhook_timeout_ms),
            retries: self.webhook_retries,
            backoff: Duration::from_millis(self.webhook_backoff_ms),
        }))
    }
}

/// `--webhook-allow ORIGIN`: an http(s) URL with no path, query or fragment, as its origin.
fn allowed_origin(value: &str) -> Result<String, WebhookConfigError> {
    let url = parse_url("--webhook-allow", value)?;
    if url.path() != "/" || url.query().is_some() || url.fragment().is_some() {
        return Err(WebhookConfigError::InvalidUrl {
            flag: "--webhook-allow",
            value: value.to_string(),
            reason: "an origin is scheme://host[:port], with no path".to_string(),
        });
    }
    Ok(origin_of(&url))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_must_have_no_path() {
        assert_eq!(
            allowed_origin("http://127.0.0.1:9000").unwrap(),
            "http://127.0.0.1:9000"
        );
        assert_eq!(
            allowed_origin("https://hooks.example.com/").unwrap(),
            "https://hooks.example.com"
        );
        assert!(allowed_origin("https://hooks.example.com/a").is_err());
    }
}
