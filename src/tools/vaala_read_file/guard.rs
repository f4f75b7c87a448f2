//! What the openvaala `read_file` refuses to open, for the file it was asked for and for every
//! `AGENTS.md` it brings along: a path whose real location (symlinks resolved) is outside the
//! workspace, as apply_patch confines its paths, and a secret store, decided as by every file
//! tool (`crate::tools::secret_guard`: by the name of the path and of its realpath before the
//! open, by the opened file, a hard link to one, after it).
//!
//! It only looks and opens read-only; it never reads a file's content.

use std::path::Path;

use crate::tools::canonical::{canonical, canonical_workspace};
use crate::tools::file_target::{Opened, TargetError, open_regular};
use crate::tools::secret_guard::{secret_by_identity, secret_by_names};

/// Why a path was not opened.
#[derive(Debug)]
pub(super) enum Refused {
    /// It leads out of the workspace.
    Outside,
    /// It is the secret store of this name.
    Secret(&'static str),
    /// It could not be opened as a regular file.
    Target(TargetError),
}

/// Opens `path` (absolute, lexically inside `workspace`) for reading, unless it is refused.
pub(super) fn open_guarded(workspace: &Path, path: &Path) -> Result<Opened, Refused> {
    let real = canonical(workspace, path);
    if let Some(real) = &real
        && !inside_really(workspace, real)
    {
        return Err(Refused::Outside);
    }
    if let Some(name) = secret_by_names(path, real.as_deref()) {
        return Err(Refused::Secret(name));
    }
    let opened = open_regular(path).map_err(Refused::Target)?;
    match secret_by_identity(real.as_deref().unwrap_or(path), &opened.meta, workspace) {
        Some(name) => Err(Refused::Secret(name)),
        None => Ok(opened),
    }
}

/// Whether `real` (a canonical path) lies in `workspace`, as given or resolved.
fn inside_really(workspace: &Path, real: &Path) -> bool {
    real.starts_with(super::normalize(workspace))
        || canonical_workspace(workspace).is_some_and(|w| real.starts_with(w))
}
