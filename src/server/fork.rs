//! `POST /v1/sessions/{id}/fork {at_task?, workspace?, approval_mode?}`: a new session whose
//! history is this one's up to the end of task `at_task` (numbered from 1; default: the last
//! completed one, so a running session forks its last completed task), with its own id and
//! trace, served at once: 201 `{"session_id"}`. The origin is untouched. 409 `no_such_task`
//! when the task has not ended (or none has completed); 400 for a bad workspace or mode.
//!
//! The handler only translates HTTP to `SessionHandle::fork_with` (with `--store`,
//! `crate::store::fork`) and the state's resume.

use std::path::PathBuf;
use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};

use super::credentials::Caller;
use super::error::{ApiError, ApiPath, OptionalJson};
use super::state::{OpenOptions, ServerState, SessionEntry};
use crate::approval::ApprovalMode;
use crate::trace::fork::{ForkOverrides, ForkedTrace};

/// The body of a fork request (every field optional).
#[derive(Deserialize, Default, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ForkBody {
    /// The task whose end the fork starts from.
    #[serde(default)]
    #[schema(minimum = 1)]
    at_task: Option<u64>,
    /// The fork's workspace (default: the origin's).
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    workspace: Option<PathBuf>,
    /// The fork's approval mode (default: the origin's).
    #[serde(default)]
    #[schema(value_type = Option<super::openapi_shapes::ApprovalModeName>)]
    approval_mode: Option<String>,
}

/// `POST /v1/sessions/{id}/fork` (see the module doc for the answers).
#[utoipa::path(post, path = "/v1/sessions/{id}/fork", tag = "sessions", params(("id" = String, Path, description = "The session's id.")),
    request_body(content = Option<ForkBody>, description = "Optional: where to fork and what to change."),
    responses(
        (status = 201, description = "The fork is served.", body = super::openapi_shapes::Created),
        (status = 400, description = "invalid_request, invalid_workspace"),
        (status = 403, description = "workspace_not_allowed"),
        (status = 409, description = "no_such_task, session_failed"),
        (status = 429, description = "quota_exceeded"),
    ))]
pub async fn fork(
    State(state): State<Arc<ServerState>>,
    Caller(who): Caller,
    ApiPath(id): ApiPath<String>,
    OptionalJson(body): OptionalJson<ForkBody>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    state.check_open()?;
    let body = body.unwrap_or_default();
    if body.at_task == Some(0) {
        return Err(ApiError::bad_request(
            "invalid_request",
            "at_task counts from 1",
        ));
    }
    let approval_mode = body
        .approval_mode
        .as_deref()
        .map(|m| {
            m.parse::<ApprovalMode>()
                .map_err(|e| ApiError::bad_request("invalid_request", e.to_string()))
        })
        .transpose()?;
    let workspace = match &body.workspace {
        None => None,
        Some(w) => Some(
            std::fs::canonicalize(w)
                .ok()
                .filter(|p| p.is_dir())
                .ok_or_else(|| {
                    ApiError::bad_request(
                        "invalid_workspace",
                        format!("workspace {} is not a directory", w.display()),
                    )
                })?,
        ),
    };
    if let Some(w) = &workspace {
        // The fork's own workspace must be inside the caller's roots, as a create's.
        super::workspace::check(&who, w)?;
    }
    let entry = state.get(&id).await?;
    let overrides = ForkOverrides {
        workspace: workspace.as_ref().map(|w| w.display().to_string()),
        approval_mode: approval_mode.map(|m| m.as_str().to_string()),
    };
    let forked = copy(&state, &entry, body.at_task, overrides).await?;
    let open = OpenOptions {
        approval_mode,
        ..OpenOptions::default()
    };
    // A new session of the caller's: its quotas apply as to a create.
    match state.resume_as(&who, &forked.session_id, open).await {
        Ok(new) => Ok((StatusCode::CREATED, Json(json!({"session_id": new.id()})))),
        Err(e) => {
            // Not served: the copy goes, so no half-made session is left behind.
            discard(&state, &forked).await;
            Err(e)
        }
    }
}

/// The fork's copy: a new trace file, or with a store a new stored session.
async fn copy(
    state: &ServerState,
    entry: &SessionEntry,
    at_task: Option<u64>,
    overrides: ForkOverrides,
) -> Result<ForkedTrace, ApiError> {
    #[cfg(feature = "postgres")]
    if let Some(store) = state.cfg.store.clone() {
        // Every record so far is stored before it is copied.
        entry
            .handle
            .flush_trace()
            .await
            .map_err(|e| state.call_error(entry, e))?;
        return crate::store::fork::fork(&store, entry.id(), at_task, &overrides)
            .await
            .map_err(|e| match e {
                crate::store::fork::StoredForkError::Fork(f) => {
                    crate::error::RookeryError::Fork(f).into()
                }
                crate::store::fork::StoredForkError::Store(s) => {
                    crate::error::RookeryError::Store(s).into()
                }
            });
    }
    entry
        .handle
        .fork_with(at_task, overrides)
        .await
        .map_err(|e| state.call_error(entry, e))
}

/// Removes a fork that could not be served.
async fn discard(state: &ServerState, forked: &ForkedTrace) {
    #[cfg(feature = "postgres")]
    if let Some(store) = &state.cfg.store {
        if let Err(e) = crate::store::removal::remove(store, &forked.session_id).await {
            tracing::warn!("cannot remove the fork {}: {e}", forked.session_id);
        }
        return;
    }
    let _ = state;
    if let Err(rm) = std::fs::remove_file(&forked.path) {
        tracing::warn!("cannot remove the fork {}: {rm}", forked.path.display());
    }
}
