//! A session's transcript and conversation read from the `postgres` store as from trace files,
//! on a real Postgres the tests start (`tests/common/postgres.rs`), through the built binary:
//! `sessions show ID --store URL` prints what `sessions show` prints for the same scripted run
//! on the `files` backend (its subagent indented under its call, read from the subagent's own
//! stored records), `--json` is the stored trace; `GET …/messages` on a store-backed `serve`
//! gives the pages of a files-backed one for the same scripted run, at every page size; another
//! principal's session stays 404.

use crate::common::cli::*;
use crate::common::postgres::TestPostgres;
use crate::common::serve as harness;

use std::collections::HashMap;

use reqwest::StatusCode;
use serde_json::{Value, json};

const PROMPT: &str = "Please lint\nthe notes";

/// A task that runs a subagent, which reads a file and answers.
fn subagent_script() -> Value {
    json!({
        "turns": [
            { "tool_calls": [ { "name": "run_subagent",
                "arguments": { "description": "Ask a helper", "prompt": "lint the notes" } } ] },
            { "text": "The helper is done." } ],
        "children": [ { "when_prompt_contains": "lint", "turns": [
            { "tool_calls": [ { "name": "read_file", "arguments": { "file_path": "notes.md" } } ] },
            { "text": "No problems found." } ] } ]
    })
}

/// `text` with every session and subagent id replaced by `ID<n>` (numbered by first
/// appearance, so a parent and its child stay apart), every timestamp by `T`, and the places
/// the traces are read from by `trace P`: what differs between two runs of one script.
fn normalized(text: &str) -> String {
    let ids = regex::Regex::new(r"(session|subagent)-[0-9a-f-]*[0-9a-f]{8}").unwrap();
    let mut seen: HashMap<String, usize> = HashMap::new();
    let text = ids.replace_all(text, |c: &regex::Captures| {
        let n = seen.len();
        format!("ID{}", seen.entry(c[0].to_string()).or_insert(n))
    });
    let stamps =
        regex::Regex::new(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)?").unwrap();
    let text = stamps.replace_all(&text, "T");
    text.lines()
        .map(|l| {
            if l.starts_with("trace ") {
                "trace P"
            } else {
                l
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `rookery sessions <args>` in the sandbox's environment, run to its end.
fn sessions(sb: &Sandbox, args: &[&str]) -> Out {
    let mut c = sb.command();
    c.arg("sessions").args(args);
    Running::spawn(c).wait(RUN_TIMEOUT)
}

/// The session id of a files run: its one top-level trace.
fn files_session(sb: &Sandbox) -> String {
    let tops: Vec<String> = sb
        .trace_files()
        .iter()
        .filter(|f| read_records(f)[0]["payload"]["source"].is_null())
        .map(|f| {
            let name = f.file_name().unwrap().to_str().unwrap();
            name.strip_suffix("_001.jsonl").unwrap().to_string()
        })
        .collect();
    assert_eq!(tops.len(), 1, "{tops:?}");
    tops[0].clone()
}

#[test]
fn sessions_show_on_the_store_prints_the_files_transcript() {
    let pg = TestPostgres::start();
    let url = pg.url();
    let sb = Sandbox::new();
    std::fs::write(sb.ws().join("notes.md"), "# notes\n").unwrap();
    let script = sb.script(&subagent_script());

    sb.run(&["--script", s(&script), PROMPT]).expect_code(0);
    let files_id = files_session(&sb);
    let home = sb.home();
    let on_files = sessions(&sb, &["show", &files_id, "--home", s(&home)]);
    on_files.expect_code(0);

    let run = sb.run(&["--store", &url, "--script", s(&script), PROMPT]);
    run.expect_code(0);
    let id = run
        .stderr
        .lines()
        .find_map(|l| l.strip_prefix("trace: postgres:/"))
        .unwrap_or_else(|| panic!("no stored trace named on stderr:\n{}", run.stderr))
        .to_string();
    let on_store = sessions(&sb, &["show", &id, "--store", &url]);
    on_store.expect_code(0);
    assert_eq!(
        normalized(&on_store.stdout),
        normalized(&on_files.stdout),
        "the stored transcript differs from the files one"
    );
    // The subagent is there, indented under its call, read from its own stored records.
    let child_line = on_store
        .stdout
        .lines()
        .find(|l| l.starts_with("    ↳ subagent "))
        .unwrap_or_else(|| panic!("no subagent line:\n{}", on_store.stdout));
    assert!(child_line.ends_with(" · completed"), "{child_line}");
    assert!(
        on_store.stdout.contains("    │ No problems found."),
        "{}",
        on_store.stdout
    );
    assert!(
        on_store
            .stdout
            .lines()
            .any(|l| l == format!("trace postgres:/{id}")),
        "{}",
        on_store.stdout
    );

    // The subagent shown by its own id names its parent, as on files.
    let child = child_line
        .strip_prefix("    ↳ subagent ")
        .and_then(|l| l.split(' ').next())
        .unwrap()
        .to_string();
    let stored_child: Vec<Vec<Option<String>>> = pg.query(&format!(
        "SELECT count(*) FROM trace_records WHERE session_id = '{child}'"
    ));
    assert_ne!(
        stored_child[0][0].as_deref(),
        Some("0"),
        "{child} not stored"
    );
    let child_show = sessions(&sb, &["show", &child, "--store", &url]);
    child_show.expect_code(0);
    assert!(
        child_show.stdout.contains(&format!("subagent of {id}")),
        "{}",
        child_show.stdout
    );
    assert!(
        child_show.stdout.contains("No problems found."),
        "{}",
        child_show.stdout
    );

    // --json is the stored trace, as `store export` writes it.
    let json = sessions(&sb, &["show", "--json", &id, "--store", &url]);
    json.expect_code(0);
    let mut c = sb.command();
    c.args(["store", "export", "--store", &url, &id]);
    let export = Running::spawn(c).wait(RUN_TIMEOUT);
    export.expect_code(0);
    assert_eq!(json.stdout, export.stdout);
    assert!(json.stdout.lines().count() > 3, "{}", json.stdout);

    // An unknown id is a usage error naming it.
    let out = sessions(&sb, &["show", "session-nope", "--store", &url]);
    out.expect_code(2);
    assert!(out.stderr.contains("session-nope"), "{}", out.stderr);
}

/// Every page of session `id`'s messages, `limit` at a time, each page normalized (ids and
/// timestamps replaced), with whether a cursor followed it.
async fn pages(server: &harness::Server, id: &str, limit: usize) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut path = format!("/v1/sessions/{id}/messages?limit={limit}");
        if let Some(c) = &cursor {
            path.push_str(&format!("&cursor={c}"));
        }
        let (s, v) = server.call("GET", &path, None).await;
        assert_eq!(s, StatusCode::OK, "{path}: {v}");
        let messages = v["messages"].as_array().unwrap();
        assert!(messages.len() <= limit, "{v}");
        cursor = v["next_cursor"].as_str().map(str::to_string);
        out.push((
            normalized(&serde_json::to_string(messages).unwrap()),
            cursor.is_some(),
        ));
        assert!(out.len() < 100, "paging never ends");
        if cursor.is_none() {
            return out;
        }
    }
}

/// A task of `PROMPT` on a new session of `server`, run to its end; the session's id.
async fn one_task(server: &harness::Server) -> String {
    let id = server.create(Some("allow-all")).await;
    let after = server.task(&id, PROMPT).await;
    server.events_until_task_end(&id, after).await;
    id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_on_a_store_serve_page_as_on_files() {
    let pg = tokio::task::block_in_place(TestPostgres::start);
    let script = subagent_script();
    let files = harness::Server::start(&script);
    std::fs::write(files.ws().join("notes.md"), "# notes\n").unwrap();
    let stored = super::serve_store::serve(&pg, &script, &[]);
    std::fs::write(stored.ws().join("notes.md"), "# notes\n").unwrap();
    let files_id = one_task(&files).await;
    let id = one_task(&stored).await;

    for limit in [1, 2, 3, 1000] {
        let want = pages(&files, &files_id, limit).await;
        let got = pages(&stored, &id, limit).await;
        assert_eq!(got, want, "limit {limit}");
        if limit == 1 {
            assert!(want.len() > 6, "{want:#?}");
        }
    }
    // The subagent's messages come tagged with its origin, from its own stored records.
    let (_, whole) = stored
        .call(
            "GET",
            &format!("/v1/sessions/{id}/messages?limit=1000"),
            None,
        )
        .await;
    let tagged: Vec<&Value> = whole["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["origin"].is_array())
        .collect();
    assert!(
        tagged
            .iter()
            .any(|m| m["payload"]["text"] == "No problems found."),
        "{whole}"
    );
    let child = tagged[0]["origin"][0].as_str().unwrap();
    let rows = tokio::task::block_in_place(|| {
        pg.query(&format!(
            "SELECT count(*) FROM trace_records WHERE session_id = '{child}'"
        ))
    });
    assert_ne!(rows[0][0].as_deref(), Some("0"), "{child} not stored");

    // Cursors: a files server's is refused by the store's, a forged one too; an unknown
    // session is 404.
    let (_, first) = files
        .call(
            "GET",
            &format!("/v1/sessions/{files_id}/messages?limit=1"),
            None,
        )
        .await;
    let files_cursor = first["next_cursor"].as_str().unwrap().to_string();
    for cursor in [files_cursor.as_str(), "bXMxOnNlc3Npb24tbm9wZXwx"] {
        let (s, v) = stored
            .call(
                "GET",
                &format!("/v1/sessions/{id}/messages?cursor={cursor}"),
                None,
            )
            .await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{cursor}: {v}");
        assert_eq!(v["error"]["code"], "invalid_cursor", "{v}");
    }
    let (s, v) = stored
        .call("GET", "/v1/sessions/session-nope/messages", None)
        .await;
    assert_eq!(s, StatusCode::NOT_FOUND, "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_principals_stored_messages_stay_unknown() {
    use super::serve_principals::{ALICE, BOB, ROOT, auth_file, call_as, create_as};
    let pg = tokio::task::block_in_place(TestPostgres::start);
    let dir = tempfile::tempdir().unwrap();
    let auth = auth_file(dir.path(), "", "", "");
    let server = super::serve_store::serve(&pg, &subagent_script(), &["--auth", &auth]);
    let id = create_as(&server, ALICE, &server.ws()).await;
    let path = format!("/v1/sessions/{id}/messages");
    let (s, v) = call_as(&server, BOB, "GET", &path, None).await;
    assert_eq!(s, StatusCode::NOT_FOUND, "{v}");
    assert_eq!(v["error"]["code"], "unknown_session", "{v}");
    for token in [ALICE, ROOT] {
        let (s, v) = call_as(&server, token, "GET", &path, None).await;
        assert_eq!(s, StatusCode::OK, "{v}");
        assert!(v["next_cursor"].is_null(), "{v}");
    }

    // `sessions list --owner` on the store lists each principal's own, as on files.
    let bobs = create_as(&server, BOB, &server.ws()).await;
    let url = pg.url();
    let listed = |owner: &str| {
        let out = crate::common::serve::command(
            server.dir.path(),
            &[
                "sessions", "list", "--json", "--store", &url, "--owner", owner,
            ],
        )
        .output()
        .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| {
                serde_json::from_str::<Value>(l).unwrap()["id"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(listed("alice"), [id]);
    assert_eq!(listed("bob"), [bobs]);
    assert!(listed("carol").is_empty());
}
