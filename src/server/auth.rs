//! Bearer-token authentication of the HTTP API: every route but `/healthz` needs
//! `Authorization: Bearer <token>` when the server has a token. The comparison is constant-time.
//!
//! It only lets requests through or answers 401; it never logs or echoes the token.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::header::AUTHORIZATION;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use subtle::ConstantTimeEq;

use super::error::ApiError;
use super::state::ServerState;

/// True when `header` is `Bearer <token>` (the scheme case-insensitive).
pub fn token_matches(header: Option<&str>, token: &str) -> bool {
    let Some(header) = header else {
        return false;
    };
    let Some((scheme, given)) = header.split_once(' ') else {
        return false;
    };
    if !scheme.eq_ignore_ascii_case("bearer") {
        return false;
    }
    bool::from(given.trim().as_bytes().ct_eq(token.as_bytes()))
}

/// The middleware: passes the request on, or answers 401.
pub async fn require_token(
    State(state): State<Arc<ServerState>>,
    req: Request,
    next: Next,
) -> Response {
    if let Some(token) = &state.cfg.token {
        let header = req
            .headers()
            .get(AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        // The one exception: a stream token on its session's event stream.
        if !token_matches(header, token) && !super::stream_token::admits(&state.stream_tokens, &req)
        {
            return ApiError::unauthorized().into_response();
        }
    }
    next.run(req).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_exact_bearer_token_passes() {
        assert!(token_matches(Some("Bearer s3cret"), "s3cret"));
        assert!(token_matches(Some("bearer s3cret"), "s3cret"));
        assert!(!token_matches(Some("Bearer s3cre"), "s3cret"));
        assert!(!token_matches(Some("Bearer s3cret2"), "s3cret"));
        assert!(!token_matches(Some("Basic s3cret"), "s3cret"));
        assert!(!token_matches(Some("s3cret"), "s3cret"));
        assert!(!token_matches(None, "s3cret"));
        assert!(!token_matches(Some("Bearer "), "s3cret"));
    }
}
