//! The OpenAI-compatible streaming provider: [`OpenAiModel`] (built from a [`ModelConfig`], shared
//! by the sessions of a host) and its per-session stream of `chat/completions` requests.
//!
//! The request body is `openai/request.rs` (a task's output schema as `response_format`:
//! `openai/response_format.rs`), the SSE framer `openai/sse.rs`, the chunk parser
//! `openai/chunks.rs`, HTTP and failure classification `openai/transport.rs`. This file owns
//! construction (validation, the API key read from its environment variable, the HTTP client)
//! and the [`Model`] impl. It never retries and never lets the key reach a log line, a message
//! or a `Debug` output.

mod body_cache;
mod chunks;
mod drain;
pub(crate) mod first_contact;
pub mod request;
mod response_format;
mod shared_tails;
mod sse;
mod transport;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures::stream::BoxStream;
use reqwest::header::{AUTHORIZATION, HeaderValue};
use serde_json::{Map, Value};

use self::body_cache::BodyCache;
use self::chunks::CallIds;
use self::shared_tails::SharedTails;
// Also the transport other providers stream through (with their own parser and key header).
pub(crate) use self::transport::{Endpoint, Fed, Secret, StreamParser, clip, stream_with};
use super::error::ModelSetupError;
use super::http_client::endpoint_client;
use super::model_config::ModelConfig;
use super::{Model, ModelEvent, ModelInfo, ModelRequest, ModelSession, ModelSessionContext};

/// An OpenAI-compatible chat-completions model.
#[derive(Debug, Clone)]
pub struct OpenAiModel {
    inner: Arc<Inner>,
}

#[derive(Debug, Clone)]
struct Inner {
    endpoint: Arc<Endpoint>,
    provider: String,
    model: String,
    vision: bool,
    vision_model: Option<String>,
    context_window: u64,
    extra: Map<String, Value>,
    /// The bodies' serialized tails (tools included), one per tool list for all sessions.
    tails: Arc<SharedTails>,
    /// Keeps every request body sent (`rookery bench --floor` replays them).
    log: Option<BodyLog>,
}

/// The request bodies a model sent, per session in the order the sessions were opened, each
/// in sending order (kept by reference: no copy of the bytes).
#[derive(Debug, Clone, Default)]
pub struct BodyLog {
    sessions: Arc<Mutex<Vec<SessionLog>>>,
}

type SessionLog = Arc<Mutex<Vec<Bytes>>>;

impl BodyLog {
    fn open(&self) -> SessionLog {
        let log = SessionLog::default();
        match self.sessions.lock() {
            Ok(mut s) => s.push(log.clone()),
            Err(p) => p.into_inner().push(log.clone()),
        }
        log
    }

    /// The bodies of every session opened since the last take, which the log then forgets
    /// (one round of a benchmark each).
    pub fn take_bodies(&self) -> Vec<Vec<Bytes>> {
        let sessions = match self.sessions.lock() {
            Ok(mut s) => std::mem::take(&mut *s),
            Err(p) => std::mem::take(&mut *p.into_inner()),
        };
        sessions
            .iter()
            .map(|s| match s.lock() {
                Ok(b) => b.clone(),
                Err(p) => p.into_inner().clone(),
            })
            .collect()
    }
}

impl OpenAiModel {
    /// Validates the config, reads the API key from its variable (absent or empty: no
    /// `Authorization` header) and builds the HTTP client.
    pub fn new(cfg: ModelConfig) -> Result<Self, ModelSetupError> {
        cfg.validate()?;
        if cfg.is_scripted() {
            return Err(ModelSetupError::ScriptedNotOpenAi);
        }
        let (Some(base_url), Some(model)) = (cfg.base_url.clone(), cfg.model.clone()) else {
            return Err(ModelSetupError::MissingEndpoint {
                provider: cfg.provider,
            });
        };
        let var = cfg.api_key_env().to_string();
        let key = match std::env::var(&var) {
            Ok(raw) if !raw.trim().is_empty() => {
                let raw = raw.trim().to_string();
                let mut header = HeaderValue::from_str(&format!("Bearer {raw}"))
                    .map_err(|_| ModelSetupError::KeyNotHeader { var: var.clone() })?;
                header.set_sensitive(true);
                crate::redact::redact_in_logs(&raw);
                Some(Secret {
                    name: AUTHORIZATION,
                    header,
                    raw,
                })
            }
            _ => {
                tracing::debug!(variable = %var, "openai: no API key in the environment; sending no Authorization header");
                None
            }
        };
        let idle = Duration::from_millis(cfg.idle_timeout_ms());
        let url = format!("{}/chat/completions", base_url.trim().trim_end_matches('/'));
        let http = endpoint_client(
            &url,
            idle.min(Duration::from_secs(30)),
            reqwest::header::HeaderMap::new(),
        )
        .map_err(ModelSetupError::HttpClient)?;
        // Parsed once here, not per request (a URL that does not parse fails each request
        // with the client's own error, as before).
        let parsed = reqwest::Url::parse(&url).ok();
        Ok(OpenAiModel {
            inner: Arc::new(Inner {
                endpoint: Arc::new(Endpoint {
                    http,
                    url,
                    parsed,
                    key,
                    idle,
                    request_timeout: cfg.request_timeout_ms.map(Duration::from_millis),
                    max_response_bytes: cfg.max_response_bytes(),
                }),
                provider: cfg.provider.clone(),
                model,
                vision: cfg.vision,
                vision_model: cfg.vision_model.clone(),
                context_window: cfg.context_window(),
                tails: Arc::new(SharedTails::new(cfg.extra.clone())),
                extra: cfg.extra,
                log: None,
            }),
        })
    }

    /// The same model, keeping every request body it sends in `log`.
    pub fn with_body_log(&self, log: BodyLog) -> Self {
        let mut inner = (*self.inner).clone();
        inner.log = Some(log);
        OpenAiModel {
            inner: Arc::new(inner),
        }
    }

    /// The model requests are sent to.
    pub fn model_id(&self) -> &str {
        &self.inner.model
    }

    /// The model `describe_image` uses, when configured.
    pub fn vision_model(&self) -> Option<&str> {
        self.inner.vision_model.as_deref()
    }

    /// The URL requests are posted to.
    pub fn url(&self) -> &str {
        &self.inner.endpoint.url
    }

    /// One request outside any session (e.g. `describe_image`): `model` replaces the configured
    /// model name, and images are sent when `vision` is true.
    pub fn one_off(
        &self,
        model: &str,
        request: &ModelRequest,
        vision: bool,
    ) -> BoxStream<'static, ModelEvent> {
        let tools = request::tools_json(&request.tools);
        let body = request::encode_body(model, request, vision, &self.inner.extra, &tools);
        transport::stream(
            self.inner.endpoint.clone(),
            Bytes::from(body),
            Arc::new(Mutex::new(CallIds::default())),
            first_contact::FirstContact::default(),
            None,
        )
    }
}

impl Model for OpenAiModel {
    fn info(&self) -> ModelInfo {
        ModelInfo {
            provider: self.inner.provider.clone(),
            model_id: self.inner.model.clone(),
            context_window: Value::from(self.inner.context_window),
        }
    }

    fn open(&self, _ctx: &ModelSessionContext) -> Box<dyn ModelSession> {
        Box::new(OpenAiSession {
            inner: self.inner.clone(),
            ids: Arc::new(Mutex::new(CallIds::default())),
            cache: BodyCache::default(),
            log: self.inner.log.as_ref().map(BodyLog::open),
            contact: first_contact::FirstContact::default(),
            format: response_format::ResponseFormat::default(),
            traceparent: None,
        })
    }
}

/// One session's view: the tool call ids it has seen (repeats are disambiguated per session).
struct OpenAiSession {
    inner: Arc<Inner>,
    ids: Arc<Mutex<CallIds>>,
    /// The serialized pieces of earlier bodies.
    cache: BodyCache,
    log: Option<SessionLog>,
    /// Whether the server has answered this session yet (before: fail fast).
    contact: first_contact::FirstContact,
    /// The task's output schema as `response_format` (`response_format.rs`).
    format: response_format::ResponseFormat,
    /// The next request's `traceparent` header (OpenTelemetry export on).
    traceparent: Option<HeaderValue>,
}

impl ModelSession for OpenAiSession {
    fn stream(&mut self, request: ModelRequest) -> BoxStream<'static, ModelEvent> {
        let inner = &self.inner;
        let body = self
            .cache
            .encode(&inner.model, &request, inner.vision, &inner.tails);
        let body = self.format.apply(body);
        if let Some(log) = &self.log {
            match log.lock() {
                Ok(mut l) => l.push(body.clone()),
                Err(p) => p.into_inner().push(body.clone()),
            }
        }
        transport::stream(
            inner.endpoint.clone(),
            body,
            self.ids.clone(),
            self.contact.clone(),
            self.traceparent.take(),
        )
    }

    fn set_traceparent(&mut self, traceparent: Option<&str>) {
        self.traceparent = traceparent.and_then(|t| HeaderValue::from_str(t).ok());
    }

    fn set_output_schema(&mut self, schema: Option<&Value>) {
        self.format.set(schema, &self.inner.extra);
    }

    fn known_call_ids(&mut self, ids: &[&str]) {
        match self.ids.lock() {
            Ok(mut seen) => seen.seed(ids),
            Err(p) => p.into_inner().seed(ids),
        }
    }
}
