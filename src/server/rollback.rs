//! `POST /v1/sessions/{id}/rollback {tasks: N}`: drops the last N completed tasks from the
//! session's context (recorded as a `rollback`, so a resume rebuilds the context without them).
//! 200 `{"dropped_tasks": N, "files_reverted": false}`: files the dropped tasks changed are
//! not reverted. 409 `session_busy` while a task runs, 409 `compacting` during a compaction,
//! 400 `invalid_request` for 0 or more tasks than the context holds. A hibernated session is
//! woken first.
//!
//! The handler only translates HTTP to `SessionHandle::rollback`.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};

use super::error::{ApiError, ApiJson, ApiPath};
use super::state::ServerState;

/// The body of a rollback request.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RollbackBody {
    /// How many of the last completed tasks to drop.
    #[schema(minimum = 1)]
    tasks: u64,
}

/// `POST /v1/sessions/{id}/rollback` (see the module doc for the answers).
#[utoipa::path(post, path = "/v1/sessions/{id}/rollback", tag = "sessions", params(("id" = String, Path, description = "The session's id.")),
    request_body = RollbackBody,
    responses(
        (status = 200, description = "The tasks were dropped from the context (files stay as they are).", body = super::openapi_shapes::RolledBack),
        (status = 400, description = "invalid_request"),
        (status = 409, description = "session_busy, compacting, session_failed"),
    ))]
pub async fn rollback(
    State(state): State<Arc<ServerState>>,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<RollbackBody>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    state.check_open()?;
    let entry = state.get(&id).await?;
    let rolled = match entry.handle.rollback(body.tasks).await {
        Ok(r) => r,
        // Hibernated since the lookup: woken again, asked again.
        Err(_) if !state.is_current(&entry) => {
            let entry = state.get(&id).await?;
            entry.handle.rollback(body.tasks).await?
        }
        Err(e) => return Err(state.call_error(&entry, e)),
    };
    Ok((
        StatusCode::OK,
        Json(json!({"dropped_tasks": rolled.dropped_tasks, "files_reverted": false})),
    ))
}
