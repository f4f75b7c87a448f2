//! Where traces live: session ids, the Rookery home directory, and the
//! `<home>/traces/<yyyy-mm-dd>/<session_id>_<NNN>.jsonl` layout.
//!
//! This module owns naming and locating only. It must not open, write or parse trace files
//! (that is `file.rs` and `reader.rs`), and it never trusts a session id that did not pass
//! [`is_valid_session_id`] to build a path from.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use chrono::NaiveDate;

/// Environment variable naming the Rookery home when `--home` is not given.
pub const ROOKERY_HOME_ENV: &str = "ROOKERY_HOME";

/// Name of the home directory under `$HOME` when neither `--home` nor `$ROOKERY_HOME` is set.
pub const DEFAULT_HOME_DIR_NAME: &str = ".rookery";

/// Name of the traces directory under the Rookery home.
pub const TRACES_DIR_NAME: &str = "traces";

/// A fresh session id: `session-YYYY-MM-DD-HH-mm-ss-<8 lowercase hex>`, local time.
pub fn new_session_id() -> String {
    let now = chrono::Local::now();
    let suffix: u32 = rand::random();
    format!("{}-{suffix:08x}", now.format("session-%Y-%m-%d-%H-%M-%S"))
}

/// The Rookery home: `explicit` (`--home`) if given, else `$ROOKERY_HOME`, else `~/.rookery`.
///
/// Empty environment values count as unset. Without any home directory at all (no `$HOME`,
/// no password entry) the fallback is `.rookery` relative to the current directory.
pub fn rookery_home(explicit: Option<&Path>) -> PathBuf {
    resolve_home(
        explicit,
        std::env::var_os(ROOKERY_HOME_ENV),
        std::env::var_os("HOME").or_else(|| std::env::home_dir().map(PathBuf::into_os_string)),
    )
}

/// The pure part of [`rookery_home`], with the environment passed in (testable without
/// mutating the process environment).
fn resolve_home(
    explicit: Option<&Path>,
    rookery_home_env: Option<OsString>,
    home_env: Option<OsString>,
) -> PathBuf {
    if let Some(explicit) = explicit {
        return explicit.to_path_buf();
    }
    if let Some(home) = rookery_home_env.filter(|v| !v.is_empty()) {
        return PathBuf::from(home);
    }
    match home_env.filter(|v| !v.is_empty()) {
        Some(home) => PathBuf::from(home).join(DEFAULT_HOME_DIR_NAME),
        None => PathBuf::from(DEFAULT_HOME_DIR_NAME),
    }
}

/// The first trace file of a session: `<home>/traces/<yyyy-mm-dd>/<session_id>_001.jsonl`.
///
/// The date directory is the local date embedded in a standard session id
/// (`session-YYYY-MM-DD-…`), so a session created just before midnight keeps the date of its
/// id; for any other id it is today's local date. The caller must have checked the id with
/// [`is_valid_session_id`].
pub fn trace_path(home: &Path, session_id: &str) -> PathBuf {
    let date = date_of_session_id(session_id).unwrap_or_else(|| chrono::Local::now().date_naive());
    home.join(TRACES_DIR_NAME)
        .join(date.format("%Y-%m-%d").to_string())
        .join(trace_file_name(session_id, 1))
}

/// `<session_id>_<index, 3-digit zero pad>.jsonl`.
pub fn trace_file_name(session_id: &str, index: u32) -> String {
    format!("{session_id}_{index:03}.jsonl")
}

/// The trace file of `session_id` with the highest `_NNN` index across all date directories
/// (ties between date directories go to the later date). `None` when the id is invalid, the
/// traces directory is missing or unreadable, or no file matches.
///
/// A standard id's files are written in the date directory of the id (rotation stays there):
/// they are probed by name (`_001`, `_002`, … while they exist) without listing any directory,
/// which keeps a lookup cheap among 100,000 traces. Other ids, and a standard id without its
/// `_001` there, are found by listing every date directory.
pub fn locate_trace(home: &Path, session_id: &str) -> Option<PathBuf> {
    if !is_valid_session_id(session_id) {
        return None;
    }
    if let Some(found) = probe_dated(home, session_id) {
        return Some(found);
    }
    let traces = home.join(TRACES_DIR_NAME);
    let mut best: Option<(u64, OsString, PathBuf)> = None;
    for date_entry in std::fs::read_dir(&traces).ok()?.flatten() {
        if !date_entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let Ok(files) = std::fs::read_dir(date_entry.path()) else {
            continue;
        };
        let date_name = date_entry.file_name();
        for file in files.flatten() {
            let name = file.file_name();
            let Some(index) = name.to_str().and_then(|n| trace_index(n, session_id)) else {
                continue;
            };
            if !file.file_type().is_ok_and(|t| t.is_file()) {
                continue;
            }
            let better = best.as_ref().is_none_or(|(best_index, best_date, _)| {
                (index, &date_name) > (*best_index, best_date)
            });
            if better {
                best = Some((index, date_name.clone(), file.path()));
            }
        }
    }
    best.map(|(_, _, path)| path)
}

/// Whether `path` is in the date directory of the dated id `session_id`, where
/// [`locate_trace`] finds it by name.
pub fn in_own_date_dir(home: &Path, session_id: &str, path: &Path) -> bool {
    date_of_session_id(session_id).is_some()
        && path.parent() == trace_path(home, session_id).parent()
}

/// The latest of `<date of the id>/<id>_001.jsonl`, `_002`, … (consecutive files that exist).
fn probe_dated(home: &Path, session_id: &str) -> Option<PathBuf> {
    date_of_session_id(session_id)?;
    let first = trace_path(home, session_id);
    let mut found = None;
    let mut index = 1u32;
    loop {
        let path = first.with_file_name(trace_file_name(session_id, index));
        if !path.is_file() {
            return found;
        }
        found = Some(path);
        index = index.checked_add(1)?;
    }
}

/// True for a non-empty id made only of ASCII letters, digits, `_` and `-` (so it can never
/// name a parent directory or leave the traces tree).
pub fn is_valid_session_id(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// The index `NNN` of a file named `<session_id>_<NNN>.jsonl` (at least one digit, only digits).
fn trace_index(file_name: &str, session_id: &str) -> Option<u64> {
    let digits = file_name
        .strip_prefix(session_id)?
        .strip_prefix('_')?
        .strip_suffix(".jsonl")?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// The date of a standard id `session-YYYY-MM-DD-HH-mm-ss-<hex>`, if it is one.
fn date_of_session_id(session_id: &str) -> Option<NaiveDate> {
    let rest = session_id.strip_prefix("session-")?;
    let date = rest.get(..10)?;
    if !date.bytes().all(|b| b.is_ascii_digit() || b == b'-') {
        return None;
    }
    NaiveDate::parse_from_str(date, "%Y-%m-%d").ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn session_id_has_the_documented_format() {
        let re = regex::Regex::new(r"^session-\d{4}-\d{2}-\d{2}-\d{2}-\d{2}-\d{2}-[0-9a-f]{8}$")
            .unwrap();
        let before = chrono::Local::now().format("%Y-%m-%d").to_string();
        let id = new_session_id();
        let after = chrono::Local::now().format("%Y-%m-%d").to_string();
        assert!(re.is_match(&id), "bad id {id}");
        let date = &id["session-".len().."session-".len() + 10];
        assert!(date == before || date == after, "{id} is not dated today");
        assert!(is_valid_session_id(&id));
    }

    #[test]
    fn session_ids_are_distinct() {
        let ids: HashSet<String> = (0..200).map(|_| new_session_id()).collect();
        assert_eq!(ids.len(), 200);
    }

    #[test]
    fn home_prefers_explicit_then_env_then_dot_rookery() {
        let explicit = Path::new("/explicit/home");
        assert_eq!(
            resolve_home(Some(explicit), Some("/env".into()), Some("/u".into())),
            PathBuf::from("/explicit/home")
        );
        assert_eq!(
            resolve_home(None, Some("/env".into()), Some("/u".into())),
            PathBuf::from("/env")
        );
        assert_eq!(
            resolve_home(None, Some("".into()), Some("/u".into())),
            PathBuf::from("/u/.rookery")
        );
        assert_eq!(
            resolve_home(None, None, Some("/u".into())),
            PathBuf::from("/u/.rookery")
        );
        assert_eq!(resolve_home(None, None, None), PathBuf::from(".rookery"));
        assert_eq!(
            rookery_home(Some(explicit)),
            PathBuf::from("/explicit/home")
        );
    }

    #[test]
    fn trace_path_layout_uses_the_date_of_the_id() {
        let home = Path::new("/h");
        assert_eq!(
            trace_path(home, "session-2026-07-18-03-10-22-abcdef12"),
            PathBuf::from("/h/traces/2026-07-18/session-2026-07-18-03-10-22-abcdef12_001.jsonl")
        );
    }

    #[test]
    fn trace_path_of_a_custom_id_uses_today() {
        let before = chrono::Local::now().format("%Y-%m-%d").to_string();
        let path = trace_path(Path::new("/h"), "my-run");
        let after = chrono::Local::now().format("%Y-%m-%d").to_string();
        let ok = [before, after]
            .iter()
            .any(|d| path == Path::new(&format!("/h/traces/{d}/my-run_001.jsonl")));
        assert!(ok, "unexpected path {}", path.display());
        // An id that only looks dated is not trusted as a date.
        let path = trace_path(Path::new("/h"), "session-2026-13-40-00-00-00-00000000");
        assert!(!path.starts_with("/h/traces/2026-13-40"));
    }

    #[test]
    fn file_names_are_zero_padded() {
        assert_eq!(trace_file_name("s", 1), "s_001.jsonl");
        assert_eq!(trace_file_name("s", 42), "s_042.jsonl");
        assert_eq!(trace_file_name("s", 1234), "s_1234.jsonl");
    }

    #[test]
    fn session_id_validation_guards_traversal() {
        assert!(is_valid_session_id("session-2026-07-18-03-10-22-abcdef12"));
        assert!(is_valid_session_id("A_b-9"));
        for bad in ["", "..", "../x", "a/b", "a.b", "a b", "é", "a\0b", "a\\b"] {
            assert!(!is_valid_session_id(bad), "{bad:?} accepted");
        }
    }

    fn touch(path: &Path) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, b"").unwrap();
    }

    #[test]
    fn locate_picks_the_highest_index_across_date_dirs() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path();
        let t = home.join("traces");
        touch(&t.join("2026-01-01/s_001.jsonl"));
        touch(&t.join("2026-01-02/s_003.jsonl"));
        touch(&t.join("2026-01-03/s_002.jsonl"));
        // Not ours or not trace files.
        touch(&t.join("2026-01-03/s_x_009.jsonl"));
        touch(&t.join("2026-01-03/s-2_009.jsonl"));
        touch(&t.join("2026-01-03/s_abc.jsonl"));
        touch(&t.join("2026-01-03/s_.jsonl"));
        touch(&t.join("2026-01-03/s_007.json"));
        std::fs::create_dir_all(t.join("2026-01-04/s_008.jsonl")).unwrap();
        touch(&t.join("stray_file"));
        assert_eq!(
            locate_trace(home, "s"),
            Some(t.join("2026-01-02/s_003.jsonl"))
        );
        assert_eq!(
            locate_trace(home, "s-2"),
            Some(t.join("2026-01-03/s-2_009.jsonl"))
        );
        assert_eq!(locate_trace(home, "nobody"), None);
        assert_eq!(locate_trace(home, "../traces/2026-01-01/s"), None);
        assert_eq!(locate_trace(&home.join("missing"), "s"), None);
    }

    #[test]
    fn a_dated_id_is_found_in_its_date_directory_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let t = dir.path().join("traces");
        let id = "session-2026-07-18-03-10-22-abcdef12";
        for n in 1..=3 {
            touch(&t.join(format!("2026-07-18/{id}_{n:03}.jsonl")));
        }
        assert_eq!(
            locate_trace(dir.path(), id),
            Some(t.join(format!("2026-07-18/{id}_003.jsonl")))
        );
        let own = t.join(format!("2026-07-18/{id}_003.jsonl"));
        assert!(in_own_date_dir(dir.path(), id, &own));
        assert!(!in_own_date_dir(
            dir.path(),
            id,
            &t.join("2026-07-19/x_001.jsonl")
        ));
        assert!(!in_own_date_dir(
            dir.path(),
            "s",
            &t.join("2026-07-18/s_001.jsonl")
        ));
        // Without its `_001` in its own directory, every date directory is listed.
        let other = "session-2026-07-19-03-10-22-abcdef12";
        touch(&t.join(format!("2026-07-20/{other}_002.jsonl")));
        assert_eq!(
            locate_trace(dir.path(), other),
            Some(t.join(format!("2026-07-20/{other}_002.jsonl")))
        );
    }

    #[test]
    fn locate_breaks_index_ties_by_later_date() {
        let dir = tempfile::tempdir().unwrap();
        let t = dir.path().join("traces");
        touch(&t.join("2026-03-01/s_002.jsonl"));
        touch(&t.join("2026-02-01/s_002.jsonl"));
        assert_eq!(
            locate_trace(dir.path(), "s"),
            Some(t.join("2026-03-01/s_002.jsonl"))
        );
    }

    #[test]
    fn locate_finds_what_trace_path_names() {
        let dir = tempfile::tempdir().unwrap();
        let id = new_session_id();
        let path = trace_path(dir.path(), &id);
        touch(&path);
        assert_eq!(locate_trace(dir.path(), &id), Some(path));
    }
}
