//! `POST /v1/sessions`: the body that opens a session (also the optional body of a resume) and
//! its handler, which checks it, resolves its config and sandbox request, and creates the
//! session as the caller.
//!
//! It translates HTTP to the server state and holds no state of its own.

use std::path::PathBuf;
use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};

use super::approval_routes::parse_mode;
use super::credentials::Caller;
use super::error::{ApiError, ApiJson};
use super::session_config;
use super::state::{OpenOptions, ServerState};

type ApiResult<T> = Result<T, ApiError>;

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct OpenBody {
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    workspace: Option<PathBuf>,
    #[serde(default)]
    #[schema(value_type = Option<super::openapi_shapes::ApprovalModeName>)]
    approval_mode: Option<String>,
    /// An inline config object or the name of one in `--config-dir`.
    #[serde(default)]
    config: Option<Value>,
    /// `penguin` | `openvaala`: overrides the config's `tools.profile`.
    #[serde(default)]
    #[schema(pattern = "^(penguin|openvaala)$")]
    tools_profile: Option<String>,
    /// `{"mode": "off|read-only|workspace-write", "network": "off|on"}`: never looser than the
    /// server's `--sandbox`.
    #[serde(default)]
    #[schema(value_type = Option<super::openapi_shapes::SandboxRequest>)]
    sandbox: Option<Value>,
    /// This session's own webhook URL (an origin of `--webhook-allow`; `webhooks.rs`).
    #[serde(default)]
    pub(super) webhook: Option<String>,
}

impl OpenBody {
    pub(super) async fn into_options(self, state: &ServerState) -> ApiResult<OpenOptions> {
        let approval_mode = self.approval_mode.as_deref().map(parse_mode).transpose()?;
        let tools_profile = self
            .tools_profile
            .as_deref()
            .map(|p| {
                p.parse::<crate::tools::profile::ToolProfile>()
                    .map_err(|e| ApiError::bad_request("invalid_tools_profile", e.to_string()))
            })
            .transpose()?;
        let config = match self.config {
            None | Some(Value::Null) => None,
            Some(v) => Some(
                session_config::resolve(
                    v,
                    state.cfg.config_dir.as_ref(),
                    state.cfg.config.model.as_ref(),
                )
                .await?,
            ),
        };
        let sandbox = match self.sandbox {
            None | Some(Value::Null) => Default::default(),
            Some(v) => serde_json::from_value(v).map_err(|e| {
                ApiError::bad_request(
                    "invalid_sandbox",
                    format!("sandbox: {e} (expected {{\"mode\": \"off|read-only|workspace-write\", \"network\": \"off|on\"}})"),
                )
            })?,
        };
        Ok(OpenOptions {
            workspace: self.workspace,
            approval_mode,
            config,
            tools_profile,
            sandbox,
            owner: None,
        })
    }
}

#[utoipa::path(post, path = "/v1/sessions", tag = "sessions",
    request_body(content = OpenBody, description = "The new session; `workspace` is required here."),
    responses(
        (status = 201, description = "The session was created and is served.", body = super::openapi_shapes::Created),
        (status = 400, description = "invalid_workspace, invalid_config, invalid_tools_profile, invalid_sandbox, invalid_webhook"),
        (status = 403, description = "sandbox_not_allowed, workspace_not_allowed, webhook_not_allowed"),
        (status = 422, description = "no_model, sandbox_unavailable"),
        (status = 429, description = "quota_exceeded"),
        (status = 500, description = "internal"),
        (status = 503, description = "session_start_failed, too_many_sessions, too_many_webhooks, shutting_down, store_unavailable"),
    ))]
pub(super) async fn create_session(
    State(state): State<Arc<ServerState>>,
    Caller(who): Caller,
    ApiJson(body): ApiJson<OpenBody>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let webhook = super::webhooks::requested(state.webhooks(), body.webhook.as_deref())?;
    state.store_ready().await?;
    let entry = state
        .create_as(&who, body.into_options(&state).await?)
        .await?;
    super::webhooks::attach(state.webhooks(), entry.id(), webhook);
    Ok((StatusCode::CREATED, Json(json!({"session_id": entry.id()}))))
}
