//! What the openvaala `read_file` refuses to open, for the file it was asked for and for every
//! `AGENTS.md` it brings along: a path whose real location (symlinks resolved) is outside the
//! workspace, as apply_patch confines its paths, and a secret store, decided as by every file
//! tool (`crate::tools::secret_guard`: by the name of the path and of its realpath before the
//! open, by the opened file, a hard link to one, after it). After the open, where the kernel
//! says the opened file is must still be inside and not a secret store, so a symlink swapped
//! between the look and the open leads nowhere.
//!
//! It only looks and opens read-only; it never reads a file's content.

use std::path::Path;

use crate::tools::canonical::{canonical, real_location, really_inside};
use crate::tools::file_target::{Opened, TargetError, open_regular};
use crate::tools::opened_at::path_of;
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

/// Opens `path` (absolute, lexically inside `workspace`) for reading, unless it is refused. A
/// missing path is judged by where it would be (its deepest existing directory resolved), so
/// one under a symlink out of the workspace is refused as outside, not answered as missing.
pub(super) fn open_guarded(workspace: &Path, path: &Path) -> Result<Opened, Refused> {
    let real = canonical(workspace, path);
    let inside = match &real {
        Some(real) => really_inside(workspace, real),
        None => real_location(path).is_some_and(|at| really_inside(workspace, &at)),
    };
    if !inside {
        return Err(Refused::Outside);
    }
    if let Some(name) = secret_by_names(path, real.as_deref()) {
        return Err(Refused::Secret(name));
    }
    let opened = open_regular(path).map_err(Refused::Target)?;
    // Judged again by what was opened: a symlink swapped by rename after the look above may
    // have led the open elsewhere. Where the kernel says the opened file is decides.
    let opened_at = path_of(&opened.file).ok();
    let real = opened_at.as_deref().or(real.as_deref()).unwrap_or(path);
    if !really_inside(workspace, real) {
        return Err(Refused::Outside);
    }
    if let Some(name) = secret_by_names(path, Some(real)) {
        return Err(Refused::Secret(name));
    }
    match secret_by_identity(real, &opened.meta, workspace) {
        Some(name) => Err(Refused::Secret(name)),
        None => Ok(opened),
    }
}
