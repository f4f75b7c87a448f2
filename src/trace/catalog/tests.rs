use super::*;
use crate::message::{EventPayload, SessionMeta, StopReason, build};
use crate::trace::summary::RecordedStatus;

const A: &str = "session-2026-11-30-10-00-00-aaaa1111";
const B: &str = "session-2026-12-01-09-00-00-bbbb2222";
const B2: &str = "session-2026-12-01-09-00-00-bbbc3333";

fn meta(id: &str, source: Option<&str>) -> OmniMessage {
    OmniMessage::session_meta(SessionMeta {
        session_id: id.into(),
        provider: "scripted".into(),
        model_id: "scripted".into(),
        source: source.map(str::to_string),
        ..SessionMeta::default()
    })
}

fn at(mut m: OmniMessage, ts: &str) -> OmniMessage {
    m.timestamp = ts.to_string();
    m
}

fn write(home: &Path, rel: &str, records: &[OmniMessage]) -> PathBuf {
    let path = home.join(TRACES_DIR_NAME).join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let mut text = String::new();
    for r in records {
        text.push_str(&r.to_json());
        text.push('\n');
    }
    std::fs::write(&path, text).unwrap();
    path
}

/// A (older, one task, one subagent B2), B (newer, open), B2 (the subagent).
fn home_with_three() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let h = dir.path();
    write(
        h,
        &format!("2026-11-30/{A}_001.jsonl"),
        &[
            at(meta(A, None), "2026-11-30T10:00:00.000Z"),
            at(build::user_text("first", None), "2026-11-30T10:00:00.100Z"),
            OmniMessage::event(EventPayload::Subagent {
                session_id: B2.into(),
            }),
            at(
                build::task_end(StopReason::Completed),
                "2026-11-30T10:00:01.000Z",
            ),
        ],
    );
    write(
        h,
        &format!("2026-12-01/{B}_001.jsonl"),
        &[
            at(meta(B, None), "2026-12-01T09:00:00.000Z"),
            at(build::user_text("second", None), "2026-12-01T09:00:00.500Z"),
        ],
    );
    write(
        h,
        &format!("2026-12-01/{B2}_001.jsonl"),
        &[
            at(meta(B2, Some("subagent")), "2026-12-01T09:00:00.200Z"),
            at(
                build::user_text("child", Some(crate::message::Sender::ParentAgent)),
                "2026-12-01T09:00:00.300Z",
            ),
            at(
                build::task_end(StopReason::Failed),
                "2026-12-01T09:00:00.400Z",
            ),
        ],
    );
    dir
}

#[test]
fn file_names_split_into_id_and_index() {
    assert_eq!(split_trace_file_name("s_001.jsonl"), Some(("s", 1)));
    assert_eq!(split_trace_file_name("a_b_012.jsonl"), Some(("a_b", 12)));
    for bad in [
        "s_.jsonl",
        "s_01a.jsonl",
        "s_001.json",
        "s.jsonl",
        "_001.jsonl",
        "a.b_001.jsonl",
    ] {
        assert_eq!(split_trace_file_name(bad), None, "{bad}");
    }
}

#[test]
fn missing_home_is_empty_and_a_file_home_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = Catalog::scan(&dir.path().join("nowhere")).unwrap();
    assert!(catalog.sessions().is_empty());
    assert!(catalog.summaries().is_empty());
    let file = dir.path().join("f");
    std::fs::write(&file, "x").unwrap();
    let err = Catalog::scan(&file).unwrap_err();
    assert!(matches!(err, CatalogError::NotADirectory(_)));
    assert_eq!(
        err.to_string(),
        format!(
            "{} is not a directory, so it cannot be a Rookery home",
            file.display()
        )
    );
}

#[test]
fn files_of_one_id_are_one_history_in_index_order() {
    let dir = tempfile::tempdir().unwrap();
    let h = dir.path();
    let second = write(
        h,
        &format!("2026-12-02/{A}_002.jsonl"),
        &[
            at(build::user_text("again", None), "2026-12-02T00:00:00.000Z"),
            at(
                build::task_end(StopReason::Aborted),
                "2026-12-02T00:00:01.000Z",
            ),
        ],
    );
    let first = write(
        h,
        &format!("2026-11-30/{A}_001.jsonl"),
        &[
            at(meta(A, None), "2026-11-30T10:00:00.000Z"),
            build::user_text("first", None),
            build::task_end(StopReason::Completed),
        ],
    );
    // Not trace files of a session.
    write(h, "2026-11-30/notes.txt", &[]);
    write(h, "2026-11-30/x.y_001.jsonl", &[]);
    std::fs::write(h.join(TRACES_DIR_NAME).join("stray"), "").unwrap();

    let catalog = Catalog::scan(h).unwrap();
    assert_eq!(catalog.sessions().len(), 1);
    let files = catalog.get(A).unwrap();
    assert_eq!(files.files, vec![first, second]);
    let history = read_history(files).unwrap();
    assert_eq!(history.records.len(), 5);
    assert_eq!(history.lines.len(), 5);
    assert_eq!(history.lines[0], history.records[0].to_json());
    let summary = history.summary();
    assert_eq!(summary.status, RecordedStatus::Ended(StopReason::Aborted));
    assert_eq!(summary.first_prompt.as_deref(), Some("first"));
    assert_eq!(summary.tasks, 2);
    assert_eq!(
        summary.last_activity.as_deref(),
        Some("2026-12-02T00:00:01.000Z")
    );
    assert_eq!(summary.files.len(), 2);
}

#[test]
fn torn_tail_is_ignored_and_malformed_lines_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), &format!("2026-12-01/{B}_001.jsonl"), &[]);
    let good = [
        meta(B, None).to_json(),
        build::user_text("x", None).to_json(),
    ];
    let text = format!("{}\n{{broken\n{}\r\n\n{}", good[0], good[1], &good[1][..10]);
    std::fs::write(&path, text).unwrap();
    let catalog = Catalog::scan(dir.path()).unwrap();
    let history = read_history(catalog.get(B).unwrap()).unwrap();
    assert_eq!(history.lines, good.to_vec());
    assert_eq!(history.skipped, 1);
    assert_eq!(history.metas.len(), 1);
    assert_eq!(history.metas[0]["session_id"], B);
}

#[test]
fn summaries_are_newest_first_with_parents() {
    let dir = home_with_three();
    let catalog = Catalog::scan(dir.path()).unwrap();
    let all = catalog.summaries();
    let ids: Vec<&str> = all.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, vec![B2, B, A]);
    assert_eq!(all[0].status, RecordedStatus::Ended(StopReason::Failed));
    assert_eq!(all[0].parent.as_deref(), Some(A));
    assert!(all[0].is_subagent());
    assert_eq!(all[1].status, RecordedStatus::Open);
    assert_eq!(all[2].subagents, vec![B2.to_string()]);
    assert_eq!(all[2].parent, None);
}

#[test]
fn abbreviations_resolve_like_git() {
    let dir = home_with_three();
    let catalog = Catalog::scan(dir.path()).unwrap();
    let id = |q: &str| catalog.resolve(q).map(|s| s.id.clone());
    assert_eq!(id(A).unwrap(), A);
    assert_eq!(id("session-2026-11").unwrap(), A);
    assert_eq!(id("2026-11-30").unwrap(), A);
    assert_eq!(id("aaaa").unwrap(), A);
    assert_eq!(id("subagent-bbbc3333").unwrap(), B2);
    assert_eq!(id(" bbbb2 ").unwrap(), B);
    match catalog.resolve("2026-12-01").unwrap_err() {
        CatalogError::AmbiguousSession { query, candidates } => {
            assert_eq!(query, "2026-12-01");
            assert_eq!(candidates, vec![B.to_string(), B2.to_string()]);
        }
        other => panic!("expected ambiguity, got {other}"),
    }
    let err = catalog.resolve("bbb").unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("session id \"bbb\" is ambiguous; it matches {B}, {B2}")
    );
    for unknown in ["cccc", "", "../x", "session-2027", "subagent-"] {
        let err = catalog.resolve(unknown).unwrap_err();
        assert!(
            matches!(err, CatalogError::UnknownSession { .. }),
            "{unknown:?}: {err}"
        );
    }
    assert_eq!(
        catalog.resolve("zz").unwrap_err().to_string(),
        format!("no session matches \"zz\" under {}", dir.path().display())
    );
}

#[test]
fn an_exact_id_wins_over_longer_ids_it_prefixes() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "2026-12-01/run_001.jsonl", &[meta("run", None)]);
    write(
        dir.path(),
        "2026-12-01/run-2_001.jsonl",
        &[meta("run-2", None)],
    );
    let catalog = Catalog::scan(dir.path()).unwrap();
    assert_eq!(catalog.resolve("run").unwrap().id, "run");
    assert_eq!(catalog.resolve("run-").unwrap().id, "run-2");
    assert!(matches!(
        catalog.resolve("ru"),
        Err(CatalogError::AmbiguousSession { .. })
    ));
}

#[test]
fn ambiguity_lists_at_most_ten_candidates() {
    let many: Vec<String> = (0..12).map(|i| format!("s{i:02}")).collect();
    let err = CatalogError::AmbiguousSession {
        query: "s".into(),
        candidates: many,
    };
    let text = err.to_string();
    assert!(text.ends_with("s08, s09 and 2 more"), "{text}");
}

#[test]
fn hex_suffix_rule_needs_a_standard_id() {
    assert!(matches_abbreviation(A, "aaaa1111"));
    assert!(matches_abbreviation(A, "subagent-aaaa"));
    assert!(!matches_abbreviation(A, "aaaa11112"));
    assert!(!matches_abbreviation("my-run-abcdef12", "abc"));
    assert!(!matches_abbreviation(A, ""));
}

#[test]
fn subagent_files_are_collected_and_removed_with_empty_dirs() {
    let dir = home_with_three();
    let catalog = Catalog::scan(dir.path()).unwrap();
    let sets = catalog.files_with_subagents(A).unwrap();
    let ids: Vec<&str> = sets.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, vec![A, B2]);
    let files: Vec<PathBuf> = sets.iter().flat_map(|s| s.files.clone()).collect();
    assert_eq!(remove_files(&files).unwrap(), 2);
    // Removing again: already gone counts as nothing to do.
    assert_eq!(remove_files(&files).unwrap(), 0);
    let traces = dir.path().join(TRACES_DIR_NAME);
    assert!(!traces.join("2026-11-30").exists(), "empty day dir removed");
    assert!(traces.join("2026-12-01").is_dir(), "B still lives there");
    let after = Catalog::scan(dir.path()).unwrap();
    let left: Vec<&str> = after.sessions().iter().map(|s| s.id.as_str()).collect();
    assert_eq!(left, vec![B]);
    // A pointer to a session that is gone is skipped.
    assert_eq!(after.files_with_subagents("gone").unwrap(), vec![]);
}
