//! The native Anthropic provider: [`AnthropicModel`] (built from a [`ModelConfig`] whose provider
//! is `anthropic`, shared by the sessions of a host) and its per-session stream of streamed
//! `POST {base_url}/messages` requests.
//!
//! The request body is `anthropic/request.rs`, the event parser `anthropic/stream.rs`. HTTP,
//! SSE framing, timeouts, key scrubbing and HTTP status classification are the OpenAI-compatible
//! provider's transport, called with this provider's parser and headers. This file owns
//! construction (validation, the `x-api-key` read from its variable, `anthropic-version`) and the
//! [`Model`] impl. It never retries and never lets the key reach a log line, message or `Debug`.

pub mod request;
mod stream;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::stream::BoxStream;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{Map, Value};

use super::error::ModelSetupError;
use super::http_client::endpoint_client;
use super::model_config::ModelConfig;
use super::openai::first_contact::FirstContact;
use super::openai::{Endpoint, Secret, stream_with};
use super::provider_defaults;
use super::{Model, ModelEvent, ModelInfo, ModelRequest, ModelSession, ModelSessionContext};

/// The provider name selecting this client (`--provider anthropic`).
pub const PROVIDER: &str = provider_defaults::ANTHROPIC;
/// `base_url` when the config names none.
pub const DEFAULT_BASE_URL: &str = provider_defaults::ANTHROPIC_BASE_URL;
/// The variable the key is read from when `api_key_env` is not given.
pub const DEFAULT_API_KEY_ENV: &str = provider_defaults::ANTHROPIC_API_KEY_ENV;
/// The `anthropic-version` header sent with every request.
pub const API_VERSION: &str = "2023-06-01";
/// `max_tokens` when the config names none.
pub const DEFAULT_MAX_TOKENS: u64 = 8192;
/// `context_window` reported when the config names none (every current Claude model).
pub const DEFAULT_CONTEXT_WINDOW: u64 = 200_000;
/// Cap on one response's text, thinking and tool input together (over it: `malformed`).
pub const MAX_RESPONSE_BYTES: usize = 8 * 1024 * 1024;

/// A model served by Anthropic's Messages API (or a server speaking it).
#[derive(Debug, Clone)]
pub struct AnthropicModel {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    endpoint: Arc<Endpoint>,
    model: String,
    vision: bool,
    context_window: u64,
    /// `max_tokens`, `thinking`, sampling fields: merged into every body.
    extra: Map<String, Value>,
}

/// Sets `base_url` to [`DEFAULT_BASE_URL`] when an anthropic config has none.
pub fn fill_base_url(cfg: &mut ModelConfig) {
    if cfg.provider == PROVIDER {
        cfg.fill_default_base_url();
    }
}

/// The anthropic defaults of a config about to be validated (`base_url`), and its one required
/// field (`model`); other providers' configs are left alone.
pub fn apply_defaults(cfg: &mut ModelConfig) -> Result<(), ModelSetupError> {
    if cfg.provider != PROVIDER {
        return Ok(());
    }
    fill_base_url(cfg);
    if cfg.model.as_deref().is_none_or(|m| m.trim().is_empty()) {
        return Err(ModelSetupError::MissingModel {
            provider: PROVIDER.to_string(),
        });
    }
    Ok(())
}

impl AnthropicModel {
    /// Validates the config, reads the key from its variable (absent or empty: no `x-api-key`,
    /// for proxies that add it) and builds the HTTP client.
    pub fn new(mut cfg: ModelConfig) -> Result<Self, ModelSetupError> {
        if cfg.provider != PROVIDER {
            return Err(ModelSetupError::NotAnthropic(cfg.provider));
        }
        apply_defaults(&mut cfg)?;
        cfg.validate()?;
        let Some(model) = cfg.model.clone() else {
            return Err(ModelSetupError::MissingModel {
                provider: PROVIDER.to_string(),
            });
        };
        if cfg.vision_model.is_some() {
            return Err(ModelSetupError::AnthropicVisionModel);
        }
        let extra = request::checked_extra(&cfg.extra)?;
        let base_url = cfg
            .base_url
            .as_deref()
            .filter(|u| !u.trim().is_empty())
            .unwrap_or(DEFAULT_BASE_URL);
        let var = cfg.api_key_env().to_string();
        let key = match std::env::var(&var) {
            Ok(raw) if !raw.trim().is_empty() => {
                let raw = raw.trim().to_string();
                let mut header = HeaderValue::from_str(&raw)
                    .map_err(|_| ModelSetupError::KeyNotHeader { var: var.clone() })?;
                header.set_sensitive(true);
                crate::redact::redact_in_logs(&raw);
                Some(Secret {
                    name: HeaderName::from_static("x-api-key"),
                    header,
                    raw,
                })
            }
            _ => {
                tracing::debug!(variable = %var, "anthropic: no API key in the environment; sending no x-api-key header");
                None
            }
        };
        let mut headers = HeaderMap::new();
        headers.insert(
            HeaderName::from_static("anthropic-version"),
            HeaderValue::from_static(API_VERSION),
        );
        let idle = Duration::from_millis(cfg.idle_timeout_ms());
        let url = format!("{}/messages", base_url.trim().trim_end_matches('/'));
        let http = endpoint_client(&url, idle.min(Duration::from_secs(30)), headers)
            .map_err(ModelSetupError::HttpClient)?;
        Ok(AnthropicModel {
            inner: Arc::new(Inner {
                endpoint: Arc::new(Endpoint {
                    http,
                    parsed: reqwest::Url::parse(&url).ok(),
                    url,
                    key,
                    idle,
                    request_timeout: cfg.request_timeout_ms.map(Duration::from_millis),
                    max_response_bytes: cfg.max_response_bytes(),
                }),
                model,
                vision: cfg.vision,
                context_window: cfg.context_window.unwrap_or(DEFAULT_CONTEXT_WINDOW),
                extra,
            }),
        })
    }

    /// The URL requests are posted to.
    pub fn url(&self) -> &str {
        &self.inner.endpoint.url
    }

    /// The JSON body the next request of `request` would carry.
    pub fn body(&self, request: &ModelRequest) -> Value {
        let inner = &self.inner;
        request::build_body(&inner.model, request, inner.vision, &inner.extra)
    }
}

impl Model for AnthropicModel {
    fn info(&self) -> ModelInfo {
        ModelInfo {
            provider: PROVIDER.to_string(),
            model_id: self.inner.model.clone(),
            context_window: Value::from(self.inner.context_window),
        }
    }

    fn open(&self, _ctx: &ModelSessionContext) -> Box<dyn ModelSession> {
        Box::new(AnthropicSession {
            inner: self.inner.clone(),
            ids: Arc::default(),
            contact: FirstContact::default(),
            traceparent: None,
        })
    }
}

/// One session's view: the tool call ids it has seen (repeats get a `_<n>` suffix).
struct AnthropicSession {
    inner: Arc<Inner>,
    ids: Arc<Mutex<HashSet<String>>>,
    /// Whether the server has answered this session yet (before: fail fast).
    contact: FirstContact,
    /// The next request's `traceparent` header (OpenTelemetry export on).
    traceparent: Option<HeaderValue>,
}

impl ModelSession for AnthropicSession {
    fn stream(&mut self, request: ModelRequest) -> BoxStream<'static, ModelEvent> {
        let inner = &self.inner;
        let body = request::build_body(&inner.model, &request, inner.vision, &inner.extra);
        let bytes = serde_json::to_vec(&body).unwrap_or_else(|_| b"{}".to_vec());
        stream_with(
            inner.endpoint.clone(),
            bytes,
            Box::new(stream::EventParser::new(
                self.ids.clone(),
                inner.endpoint.max_response_bytes,
            )),
            self.contact.clone(),
            self.traceparent.take(),
        )
    }

    fn set_traceparent(&mut self, traceparent: Option<&str>) {
        self.traceparent = traceparent.and_then(|t| HeaderValue::from_str(t).ok());
    }

    fn known_call_ids(&mut self, ids: &[&str]) {
        let mut seen = self.ids.lock().unwrap_or_else(|p| p.into_inner());
        seen.extend(ids.iter().map(|id| id.to_string()));
    }
}
