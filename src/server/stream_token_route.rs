//! `POST /v1/sessions/{id}/stream_token`: hands out a stream token (`stream_token.rs`) for a
//! session the server knows, without waking it.
//!
//! It only issues; the auth middleware checks tokens, and nothing here logs one.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde_json::{Value, json};

use super::credentials::Caller;
use super::error::{ApiError, ApiPath};
use super::state::ServerState;
use super::stream_token::IssueError;

/// `POST /v1/sessions/{id}/stream_token`: `{"stream_token", "expires_in"}` (seconds) for a
/// session the server serves, has hibernated or finds on disk (none is woken). The token acts
/// as the caller (the ownership check has already let the caller at this session).
#[utoipa::path(post, path = "/v1/sessions/{id}/stream_token", tag = "events", operation_id = "issue_stream_token", params(("id" = String, Path, description = "The session's id.")),
    responses(
        (status = 200, description = "A token for this session's event stream.", body = super::openapi_shapes::StreamToken),
        (status = 503, description = "too_many_stream_tokens, shutting_down"),
    ))]
pub async fn issue(
    State(state): State<Arc<ServerState>>,
    Caller(who): Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<Value>, ApiError> {
    state.check_open()?;
    state.check_known(&id).await?;
    let token = match state.stream_tokens.issue(&id, who) {
        Ok(token) => token,
        Err(e @ IssueError::TooMany) => {
            return Err(ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "too_many_stream_tokens",
                e.to_string(),
            ));
        }
        Err(e @ IssueError::Signed(_)) => return Err(ApiError::internal(e.to_string())),
    };
    let ttl = state.stream_tokens.ttl();
    Ok(Json(json!({
        "stream_token": token,
        "expires_in": ttl.as_millis().div_ceil(1000) as u64,
    })))
}
