//! Webhooks of `rookery serve` (`--webhook URL`, `--webhook-allow ORIGIN`, per-session
//! `webhook` in the create request): which events become a delivery (a top-level `task_end`,
//! an approval that starts waiting), the JSON body of each, which URLs receive it, the bounded
//! queue in front of the delivery task and the counters `/metrics` shows.
//!
//! It owns the per-session URLs and the queue, never the sending: `webhook_delivery.rs` signs,
//! posts and retries. Nothing here waits: a session's pump hands an event over with a `try_send`
//! and a full queue drops that new delivery (counted as `dropped`), so a slow or dead receiver
//! never holds a session up.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::StatusCode;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use url::Url;

use super::approver::{ApiApprover, PendingApproval};
use super::error::ApiError;
use super::webhook_delivery::{self, Delivery, WebhookCounters};
use crate::message::{EventPayload, OmniMessage};

/// Deliveries waiting for the delivery task, at most; beyond it a new one is dropped.
pub const QUEUE_CAPACITY: usize = 1024;
/// Sessions with their own webhook URL, at most (a create asking for one more gets 503).
pub const MAX_SESSION_URLS: usize = 65_536;

/// Why the webhook flags cannot be used (the server refuses to start, exit 2).
#[derive(Debug, thiserror::Error)]
pub enum WebhookConfigError {
    /// A URL or origin that does not parse or is not http(s).
    #[error("{flag} {value}: {reason} (expected an http:// or https:// URL)")]
    InvalidUrl {
        /// The flag that gave it.
        flag: &'static str,
        /// What was given.
        value: String,
        /// Why it is refused.
        reason: String,
    },
    /// `--webhook` or `--webhook-allow` without `--webhook-secret-env`.
    #[error("{flag} needs --webhook-secret-env VAR: every delivery is signed")]
    NoSecret {
        /// The flag given without a secret.
        flag: &'static str,
    },
    /// The secret's variable is unset or empty.
    #[error("--webhook-secret-env {var}: the environment variable {var} is not set or empty")]
    EmptySecret {
        /// The variable's name.
        var: String,
    },
    /// A zero timeout.
    #[error("--webhook-timeout-ms must be at least 1")]
    ZeroTimeout,
}

/// What the command line gives the webhooks.
#[derive(Clone)]
pub struct WebhookConfig {
    /// `--webhook URL`: receives the events of every session.
    pub url: Option<Url>,
    /// `--webhook-allow ORIGIN`: origins (`scheme://host:port`) a session's own URL may have.
    pub allow: Vec<String>,
    /// The signing key (the value of `--webhook-secret-env`'s variable).
    pub secret: String,
    /// How long one attempt may take (`--webhook-timeout-ms`).
    pub timeout: Duration,
    /// Attempts after the first failed one (`--webhook-retries`).
    pub retries: u32,
    /// The wait before the first retry, doubled before each next one (`--webhook-backoff-ms`).
    pub backoff: Duration,
}

/// Parses an http(s) URL given with `flag`.
pub fn parse_url(flag: &'static str, value: &str) -> Result<Url, WebhookConfigError> {
    let invalid = |reason: String| WebhookConfigError::InvalidUrl {
        flag,
        value: value.to_string(),
        reason,
    };
    let url = Url::parse(value).map_err(|e| invalid(e.to_string()))?;
    if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
        return Err(invalid("not an http(s) URL with a host".to_string()));
    }
    Ok(url)
}

/// The origin of an http(s) URL, as `scheme://host[:port]` (the default port left out).
pub fn origin_of(url: &Url) -> String {
    url.origin().ascii_serialization()
}

/// The `webhook` of a create or resume request, checked before the session opens: `None`
/// when there is none; 403 `webhook_not_allowed` when the server takes no per-session URL.
pub fn requested(
    webhooks: Option<&Arc<Webhooks>>,
    raw: Option<&str>,
) -> Result<Option<Url>, ApiError> {
    let Some(raw) = raw else { return Ok(None) };
    match webhooks {
        Some(w) => w.check_session_url(raw).map(Some),
        None => Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "webhook_not_allowed",
            "this server takes no per-session webhook (start it with --webhook-secret-env VAR and --webhook-allow ORIGIN)",
        )),
    }
}

/// Sends the events of the session `id` to `url` (from [`requested`]) from now on.
pub fn attach(webhooks: Option<&Arc<Webhooks>>, id: &str, url: Option<Url>) {
    if let (Some(w), Some(url)) = (webhooks, url) {
        w.set_session_url(id, url);
    }
}

/// The webhooks of a server: its URLs, the queue to the delivery task and the counters.
pub struct Webhooks {
    url: Option<Url>,
    allow: Vec<String>,
    secret: String,
    session_urls: Mutex<HashMap<String, Url>>,
    queue: mpsc::Sender<Delivery>,
    counters: Arc<WebhookCounters>,
}

impl Webhooks {
    /// The webhooks of `cfg`, with their delivery task started (it ends with the last sender).
    pub fn start(cfg: WebhookConfig) -> Result<Arc<Self>, reqwest::Error> {
        let (tx, rx) = mpsc::channel(QUEUE_CAPACITY);
        let counters = Arc::new(WebhookCounters::default());
        let sender = webhook_delivery::Sender::new(
            &cfg.secret,
            cfg.timeout,
            cfg.retries,
            cfg.backoff,
            counters.clone(),
        )?;
        tokio::spawn(sender.run(rx));
        crate::redact::redact_in_logs(&cfg.secret);
        Ok(Arc::new(Webhooks {
            url: cfg.url,
            allow: cfg.allow,
            secret: cfg.secret,
            session_urls: Mutex::new(HashMap::new()),
            queue: tx,
            counters,
        }))
    }

    /// The signing key (kept out of sessions' commands and traces like the token).
    pub fn secret(&self) -> &str {
        &self.secret
    }

    /// A session's own webhook URL from a request: 400 `invalid_webhook` when it is no http(s)
    /// URL, 403 `webhook_not_allowed` when its origin is not one of `--webhook-allow`.
    pub fn check_session_url(&self, raw: &str) -> Result<Url, ApiError> {
        let url = parse_url("webhook", raw)
            .map_err(|e| ApiError::bad_request("invalid_webhook", e.to_string()))?;
        let origin = origin_of(&url);
        if !self.allow.contains(&origin) {
            let allowed = if self.allow.is_empty() {
                "none: start the server with --webhook-allow ORIGIN".to_string()
            } else {
                self.allow.join(", ")
            };
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "webhook_not_allowed",
                format!(
                    "webhook origin {origin} is not allowed by this server (allowed: {allowed})"
                ),
            ));
        }
        let full = self
            .session_urls
            .lock()
            .map_or(true, |m| m.len() >= MAX_SESSION_URLS);
        if full {
            return Err(ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "too_many_webhooks",
                format!("the server already holds {MAX_SESSION_URLS} session webhook URLs"),
            ));
        }
        Ok(url)
    }

    /// Sends `session`'s events to `url` too (kept while the server runs, across hibernation
    /// and resume; a later `webhook` for the same session replaces it).
    pub fn set_session_url(&self, session: &str, url: Url) {
        if let Ok(mut map) = self.session_urls.lock()
            && (map.len() < MAX_SESSION_URLS || map.contains_key(session))
        {
            map.insert(session.to_string(), url);
        }
    }

    /// Queues a delivery of `msg` when it is one: a `task_end` of the session itself (not of
    /// a subagent).
    pub fn observe(&self, session: &str, msg: &OmniMessage) {
        if msg.origin.is_some() {
            return;
        }
        if let Some(EventPayload::TaskEnd { status, output, .. }) = msg.as_event() {
            let mut body = json!({
                "type": "task_end",
                "session_id": session,
                "timestamp": msg.timestamp,
                "status": status.as_str(),
            });
            // A structured task's parsed answer, as the event carries it.
            if let (Some(output), Some(fields)) = (output, body.as_object_mut()) {
                fields.insert("output".to_string(), output.clone());
            }
            self.enqueue(session, body);
        }
    }

    /// Queues an `approval_waiting` delivery for every question `approvals` starts waiting on.
    pub fn watch_approvals(self: &Arc<Self>, session: &str, approvals: &ApiApprover) {
        let me = Arc::downgrade(self);
        let session = session.to_string();
        approvals.on_wait(move |p: &PendingApproval| {
            if let Some(me) = me.upgrade() {
                me.enqueue(
                    &session,
                    json!({
                        "type": "approval_waiting",
                        "session_id": session,
                        "timestamp": crate::message::now_timestamp(),
                        "approval_id": p.approval_id,
                        "tool_call_id": p.request.tool_call_id,
                        "name": p.request.name,
                        "arguments": p.request.arguments,
                        "origin": p.request.origin,
                    }),
                );
            }
        });
    }

    /// One delivery of `event` per URL that wants `session`'s events; never waits.
    fn enqueue(&self, session: &str, mut event: Value) {
        let own = self
            .session_urls
            .lock()
            .ok()
            .and_then(|m| m.get(session).cloned());
        for url in self.url.iter().cloned().chain(own) {
            let id = format!("wh-{}", uuid::Uuid::new_v4().simple());
            event["delivery_id"] = Value::String(id.clone());
            let body = event.to_string().into_bytes();
            let kind = event["type"].as_str().unwrap_or_default().to_string();
            match self.queue.try_send(Delivery {
                id,
                url,
                body,
                kind,
            }) {
                Ok(()) => {}
                Err(e) => {
                    self.counters.dropped.fetch_add(1, Ordering::Relaxed);
                    let d = e.into_inner();
                    tracing::warn!(
                        session = %session,
                        delivery = %d.id,
                        "webhook {} to {} dropped: the delivery queue ({QUEUE_CAPACITY}) is full",
                        d.kind,
                        d.url
                    );
                }
            }
        }
    }

    /// The webhook series of `/metrics` (Prometheus text).
    pub fn render(&self) -> String {
        let c = &self.counters;
        let depth = self.queue.max_capacity() - self.queue.capacity();
        format!(
            "# HELP rookery_webhook_deliveries_total Webhook deliveries, by result (failed: every retry failed; dropped: the queue was full).\n\
             # TYPE rookery_webhook_deliveries_total counter\n\
             rookery_webhook_deliveries_total{{result=\"delivered\"}} {}\n\
             rookery_webhook_deliveries_total{{result=\"failed\"}} {}\n\
             rookery_webhook_deliveries_total{{result=\"dropped\"}} {}\n\
             # HELP rookery_webhook_attempts_failed_total Webhook attempts that failed (error, timeout or non-2xx).\n\
             # TYPE rookery_webhook_attempts_failed_total counter\n\
             rookery_webhook_attempts_failed_total {}\n\
             # HELP rookery_webhook_queue_depth Webhook deliveries waiting in the queue.\n\
             # TYPE rookery_webhook_queue_depth gauge\n\
             rookery_webhook_queue_depth {depth}\n",
            c.delivered.load(Ordering::Relaxed),
            c.failed.load(Ordering::Relaxed),
            c.dropped.load(Ordering::Relaxed),
            c.attempts_failed.load(Ordering::Relaxed),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_compare_without_default_ports_or_paths() {
        let u = parse_url("--webhook", "http://127.0.0.1:8080/hooks/a?x=1").unwrap();
        assert_eq!(origin_of(&u), "http://127.0.0.1:8080");
        let u = parse_url("--webhook", "https://Example.COM:443/x").unwrap();
        assert_eq!(origin_of(&u), "https://example.com");
        assert!(parse_url("--webhook", "ftp://example.com/").is_err());
        assert!(parse_url("--webhook", "not a url").is_err());
    }
}
