//! `POST /v1/sessions/{id}/schedules {cron, text, timezone?, if_busy?}` (201
//! `{"schedule_id", …}`), `GET …/schedules` (`{"schedules": [...]}`) and `DELETE
//! …/schedules/{schedule_id}` (204, 404 `unknown_schedule`): a session's tasks on a cron
//! pattern (`schedules.rs`). A bad pattern is 400 `invalid_cron`, an unknown zone 400
//! `unknown_timezone`, an unknown `if_busy` 400 `invalid_request`, more than 32 schedules 429
//! `too_many_schedules`. The owner rules are the other session routes' (`ownership.rs`).
//!
//! The handlers only translate HTTP to the server's [`Schedules`]; a server started without
//! them (a library router) answers 404 `schedules_off`.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};

use super::busy::IfBusy;
use super::error::{ApiError, ApiJson, ApiPath};
use super::schedules::{NewSchedule, Schedules};
use super::state::ServerState;

/// The body of `POST …/schedules`.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ScheduleBody {
    /// A 5-field cron pattern.
    cron: String,
    /// The text of each run's task.
    text: String,
    /// An IANA time zone (default `UTC`).
    #[serde(default)]
    timezone: Option<String>,
    /// `reject` (default), `enqueue`, `interrupt` or `steer`.
    #[serde(default)]
    #[schema(pattern = "^(reject|enqueue|interrupt|steer)$")]
    if_busy: Option<String>,
}

/// `if_busy` as a schedule stores it (absent: `reject`); an unknown value is 400.
fn if_busy_name(value: Option<&str>) -> Result<&'static str, ApiError> {
    Ok(match IfBusy::parse(value)? {
        IfBusy::Reject => "reject",
        IfBusy::Enqueue => "enqueue",
        IfBusy::Interrupt => "interrupt",
        IfBusy::Steer => "steer",
    })
}

fn schedules(state: &ServerState) -> Result<&Arc<Schedules>, ApiError> {
    state.schedules().ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "schedules_off",
            "this server runs no schedules",
        )
    })
}

/// `POST /v1/sessions/{id}/schedules`.
#[utoipa::path(post, path = "/v1/sessions/{id}/schedules", tag = "schedules", params(("id" = String, Path, description = "The session's id.")),
    request_body(content = ScheduleBody, description = "The pattern, the task's text, its time zone and busy policy."),
    responses(
        (status = 201, description = "The schedule, with its next run.", body = super::openapi_shapes::Schedule),
        (status = 400, description = "invalid_request, invalid_cron, unknown_timezone"),
        (status = 404, description = "schedules_off"),
        (status = 429, description = "too_many_schedules"),
    ))]
pub async fn create(
    State(state): State<Arc<ServerState>>,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<ScheduleBody>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    state.check_open()?;
    let schedules = schedules(&state)?;
    let new = NewSchedule {
        cron: body.cron,
        text: body.text,
        timezone: body.timezone,
        if_busy: if_busy_name(body.if_busy.as_deref())?,
    };
    let entry = state.get(&id).await?;
    let view = schedules.add(&entry.handle, new).await?;
    Ok((StatusCode::CREATED, Json(view)))
}

/// `GET /v1/sessions/{id}/schedules` (a hibernated session is not woken).
#[utoipa::path(get, path = "/v1/sessions/{id}/schedules", tag = "schedules", params(("id" = String, Path, description = "The session's id.")),
    responses(
        (status = 200, description = "The session's schedules and the schedule clock.", body = super::openapi_shapes::ScheduleList),
        (status = 404, description = "schedules_off"),
    ))]
pub async fn list(
    State(state): State<Arc<ServerState>>,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<Value>, ApiError> {
    let schedules = schedules(&state)?;
    state.check_known(&id).await?;
    Ok(Json(json!({
        "schedules": schedules.list(&id).await?,
        "minute_ms": schedules.minute_ms(),
        "now_minute": schedules.now_minute(),
    })))
}

/// `DELETE /v1/sessions/{id}/schedules/{schedule_id}`.
#[utoipa::path(delete, path = "/v1/sessions/{id}/schedules/{schedule_id}", tag = "schedules",
    params(("id" = String, Path, description = "The session's id."), ("schedule_id" = String, Path, description = "The schedule's id (`sch-…`).")),
    responses(
        (status = 204, description = "Removed; its removal is recorded in the session's trace."),
        (status = 404, description = "schedules_off, unknown_schedule"),
    ))]
pub async fn delete(
    State(state): State<Arc<ServerState>>,
    ApiPath((id, schedule_id)): ApiPath<(String, String)>,
) -> Result<StatusCode, ApiError> {
    let schedules = schedules(&state)?;
    state.check_known(&id).await?;
    if !schedules.has_any(&id).await? {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "unknown_schedule",
            format!("session {id} has no schedule {schedule_id}"),
        ));
    }
    let entry = state.get(&id).await?;
    schedules.remove(&entry.handle, &schedule_id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Before a `DELETE /v1/sessions/{id}`: the session's schedules go with it (their removal
/// recorded in its trace; a hibernated session is woken for that, and then closed).
pub async fn session_deleted(state: &ServerState, id: &str) {
    let Some(schedules) = state.schedules() else {
        return;
    };
    match schedules.has_any(id).await {
        Ok(true) => {}
        Ok(false) => return,
        Err(e) => {
            tracing::warn!(session = %id, "cannot tell whether it has schedules: {}", e.message);
            return;
        }
    }
    match state.get(id).await {
        Ok(entry) => schedules.remove_session(id, Some(&entry.handle)).await,
        Err(e) => {
            tracing::warn!(session = %id, "the removal of its schedules is not recorded in its trace: {}", e.message);
            schedules.remove_session(id, None).await;
        }
    }
}
