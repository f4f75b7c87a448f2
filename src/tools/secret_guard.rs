//! The secret-store guard of the file tools (read_file, write_file, edit_file): decides whether a
//! path or an opened file is one of the user's secret stores (`.vault.toml`,
//! `.project_config.toml`), first by name (the path and its realpath, case-insensitive), then by
//! the file itself: a regular file with more than one hard link is a secret store when another
//! name of the same device + inode is one (searched next to the file, in its ancestors, in the
//! workspace and in the user's home, within fixed entry budgets).
//!
//! It only looks (stat, readdir); it never reads file contents, writes or fails: when a search
//! cannot be done (unreadable directory) that place is skipped.

use std::collections::HashSet;
use std::ffi::OsStr;
use std::fs::{self, Metadata};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Secret stores, by lowercased basename.
pub const SECRET_BASENAMES: [&str; 2] = [".vault.toml", ".project_config.toml"];

/// Directory entries looked at in the workspace walk of one check.
const WORKSPACE_ENTRY_BUDGET: usize = 50_000;

/// Directory entries looked at under each home directory in one check.
const HOME_ENTRY_BUDGET: usize = 10_000;

/// Deepest directory level walked (the root of the walk is level 0).
const MAX_WALK_DEPTH: usize = 12;

/// Directories never descended into by the walks (huge, and never a secret store's home).
const SKIPPED_DIRS: [&str; 2] = [".git", "node_modules"];

/// The secret-store name `name` spells (case-insensitive), if any.
pub fn secret_name(name: &OsStr) -> Option<&'static str> {
    let lower = name.to_string_lossy().to_lowercase();
    SECRET_BASENAMES.iter().copied().find(|s| *s == lower)
}

/// The secret-store name the basename of `path` or of its realpath hits. A missing file has
/// no realpath; its lexical name is still checked.
pub fn secret_by_name(path: &Path) -> Option<&'static str> {
    secret_by_names(path, fs::canonicalize(path).ok().as_deref())
}

/// [`secret_by_name`] with the realpath already resolved (`None`: the file is missing).
pub fn secret_by_names(path: &Path, real: Option<&Path>) -> Option<&'static str> {
    [Some(path), real]
        .into_iter()
        .flatten()
        .filter_map(Path::file_name)
        .find_map(secret_name)
}

/// Whether the opened file (`meta` from `fstat` of the open descriptor, `real` its resolved
/// path) is a secret store: by the name of `real`, or, when it has more than one hard link, by
/// another name of the same device + inode found next to it, in its ancestors, under
/// `workspace`, `$HOME` or `$ROOKERY_HOME`.
pub fn secret_by_identity(real: &Path, meta: &Metadata, workspace: &Path) -> Option<&'static str> {
    if let Some(name) = real.file_name().and_then(secret_name) {
        return Some(name);
    }
    if meta.nlink() <= 1 {
        // Its only name is `real`, checked above.
        return None;
    }
    let id = (meta.dev(), meta.ino());
    // Ancestors of the canonical path: `..` and symlinked directories resolved.
    let real = fs::canonicalize(real).unwrap_or_else(|_| real.to_path_buf());
    let mut search = Search {
        id,
        seen: HashSet::new(),
    };
    // Next to the file and in every ancestor directory (one level each): cheap and the most
    // likely places for a link.
    let start = real.parent().map(Path::to_path_buf);
    for dir in start.iter().flat_map(|p| p.ancestors()) {
        if let Some(hit) = search.dir(dir) {
            return Some(hit);
        }
    }
    let mut roots: Vec<(PathBuf, usize)> = vec![(workspace.to_path_buf(), WORKSPACE_ENTRY_BUDGET)];
    for var in ["ROOKERY_HOME", "HOME"] {
        if let Some(home) = std::env::var_os(var).filter(|v| !v.is_empty()) {
            roots.push((PathBuf::from(home), HOME_ENTRY_BUDGET));
        }
    }
    roots
        .into_iter()
        .find_map(|(root, budget)| search.walk(&root, budget))
}

/// One identity search: the (device, inode) looked for and the directories already listed.
struct Search {
    id: (u64, u64),
    seen: HashSet<PathBuf>,
}

impl Search {
    /// Lists `dir` once; a secret-named entry whose target has the wanted identity is a hit.
    fn dir(&mut self, dir: &Path) -> Option<&'static str> {
        let dir = if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        };
        if !self.seen.insert(dir.to_path_buf()) {
            return None;
        }
        let entries = fs::read_dir(dir).ok()?;
        entries.filter_map(Result::ok).find_map(|entry| {
            let name = secret_name(&entry.file_name())?;
            // Followed: a secret-store name that is a symlink guards its target too.
            let meta = fs::metadata(entry.path()).ok()?;
            ((meta.dev(), meta.ino()) == self.id).then_some(name)
        })
    }

    /// Breadth-first walk under `root` (not following symlinked directories) within `budget`
    /// directory entries.
    fn walk(&mut self, root: &Path, budget: usize) -> Option<&'static str> {
        let mut queue = std::collections::VecDeque::from([(root.to_path_buf(), 0usize)]);
        let mut left = budget;
        while let Some((dir, depth)) = queue.pop_front() {
            if let Some(hit) = self.dir(&dir) {
                return Some(hit);
            }
            let Ok(entries) = fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.filter_map(Result::ok) {
                if left == 0 {
                    tracing::debug!(root = %root.display(), "secret-store search budget spent");
                    return None;
                }
                left -= 1;
                let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
                let skipped = SKIPPED_DIRS.iter().any(|s| entry.file_name() == *s);
                if is_dir && !skipped && depth < MAX_WALK_DEPTH {
                    queue.push_back((entry.path(), depth + 1));
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_matched_case_insensitively() {
        assert_eq!(secret_name(OsStr::new(".VAULT.toml")), Some(".vault.toml"));
        assert_eq!(
            secret_name(OsStr::new(".Project_Config.TOML")),
            Some(".project_config.toml")
        );
        assert_eq!(secret_name(OsStr::new("vault.toml")), None);
        assert_eq!(
            secret_by_name(Path::new("/nowhere/.vault.toml")),
            Some(".vault.toml")
        );
    }

    #[test]
    fn a_hard_link_is_found_in_the_workspace_and_in_ancestors() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path();
        fs::create_dir_all(ws.join("cfg/deep")).unwrap();
        fs::create_dir_all(ws.join("other")).unwrap();
        fs::write(ws.join("cfg/.vault.toml"), "KEY=1\n").unwrap();
        // Below the store's directory: found among the ancestors.
        let below = ws.join("cfg/deep/innocent.txt");
        fs::hard_link(ws.join("cfg/.vault.toml"), &below).unwrap();
        // In a sibling directory: found by the workspace walk.
        let beside = ws.join("other/notes.txt");
        fs::hard_link(ws.join("cfg/.vault.toml"), &beside).unwrap();
        for link in [&below, &beside] {
            let meta = fs::metadata(link).unwrap();
            assert_eq!(
                secret_by_identity(link, &meta, ws),
                Some(".vault.toml"),
                "{}",
                link.display()
            );
        }
        // A plain file and a hard-linked ordinary file are not secrets.
        fs::write(ws.join("plain.txt"), "x").unwrap();
        fs::hard_link(ws.join("plain.txt"), ws.join("plain2.txt")).unwrap();
        let meta = fs::metadata(ws.join("plain.txt")).unwrap();
        assert_eq!(secret_by_identity(&ws.join("plain.txt"), &meta, ws), None);
    }

    #[test]
    fn a_secret_name_that_is_a_symlink_guards_its_target() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path();
        fs::write(ws.join("real.toml"), "KEY=1\n").unwrap();
        std::os::unix::fs::symlink(ws.join("real.toml"), ws.join(".project_config.toml")).unwrap();
        fs::hard_link(ws.join("real.toml"), ws.join("copy.toml")).unwrap();
        let meta = fs::metadata(ws.join("copy.toml")).unwrap();
        assert_eq!(
            secret_by_identity(&ws.join("copy.toml"), &meta, ws),
            Some(".project_config.toml")
        );
    }
}
