//! `GET /v1/sessions/{id}/grants` (`{"grants":[{grant_id, rule, created_at}]}`) and
//! `DELETE /v1/sessions/{id}/grants/{grant_id}` (204; 404 `unknown_grant`): the session's
//! grants, added by approvals answered `allow_for_session`. A hibernated session is woken
//! first (the lookup resumes it, grants included), so its revocation is recorded.
//!
//! The handlers only translate HTTP to the session policy's `Grants`.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde_json::{Value, json};

use super::error::{ApiError, ApiPath};
use super::state::ServerState;

/// `GET /v1/sessions/{id}/grants`.
#[utoipa::path(get, path = "/v1/sessions/{id}/grants", tag = "approvals", operation_id = "list_grants", params(("id" = String, Path, description = "The session's id.")),
    responses((status = 200, description = "The session's grants.", body = super::openapi_shapes::GrantList)))]
pub async fn list(
    State(state): State<Arc<ServerState>>,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<Value>, ApiError> {
    let entry = state.get(&id).await?;
    let grants: Vec<Value> = entry
        .policy
        .grants()
        .list()
        .into_iter()
        .map(|g| json!({"grant_id": g.grant_id, "rule": g.rule, "created_at": g.created_at}))
        .collect();
    Ok(Json(json!({ "grants": grants })))
}

/// `DELETE /v1/sessions/{id}/grants/{grant_id}`.
#[utoipa::path(delete, path = "/v1/sessions/{id}/grants/{grant_id}", tag = "approvals", operation_id = "revoke_grant",
    params(("id" = String, Path, description = "The session's id."), ("grant_id" = String, Path, description = "The grant's id.")),
    responses(
        (status = 204, description = "The grant is gone."),
        (status = 404, description = "unknown_grant"),
    ))]
pub async fn revoke(
    State(state): State<Arc<ServerState>>,
    ApiPath((id, grant_id)): ApiPath<(String, String)>,
) -> Result<StatusCode, ApiError> {
    let entry = state.get(&id).await?;
    if entry.policy.grants().revoke(&grant_id) {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "unknown_grant",
            format!("no grant {grant_id} in session {id}"),
        ))
    }
}
