//! The shared missing-path diagnostic of the file tools (read_file, edit_file): where a path that
//! failed to stat leaves reality, as a sentence to append after "File not found" (`docs/tools.md#path-hint`), plus the lexical path normalization the file tools resolve paths with.
//!
//! Failure path only: it stats and lists directories but never reads, creates or changes
//! anything, and it never fails — when nothing useful can be said the hint is empty.

use std::cmp::Ordering;
use std::fs;
use std::path::{Component, Path, PathBuf};

/// Directory entries named in the hint; the rest collapse into a `(+<k> more)` count.
const MAX_LISTED_ENTRIES: usize = 8;

/// The hint appended after a "File not found" text (it starts with a space), or `""`.
///
/// Walks up from the parent of `resolved` to the deepest ancestor that stats. If that ancestor
/// is a file: ` Note: "<ancestor>" exists but is a file, not a directory.` Otherwise
/// ` The directory "<ancestor>" exists but has no entry "<first missing segment>".` followed by
/// ` It is empty.` or ` It contains: <up to 8 entries> (+<k> more).` (entries ranked by the
/// longest case-insensitive common prefix with the missing segment, then alphabetically;
/// directories carry a trailing `/`). `resolved` is normalized lexically first.
pub fn path_hint(resolved: &Path) -> String {
    let normalized = normalize_lexically(resolved);
    let (Some(parent), Some(name)) = (normalized.parent(), normalized.file_name()) else {
        return String::new();
    };
    let mut ancestor = non_empty(parent);
    let mut missing = name.to_string_lossy().into_owned();
    loop {
        match fs::metadata(&ancestor) {
            Ok(meta) if meta.is_dir() => break,
            Ok(_) => {
                return format!(
                    " Note: \"{}\" exists but is a file, not a directory.",
                    ancestor.display()
                );
            }
            // Any stat failure (missing, unreadable) keeps the walk going: the hint names the
            // deepest ancestor that is visibly there.
            Err(_) => {
                let (Some(parent), Some(name)) = (ancestor.parent(), ancestor.file_name()) else {
                    return String::new();
                };
                missing = name.to_string_lossy().into_owned();
                ancestor = non_empty(parent);
            }
        }
    }
    let head = format!(
        " The directory \"{}\" exists but has no entry \"{}\".",
        ancestor.display(),
        missing
    );
    let Ok(dir) = fs::read_dir(&ancestor) else {
        return head;
    };
    let entries: Vec<(String, bool)> = dir
        .filter_map(Result::ok)
        .map(|entry| {
            // The entry's own type (a symlink to a directory is not listed as a directory).
            let is_dir = entry.file_type().map(|t| t.is_dir()).unwrap_or(false);
            (entry.file_name().to_string_lossy().into_owned(), is_dir)
        })
        .collect();
    if entries.is_empty() {
        return format!("{head} It is empty.");
    }
    let labels = rank_entries(entries, &missing);
    let hidden = labels.len().saturating_sub(MAX_LISTED_ENTRIES);
    let shown: Vec<&str> = labels
        .iter()
        .take(MAX_LISTED_ENTRIES)
        .map(String::as_str)
        .collect();
    let more = if hidden > 0 {
        format!(" (+{hidden} more)")
    } else {
        String::new()
    };
    format!("{head} It contains: {}{more}.", shown.join(", "))
}

/// `path` with `.` segments dropped and `..` segments applied lexically (as Node's
/// `path.resolve` does; symlinks are not consulted). `..` at the root stays at the root; an
/// empty relative result is `.`.
pub fn normalize_lexically(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    let mut normals = 0usize;
    for component in path.components() {
        match component {
            Component::Prefix(_) | Component::RootDir => out.push(component.as_os_str()),
            Component::CurDir => {}
            Component::ParentDir => {
                if normals > 0 {
                    out.pop();
                    normals -= 1;
                } else if !out.has_root() {
                    out.push("..");
                }
            }
            Component::Normal(name) => {
                out.push(name);
                normals += 1;
            }
        }
    }
    if out.as_os_str().is_empty() {
        PathBuf::from(".")
    } else {
        out
    }
}

/// The parent of a relative single-segment path is `""`; stat that as `.`.
fn non_empty(path: &Path) -> PathBuf {
    if path.as_os_str().is_empty() {
        PathBuf::from(".")
    } else {
        path.to_path_buf()
    }
}

/// Entry labels (directories with a trailing `/`), best match with `missing` first.
fn rank_entries(entries: Vec<(String, bool)>, missing: &str) -> Vec<String> {
    let target: Vec<char> = missing.to_lowercase().chars().collect();
    let mut scored: Vec<(usize, String, bool)> = entries
        .into_iter()
        .map(|(name, is_dir)| {
            let prefix = name
                .to_lowercase()
                .chars()
                .zip(target.iter())
                .take_while(|(a, b)| a == *b)
                .count();
            (prefix, name, is_dir)
        })
        .collect();
    scored.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| alphabetical(&a.1, &b.1)));
    scored
        .into_iter()
        .map(|(_, name, is_dir)| if is_dir { format!("{name}/") } else { name })
        .collect()
}

/// Case-insensitive order; names equal but for case put the lowercase spelling first (as a
/// locale-aware comparison does).
fn alphabetical(a: &str, b: &str) -> Ordering {
    a.to_lowercase()
        .cmp(&b.to_lowercase())
        .then_with(|| b.cmp(a))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn touch(path: &Path) {
        fs::write(path, b"x").unwrap();
    }

    #[test]
    fn lists_nearest_entries_ranked_with_more_count() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path();
        fs::create_dir(ws.join("agent_state")).unwrap();
        fs::create_dir(ws.join("src")).unwrap();
        for f in [
            "AGENTS.md",
            "a.txt",
            "b.txt",
            "c.txt",
            "d.txt",
            "e.txt",
            "f.txt",
            "zeta.md",
        ] {
            touch(&ws.join(f));
        }
        let hint = path_hint(&ws.join("agent_sate/notes.md"));
        assert_eq!(
            hint,
            format!(
                " The directory \"{}\" exists but has no entry \"agent_sate\". It contains: \
                 agent_state/, AGENTS.md, a.txt, b.txt, c.txt, d.txt, e.txt, f.txt (+2 more).",
                ws.display()
            )
        );
    }

    #[test]
    fn exactly_eight_entries_have_no_more_count() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path();
        for f in ["h", "g", "f", "e", "d", "c", "b", "a"] {
            touch(&ws.join(f));
        }
        assert_eq!(
            path_hint(&ws.join("zz")),
            format!(
                " The directory \"{}\" exists but has no entry \"zz\". It contains: \
                 a, b, c, d, e, f, g, h.",
                ws.display()
            )
        );
    }

    #[test]
    fn names_first_missing_segment_of_deepest_existing_dir() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path();
        fs::create_dir(ws.join("src")).unwrap();
        assert_eq!(
            path_hint(&ws.join("src/missing/deep/file.rs")),
            format!(
                " The directory \"{}\" exists but has no entry \"missing\". It is empty.",
                ws.join("src").display()
            )
        );
    }

    #[test]
    fn file_used_as_directory() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path();
        touch(&ws.join("a.txt"));
        assert_eq!(
            path_hint(&ws.join("a.txt/inner/x")),
            format!(
                " Note: \"{}\" exists but is a file, not a directory.",
                ws.join("a.txt").display()
            )
        );
    }

    #[test]
    fn dot_segments_are_normalized_before_the_walk() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path();
        fs::create_dir(ws.join("sub")).unwrap();
        touch(&ws.join("sub/one.txt"));
        assert_eq!(
            path_hint(&ws.join("./nowhere/../sub/./two.txt")),
            format!(
                " The directory \"{}\" exists but has no entry \"two.txt\". It contains: one.txt.",
                ws.join("sub").display()
            )
        );
    }

    #[test]
    fn case_insensitive_prefix_then_alphabetical() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path();
        for f in ["README.md", "Cargo.toml", "readme_old.md", "build.rs"] {
            touch(&ws.join(f));
        }
        fs::create_dir(ws.join("docs")).unwrap();
        // "readme.txt": README.md and readme_old.md share 6 chars ("readme"), then 7 for
        // README.md (".").
        assert_eq!(
            path_hint(&ws.join("readme.txt")),
            format!(
                " The directory \"{}\" exists but has no entry \"readme.txt\". It contains: \
                 README.md, readme_old.md, build.rs, Cargo.toml, docs/.",
                ws.display()
            )
        );
    }

    #[test]
    fn root_path_has_no_hint() {
        assert_eq!(path_hint(Path::new("/")), "");
    }

    #[test]
    fn normalize_lexically_cases() {
        assert_eq!(
            normalize_lexically(Path::new("/a/./b/../c/")),
            Path::new("/a/c")
        );
        assert_eq!(normalize_lexically(Path::new("/../x")), Path::new("/x"));
        assert_eq!(normalize_lexically(Path::new("a/../..")), Path::new(".."));
        assert_eq!(normalize_lexically(Path::new("a/..")), Path::new("."));
    }
}
