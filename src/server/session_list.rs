//! `GET /v1/sessions`: one page of sessions by id (`limit`, `cursor`; the answer's
//! `next_cursor`), the resident ones as `GET /v1/sessions/{id}` shows them and the hibernated
//! and recorded ones (after a restart: every user session under the home) from what the server
//! kept or their trace's `session_meta` records, with status `hibernated`.
//!
//! Each has its `last_activity`: when its trace was last written (with `--store`, when its last
//! record was stored).
//!
//! A user sees its own sessions only, an admin every one, each with its `owner`. Listing never
//! wakes or resumes a session.

use std::sync::Arc;

use axum::Json;
use axum::extract::{RawQuery, State};
use serde_json::{Value, json};

use super::credentials::Caller;
use super::error::ApiError;
use super::paging::{decode, encode, page_query};
use super::state::ServerState;
use super::state::listing::{Listed, StoredView};

/// The cursor kind of this route.
const KIND: &str = "l1";

/// The handler.
#[utoipa::path(get, path = "/v1/sessions", tag = "sessions", operation_id = "list_sessions",
    params(("limit" = Option<usize>, Query, minimum = 1, maximum = 1000, description = "Items of the page (default 100)."), ("cursor" = Option<String>, Query, description = "The `next_cursor` of the previous page.")),
    responses(
        (status = 200, description = "A page of the caller's sessions (an admin's: every one), by id.", body = super::openapi_shapes::SessionPage),
        (status = 400, description = "invalid_request, invalid_cursor"),
        (status = 503, description = "store_unavailable"),
    ))]
pub async fn list(
    State(state): State<Arc<ServerState>>,
    Caller(who): Caller,
    RawQuery(query): RawQuery,
) -> Result<Json<Value>, ApiError> {
    let page = page_query(query.as_deref())?;
    let after = page
        .cursor
        .as_deref()
        .map(|c| decode(KIND, c))
        .transpose()?;
    let listed = state
        .list_sessions(after.as_deref(), page.limit, &|owner| who.may_access(owner))
        .await?;
    let stored_activity = &listed.stored_activity;
    let views = futures::future::join_all(listed.sessions.iter().map(|l| async move {
        let mut view = match l {
            Listed::Live(e) => super::routes::view(e).await,
            Listed::Hibernated(h) => json!({
                "session_id": h.id,
                "owner": h.owner,
                "status": "hibernated",
                "workspace": h.workspace.display().to_string(),
                "created_at": h.created_at,
                "approval_mode": h.approval_mode.as_str(),
                "sandbox": {"mode": h.sandbox.0.as_str(), "network": h.sandbox.1.as_str()},
                "pending_approvals": 0,
                "last_event_id": h.last_event_id,
                "trace_path": h.trace_path.display().to_string(),
                "last_activity": last_activity(&h.trace_path),
                // A session whose trace failed is `failed`, never quiet: it does not hibernate.
                "error": Value::Null,
                "last_task": Value::Null,
                "queue": [],
            }),
            Listed::Stored(s) => stored(s),
        };
        // With a store: when the session's last record was stored (no file to read).
        if let Some(at) = stored_activity.get(super::state::listing::listed_id(l)) {
            view["last_activity"] = Value::String(at.clone());
        }
        view
    }))
    .await;
    let next_cursor = listed.next_after.map(|id| encode(KIND, &id));
    Ok(Json(
        json!({ "sessions": views, "next_cursor": next_cursor }),
    ))
}

/// When the session last recorded something: the modification time of its trace file
/// (`YYYY-MM-DDTHH:MM:SS.mmmZ`, like `created_at`), or `null` when the file cannot be read.
pub fn last_activity(trace: &std::path::Path) -> Value {
    match std::fs::metadata(trace).and_then(|m| m.modified()) {
        Ok(t) => Value::String(
            chrono::DateTime::<chrono::Utc>::from(t)
                .format("%Y-%m-%dT%H:%M:%S%.3fZ")
                .to_string(),
        ),
        Err(_) => Value::Null,
    }
}

/// A session only on disk (or in the store), from its `session_meta`: woken like a hibernated one by the next
/// request that needs it.
fn stored(s: &StoredView) -> Value {
    let sandbox = s.meta.launch.sandbox.clone().unwrap_or_default();
    json!({
        "session_id": s.id,
        "owner": s.meta.owner,
        "status": "hibernated",
        "workspace": s.meta.workspace,
        "created_at": s.created_at,
        "approval_mode": s.meta.approval_mode,
        "sandbox": {"mode": sandbox.mode.as_str(), "network": sandbox.network.as_str()},
        "pending_approvals": 0,
        // Nothing streamed by this server run: a woken session numbers its events from 1.
        "last_event_id": 0,
        "trace_path": s.trace_path.display().to_string(),
        "last_activity": match &s.last_activity {
            Some(at) => Value::String(at.clone()),
            None => last_activity(&s.trace_path),
        },
        "error": Value::Null,
        "last_task": Value::Null,
        "queue": [],
    })
}
