//! Authentication of the HTTP API: every route but `/healthz` acts as a principal found from
//! the request's credentials (`credentials.rs`), or answers 401 `unauthorized`.
//!
//! It only lets requests through or answers 401; it never logs or echoes a credential.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::credentials::{Caller, authenticate};
use super::error::ApiError;
use super::state::ServerState;

/// The middleware: passes the request on as its principal's, or answers 401.
pub async fn require_token(
    State(state): State<Arc<ServerState>>,
    mut req: Request,
    next: Next,
) -> Response {
    // The one exception to the bearer credentials: a stream token on its session's event
    // stream, acting as the principal it was issued to.
    let principal = authenticate(&state.cfg.auth, req.headers())
        .or_else(|| super::stream_token::admits(&state.stream_tokens, &state.cfg.auth, &req));
    let Some(principal) = principal else {
        return ApiError::unauthorized().into_response();
    };
    req.extensions_mut().insert(Caller(principal));
    next.run(req).await
}
