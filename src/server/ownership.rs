//! Who may touch a session: the middleware in front of every `/v1/sessions/{id}/…` route.
//!
//! A `user` acts on its own sessions only: for a session of anyone else's, and for an id no
//! session has, every route answers the same 404 `unknown_session` before the request is
//! looked at any further, so a session's existence does not leak. A session that is not served
//! (hibernated, or recorded on disk) is resumed by the request: when its recorded workspace is
//! outside the caller's workspace roots, 403 `workspace_not_allowed` (`workspace.rs`).
//!
//! It only lets requests through or refuses them; it never opens a session.

use std::sync::Arc;

use axum::extract::rejection::RawPathParamsRejection;
use axum::extract::{RawPathParams, Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::credentials::Caller;
use super::error::ApiError;
use super::state::ServerState;

/// The middleware (a route layer, inside `auth::require_token`).
pub async fn require_owner(
    State(state): State<Arc<ServerState>>,
    caller: Caller,
    params: Result<RawPathParams, RawPathParamsRejection>,
    req: Request,
    next: Next,
) -> Response {
    // A path that does not decode is answered by the handler's own 400 (it names no session).
    let Ok(params) = params else {
        return next.run(req).await;
    };
    let Some((_, id)) = params.iter().find(|(k, _)| *k == "id") else {
        return next.run(req).await;
    };
    let id = id.to_string();
    let principal = &caller.0;
    if principal.is_admin() && principal.workspace_roots.is_empty() {
        return next.run(req).await;
    }
    let recorded = match state.recorded_anywhere(&id).await {
        Ok(r) => r,
        Err(e) => return e.into_response(),
    };
    let Some(recorded) = recorded else {
        if principal.is_admin() {
            return next.run(req).await;
        }
        return ApiError::unknown_session(&id).into_response();
    };
    if !principal.may_access(recorded.owner.as_deref()) {
        return ApiError::unknown_session(&id).into_response();
    }
    // Served sessions were checked when they were opened; the others are resumed by this
    // request (a DELETE of one only forgets it).
    if req.method() != Method::DELETE
        && !state.is_served(&id)
        && let Err(e) = super::workspace::check(principal, &recorded.workspace)
    {
        return e.into_response();
    }
    next.run(req).await
}
