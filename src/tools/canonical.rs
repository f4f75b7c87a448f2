//! The canonical path of a file tool's target, resolved once per call and cheaply: when the
//! target lies under the session's workspace (whose canonical form is remembered per process)
//! and no component below the workspace is a symlink or `..`, the lexical path *is* the
//! canonical one, proven with one `lstat` per component below the workspace instead of the
//! `readlink` of every component of the whole path that `realpath(3)` makes.
//!
//! A session's workspace is resolved the same way when the session starts: a workspace in a
//! directory already known to be canonical (the parent of an earlier workspace) is proven by
//! one `lstat` of its own name instead of `realpath`'s `stat` and `readlink` of every component.
//! What is remembered is what `realpath` answered earlier in this process: a directory on the
//! way replaced by a symlink afterwards is not noticed (the same holds for the workspaces).
//!
//! It also answers, for the file tools that confine their paths to the workspace (openvaala's
//! `read_file`, `apply_patch`, openvaala's `bash` `cwd`), whether a path goes through the
//! workspace under any of its names ([`under_workspace`]: the workspace as given, its canonical
//! form, or another spelling that resolves to it, e.g. `/tmp/w` for `/private/tmp/w`) and
//! whether its real location, symlinks resolved, stays in it ([`real_location`],
//! [`really_inside`]).
//!
//! It only looks (`lstat`, and `realpath` as the fallback); it never opens or changes a file.

use std::collections::HashMap;
use std::fs;
use std::path::{Component, Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use super::path_hint::normalize_lexically;

/// Workspaces remembered (cleared when full; a miss only costs one `realpath`).
const REMEMBERED_MAX: usize = 4096;

/// Workspaces known to be (or not to be) their own canonical path.
fn known() -> &'static Mutex<HashMap<PathBuf, bool>> {
    static KNOWN: OnceLock<Mutex<HashMap<PathBuf, bool>>> = OnceLock::new();
    KNOWN.get_or_init(Mutex::default)
}

fn remember(workspace: &Path, canonical: bool) {
    if let Ok(mut map) = known().lock() {
        if map.len() >= REMEMBERED_MAX {
            map.clear();
        }
        map.insert(workspace.to_path_buf(), canonical);
    }
}

/// Records that `workspace` was just resolved by `realpath` (a session's workspace when it
/// starts), so its file tools do not resolve it again.
pub fn remember_canonical(workspace: &Path) {
    remember(workspace, true);
}

/// Whether `dir` is remembered as its own canonical path (memory only: a miss is `false`).
fn is_remembered_canonical(dir: &Path) -> bool {
    known()
        .lock()
        .is_ok_and(|map| map.get(dir).copied().unwrap_or(false))
}

/// The canonical path of a session's workspace, `None` when it is not a directory (or cannot
/// be resolved). An absolute path without `.` or `..` in a remembered canonical directory is
/// its own canonical form when its last component is a real directory (one `lstat`); any
/// other is resolved by `realpath`. Either way the answer and its parent are remembered, so
/// the session's file tools and the next workspace beside it are not resolved again.
pub fn canonical_workspace(workspace: &Path) -> Option<PathBuf> {
    let canonical = match plain_in_remembered_dir(workspace) {
        Some(plain) => match fs::symlink_metadata(&plain) {
            Ok(meta) if meta.is_dir() => plain,
            // A symlink (to a directory or not) is resolved below.
            Ok(meta) if meta.file_type().is_symlink() => resolve_dir(workspace)?,
            _ => return None,
        },
        None => resolve_dir(workspace)?,
    };
    if let Some(parent) = canonical.parent() {
        remember(parent, true);
    }
    remember(&canonical, true);
    Some(canonical)
}

/// `workspace` rebuilt from its components when it is absolute, has no `.` or `..` and its
/// parent is remembered canonical.
fn plain_in_remembered_dir(workspace: &Path) -> Option<PathBuf> {
    let mut components = workspace.components();
    if components.next() != Some(Component::RootDir) {
        return None;
    }
    let mut plain = PathBuf::from("/");
    for component in components {
        let Component::Normal(name) = component else {
            return None;
        };
        plain.push(name);
    }
    plain
        .parent()
        .filter(|parent| is_remembered_canonical(parent))?;
    Some(plain)
}

/// `realpath` of a directory (`None` when it fails or names something else).
fn resolve_dir(path: &Path) -> Option<PathBuf> {
    let real = fs::canonicalize(path).ok()?;
    fs::metadata(&real).ok()?.is_dir().then_some(real)
}

/// Whether `workspace` is its own canonical path (asked of the OS once per workspace).
fn is_canonical_dir(workspace: &Path) -> bool {
    if let Ok(map) = known().lock()
        && let Some(&hit) = map.get(workspace)
    {
        return hit;
    }
    let canonical = fs::canonicalize(workspace).is_ok_and(|c| c == workspace);
    remember(workspace, canonical);
    canonical
}

/// The canonical path of `resolved` (absolute and lexically normalized), `None` when it does
/// not exist (or cannot be resolved).
pub fn canonical(workspace: &Path, resolved: &Path) -> Option<PathBuf> {
    canonical_with_stat(workspace, resolved).0
}

/// [`canonical`], and the `stat` of the target when the cheap proof made one on the way: the
/// `lstat` of a final component that is not a symlink is the `stat` of the file itself, so a
/// caller about to `stat` it can take this one instead.
pub fn canonical_with_stat(
    workspace: &Path,
    resolved: &Path,
) -> (Option<PathBuf>, Option<fs::Metadata>) {
    if let Some((path, meta)) = canonical_under(workspace, resolved) {
        return (Some(path), Some(meta));
    }
    (fs::canonicalize(resolved).ok(), None)
}

/// `Some(resolved)` and the `lstat` of its final component when it exists under a canonical
/// `workspace` through real directories only (the cheap proof alone: `None` says nothing about
/// the path, which [`canonical_with_stat`] would then resolve with `realpath`).
pub fn canonical_under(workspace: &Path, resolved: &Path) -> Option<(PathBuf, fs::Metadata)> {
    let rest = resolved.strip_prefix(workspace).ok()?;
    if rest.as_os_str().is_empty() || !is_canonical_dir(workspace) {
        return None;
    }
    let mut at = workspace.to_path_buf();
    let mut last = None;
    for component in rest.components() {
        let Component::Normal(name) = component else {
            return None;
        };
        at.push(name);
        let meta = fs::symlink_metadata(&at).ok()?;
        if meta.file_type().is_symlink() {
            return None;
        }
        last = Some(meta);
    }
    Some((at, last?))
}

/// `path` (absolute and lexically normalized) as a path under `workspace` (as the session gave
/// it, lexically normalized here) when it goes through the workspace under any of its names:
/// under `workspace` itself, under its canonical form, or under another directory that is the
/// workspace once symlinks are resolved (the shallowest such ancestor of `path`). The part below
/// the workspace is kept as written, symlinks and all. `None` when it does not go through the
/// workspace.
///
/// This says nothing of where the result really leads: [`real_location`] and [`really_inside`]
/// answer that. Only a path outside the workspace as given costs more than a comparison (a
/// `realpath` per leading component, up to the first one that is missing).
pub fn under_workspace(workspace: &Path, path: &Path) -> Option<PathBuf> {
    let lexical = normalize_lexically(workspace);
    if path.starts_with(&lexical) {
        return Some(path.to_path_buf());
    }
    let canonical = canonical_workspace(&lexical)?;
    let rebase = |rest: &Path| {
        if rest.as_os_str().is_empty() {
            lexical.clone()
        } else {
            lexical.join(rest)
        }
    };
    if let Ok(rest) = path.strip_prefix(&canonical) {
        return Some(rebase(rest));
    }
    let mut prefix = PathBuf::new();
    for component in path.components() {
        prefix.push(component);
        // A missing directory: nothing below it can be the workspace.
        let real = fs::canonicalize(&prefix).ok()?;
        if real == canonical {
            return path.strip_prefix(&prefix).ok().map(rebase);
        }
    }
    None
}

/// Where `path` (lexically normalized) really is, whether it exists or not: the canonical path
/// of its deepest existing ancestor with the components below that ancestor appended as
/// written. `None` only when no ancestor resolves at all.
pub fn real_location(path: &Path) -> Option<PathBuf> {
    for ancestor in path.ancestors() {
        let at = if ancestor.as_os_str().is_empty() {
            Path::new(".")
        } else {
            ancestor
        };
        if let Ok(real) = fs::canonicalize(at) {
            let rest = path.strip_prefix(ancestor).ok()?;
            return Some(if rest.as_os_str().is_empty() {
                real
            } else {
                real.join(rest)
            });
        }
    }
    None
}

/// Whether `real` (a canonical path, or the [`real_location`] of a missing one) lies in
/// `workspace`: under the workspace as given or under its canonical form.
pub fn really_inside(workspace: &Path, real: &Path) -> bool {
    real.starts_with(normalize_lexically(workspace))
        || canonical_workspace(workspace).is_some_and(|w| real.starts_with(w))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_remembered_workspace_is_not_resolved_again() {
        // realpath would fail on a path that does not exist: the answer comes from memory.
        let ws = Path::new("/rookery-canonical-test-never-created");
        assert!(!ws.exists());
        remember_canonical(ws);
        assert!(is_canonical_dir(ws));
    }

    #[test]
    fn a_workspace_beside_a_resolved_one_is_proven_by_its_own_lstat() {
        let dir = tempfile::tempdir().unwrap();
        let real = fs::canonicalize(dir.path()).unwrap();
        fs::create_dir(real.join("ws-0")).unwrap();
        fs::create_dir(real.join("ws-1")).unwrap();
        fs::write(real.join("file"), "x").unwrap();
        std::os::unix::fs::symlink(real.join("ws-1"), real.join("link")).unwrap();
        // The first is resolved by realpath, through any spelling; its parent is remembered.
        let spelled = real.join("ws-1/../ws-0/.");
        assert_eq!(canonical_workspace(&spelled), Some(real.join("ws-0")));
        assert!(is_remembered_canonical(&real));
        assert_eq!(
            canonical_workspace(&real.join("ws-1/")),
            Some(real.join("ws-1"))
        );
        // A symlink is still resolved, and what is not a directory is refused.
        assert_eq!(
            canonical_workspace(&real.join("link")),
            Some(real.join("ws-1"))
        );
        assert_eq!(canonical_workspace(&real.join("file")), None);
        assert_eq!(canonical_workspace(&real.join("missing")), None);
        assert_eq!(canonical_workspace(&real.join("file/..")), None);

        // The memory is what is trusted: told (wrongly) that a symlinked directory is
        // canonical, the lexical path comes back, where realpath would give the target. That
        // shows the answer came from the lstat alone.
        let other = tempfile::tempdir().unwrap();
        let alias = real.join("alias");
        std::os::unix::fs::symlink(other.path(), &alias).unwrap();
        fs::create_dir(other.path().join("ws")).unwrap();
        remember_canonical(&alias);
        assert_eq!(
            canonical_workspace(&alias.join("ws")),
            Some(alias.join("ws"))
        );
    }

    #[test]
    fn plain_paths_are_their_own_and_links_are_resolved() {
        let dir = tempfile::tempdir().unwrap();
        let ws = fs::canonicalize(dir.path()).unwrap();
        fs::create_dir(ws.join("sub")).unwrap();
        fs::write(ws.join("sub/a.txt"), "a").unwrap();
        std::os::unix::fs::symlink(ws.join("sub"), ws.join("link")).unwrap();
        std::os::unix::fs::symlink("sub/a.txt", ws.join("f")).unwrap();

        let plain = ws.join("sub/a.txt");
        let (path, meta) = canonical_under(&ws, &plain).unwrap();
        assert_eq!(path, plain);
        assert!(meta.is_file() && meta.len() == 1);
        let (path, meta) = canonical_with_stat(&ws, &plain);
        assert_eq!(path.as_ref(), Some(&plain));
        assert!(meta.is_some_and(|m| m.is_file()));
        // Through a link: resolved by realpath, and no stat to hand on.
        let (path, meta) = canonical_with_stat(&ws, &ws.join("f"));
        assert_eq!(path.as_ref(), Some(&plain));
        assert!(meta.is_none());
        assert_eq!(canonical(&ws, &plain), Some(plain.clone()));
        // A symlinked directory or file is not taken as canonical; realpath resolves it.
        assert!(canonical_under(&ws, &ws.join("link/a.txt")).is_none());
        assert_eq!(canonical(&ws, &ws.join("link/a.txt")), Some(plain.clone()));
        assert_eq!(canonical(&ws, &ws.join("f")), Some(plain.clone()));
        // Outside the workspace, or missing.
        assert!(canonical_under(&ws, Path::new("/etc/hostname")).is_none());
        assert_eq!(canonical(&ws, &ws.join("missing")), None);
        // A workspace that is not canonical itself is never trusted.
        let via_link = ws.join("link");
        assert!(canonical_under(&via_link, &via_link.join("a.txt")).is_none());
        assert_eq!(canonical(&via_link, &via_link.join("a.txt")), Some(plain));
    }

    #[test]
    fn paths_through_any_name_of_the_workspace_and_their_real_locations() {
        let dir = tempfile::tempdir().unwrap();
        let root = fs::canonicalize(dir.path()).unwrap();
        let (ws, link) = (root.join("ws"), root.join("wslink"));
        fs::create_dir_all(ws.join("sub")).unwrap();
        fs::create_dir_all(root.join("out")).unwrap();
        std::os::unix::fs::symlink("ws", &link).unwrap();
        std::os::unix::fs::symlink(root.join("out"), ws.join("up")).unwrap();
        std::os::unix::fs::symlink(ws.join("sub"), root.join("subalias")).unwrap();
        // Rebased under the workspace as given, the rest kept as written.
        for (given, other) in [(&ws, &link), (&link, &ws)] {
            let under = |p: &Path| under_workspace(given, p);
            assert_eq!(under(&given.join("up/x")), Some(given.join("up/x")));
            assert_eq!(under(&other.join("up/x")), Some(given.join("up/x")));
            assert_eq!(under(other), Some(given.to_path_buf()));
            assert_eq!(
                under(&link.join("sub/new/f")),
                Some(given.join("sub/new/f"))
            );
            // Not through the workspace: beside it, or a subdirectory reached another way.
            assert_eq!(under(&root.join("out/x")), None);
            assert_eq!(under(&root.join("subalias/x")), None);
            assert_eq!(under(&root.join("wsx/a")), None);
            assert_eq!(under(&root.join("missing/ws/a")), None);
        }
        // Where a path really is, existing or not, and whether that is inside.
        assert_eq!(
            real_location(&link.join("up/new/f")),
            Some(root.join("out/new/f"))
        );
        assert_eq!(real_location(&link.join("sub")), Some(ws.join("sub")));
        assert!(really_inside(&link, &ws.join("sub/f")));
        assert!(!really_inside(&link, &root.join("out/new/f")));
        // A workspace that cannot be resolved is taken as given.
        assert!(really_inside(Path::new("/w/p"), Path::new("/w/p/x")));
        assert_eq!(under_workspace(Path::new("/w/p"), Path::new("/w/q")), None);
    }
}
