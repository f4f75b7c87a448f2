//! Browser safety of the HTTP API, with or without a token: the `Host` check against DNS
//! rebinding (403 `forbidden_host`), the `Origin` check against cross-site requests (403
//! `forbidden_origin`), CORS for the origins the operator allowed (preflight included), the
//! `Content-Type: application/json` rule for bodies (415) and the deadline of a request body.
//! A request whose `Origin` is the server's own (the web console's) passes the `Origin` check.
//!
//! It runs before authentication on every route but `/healthz`. It only admits or refuses
//! requests and adds CORS headers; it never reads a body and never touches sessions.

use std::sync::Arc;

use axum::body::HttpBody;
use axum::extract::{Request, State};
use axum::http::header::{
    ACCESS_CONTROL_ALLOW_HEADERS, ACCESS_CONTROL_ALLOW_METHODS, ACCESS_CONTROL_ALLOW_ORIGIN,
    ACCESS_CONTROL_MAX_AGE, CONTENT_LENGTH, CONTENT_TYPE, HOST, ORIGIN, TRANSFER_ENCODING, VARY,
};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::error::{ApiError, shown};
pub use super::guard_config::{BodyDeadline, GuardConfig};
use super::state::ServerState;

/// True when the headers announce a body (a non-zero length or a chunked one); an HTTP/2 body
/// without a length is caught by the body's own end-of-stream flag.
fn has_body(headers: &HeaderMap) -> bool {
    if headers.contains_key(TRANSFER_ENCODING) {
        return true;
    }
    match headers.get(CONTENT_LENGTH).map(|v| v.to_str()) {
        None => false,
        Some(Ok(v)) => v.trim() != "0",
        Some(Err(_)) => true,
    }
}

/// True for `application/json`, parameters (`; charset=utf-8`) allowed.
fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case("application/json"))
}

fn forbidden_host(host: &str) -> ApiError {
    let shown = shown(host);
    ApiError::new(
        StatusCode::FORBIDDEN,
        "forbidden_host",
        format!(
            "Host {shown:?} is not served here (use the listen address or localhost, or start the server with --allow-host NAME)"
        ),
    )
}

fn forbidden_origin(origin: &str) -> ApiError {
    let shown = shown(origin);
    ApiError::new(
        StatusCode::FORBIDDEN,
        "forbidden_origin",
        format!(
            "Origin {shown:?} may not call this API (start the server with --allow-origin ORIGIN to allow it)"
        ),
    )
}

/// True when `origin` is the origin of the server itself as the request names it (`Host`,
/// already checked): a page the server served, such as the web console (`console.rs`). A
/// cross-site page's `Origin` names its own site and is refused unless `--allow-origin` lists it.
fn same_origin(origin: &str, host: &str) -> bool {
    let origin = origin.trim().trim_end_matches('/');
    let Some(authority) = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"))
    else {
        return false;
    };
    !host.is_empty() && authority.eq_ignore_ascii_case(host.trim())
}

fn cors(resp: &mut Response, origin: &HeaderValue) {
    let h = resp.headers_mut();
    h.insert(ACCESS_CONTROL_ALLOW_ORIGIN, origin.clone());
    h.append(VARY, HeaderValue::from_static("Origin"));
}

/// The middleware: admits the request (adding CORS headers for an allowed origin), answers an
/// allowed preflight, or refuses it.
pub async fn guard(
    State(state): State<Arc<ServerState>>,
    mut req: Request,
    next: Next,
) -> Response {
    if req.uri().path() == "/healthz" {
        return next.run(req).await;
    }
    let cfg = &state.cfg.guard;
    let host = req
        .headers()
        .get(HOST)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
        .or_else(|| req.uri().authority().map(|a| a.to_string()))
        .unwrap_or_default();
    if !cfg.host_allowed(&host) {
        return forbidden_host(&host).into_response();
    }
    let origin = match req.headers().get(ORIGIN) {
        None => None,
        Some(v) => match v.to_str() {
            Ok(o) if cfg.origin_allowed(o) || same_origin(o, &host) => Some(v.clone()),
            Ok(o) => return forbidden_origin(o).into_response(),
            Err(_) => return forbidden_origin("(not text)").into_response(),
        },
    };
    if let Some(origin) = &origin
        && req.method() == Method::OPTIONS
        && req.headers().contains_key("access-control-request-method")
    {
        let mut resp = StatusCode::NO_CONTENT.into_response();
        cors(&mut resp, origin);
        let h = resp.headers_mut();
        h.insert(
            ACCESS_CONTROL_ALLOW_METHODS,
            HeaderValue::from_static("GET, POST, PUT, DELETE, OPTIONS"),
        );
        h.insert(
            ACCESS_CONTROL_ALLOW_HEADERS,
            HeaderValue::from_static("authorization, content-type, last-event-id"),
        );
        h.insert(ACCESS_CONTROL_MAX_AGE, HeaderValue::from_static("600"));
        return resp;
    }
    let announced = has_body(req.headers()) || !req.body().is_end_stream();
    if announced && !is_json(req.headers()) {
        let mut resp = ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "a request body must be sent with Content-Type: application/json",
        )
        .into_response();
        if let Some(origin) = &origin {
            cors(&mut resp, origin);
        }
        return resp;
    }
    req.extensions_mut().insert(BodyDeadline(cfg.body_timeout));
    let mut resp = next.run(req).await;
    if let Some(origin) = &origin {
        cors(&mut resp, origin);
    }
    resp
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn cfg(listen: &str) -> GuardConfig {
        GuardConfig::new(
            listen.parse().unwrap(),
            &["Rookery.Example".to_string()],
            &["http://localhost:3000/".to_string()],
            Duration::from_secs(30),
        )
    }

    #[test]
    fn hosts_and_origins() {
        let c = cfg("127.0.0.1:7878");
        for ok in [
            "127.0.0.1:7878",
            "localhost",
            "LOCALHOST:1",
            "[::1]:7878",
            "::1",
            "127.0.0.2",
            "rookery.example:7878",
            "rookery.example.",
        ] {
            assert!(c.host_allowed(ok), "{ok}");
        }
        for bad in [
            "evil.example:7878",
            "",
            "10.0.0.1",
            "localhost.evil.example",
        ] {
            assert!(!c.host_allowed(bad), "{bad}");
        }
        let c = cfg("10.0.0.1:7878");
        assert!(c.host_allowed("10.0.0.1:7878"));
        let c = cfg("0.0.0.0:7878");
        assert!(!c.host_allowed("0.0.0.0:7878"));
        assert!(c.origin_allowed("http://LOCALHOST:3000"));
        assert!(!c.origin_allowed("http://localhost:3001"));
        assert!(!c.origin_allowed("null"));
    }

    #[test]
    fn the_servers_own_origin_is_same_origin_and_no_other() {
        assert!(same_origin("http://127.0.0.1:7878", "127.0.0.1:7878"));
        assert!(same_origin("http://LocalHost:7878/", "localhost:7878"));
        assert!(!same_origin("http://127.0.0.1:7879", "127.0.0.1:7878"));
        assert!(!same_origin("http://evil.example", "127.0.0.1:7878"));
        assert!(!same_origin("null", "127.0.0.1:7878"));
        assert!(!same_origin("http://", ""));
    }

    #[test]
    fn json_bodies_only() {
        let mut h = HeaderMap::new();
        assert!(!has_body(&h));
        h.insert(CONTENT_LENGTH, HeaderValue::from_static("0"));
        assert!(!has_body(&h));
        h.insert(CONTENT_LENGTH, HeaderValue::from_static("5"));
        assert!(has_body(&h));
        assert!(!is_json(&h));
        h.insert(CONTENT_TYPE, HeaderValue::from_static("text/plain"));
        assert!(!is_json(&h));
        h.insert(
            CONTENT_TYPE,
            HeaderValue::from_static("Application/JSON; charset=utf-8"),
        );
        assert!(is_json(&h));
    }
}
