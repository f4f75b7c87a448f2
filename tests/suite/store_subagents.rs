//! Subagents on the `postgres` store, through the real binary on a real Postgres: a subagent
//! started by `run --store` gets a `sessions` row whose `parent` is its parent session, a
//! `store import` of a files home fills `parent` from the parent's `subagent` pointer, and
//! `sessions rm` of the parent deletes the child through that column even when the pointer is
//! missing from the parent's records.

use serde_json::{Value, json};

use crate::common::cli::*;
use crate::common::postgres::TestPostgres;

/// A parent task that runs one subagent, which reads a file and answers.
fn subagent_script(sb: &Sandbox) -> std::path::PathBuf {
    std::fs::write(sb.ws().join("notes.md"), "# notes\n").expect("notes");
    sb.script(&json!({
        "turns": [
            {"tool_calls": [{"name": "run_subagent",
                "arguments": {"description": "Ask a helper", "prompt": "lint the notes"}}]},
            {"text": "The helper is done."}],
        "children": [{"when_prompt_contains": "lint", "turns": [
            {"tool_calls": [{"name": "read_file", "arguments": {"file_path": "notes.md"}}]},
            {"text": "No problems found."}]}]
    }))
}

/// `rookery` with `args` in the sandbox's environment, run to its end.
fn rookery(sb: &Sandbox, args: &[&str]) -> Out {
    let mut c = sb.command();
    c.args(args);
    Running::spawn(c).wait(RUN_TIMEOUT)
}

/// `(id, parent)` of every row of `sessions`, by id.
fn rows(pg: &TestPostgres) -> Vec<(String, Option<String>)> {
    pg.query("SELECT id, parent FROM sessions ORDER BY id")
        .into_iter()
        .map(|r| (r[0].clone().expect("an id"), r[1].clone()))
        .collect()
}

/// The id of the one top-level session in `rows` (the one that is nobody's child and has a
/// child), and its child's.
fn parent_and_child(rows: &[(String, Option<String>)]) -> (String, String) {
    assert_eq!(rows.len(), 2, "a parent and one subagent: {rows:?}");
    let child = rows
        .iter()
        .find(|(_, p)| p.is_some())
        .unwrap_or_else(|| panic!("no row names a parent: {rows:?}"));
    let parent = rows
        .iter()
        .find(|(_, p)| p.is_none())
        .unwrap_or_else(|| panic!("every row names a parent: {rows:?}"));
    (parent.0.clone(), child.0.clone())
}

/// Deletes the parent's `subagent` pointer records, so only `sessions.parent` links the child.
fn drop_pointers(pg: &TestPostgres, parent: &str) {
    pg.query(&format!(
        "DELETE FROM trace_records WHERE session_id = '{parent}' \
           AND convert_from(record, 'UTF8') LIKE '%\"type\":\"subagent\",\"session_id\"%'"
    ));
    let left = pg.query(&format!(
        "SELECT count(*) FROM trace_records WHERE session_id = '{parent}' \
           AND convert_from(record, 'UTF8') LIKE '%\"type\":\"subagent\"%'"
    ));
    assert_eq!(left[0][0].as_deref(), Some("0"), "a pointer left");
}

/// `sessions rm --yes` of `parent` on the store deletes it and its child, records included.
fn rm_takes_the_child(sb: &Sandbox, pg: &TestPostgres, url: &str, parent: &str, child: &str) {
    let rm = rookery(sb, &["sessions", "rm", "--store", url, "--yes", parent]);
    rm.expect_code(0);
    assert!(rows(pg).is_empty(), "left after rm: {:?}", rows(pg));
    let records = pg.query(&format!(
        "SELECT count(*) FROM trace_records WHERE session_id IN ('{parent}', '{child}')"
    ));
    assert_eq!(records[0][0].as_deref(), Some("0"));
}

#[test]
fn a_live_subagents_row_names_its_parent_and_rm_of_the_parent_takes_it() {
    let pg = TestPostgres::start();
    let url = pg.url();
    let sb = Sandbox::new();
    let script = subagent_script(&sb);
    let out = sb.run(&[
        "--store",
        &url,
        "--script",
        s(&script),
        "Please lint the notes",
    ]);
    out.expect_code(0);
    let id = out
        .stderr
        .lines()
        .find_map(|l| l.strip_prefix("trace: postgres:/"))
        .unwrap_or_else(|| panic!("no stored trace named on stderr:\n{}", out.stderr))
        .to_string();

    let all = rows(&pg);
    let (parent, child) = parent_and_child(&all);
    assert_eq!(parent, id, "the run's session is the top-level row");
    assert!(
        all.contains(&(child.clone(), Some(id.clone()))),
        "the subagent's row names its parent: {all:?}"
    );
    // The child's records are its own trace, opening with a subagent's session_meta.
    let opening = pg.query(&format!(
        "SELECT convert_from(record, 'UTF8') FROM trace_records \
          WHERE session_id = '{child}' AND seq = 0"
    ));
    let meta: Value = serde_json::from_str(opening[0][0].as_deref().unwrap()).unwrap();
    assert_eq!(meta["payload"]["source"], "subagent", "{meta}");

    // `parent` alone is enough for `rm` to find the child.
    drop_pointers(&pg, &id);
    rm_takes_the_child(&sb, &pg, &url, &id, &child);
}

#[test]
fn an_import_names_each_subagents_parent_and_fills_a_row_that_missed_it() {
    let pg = TestPostgres::start();
    let url = pg.url();
    let sb = Sandbox::new();
    let script = subagent_script(&sb);
    sb.run(&["--script", s(&script), "Please lint the notes"])
        .expect_code(0);
    assert_eq!(sb.trace_files().len(), 2, "a parent trace and a child's");

    let first = rookery(&sb, &["store", "import", "--store", &url, s(&sb.home())]);
    first.expect_code(0);
    assert!(first.stderr.contains("2 new sessions"), "{}", first.stderr);
    let all = rows(&pg);
    let (parent, child) = parent_and_child(&all);
    let top = sb
        .trace_files()
        .into_iter()
        .find(|f| read_records(f)[0]["payload"]["source"].is_null())
        .expect("the parent's trace");
    assert!(
        top.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with(&parent)),
        "{} is not {parent}'s",
        top.display()
    );

    // A row imported without its parent (an older import) learns it; a second import of a
    // complete store changes nothing.
    pg.query(&format!(
        "UPDATE sessions SET parent = NULL WHERE id = '{child}'"
    ));
    let again = rookery(&sb, &["store", "import", "--store", &url, s(&sb.home())]);
    again.expect_code(0);
    assert!(
        again.stderr.contains("0 new sessions, 0 new records"),
        "{}",
        again.stderr
    );
    assert_eq!(rows(&pg), all, "the parent filled in again");
    let third = rookery(&sb, &["store", "import", "--store", &url, s(&sb.home())]);
    third.expect_code(0);
    assert_eq!(rows(&pg), all);

    drop_pointers(&pg, &parent);
    rm_takes_the_child(&sb, &pg, &url, &parent, &child);
}
