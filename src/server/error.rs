//! The HTTP API's error shape and its JSON request bodies.
//!
//! Every error the server returns is `{"error":{"code":"…","message":"…"}}` with a fitting
//! status; [`ApiJson`] reads a JSON body (the guard has checked its content type), turning an
//! oversized body into 413 (at once, unread, when its `Content-Length` says so), a body that
//! does not arrive in time into 408 and bad JSON into 400;
//! [`ApiPath`] reads the path's parameters, turning a malformed one (not UTF-8 once decoded)
//! into a 400 of the same shape. What a message repeats of the request is cut to
//! [`SHOWN_CHARS`] characters ([`shown`]). This file decides wire shapes only; it never touches
//! sessions.

use std::time::Duration;

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::PathRejection;
use axum::extract::{FromRequest, FromRequestParts, Path, Request};
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use serde_json::json;

use super::guard_config::BodyDeadline;
use crate::config::ConfigError;
use crate::error::RookeryError;

/// Largest request body accepted (bigger ones get 413).
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// How long a request body may take to arrive (408 after that) unless the server says otherwise.
pub const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(30);

/// Characters of a request's value (an id, a `Host`, an `Origin`) an error message repeats.
pub const SHOWN_CHARS: usize = 100;

/// At most [`SHOWN_CHARS`] characters of `value`, for an error message.
pub fn shown(value: &str) -> String {
    value.chars().take(SHOWN_CHARS).collect()
}

/// An error answered as `{"error":{"code","message"}}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// The machine-readable `code` (`unknown_session`, `bad_request`, …).
    pub code: &'static str,
    /// The human-readable `message`.
    pub message: String,
    /// Further members of the error object (e.g. the `approvals` of an ambiguous decision).
    pub detail: Option<Box<[(&'static str, serde_json::Value)]>>,
}

impl ApiError {
    /// An error without a detail member.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
            detail: None,
        }
    }

    /// Adds a member to the error object.
    pub fn with_detail(mut self, key: &'static str, value: serde_json::Value) -> Self {
        let mut members = self.detail.take().map(Vec::from).unwrap_or_default();
        members.push((key, value));
        self.detail = Some(members.into_boxed_slice());
        self
    }

    /// A session that could not be started (no descriptors, trace not writable, …): 503 with
    /// the reason, never an actor's panic text. Other errors keep their usual answer.
    pub fn session_start(e: RookeryError) -> Self {
        let reason = match &e {
            RookeryError::Trace(io) => io.to_string(),
            RookeryError::Resume(r) => r.reason(),
            RookeryError::TraceOpen(t) => t.to_string(),
            RookeryError::Actor(a) => start_reason(&a.to_string()),
            _ => return e.into(),
        };
        tracing::warn!("a session failed to start: {reason}");
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "session_start_failed",
            format!("the session could not be started: {reason}"),
        )
    }

    /// A sandbox that cannot be had: 403 `sandbox_not_allowed` for one looser than allowed,
    /// 422 `sandbox_unavailable` (with what is missing) for one this machine cannot enforce,
    /// 400 `invalid_sandbox` for a path of the policy that cannot be used.
    pub fn sandbox(e: &crate::sandbox::SandboxError) -> Self {
        use crate::sandbox::SandboxError as E;
        match e {
            E::NotAllowed { .. } => {
                Self::new(StatusCode::FORBIDDEN, "sandbox_not_allowed", e.to_string())
            }
            E::Path { .. } => Self::bad_request("invalid_sandbox", e.to_string()),
            _ => Self::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "sandbox_unavailable",
                e.to_string(),
            ),
        }
    }

    /// A 400 with `code` and `message`.
    pub fn bad_request(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, code, message)
    }

    /// 404 `unknown_session`; the message repeats at most [`SHOWN_CHARS`] characters of `id`
    /// (then `…`).
    pub fn unknown_session(id: &str) -> Self {
        let cut = if id.chars().nth(SHOWN_CHARS).is_some() {
            "…"
        } else {
            ""
        };
        Self::new(
            StatusCode::NOT_FOUND,
            "unknown_session",
            format!("unknown session {}{cut}", shown(id)),
        )
    }

    /// 404 `session_closed`: the session was closed with `DELETE` (or is being closed).
    pub fn session_closed(id: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "session_closed",
            format!("session {id} was closed; POST /v1/sessions/{id}/resume reopens it"),
        )
    }

    /// The 401 of a missing or wrong bearer token.
    pub fn unauthorized() -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "missing or wrong bearer token (send Authorization: Bearer <token>)",
        )
    }

    /// The 503 of a request arriving while the server shuts down.
    pub fn shutting_down() -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "shutting_down",
            "the server is shutting down",
        )
    }

    /// A 500 `internal` with `message`.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
    }
}

impl From<RookeryError> for ApiError {
    fn from(e: RookeryError) -> Self {
        match &e {
            RookeryError::SessionBusy(_) => {
                ApiError::new(StatusCode::CONFLICT, "session_busy", e.to_string())
            }
            RookeryError::UnknownSession(id) => ApiError::unknown_session(id),
            RookeryError::SessionEnded(_) => {
                ApiError::new(StatusCode::NOT_FOUND, "session_ended", e.to_string())
            }
            RookeryError::SessionLocked { .. } => {
                ApiError::new(StatusCode::CONFLICT, "session_locked", e.to_string())
            }
            RookeryError::Config(ConfigError::Workspace(_)) => {
                ApiError::bad_request("invalid_workspace", e.to_string())
            }
            RookeryError::Config(_) => ApiError::bad_request("invalid_config", e.to_string()),
            RookeryError::TraceFailed { .. } => {
                ApiError::new(StatusCode::CONFLICT, "session_failed", e.to_string())
            }
            RookeryError::NothingToCompact(_) => {
                ApiError::new(StatusCode::CONFLICT, "nothing_to_compact", e.to_string())
            }
            RookeryError::PromptBlocked(_) => ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "prompt_blocked",
                e.to_string(),
            ),
            RookeryError::InvalidInput(text) => ApiError::bad_request("invalid_request", text),
            RookeryError::Compacting(_) => {
                ApiError::new(StatusCode::CONFLICT, "compacting", e.to_string())
            }
            RookeryError::Sandbox(sandbox) => ApiError::sandbox(sandbox),
            RookeryError::Fork(crate::trace::fork::ForkError::NoSuchTask { .. })
            | RookeryError::Fork(crate::trace::fork::ForkError::NoCompletedTask(_)) => {
                ApiError::new(StatusCode::CONFLICT, "no_such_task", e.to_string())
            }
            RookeryError::Fork(_) => ApiError::internal(e.to_string()),
            #[cfg(feature = "postgres")]
            RookeryError::Store(store) => match store {
                crate::store::StoreError::Leased { .. } => {
                    ApiError::new(StatusCode::CONFLICT, "session_locked", e.to_string())
                }
                s if s.is_transient() => ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "store_unavailable",
                    e.to_string(),
                ),
                _ => ApiError::internal(e.to_string()),
            },
            RookeryError::Trace(_)
            | RookeryError::Resume(_)
            | RookeryError::TraceOpen(_)
            | RookeryError::Setup { .. }
            | RookeryError::Actor(_) => ApiError::internal(e.to_string()),
        }
    }
}

impl From<ConfigError> for ApiError {
    fn from(e: ConfigError) -> Self {
        RookeryError::Config(e).into()
    }
}

/// The reason inside an actor start-up error, without ractor's "panicked" wording.
fn start_reason(text: &str) -> String {
    let inner = text.strip_prefix("actor error: ").unwrap_or(text);
    let inner = inner
        .strip_prefix("Actor panicked during startup '")
        .or_else(|| inner.strip_prefix("Actor panicked '"))
        .map_or(inner, |rest| rest.strip_suffix('\'').unwrap_or(rest));
    if inner.to_ascii_lowercase().contains("panicked") {
        "an internal error (see the server log)".to_string()
    } else {
        inner.to_string()
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut error = json!({"code": self.code, "message": self.message});
        for (key, value) in self.detail.into_iter().flat_map(Vec::from) {
            error[key] = value;
        }
        let body = json!({ "error": error });
        (self.status, Json(body)).into_response()
    }
}

/// The path's parameters (`{id}`, `{approval_id}`), like axum's `Path`, with its rejections
/// answered in the API's error shape.
pub struct ApiPath<T>(pub T);

impl<S, T> FromRequestParts<S> for ApiPath<T>
where
    S: Send + Sync,
    T: DeserializeOwned + Send,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match Path::<T>::from_request_parts(parts, state).await {
            Ok(Path(value)) => Ok(ApiPath(value)),
            Err(rejection) => Err(path_error(&rejection)),
        }
    }
}

/// A path the route matched but whose parameters cannot be read: 400 `invalid_request` (a
/// missing parameter is the server's own fault: 500).
fn path_error(rejection: &PathRejection) -> ApiError {
    use axum::extract::path::ErrorKind;
    match rejection {
        PathRejection::FailedToDeserializePathParams(e) => match e.kind() {
            ErrorKind::InvalidUtf8InPathParam { key } => ApiError::bad_request(
                "invalid_request",
                format!(
                    "invalid URL: {} is not valid UTF-8 once percent-decoded (session ids are letters, digits, _ and -)",
                    shown(key)
                ),
            ),
            _ => ApiError::bad_request(
                "invalid_request",
                format!("invalid URL: {}", shown(&e.body_text())),
            ),
        },
        other => ApiError::internal(other.body_text()),
    }
}

/// A JSON request body (its `Content-Type` is checked by the guard before).
pub struct ApiJson<T>(pub T);

/// Parses a body; syntax errors are `bad_json`, shape errors `invalid_request` (both 400).
pub fn parse_body<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(bytes).map_err(|e| {
        let code = match e.classify() {
            serde_json::error::Category::Data => "invalid_request",
            _ => "bad_json",
        };
        ApiError::bad_request(code, format!("invalid request body: {e}"))
    })
}

/// A JSON body that may also be absent (an empty body is `None`).
pub struct OptionalJson<T>(pub Option<T>);

/// The 413 of a body larger than [`MAX_BODY_BYTES`].
fn too_large() -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "payload_too_large",
        format!("request body is larger than {MAX_BODY_BYTES} bytes"),
    )
}

/// Whether the request announces a body larger than [`MAX_BODY_BYTES`] (`Content-Length`):
/// refused before a byte of it is waited for.
fn announces_too_large(req: &Request) -> bool {
    req.headers()
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .is_some_and(|n| n > MAX_BODY_BYTES as u64)
}

async fn body_bytes<S: Send + Sync>(req: Request, state: &S) -> Result<Bytes, ApiError> {
    if announces_too_large(&req) {
        return Err(too_large());
    }
    let deadline = req
        .extensions()
        .get::<BodyDeadline>()
        .map_or(DEFAULT_BODY_TIMEOUT, |d| d.0);
    let read = tokio::time::timeout(deadline, Bytes::from_request(req, state));
    let Ok(read) = read.await else {
        return Err(ApiError::new(
            StatusCode::REQUEST_TIMEOUT,
            "request_timeout",
            format!(
                "the request body did not arrive within {} s",
                deadline.as_secs_f64()
            ),
        ));
    };
    read.map_err(|rejection| {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            too_large()
        } else {
            ApiError::bad_request("bad_request", rejection.body_text())
        }
    })
}

impl<S, T> FromRequest<S> for ApiJson<T>
where
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = body_bytes(req, state).await?;
        parse_body(&bytes).map(ApiJson)
    }
}

impl<S, T> FromRequest<S> for OptionalJson<T>
where
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = body_bytes(req, state).await?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(OptionalJson(None));
        }
        parse_body(&bytes).map(|v| OptionalJson(Some(v)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Body {
        #[allow(dead_code)]
        text: String,
    }

    #[test]
    fn body_errors_are_classified() {
        let e = parse_body::<Body>(b"{\"text\": ").unwrap_err();
        assert_eq!((e.status, e.code), (StatusCode::BAD_REQUEST, "bad_json"));
        let e = parse_body::<Body>(b"{\"txt\": \"a\"}").unwrap_err();
        assert_eq!(e.code, "invalid_request");
        assert!(
            e.message
                .starts_with("invalid request body: unknown field `txt`")
        );
        assert!(parse_body::<Body>(b"{\"text\": \"a\"}").is_ok());
    }

    #[test]
    fn unknown_session_repeats_at_most_100_characters() {
        let e = ApiError::unknown_session(&"é".repeat(100_000));
        assert_eq!(e.message, format!("unknown session {}…", "é".repeat(100)));
        let e = ApiError::unknown_session(&"x".repeat(100));
        assert_eq!(e.message, format!("unknown session {}", "x".repeat(100)));
    }

    #[test]
    fn library_errors_map_to_statuses() {
        let e: ApiError = RookeryError::SessionBusy("s1".into()).into();
        assert_eq!(
            (e.status, e.code, e.message.as_str()),
            (
                StatusCode::CONFLICT,
                "session_busy",
                "session s1 is busy: a task is already running"
            )
        );
        let e: ApiError = ConfigError::Workspace("/nope".into()).into();
        assert_eq!(
            (e.status, e.code, e.message.as_str()),
            (
                StatusCode::BAD_REQUEST,
                "invalid_workspace",
                "workspace /nope does not exist or is not a directory"
            )
        );
    }
}
