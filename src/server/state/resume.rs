//! Resuming a served session from its trace: the recorded opening (its workspace, owner, tool
//! profile and sandbox), the model and config it reopens with, then the host's resume and the
//! server's registration. Part of the server's session directory (`state.rs`).
//!
//! It owns the reopen rules; it must not read traces itself (`stored.rs` and `trace_meta.rs`
//! do) nor run a turn.

use std::path::PathBuf;
use std::sync::Arc;

use axum::http::StatusCode;

use super::{Base, OpenOptions, ServerState, SessionEntry, hibernate};
use crate::server::error::ApiError;

impl ServerState {
    /// Resumes a session from its trace (a session already served is returned as it is).
    pub async fn resume(&self, id: &str, open: OpenOptions) -> Result<Arc<SessionEntry>, ApiError> {
        let _guard = self.resume_lock.lock().await;
        self.resume_locked(id, open, None).await
    }

    /// [`Self::resume`] under the resume lock; `carried` is what a hibernated session keeps
    /// (its event log, its trace file when its id does not say where, its creation time).
    pub(super) async fn resume_locked(
        &self,
        id: &str,
        open: OpenOptions,
        carried: Option<hibernate::Carried>,
    ) -> Result<Arc<SessionEntry>, ApiError> {
        if let Some(e) = self.in_memory(id) {
            return Ok(e);
        }
        self.check_open()?;
        let (log, known, created_at) = match carried {
            Some(c) => (Some(c.log), c.trace, Some(c.created_at)),
            None => (None, None, None),
        };
        let opening = match self.opening_of(id, known).await? {
            Some(o) => o,
            None => return Err(ApiError::unknown_session(id)),
        };
        let created_at = created_at.unwrap_or_else(|| opening.created_at.clone());
        let first_meta = opening.first.clone();
        let workspace = match open.workspace.clone() {
            Some(w) => w,
            None => match &first_meta {
                Some(meta) => PathBuf::from(&meta.workspace),
                None => {
                    return Err(ApiError::new(
                        StatusCode::UNPROCESSABLE_ENTITY,
                        "unreadable_trace",
                        format!(
                            "cannot resume {id}: {} has no session_meta",
                            opening.place.display()
                        ),
                    ));
                }
            },
        };
        self.check_workspace_here(id, &workspace)?;
        let mut open = open;
        if open.owner.is_none() {
            open.owner = first_meta.as_ref().and_then(|m| m.owner.clone());
        }
        if open.tools_profile.is_none() {
            // The session keeps the tool profile its trace recorded.
            open.tools_profile =
                first_meta.and_then(|m| m.launch.tool_profile.and_then(|p| p.parse().ok()));
        }
        let base = self.reopen_base(id, opening.last.as_ref(), &open)?;
        self.check_resumed_sandbox(opening.last.as_ref(), &open)?;
        let (options, policy, approvals) = self.options(workspace, &open, base)?;
        let slot = self.slot()?;
        let handle = self
            .host
            .resume_session(id, options)
            .await
            .map_err(ApiError::session_start)?;
        tracing::info!(session = %id, "resumed from {}", opening.place.display());
        self.register(handle, policy, approvals, slot, log, created_at)
            .await
    }

    /// The model, config and launch a recorded session reopens with: the server's own when it
    /// was started with a model (the recorded details are then overridden, and the override is
    /// recorded when it changes them), else the ones the trace records. Fields of the request
    /// (`config`) override either and are recorded too.
    fn reopen_base(
        &self,
        id: &str,
        meta: Option<&crate::message::SessionMeta>,
        open: &OpenOptions,
    ) -> Result<Base, ApiError> {
        let mut overrides = Vec::new();
        let mut base = match &self.cfg.model {
            Some(model) => {
                let info = model.info();
                let same = meta.is_some_and(|m| {
                    m.provider == info.provider
                        && m.model_id == info.model_id
                        && m.launch.script == self.cfg.launch.script
                        && m.launch.base_url == self.cfg.launch.base_url
                        && m.launch.api_key_env == self.cfg.launch.api_key_env
                });
                if meta.is_some() && !same {
                    overrides.push("model".to_string());
                }
                Base {
                    model: model.clone(),
                    config: self.cfg.config.clone(),
                    launch: self.cfg.launch.clone(),
                }
            }
            None => {
                let recorded = meta
                    .map(crate::server::reopen::recorded)
                    .transpose()
                    .map_err(|e| {
                        ApiError::new(
                            StatusCode::UNPROCESSABLE_ENTITY,
                            "invalid_recorded_config",
                            format!("cannot resume {id} with what its trace records: {e}"),
                        )
                    })?
                    .flatten();
                let Some(r) = recorded else {
                    return Err(ApiError::new(
                        StatusCode::UNPROCESSABLE_ENTITY,
                        "no_model",
                        format!(
                            "cannot resume {id}: its trace records no model to reopen it with, and the server was started without one"
                        ),
                    ));
                };
                let mut config = r.config;
                config.hooks = Arc::new(config.hooks.merged(&self.cfg.hooks));
                config.permissions = Arc::new(config.permissions.merged(&self.cfg.permissions));
                Base {
                    model: r.model,
                    config,
                    launch: r.launch,
                }
            }
        };
        if open.config.is_some() {
            overrides.push("config".to_string());
            base.launch.config = None;
        }
        if !overrides.is_empty() {
            base.launch.reopened_with = Some(overrides);
        }
        Ok(base)
    }
}
