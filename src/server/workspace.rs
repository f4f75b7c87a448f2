//! Workspace roots: a principal with `workspace_roots` may only open (create, resume, wake)
//! a session whose workspace, with symlinks and `..` resolved, is inside one of them; else
//! 403 `workspace_not_allowed`.
//!
//! It decides; it never opens a session nor changes a path the session is given.

use std::path::Path;

use axum::http::StatusCode;

use super::error::ApiError;
use super::principal::Principal;

/// 403 `workspace_not_allowed` unless `workspace` resolves inside `principal`'s roots (a
/// principal without roots may use any workspace; one that cannot be resolved is refused).
pub fn check(principal: &Principal, workspace: &Path) -> Result<(), ApiError> {
    if principal.workspace_roots.is_empty() {
        return Ok(());
    }
    let allowed = std::fs::canonicalize(workspace)
        .ok()
        .is_some_and(|real| principal.allows_workspace(&real));
    if allowed {
        Ok(())
    } else {
        Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "workspace_not_allowed",
            format!(
                "workspace {} is outside the workspace roots of principal \"{}\" (symlinks and .. resolved)",
                super::error::shown(&workspace.display().to_string()),
                principal.name
            ),
        ))
    }
}
