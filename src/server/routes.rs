//! The HTTP routes of `rookery serve`: sessions, tasks, events (SSE), approvals and approval mode
//! (their handlers in `approval_routes.rs`; the create in `create_route.rs`),
//! abort, resume, `/healthz` and `/metrics`.
//!
//! Handlers translate HTTP to the server state and the session API and back; they hold no state
//! of their own and every failure is an [`ApiError`]. A session that stops being served between
//! a handler's lookup and its call (closed by a concurrent `DELETE`, hibernated) is looked up
//! again (`on_session`): a closed one answers 404 `session_closed`, a hibernated one is woken.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::extract::{DefaultBodyLimit, RawQuery, State};
use axum::http::header::CONTENT_TYPE;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::{Json, Router, middleware};
use serde::Deserialize;
use serde_json::{Value, json};

use super::approval_routes::{audit, decide_approval, list_approvals, set_approval_mode};
use super::credentials::Caller;
use super::error::{ApiError, ApiJson, ApiPath, MAX_BODY_BYTES, OptionalJson};
use super::sse::sse_response;
use super::state::{OpenOptions, ServerState, SessionEntry};
use super::{auth, guard};
use crate::actors::session::SessionStatus;
use crate::error::RookeryError;

type AppState = State<Arc<ServerState>>;
type ApiResult<T> = Result<T, ApiError>;

/// The whole API with its state.
pub fn router(state: Arc<ServerState>) -> Router {
    let api = Router::new()
        .route(
            "/v1/sessions",
            post(super::create_route::create_session).get(super::session_list::list),
        )
        .route("/v1/sessions/{id}", get(get_session).delete(delete_session))
        .route("/v1/sessions/{id}/tasks", post(start_task))
        .route(
            "/v1/sessions/{id}/queue/{entry_id}",
            axum::routing::delete(cancel_queued),
        )
        .route("/v1/sessions/{id}/steer", post(steer))
        .route("/v1/sessions/{id}/events", get(events))
        .route("/v1/sessions/{id}/messages", get(super::messages::messages))
        .route(
            "/v1/sessions/{id}/trace",
            get(super::trace_download::download),
        )
        .route(
            "/v1/sessions/{id}/stream_token",
            post(super::stream_token_route::issue),
        )
        .route("/v1/sessions/{id}/approvals", get(list_approvals))
        .route(
            "/v1/sessions/{id}/approvals/{approval_id}",
            post(decide_approval),
        )
        .route("/v1/sessions/{id}/approval_mode", put(set_approval_mode))
        .route("/v1/sessions/{id}/grants", get(super::grants::list))
        .route(
            "/v1/sessions/{id}/grants/{grant_id}",
            axum::routing::delete(super::grants::revoke),
        )
        .route("/v1/sessions/{id}/abort", post(abort))
        .route("/v1/sessions/{id}/compact", post(super::compact::compact))
        .route("/v1/sessions/{id}/resume", post(resume))
        .route("/v1/sessions/{id}/fork", post(super::fork::fork))
        .route(
            "/v1/sessions/{id}/rollback",
            post(super::rollback::rollback),
        )
        .route(
            "/v1/sessions/{id}/schedules",
            post(super::schedule_routes::create).get(super::schedule_routes::list),
        )
        .route(
            "/v1/sessions/{id}/schedules/{schedule_id}",
            axum::routing::delete(super::schedule_routes::delete),
        )
        .route("/metrics", get(metrics))
        .route("/v1/openapi.json", get(super::openapi::serve));
    #[cfg(feature = "postgres")]
    let api = api.route("/v1/cluster", get(super::cluster_route::nodes));
    let api = api.route_layer(middleware::from_fn_with_state(
        state.clone(),
        super::ownership::require_owner,
    ));
    // Inside the auth (a request is authenticated here before it is passed on), outside the
    // ownership check (the node that serves the session makes it).
    #[cfg(feature = "postgres")]
    let api = api.route_layer(middleware::from_fn_with_state(
        state.clone(),
        super::forward::route,
    ));
    let api = api.route_layer(middleware::from_fn_with_state(
        state.clone(),
        auth::require_token,
    ));
    Router::new()
        .route("/healthz", get(healthz))
        .merge(api)
        .merge(super::console::routes())
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(middleware::from_fn_with_state(state.clone(), guard::guard))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(middleware::from_fn(super::access_log::log_request))
        .with_state(state)
}

async fn not_found() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such route")
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        "method not allowed on this route",
    )
}

#[utoipa::path(get, path = "/healthz", tag = "server", security(()),
    responses((status = 200, description = "The server is up.", body = super::openapi_shapes::Health)))]
async fn healthz() -> Json<Value> {
    Json(json!({"status": "ok"}))
}

/// The JSON view of a served session.
pub(super) async fn view(entry: &SessionEntry) -> Value {
    let status = match entry.handle.status().await {
        Ok(SessionStatus::Idle) => "idle",
        Ok(SessionStatus::Running) => "running",
        Ok(SessionStatus::Failed) => "failed",
        Err(_) => "closed",
    };
    json!({
        "session_id": entry.id(),
        "owner": entry.handle.meta().owner,
        "status": status,
        "workspace": entry.handle.meta().workspace,
        "created_at": entry.created_at,
        "approval_mode": entry.policy.mode().as_str(),
        "sandbox": {
            "mode": entry.handle.sandbox().0.as_str(),
            "network": entry.handle.sandbox().1.as_str(),
        },
        "pending_approvals": entry.approvals.pending_count(),
        "last_event_id": entry.log.last_seq(),
        "trace_path": entry.handle.trace_path().display().to_string(),
        "last_activity": super::session_list::last_activity(&entry.handle.trace_path()),
        "error": entry.handle.trace_failure(),
        "last_task": entry.last_task.view(),
        "queue": entry.queue.view().await,
    })
}

#[utoipa::path(get, path = "/v1/sessions/{id}", tag = "sessions", params(("id" = String, Path, description = "The session's id.")),
    responses((status = 200, description = "The session.", body = super::openapi_shapes::SessionView)))]
async fn get_session(
    State(state): AppState,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Json<Value>> {
    let entry = state.get(&id).await?;
    let mut v = view(&entry).await;
    if v["status"] == "closed" && !state.is_current(&entry) {
        // Closed or hibernated since the lookup: 404 `session_closed`, or woken.
        let entry = state.get(&id).await?;
        v = view(&entry).await;
    }
    // With a store: when its last record was stored (no file to read).
    if let Some(at) = state.stored_last_activity(&id).await {
        v["last_activity"] = Value::String(at);
    }
    Ok(Json(v))
}

/// Looks session `id` up and runs `call` on it. When the call fails and the entry is no longer
/// the session's (a concurrent `DELETE` or a hibernation took it), the session is looked up
/// again: a closed one answers 404 `session_closed`, a hibernated one is woken and `call` runs
/// once more. The entry the call ran on comes back with its result.
async fn on_session<T, F, Fut>(
    state: &ServerState,
    id: &str,
    call: F,
) -> ApiResult<(Arc<SessionEntry>, T)>
where
    F: Fn(Arc<SessionEntry>) -> Fut,
    Fut: Future<Output = Result<T, RookeryError>>,
{
    let entry = state.get(id).await?;
    match gated(&entry, &call).await {
        Some(Ok(v)) => Ok((entry, v)),
        Some(Err(e)) if state.is_current(&entry) => Err(state.call_error(&entry, e)),
        _ => {
            let entry = state.get(id).await?;
            // Hibernated once more in between (rare): the call goes to this entry as it is.
            let result = match gated(&entry, &call).await {
                Some(result) => result,
                None => call(entry.clone()).await,
            };
            match result {
                Ok(v) => Ok((entry, v)),
                Err(e) => Err(state.call_error(&entry, e)),
            }
        }
    }
}

/// Runs `call` on `entry` under the entry's gate, so that no hibernation closes the session
/// between the call's handing over its work and the hibernation's last check; `None` when the
/// session was hibernated while this request waited for the gate.
async fn gated<T, F, Fut>(entry: &Arc<SessionEntry>, call: &F) -> Option<Result<T, RookeryError>>
where
    F: Fn(Arc<SessionEntry>) -> Fut,
    Fut: Future<Output = Result<T, RookeryError>>,
{
    let _gate = entry.gate.read().await;
    if entry.hibernating.load(Ordering::SeqCst) {
        return None;
    }
    Some(call(entry.clone()).await)
}

#[utoipa::path(delete, path = "/v1/sessions/{id}", tag = "sessions", params(("id" = String, Path, description = "The session's id.")),
    responses((status = 204, description = "The session was closed (its trace stays; `resume` reopens it).")))]
async fn delete_session(
    State(state): AppState,
    Caller(who): Caller,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<StatusCode> {
    if let Some(entry) = state.list().into_iter().find(|e| e.id() == id) {
        audit(&state, &entry, &who.name, "delete", None);
    }
    super::schedule_routes::session_deleted(&state, &id).await;
    state.delete(&id).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(post, path = "/v1/sessions/{id}/resume", tag = "sessions", params(("id" = String, Path, description = "The session's id.")),
    request_body(content = Option<super::create_route::OpenBody>, description = "Optional: what to change on reopening."),
    responses(
        (status = 200, description = "The session is served.", body = super::openapi_shapes::Resumed),
        (status = 400, description = "invalid_workspace, invalid_config, invalid_tools_profile, invalid_sandbox, invalid_webhook"),
        (status = 403, description = "sandbox_not_allowed, workspace_not_allowed, webhook_not_allowed"),
        (status = 404, description = "session_ended"),
        (status = 429, description = "quota_exceeded"),
        (status = 503, description = "too_many_webhooks"),
    ))]
async fn resume(
    State(state): AppState,
    Caller(who): Caller,
    ApiPath(id): ApiPath<String>,
    OptionalJson(body): OptionalJson<super::create_route::OpenBody>,
) -> ApiResult<Json<Value>> {
    let webhook = super::webhooks::requested(
        state.webhooks(),
        body.as_ref().and_then(|b| b.webhook.as_deref()),
    )?;
    let open = match body {
        Some(b) => b.into_options(&state).await?,
        None => OpenOptions::default(),
    };
    let was_served = state.is_served(&id);
    let entry = state.resume_as(&who, &id, open).await?;
    super::webhooks::attach(state.webhooks(), entry.id(), webhook);
    Ok(Json(
        json!({"session_id": entry.id(), "resumed": !was_served}),
    ))
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
struct TaskBody {
    /// The steer's text (not blank).
    #[schema(pattern = "\\S")]
    text: String,
    /// A JSON Schema the final answer must meet (tasks only).
    #[serde(default)]
    #[schema(ignore)]
    output_schema: Option<Value>,
    /// How often an invalid answer is sent back (default 2; tasks only).
    #[serde(default)]
    #[schema(ignore)]
    max_output_retries: Option<u32>,
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
struct StartBody {
    /// The task's text (not blank).
    #[schema(pattern = "\\S")]
    text: String,
    /// `reject` (default), `enqueue`, `interrupt` or `steer` (`busy.rs`).
    #[serde(default)]
    #[schema(pattern = "^(reject|enqueue|interrupt|steer)$")]
    if_busy: Option<String>,
    /// The JSON Schema the task's final answer must meet (`task_schema.rs`).
    #[serde(default)]
    output_schema: Option<Value>,
    /// How often an answer that fails the schema is sent back (default 2).
    #[serde(default)]
    max_output_retries: Option<u32>,
}

#[utoipa::path(post, path = "/v1/sessions/{id}/tasks", tag = "tasks", params(("id" = String, Path, description = "The session's id.")),
    request_body = StartBody,
    responses(
        (status = 202, description = "The task started, was queued or steered; its events follow `events_after`.", body = super::openapi_shapes::TaskAccepted),
        (status = 400, description = "invalid_request, invalid_output_schema"),
        (status = 404, description = "session_ended"),
        (status = 409, description = "session_busy, compacting, session_failed"),
        (status = 422, description = "prompt_blocked"),
        (status = 429, description = "quota_exceeded, queue_full"),
    ))]
async fn start_task(
    State(state): AppState,
    Caller(who): Caller,
    ApiPath(id): ApiPath<String>,
    headers: axum::http::HeaderMap,
    ApiJson(body): ApiJson<StartBody>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    state.check_open()?;
    // With a store: 503 `store_unavailable` while it is down, before the task is handed over.
    state.store_ready().await?;
    join_trace(&state, &id, &headers).await;
    let policy = super::busy::IfBusy::parse(body.if_busy.as_deref())?;
    if body.text.trim().is_empty() {
        // The session is looked up first: an unknown or closed one is a 404 whatever the text.
        state.get(&id).await?;
        return Err(ApiError::bad_request(
            "invalid_request",
            "text must not be empty",
        ));
    }
    let schema = super::task_schema::from_request(body.output_schema, body.max_output_retries)?;
    if policy != super::busy::IfBusy::Reject {
        if schema.is_some() {
            // The queue and the interrupt path carry a task's text only.
            return Err(ApiError::bad_request(
                "invalid_request",
                "output_schema needs if_busy \"reject\" (the default)",
            ));
        }
        let entry = state.get(&id).await?;
        let after = entry.events_after().await;
        let answer = match super::busy::start(&state, &entry, &body.text, policy).await? {
            super::busy::Started::Now => {
                state.metrics.task_started();
                json!({"session_id": entry.id(), "events_after": after, "status": "started"})
            }
            super::busy::Started::Steered => {
                json!({"session_id": entry.id(), "events_after": after, "status": "steered"})
            }
            super::busy::Started::Queued(entry_id) => json!({
                "session_id": entry.id(), "events_after": after, "status": "queued",
                "entry_id": entry_id,
            }),
        };
        return Ok((StatusCode::ACCEPTED, Json(answer)));
    }
    let text = body.text.as_str();
    let started = on_session(&state, &id, |entry| {
        let schema = schema.clone();
        async move {
            let after = entry.events_after().await;
            super::task_schema::start(&entry.handle, text, schema)
                .await
                .map(|()| after)
        }
    });
    let (entry, after) = state.within_running_quota(&who, &id, started).await?;
    audit(&state, &entry, &who.name, "task_start", None);
    state.metrics.task_started();
    state.metrics.principals.task_started(&who.label);
    Ok((
        StatusCode::ACCEPTED,
        Json(json!({"session_id": entry.id(), "events_after": after, "status": "started"})),
    ))
}

/// A `traceparent` header (OpenTelemetry export on): the session's next task (or the running
/// one's steer) joins the caller's trace. An unknown session is left to the route's own check.
async fn join_trace(state: &ServerState, id: &str, headers: &axum::http::HeaderMap) {
    if !crate::telemetry::enabled() {
        return;
    }
    let Some(value) = headers
        .get(crate::telemetry::traceparent::HEADER)
        .and_then(|v| v.to_str().ok())
    else {
        return;
    };
    if let Ok(entry) = state.get(id).await {
        let _ = entry.handle.join_trace(value);
    }
}

/// `DELETE /v1/sessions/{id}/queue/{entry_id}`: 204, 404 `unknown_queue_entry`.
#[utoipa::path(delete, path = "/v1/sessions/{id}/queue/{entry_id}", tag = "tasks",
    params(("id" = String, Path, description = "The session's id."), ("entry_id" = String, Path, description = "The queued task's id.")),
    responses(
        (status = 204, description = "The queued task was dropped."),
        (status = 404, description = "unknown_queue_entry"),
    ))]
async fn cancel_queued(
    State(state): AppState,
    ApiPath((id, entry_id)): ApiPath<(String, String)>,
) -> ApiResult<StatusCode> {
    let entry = state.get(&id).await?;
    super::busy::cancel(&entry, &entry_id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `POST /v1/sessions/{id}/steer {text}`: 202 with `{"steer": "queued"|"started"}`.
#[utoipa::path(post, path = "/v1/sessions/{id}/steer", tag = "tasks", params(("id" = String, Path, description = "The session's id.")),
    request_body = TaskBody,
    responses(
        (status = 202, description = "The steer reaches the running task at its next turn, or started a task.", body = super::openapi_shapes::Steered),
        (status = 400, description = "invalid_request"),
        (status = 404, description = "session_ended"),
        (status = 409, description = "session_busy, compacting, session_failed"),
        (status = 422, description = "prompt_blocked"),
        (status = 429, description = "quota_exceeded"),
    ))]
async fn steer(
    State(state): AppState,
    Caller(who): Caller,
    ApiPath(id): ApiPath<String>,
    headers: axum::http::HeaderMap,
    ApiJson(body): ApiJson<TaskBody>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    state.check_open()?;
    // With a store: 503 `store_unavailable` while it is down, before the task is handed over.
    state.store_ready().await?;
    join_trace(&state, &id, &headers).await;
    super::task_schema::refuse_on_steer(&body.output_schema, body.max_output_retries)?;
    let text = body.text.as_str();
    let steered = on_session(&state, &id, |entry| async move {
        let after = entry.events_after().await;
        entry.handle.steer(text).await.map(|o| (after, o))
    });
    let (entry, (after, outcome)) = state.within_running_quota(&who, &id, steered).await?;
    audit(&state, &entry, &who.name, "steer", None);
    if outcome == crate::actors::session::SteerOutcome::Started {
        state.metrics.task_started();
        state.metrics.principals.task_started(&who.label);
    }
    Ok((
        StatusCode::ACCEPTED,
        Json(json!({"session_id": entry.id(), "steer": outcome.as_str(), "events_after": after})),
    ))
}

/// `Last-Event-ID` (header) or `?last_event_id=N` (for clients that cannot set headers).
fn last_event_id(headers: &HeaderMap, query: Option<&str>) -> ApiResult<Option<u64>> {
    let from_query = query.and_then(|q| {
        q.split('&')
            .find_map(|kv| kv.strip_prefix("last_event_id="))
            .map(str::to_string)
    });
    let raw = match headers.get("last-event-id") {
        Some(v) => Some(
            v.to_str()
                .map_err(|_| {
                    ApiError::bad_request("invalid_request", "Last-Event-ID must be a number")
                })?
                .to_string(),
        ),
        None => from_query,
    };
    match raw.as_deref().map(str::trim) {
        None | Some("") => Ok(None),
        Some(s) => s.parse::<u64>().map(Some).map_err(|_| {
            ApiError::bad_request(
                "invalid_request",
                format!("Last-Event-ID must be a number, got \"{s}\""),
            )
        }),
    }
}

#[utoipa::path(get, path = "/v1/sessions/{id}/events", tag = "events",
    params(("id" = String, Path, description = "The session's id."),
        ("Last-Event-ID" = Option<u64>, Header, description = "Go on after this event (a reconnect)."),
        ("last_event_id" = Option<u64>, Query, description = "The same, for clients that cannot set headers (the header wins)."),
        ("stream_token" = Option<String>, Query, description = "A token of `POST …/stream_token`, instead of the bearer token."),
    ),
    responses(
        (status = 200, description = "The session's events as Server-Sent Events, endless: each `id: <n>`, `event: <name>`, `data: <record>` (see the `StreamEvent` schema), with keep-alive comments.", content_type = "text/event-stream", body = super::openapi_shapes::StreamEvent),
        (status = 400, description = "invalid_request"),
    ))]
async fn events(
    State(state): AppState,
    ApiPath(id): ApiPath<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let after = last_event_id(&headers, query.as_deref())?;
    let mut entry = state.get(&id).await?;
    if !state.is_current(&entry) {
        // Closed or hibernated since the lookup.
        entry = state.get(&id).await?;
    }
    let sub = entry.log.subscribe(after);
    #[cfg(feature = "postgres")]
    if let (Some(range), Some(store)) = (sub.from_store, state.cfg.store.clone()) {
        // On the store: what is older than the ring, read by `seq`.
        let earlier = super::sse_store::replay(store, id, range).await?;
        return Ok(sse_response(sub, Some(earlier)).into_response());
    }
    let earlier = if sub.from_trace.is_empty() {
        None
    } else {
        // What left the ring is read back from the trace, written up to now first.
        if let Err(e) = entry.handle.flush_trace().await {
            tracing::warn!(session = %id, "cannot flush the trace for an SSE replay: {e}");
        }
        read_back(&state, &entry, sub.from_trace.clone()).await?
    };
    Ok(sse_response(sub, earlier).into_response())
}

/// The messages of `wanted` read back from the session's trace: its files, or the store
/// (503 `store_unavailable` while it is down).
async fn read_back(
    state: &ServerState,
    entry: &SessionEntry,
    wanted: Vec<super::sse::Gone>,
) -> ApiResult<Option<tokio::sync::mpsc::Receiver<Arc<super::sse::Record>>>> {
    #[cfg(feature = "postgres")]
    if let Some(store) = state.cfg.store.clone() {
        let rx = super::stored_records::read_back(store, entry.id().to_string(), wanted).await?;
        return Ok(Some(rx));
    }
    let _ = state;
    let files = super::sse_trace::trace_files(&entry.handle.trace_path());
    Ok(Some(super::sse_trace::read_back(files, wanted)))
}

#[utoipa::path(post, path = "/v1/sessions/{id}/abort", tag = "tasks", params(("id" = String, Path, description = "The session's id.")),
    responses(
        (status = 202, description = "The running task (if any) is being aborted; its `task_end` follows in the stream.", body = super::openapi_shapes::Aborting),
        (status = 404, description = "session_ended"),
        (status = 409, description = "session_failed"),
    ))]
async fn abort(
    State(state): AppState,
    Caller(who): Caller,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let state = &*state;
    let (entry, ()) = on_session(state, &id, |entry| async move { state.abort(&entry) }).await?;
    audit(state, &entry, &who.name, "abort", None);
    Ok((
        StatusCode::ACCEPTED,
        Json(json!({"session_id": entry.id()})),
    ))
}

#[utoipa::path(get, path = "/metrics", tag = "server",
    responses((status = 200, description = "Prometheus text exposition (version 0.0.4).", content_type = "text/plain", body = String)))]
async fn metrics(State(state): AppState) -> Response {
    let (g, by_principal) = super::metrics_collect::collect(&state).await;
    (
        [(CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")],
        state.metrics.render(&g)
            + &state.metrics.principals.render(&by_principal)
            + &state.webhooks().map(|w| w.render()).unwrap_or_default(),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn last_event_id_from_header_or_query() {
        let mut h = HeaderMap::new();
        assert_eq!(last_event_id(&h, None), Ok(None));
        assert_eq!(last_event_id(&h, Some("a=1&last_event_id=7")), Ok(Some(7)));
        h.insert("last-event-id", HeaderValue::from_static(" 12 "));
        assert_eq!(last_event_id(&h, Some("last_event_id=7")), Ok(Some(12)));
        h.insert("last-event-id", HeaderValue::from_static("x"));
        let e = last_event_id(&h, None).unwrap_err();
        assert_eq!(
            (e.status, e.message.as_str()),
            (
                StatusCode::BAD_REQUEST,
                "Last-Event-ID must be a number, got \"x\""
            )
        );
    }
}
