//! The sandbox of a served session: the request's, within the server's own (`--sandbox`), and
//! a resumed session's recorded one, which must be within it too.
//!
//! It decides and answers 403 `sandbox_not_allowed`; it sets nothing up (the spawn does).

use super::{OpenOptions, ServerState};
use crate::sandbox::SandboxPolicy;
use crate::server::error::ApiError;

impl ServerState {
    /// The sandbox a new session gets: what the request asks of the request's config's sandbox
    /// (when it has one) or the server's, never looser than the server's.
    pub(super) fn session_sandbox(&self, open: &OpenOptions) -> Result<SandboxPolicy, ApiError> {
        let ceiling = &self.cfg.sandbox;
        let default = match &open.config {
            Some(c) if !c.sandbox.is_off() => &c.sandbox,
            _ => ceiling,
        };
        SandboxPolicy::within(open.sandbox.apply(default), ceiling)
            .map_err(|e| ApiError::sandbox(&e))
    }

    /// A recorded session comes back with its recorded sandbox (or a stricter one asked for,
    /// never a looser one: the host refuses that), and only when that is within the server's:
    /// 403 `sandbox_not_allowed` otherwise.
    pub(super) fn check_resumed_sandbox(
        &self,
        recorded: Option<&crate::message::SessionMeta>,
        open: &OpenOptions,
    ) -> Result<(), ApiError> {
        if self.cfg.sandbox.is_off() {
            // Nothing is looser than `off`.
            return Ok(());
        }
        let recorded = recorded
            .map(|m| m.launch.sandbox_policy())
            .unwrap_or_default();
        SandboxPolicy::within(open.sandbox.apply(&recorded), &self.cfg.sandbox)
            .map(|_| ())
            .map_err(|e| ApiError::sandbox(&e))
    }
}
