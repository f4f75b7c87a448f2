//! The HTTP side of the OpenAI-compatible provider: one streamed `POST {base_url}/chat/completions`
//! per request, SSE framing (`openai/sse.rs`), the idle timer (reset by every byte, comment lines
//! included) and the request timeout, ending a finished answer that the server keeps open, and
//! the classification of every failure into a [`ModelOutcome`] (auth, permanent or retryable
//! failed, timeout, malformed). A body whose answer ended goes to `openai/drain.rs`, which hands
//! its connection back to the pool.
//!
//! It does not retry (the turn loop does) and never puts the API key into a message: error texts
//! from the server are scrubbed of it.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures::stream::{self, BoxStream, Stream, StreamExt};
use reqwest::StatusCode;
use reqwest::header::{CONTENT_TYPE, HeaderName, HeaderValue, RETRY_AFTER};
use serde_json::Value;
use tokio::time::Instant;

use super::chunks::{CallIds, ChunkParser};
pub(crate) use super::chunks::{Fed, clip};
use super::drain::drain;
use super::first_contact::{self, FirstContact};
use super::sse::SseFramer;
use crate::message::StopReason;
use crate::model::{ModelEvent, ModelOutcome};

/// Longest server error text kept in an outcome.
const ERROR_TEXT_MAX: usize = 500;
/// Most bytes of an error body read.
const ERROR_BODY_MAX: usize = 64 * 1024;
/// Longest `Retry-After` honoured.
const RETRY_AFTER_MAX_S: u64 = 600;
/// How long a finished answer waits for its usage chunk (the request asks for one) before it
/// completes without it, counted from the last event.
const USAGE_GRACE: Duration = Duration::from_secs(2);
/// Bytes of a body kept for the error message when it is not an event stream.
const HEAD_MAX: usize = 300;

/// The API key as the value of header `name` (`Authorization`, `x-api-key`); never printed.
#[derive(Clone)]
pub(crate) struct Secret {
    pub(crate) name: HeaderName,
    pub(crate) header: HeaderValue,
    pub(crate) raw: String,
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// Everything needed to send requests to one endpoint.
#[derive(Debug)]
pub(crate) struct Endpoint {
    pub(crate) http: reqwest::Client,
    pub(crate) url: String,
    /// `url`, parsed once (`None`: it does not parse; each request then reports why).
    pub(crate) parsed: Option<reqwest::Url>,
    pub(crate) key: Option<Secret>,
    pub(crate) idle: Duration,
    pub(crate) request_timeout: Option<Duration>,
    /// Cap on one response's text, thinking and tool arguments.
    pub(crate) max_response_bytes: usize,
}

impl Endpoint {
    /// Replaces the key wherever a server echoed it, in any case (`bearer sk-…` lowercased).
    fn scrub(&self, text: &str) -> String {
        match self
            .key
            .as_ref()
            .and_then(|k| crate::redact::Redactor::new([&k.raw]))
        {
            Some(r) => r.redact(text).into_owned(),
            None => text.to_string(),
        }
    }
}

pub(super) type ByteStream = Pin<Box<dyn Stream<Item = reqwest::Result<Bytes>> + Send>>;

/// A 200 response being read.
struct Body {
    bytes: ByteStream,
    framer: SseFramer,
    /// `Content-Type` of the response, when it is not an event stream.
    not_sse: Option<String>,
    /// The first bytes of the body (for the error message when it is not an event stream).
    head: Vec<u8>,
    /// When a finished answer stops waiting for its usage chunk.
    grace_until: Option<Instant>,
}

enum Phase {
    Send(Bytes),
    Body(Box<Body>),
    Done,
}

/// Turns the `data:` payloads of one response into model events (one impl per wire format).
pub(crate) trait StreamParser: Send {
    /// Feeds the data of one SSE event; events to emit are pushed onto `out`.
    fn feed(&mut self, data: &str, out: &mut Vec<ModelEvent>) -> Fed;
    /// The body ended: how the request ended.
    fn eof(&mut self, out: &mut Vec<ModelEvent>) -> ModelOutcome;
    /// The answer's stop reason arrived (only usage or the end marker may follow).
    fn finished(&self) -> bool {
        false
    }
    /// Nothing more is expected: the request may end without waiting for the body's end.
    fn settled(&self) -> bool {
        false
    }
    /// Ends a finished answer whose server keeps the connection open: completed.
    fn complete(&mut self, out: &mut Vec<ModelEvent>) -> ModelOutcome {
        self.eof(out)
    }
}

impl StreamParser for ChunkParser {
    fn feed(&mut self, data: &str, out: &mut Vec<ModelEvent>) -> Fed {
        ChunkParser::feed(self, data, out)
    }
    fn eof(&mut self, out: &mut Vec<ModelEvent>) -> ModelOutcome {
        ChunkParser::eof(self, out)
    }
    fn finished(&self) -> bool {
        ChunkParser::finished(self)
    }
    fn settled(&self) -> bool {
        ChunkParser::settled(self)
    }
    fn complete(&mut self, out: &mut Vec<ModelEvent>) -> ModelOutcome {
        ChunkParser::complete(self, out)
    }
}

struct Driver {
    endpoint: Arc<Endpoint>,
    phase: Phase,
    parser: Box<dyn StreamParser>,
    queue: VecDeque<ModelEvent>,
    deadline: Option<Instant>,
    /// Whether the session's server has answered yet (before: fail fast, `first_contact.rs`).
    contact: FirstContact,
    /// The W3C `traceparent` header of the request (OpenTelemetry export on).
    traceparent: Option<HeaderValue>,
}

/// Streams one request; the stream always ends with exactly one `End`.
pub(super) fn stream(
    endpoint: Arc<Endpoint>,
    body: Bytes,
    ids: Arc<Mutex<CallIds>>,
    contact: FirstContact,
    traceparent: Option<HeaderValue>,
) -> BoxStream<'static, ModelEvent> {
    let parser = ChunkParser::new(ids).with_limit(endpoint.max_response_bytes);
    stream_with(endpoint, body, Box::new(parser), contact, traceparent)
}

/// Streams one request whose events `parser` reads; always ends with exactly one `End`.
/// `contact` is the session's: until its server has answered once, failures that no retry
/// mends are final. `traceparent` goes out as that header.
pub(crate) fn stream_with(
    endpoint: Arc<Endpoint>,
    body: impl Into<Bytes>,
    parser: Box<dyn StreamParser>,
    contact: FirstContact,
    traceparent: Option<HeaderValue>,
) -> BoxStream<'static, ModelEvent> {
    let body = body.into();
    let deadline = endpoint.request_timeout.map(|t| Instant::now() + t);
    let driver = Driver {
        endpoint,
        phase: Phase::Send(body),
        parser,
        queue: VecDeque::new(),
        deadline,
        contact,
        traceparent,
    };
    stream::unfold(Some(driver), |driver| async move {
        let mut driver = driver?;
        loop {
            if let Some(event) = driver.queue.pop_front() {
                let more = !matches!(event, ModelEvent::End(_));
                return Some((event, more.then_some(driver)));
            }
            driver.step().await;
        }
    })
    .boxed()
}

impl Driver {
    fn end(&mut self, outcome: ModelOutcome) {
        if outcome.status != StopReason::Completed {
            tracing::debug!(status = %outcome.status, error = ?outcome.error_message, "openai: request ended");
        }
        self.phase = Phase::Done;
        self.queue.push_back(ModelEvent::End(outcome));
    }

    /// How long the next wait may take, and whether the request deadline is what limits it.
    fn budget(&self) -> (Duration, bool) {
        let idle = self.endpoint.idle;
        match self.deadline {
            Some(d) => {
                let left = d.saturating_duration_since(Instant::now());
                if left < idle {
                    (left, true)
                } else {
                    (idle, false)
                }
            }
            None => (idle, false),
        }
    }

    fn timed_out(&mut self, by_deadline: bool) {
        let message = match (by_deadline, self.endpoint.request_timeout) {
            (true, Some(t)) => format!("request took longer than {} ms", t.as_millis()),
            _ => format!(
                "no data from the model for {} ms",
                self.endpoint.idle.as_millis()
            ),
        };
        self.end(ModelOutcome::error(StopReason::Timeout, message));
    }

    async fn step(&mut self) {
        match std::mem::replace(&mut self.phase, Phase::Done) {
            Phase::Done => self.end(ModelOutcome::error(
                StopReason::Failed,
                "stream already ended",
            )),
            Phase::Send(body) => self.send(body).await,
            Phase::Body(body) => self.read(body).await,
        }
    }

    /// Waits for the next bytes of the body and feeds them through the framer and the parser.
    async fn read(&mut self, mut body: Box<Body>) {
        let (mut wait, mut by_deadline) = self.budget();
        let mut in_grace = false;
        if let Some(until) = body.grace_until {
            let left = until.saturating_duration_since(Instant::now());
            if left <= wait {
                (wait, by_deadline, in_grace) = (left, false, true);
            }
        }
        match tokio::time::timeout(wait, body.bytes.next()).await {
            Err(_) if in_grace => {
                tracing::debug!("openai: no usage chunk after the finish reason; completing");
                self.complete();
            }
            Err(_) => self.timed_out(by_deadline),
            Ok(None) => {
                match self.frame(&mut body.framer, None) {
                    Ok((true, _)) => return,
                    Ok((false, _)) => {}
                    Err(e) => {
                        return self.end(ModelOutcome::error(StopReason::Malformed, e.to_string()));
                    }
                }
                let mut out = Vec::new();
                let mut outcome = self.parser.eof(&mut out);
                self.queue.extend(out);
                if outcome.status == StopReason::Malformed
                    && let Some(kind) = &body.not_sse
                {
                    outcome.error_message = Some(self.endpoint.scrub(&format!(
                        "the server answered HTTP 200 with {kind}, not an event stream: {}",
                        clip(String::from_utf8_lossy(&body.head).trim(), 200)
                    )));
                }
                self.end(outcome);
            }
            Ok(Some(Err(e))) if self.parser.finished() => {
                tracing::debug!(error = %e, "openai: connection lost after the finish reason; completing");
                self.complete();
            }
            Ok(Some(Err(e))) => {
                let message = self
                    .endpoint
                    .scrub(&format!("connection lost while streaming: {e}"));
                self.end(ModelOutcome::error(StopReason::Failed, message));
            }
            Ok(Some(Ok(bytes))) => {
                if body.head.len() < HEAD_MAX {
                    let take = (HEAD_MAX - body.head.len()).min(bytes.len());
                    body.head.extend_from_slice(&bytes[..take]);
                }
                let any = match self.frame(&mut body.framer, Some(&bytes)) {
                    Ok((true, _)) => return drain(body.bytes),
                    Ok((false, any)) => any,
                    Err(e) => {
                        let message = format!(
                            "{e} (max_response_bytes is {})",
                            self.endpoint.max_response_bytes
                        );
                        return self.end(ModelOutcome::error(StopReason::Malformed, message));
                    }
                };
                if self.parser.settled() {
                    self.complete();
                    return drain(body.bytes);
                }
                if any && self.parser.finished() {
                    body.grace_until = Some(Instant::now() + USAGE_GRACE.min(self.endpoint.idle));
                }
                self.phase = Phase::Body(body);
            }
        }
    }

    /// Frames one read (`None`: the body's end) and feeds each event's data to the parser as
    /// it is framed: (the request ended, any event was framed). Events after the one that
    /// ended the request are not read, and a framing error after it does not count.
    fn frame(
        &mut self,
        framer: &mut SseFramer,
        bytes: Option<&[u8]>,
    ) -> Result<(bool, bool), super::sse::EventTooLarge> {
        let (mut ended, mut any) = (false, false);
        let mut out = Vec::new();
        let mut on_data = |data: &str| {
            if ended {
                return;
            }
            any = true;
            let fed = self.parser.feed(data, &mut out);
            self.queue.extend(out.drain(..));
            if let Fed::End(mut outcome) = fed {
                outcome.error_message = outcome.error_message.map(|m| self.endpoint.scrub(&m));
                self.end(outcome);
                ended = true;
            }
        };
        let framed = match bytes {
            Some(bytes) => framer.feed(bytes, &mut on_data),
            None => framer.finish(&mut on_data),
        };
        match framed {
            Ok(()) => Ok((ended, any)),
            Err(_) if ended => Ok((true, any)),
            Err(e) => Err(e),
        }
    }

    /// Ends a finished answer as completed.
    fn complete(&mut self) {
        let mut out = Vec::new();
        let outcome = self.parser.complete(&mut out);
        self.queue.extend(out);
        self.end(outcome);
    }

    async fn send(&mut self, body: Bytes) {
        let endpoint = self.endpoint.clone();
        let mut request = match &endpoint.parsed {
            Some(url) => endpoint.http.post(url.clone()),
            None => endpoint.http.post(&endpoint.url),
        }
        .header(CONTENT_TYPE, "application/json")
        .body(body);
        if let Some(key) = &endpoint.key {
            request = request.header(key.name.clone(), key.header.clone());
        }
        if let Some(tp) = &self.traceparent {
            request = request.header(crate::telemetry::traceparent::HEADER, tp.clone());
        }
        let (wait, by_deadline) = self.budget();
        let response = match tokio::time::timeout(wait, request.send()).await {
            Err(_) => return self.timed_out(by_deadline),
            Ok(Err(e)) => {
                let status = if e.is_timeout() {
                    StopReason::Timeout
                } else {
                    StopReason::Failed
                };
                let chain = error_chain(&e);
                let message = endpoint.scrub(&format!("connection error: {chain}"));
                let mut outcome = ModelOutcome::error(status, message);
                // A refused redirect (to https from a plain http endpoint, or a loop) is the
                // configuration's: asking again gets the same answer.
                outcome.permanent = e.is_redirect();
                let nobody = match &endpoint.parsed {
                    Some(url) if e.is_connect() => {
                        first_contact::connect_failure(url, &chain, is_refused(&e))
                    }
                    _ => None,
                };
                self.contact
                    .settle(&mut outcome, nobody.map(|m| endpoint.scrub(&m)));
                return self.end(outcome);
            }
            Ok(Ok(r)) => r,
        };
        let status = response.status();
        let kind = response
            .headers()
            .get(CONTENT_TYPE)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
        let html = kind
            .as_deref()
            .is_some_and(|k| k.to_ascii_lowercase().contains("text/html"));
        // An HTML page before the first answer is not read as a stream: see below.
        let foreign_page = html && !self.contact.has_answered();
        if status.is_success() && !foreign_page {
            let not_sse = match kind {
                Some(k) if k.to_ascii_lowercase().contains("text/event-stream") => None,
                Some(k) => Some(format!("Content-Type \"{}\"", clip(&k, 100))),
                None => Some("no Content-Type".to_string()),
            };
            if not_sse.is_none() {
                self.contact.answered();
            }
            let limit = endpoint
                .max_response_bytes
                .saturating_mul(4)
                .saturating_add(1 << 20);
            self.phase = Phase::Body(Box::new(Body {
                bytes: Box::pin(response.bytes_stream()),
                framer: SseFramer::new(limit),
                not_sse,
                head: Vec::new(),
                grace_until: None,
            }));
            return;
        }
        let retry_after = retry_after_ms(response.headers().get(RETRY_AFTER));
        let text = read_error_body(response, endpoint.idle).await;
        let message = endpoint.scrub(&format!(
            "HTTP {}: {}",
            status.as_u16(),
            server_message(&text, status)
        ));
        let mut outcome = if status.is_success() {
            // An HTML page with 200 before the first answer: not an event stream.
            ModelOutcome::error(StopReason::Malformed, message)
        } else {
            classify(status, message, retry_after)
        };
        let nobody = endpoint.parsed.as_ref().and_then(|url| {
            first_contact::foreign_answer(url, status.as_u16(), kind.as_deref(), &text)
        });
        self.contact
            .settle(&mut outcome, nobody.map(|m| endpoint.scrub(&m)));
        self.end(outcome);
    }
}

/// Whether the connection was refused (an `io::Error` among the error's sources says so).
fn is_refused(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut source = Some(e);
    while let Some(s) = source {
        if s.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionRefused)
        {
            return true;
        }
        source = s.source();
    }
    false
}

/// The outcome of a non-success HTTP status.
pub(crate) fn classify(
    status: StatusCode,
    message: String,
    retry_after_ms: Option<u64>,
) -> ModelOutcome {
    let code = status.as_u16();
    let mut outcome = match code {
        401 | 403 => ModelOutcome::error(StopReason::Auth, message),
        408 | 409 | 429 => ModelOutcome::error(StopReason::Failed, message),
        400..=499 => {
            let mut o = ModelOutcome::error(StopReason::Failed, message);
            o.permanent = true;
            o
        }
        _ => ModelOutcome::error(StopReason::Failed, message),
    };
    if outcome.status == StopReason::Failed && !outcome.permanent {
        outcome.retry_after_ms = retry_after_ms;
    }
    outcome
}

/// `Retry-After` in seconds (integer or decimal), capped; HTTP dates are ignored.
pub(crate) fn retry_after_ms(value: Option<&HeaderValue>) -> Option<u64> {
    let text = value?.to_str().ok()?.trim();
    let secs: f64 = text.parse().ok()?;
    if !secs.is_finite() || secs < 0.0 {
        return None;
    }
    let ms = (secs.min(RETRY_AFTER_MAX_S as f64) * 1000.0).round();
    Some(ms as u64)
}

/// `error.message` of a JSON error body, else the body text (truncated), else the status text.
pub(crate) fn server_message(body: &str, status: StatusCode) -> String {
    let from_json = serde_json::from_str::<Value>(body).ok().and_then(|v| {
        let from_error = match v.get("error") {
            Some(Value::String(s)) => Some(s.clone()),
            Some(e) => e.get("message").and_then(Value::as_str).map(str::to_string),
            None => None,
        };
        from_error.or_else(|| v.get("message").and_then(Value::as_str).map(str::to_string))
    });
    let text = from_json.unwrap_or_else(|| body.trim().to_string());
    if text.is_empty() {
        status
            .canonical_reason()
            .unwrap_or("no error text")
            .to_string()
    } else {
        clip(&text, ERROR_TEXT_MAX)
    }
}

async fn read_error_body(mut response: reqwest::Response, idle: Duration) -> String {
    let mut bytes = Vec::new();
    while bytes.len() < ERROR_BODY_MAX {
        match tokio::time::timeout(idle, response.chunk()).await {
            Ok(Ok(Some(chunk))) => bytes.extend_from_slice(&chunk),
            _ => break,
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

/// An error with its sources (reqwest's top-level text alone hides the cause).
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let part = s.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_are_classified() {
        let c = |code: u16, retry: Option<u64>| {
            let o = classify(
                StatusCode::from_u16(code).unwrap_or(StatusCode::IM_A_TEAPOT),
                "m".into(),
                retry,
            );
            (o.status, o.permanent, o.retry_after_ms)
        };
        assert_eq!(c(401, Some(5)), (StopReason::Auth, false, None));
        assert_eq!(c(403, None), (StopReason::Auth, false, None));
        for code in [400, 404, 422, 413] {
            assert_eq!(c(code, Some(5)), (StopReason::Failed, true, None), "{code}");
        }
        for code in [408, 409, 429, 500, 502, 503] {
            assert_eq!(
                c(code, Some(7000)),
                (StopReason::Failed, false, Some(7000)),
                "{code}"
            );
        }
    }

    #[test]
    fn retry_after_is_seconds() {
        let h = |s: &'static str| retry_after_ms(Some(&HeaderValue::from_static(s)));
        assert_eq!(h("3"), Some(3000));
        assert_eq!(h(" 1.5 "), Some(1500));
        assert_eq!(h("100000"), Some(600_000));
        assert_eq!(h("-1"), None);
        assert_eq!(h("Wed, 21 Oct 2015 07:28:00 GMT"), None);
        assert_eq!(retry_after_ms(None), None);
    }

    #[test]
    fn server_messages() {
        let bad = StatusCode::BAD_REQUEST;
        assert_eq!(
            server_message(r#"{"error":{"message":"bad tool"}}"#, bad),
            "bad tool"
        );
        assert_eq!(server_message(r#"{"error":"plain"}"#, bad), "plain");
        assert_eq!(server_message(r#"{"message":"top"}"#, bad), "top");
        assert_eq!(
            server_message("  <html>oops</html>\n", bad),
            "<html>oops</html>"
        );
        assert_eq!(server_message("", StatusCode::BAD_GATEWAY), "Bad Gateway");
        let long = "x".repeat(600);
        assert_eq!(server_message(&long, bad), format!("{}…", "x".repeat(500)));
    }

    #[test]
    fn secrets_do_not_print() {
        let secret = Secret {
            name: reqwest::header::AUTHORIZATION,
            header: HeaderValue::from_static("Bearer sk-zzz"),
            raw: "sk-zzz".into(),
        };
        assert_eq!(format!("{secret:?}"), "Secret(<redacted>)");
    }
}
