//! `POST /v1/sessions/{id}/compact`: compacts a session's context (see
//! `docs/guide/long-running.md`). An idle session compacts at once (202 `{"status":"compacting"}`; its stream
//! shows `compaction_begin` … `compaction_end`); a running one before its next request (202
//! `{"status":"scheduled"}`). 409 `nothing_to_compact` for an empty context, 409 `compacting`
//! while one runs. A hibernated session is woken first (the lookup resumes it), then compacted
//! like an idle one; one hibernated between the lookup and the request is woken again.
//!
//! The handler only translates HTTP to `SessionHandle::compact`.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde_json::{Value, json};

use super::error::{ApiError, ApiPath};
use super::state::ServerState;
use crate::actors::session::CompactStart;

/// `POST /v1/sessions/{id}/compact` (see the module doc for the answers).
#[utoipa::path(post, path = "/v1/sessions/{id}/compact", tag = "tasks", params(("id" = String, Path, description = "The session's id.")),
    responses(
        (status = 202, description = "The session compacts now or before its next request.", body = super::openapi_shapes::Compacting),
        (status = 409, description = "nothing_to_compact, compacting, session_failed"),
    ))]
pub async fn compact(
    State(state): State<Arc<ServerState>>,
    ApiPath(id): ApiPath<String>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let entry = state.get(&id).await?;
    let (entry, started) = match entry.handle.compact().await {
        Ok(started) => (entry, started),
        // Hibernated since the lookup: woken again, asked again.
        Err(_) if !state.is_current(&entry) => {
            let entry = state.get(&id).await?;
            let started = entry.handle.compact().await?;
            (entry, started)
        }
        Err(e) => return Err(e.into()),
    };
    let status = match started {
        CompactStart::Started => "compacting",
        CompactStart::Scheduled => "scheduled",
    };
    Ok((
        StatusCode::ACCEPTED,
        Json(json!({"session_id": entry.id(), "status": status})),
    ))
}
