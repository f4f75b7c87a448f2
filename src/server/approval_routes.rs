//! The approval routes of `rookery serve`: `GET …/approvals` (the tool calls waiting for an
//! answer), `POST …/approvals/{approval_id}` (allow or deny one, a deny with an optional reason
//! for the model) and `PUT …/approval_mode`; and `audit`, the trace record of who did what
//! through the API, which the other session routes use too.
//!
//! Handlers translate HTTP to the session's approver and policy and back; they hold no state
//! of their own and every failure is an [`ApiError`]. This module must not import `routes.rs`
//! (which mounts these handlers).

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};

use super::approver::{Decided, PendingApproval};
use super::credentials::Caller;
use super::error::{ApiError, ApiJson, ApiPath};
use super::state::{ServerState, SessionEntry};
use crate::approval::{Answer, ApprovalMode, UnknownApprovalMode};
use crate::message::Decision;

type AppState = State<Arc<ServerState>>;
type ApiResult<T> = Result<T, ApiError>;

/// An approval mode named in a request body; 400 `invalid_request` for an unknown one.
pub(super) fn parse_mode(s: &str) -> ApiResult<ApprovalMode> {
    s.parse()
        .map_err(|e: UnknownApprovalMode| ApiError::bad_request("invalid_request", e.to_string()))
}

/// Records in the session's trace that principal `by` did `action` through the API, on a
/// server with `--auth` (without it every request is the one admin: the trace stays as it was).
/// A session that stopped meanwhile records nothing: the request acted on no session.
pub(super) fn audit(
    state: &ServerState,
    entry: &SessionEntry,
    by: &str,
    action: &str,
    mode: Option<&str>,
) {
    if state.cfg.principals().is_none() {
        return;
    }
    if let Err(e) = entry.handle.record_action(action, by, mode) {
        tracing::debug!(session = %entry.id(), "cannot record {action}: {e}");
    }
}

#[utoipa::path(get, path = "/v1/sessions/{id}/approvals", tag = "approvals", params(("id" = String, Path, description = "The session's id.")),
    responses((status = 200, description = "The tool calls waiting for an answer.", body = super::openapi_shapes::ApprovalList)))]
pub(super) async fn list_approvals(
    State(state): AppState,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Json<Value>> {
    let entry = state.get(&id).await?;
    let approvals: Vec<Value> = entry
        .approvals
        .pending()
        .iter()
        .map(approval_view)
        .collect();
    Ok(Json(json!({ "approvals": approvals })))
}

/// The JSON view of a pending approval.
fn approval_view(p: &PendingApproval) -> Value {
    json!({
        "approval_id": p.approval_id,
        "tool_call_id": p.request.tool_call_id,
        "name": p.request.name,
        "arguments": p.request.arguments,
        "origin": p.request.origin,
    })
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct DecisionBody {
    #[schema(pattern = "^(allow|deny|allow_for_session)$")]
    decision: String,
    /// Why (only with `deny`): the model is told it in the denied call's output.
    #[serde(default)]
    reason: Option<String>,
}

/// Characters a denial's `reason` may have, at most (a longer one is refused with 400).
pub const MAX_DENY_REASON_CHARS: usize = 2000;

/// A decision's `reason`: trimmed, empty as none, only with `deny`, bounded.
fn deny_reason(decision: Decision, reason: Option<String>) -> ApiResult<Option<String>> {
    let Some(reason) = reason
        .map(|r| r.trim().to_string())
        .filter(|r| !r.is_empty())
    else {
        return Ok(None);
    };
    if decision != Decision::Deny {
        return Err(ApiError::bad_request(
            "invalid_request",
            "reason is only taken with decision \"deny\"",
        ));
    }
    let chars = reason.chars().count();
    if chars > MAX_DENY_REASON_CHARS {
        return Err(ApiError::bad_request(
            "invalid_request",
            format!("reason has {chars} characters; at most {MAX_DENY_REASON_CHARS} are taken"),
        ));
    }
    Ok(Some(reason))
}

#[utoipa::path(post, path = "/v1/sessions/{id}/approvals/{approval_id}", tag = "approvals",
    params(("id" = String, Path, description = "The session's id."), ("approval_id" = String, Path, description = "The approval's id (or its tool call's id, when only one approval has it).")),
    request_body = DecisionBody,
    responses(
        (status = 204, description = "The call was answered."),
        (status = 400, description = "invalid_request"),
        (status = 404, description = "unknown_approval"),
        (status = 409, description = "ambiguous_approval"),
    ))]
pub(super) async fn decide_approval(
    State(state): AppState,
    Caller(who): Caller,
    ApiPath((id, key)): ApiPath<(String, String)>,
    ApiJson(body): ApiJson<DecisionBody>,
) -> ApiResult<StatusCode> {
    let decision = match body.decision.as_str() {
        "allow" => Decision::Allow,
        "deny" => Decision::Deny,
        "allow_for_session" => Decision::AllowForSession,
        other => {
            return Err(ApiError::bad_request(
                "invalid_request",
                format!("unknown decision \"{other}\" (use allow, allow_for_session or deny)"),
            ));
        }
    };
    let answer = Answer {
        decision,
        reason: deny_reason(decision, body.reason)?,
    };
    let mut entry = state.get(&id).await?;
    let by = Some(who.name.as_str());
    let mut decided = entry.approvals.answer_by(&key, answer.clone(), by);
    if matches!(decided, Decided::NotFound) && !state.is_current(&entry) {
        // Closed or hibernated since the lookup (either denied its approvals).
        entry = state.get(&id).await?;
        decided = entry.approvals.answer_by(&key, answer, by);
    }
    match decided {
        Decided::Answered => Ok(StatusCode::NO_CONTENT),
        Decided::NotFound => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "unknown_approval",
            format!("no pending approval for tool call {key} in session {id}"),
        )),
        Decided::Ambiguous(list) => {
            let ids: Vec<&str> = list.iter().map(|p| p.approval_id.as_str()).collect();
            Err(ApiError::new(
                StatusCode::CONFLICT,
                "ambiguous_approval",
                format!(
                    "{} pending approvals have tool call id {key} ({}); decide one by its approval_id",
                    list.len(),
                    ids.join(", ")
                ),
            )
            .with_detail(
                "approvals",
                Value::Array(list.iter().map(approval_view).collect()),
            ))
        }
    }
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ModeBody {
    #[schema(value_type = super::openapi_shapes::ApprovalModeName)]
    mode: String,
}

#[utoipa::path(put, path = "/v1/sessions/{id}/approval_mode", tag = "approvals", params(("id" = String, Path, description = "The session's id.")),
    request_body = ModeBody,
    responses(
        (status = 204, description = "The mode is set (for the calls that follow)."),
        (status = 400, description = "invalid_request"),
    ))]
pub(super) async fn set_approval_mode(
    State(state): AppState,
    Caller(who): Caller,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<ModeBody>,
) -> ApiResult<StatusCode> {
    let mode = parse_mode(&body.mode)?;
    let entry = state.get(&id).await?;
    audit(
        &state,
        &entry,
        &who.name,
        "approval_mode",
        Some(mode.as_str()),
    );
    entry.policy.set_mode(mode);
    Ok(StatusCode::NO_CONTENT)
}
