//! The `postgres` trace store on a real Postgres the tests start (`tests/common/postgres.rs`):
//! `run`, `chat --resume`, `sessions list` and `store export|import` through the real binary
//! with `--store`, and the lease rules through the library (a stale epoch's append refused, a
//! session whose lease moved stopped at once).

use std::io::Write;
use std::process::Stdio;
use std::time::{Duration, Instant};

use rookery::Host;
use rookery::store::append::append_once;
use rookery::store::lease::{Abandoned, SessionRow, release, take_existing, take_new};
use rookery::store::{PgStore, StoreError, StoreOptions};
use serde_json::{Value, json};

use crate::common::cli::*;
use crate::common::postgres::TestPostgres;

/// Three turns, one tool call each, in order (no parallel calls: the bytes are comparable).
fn sequential_script(sb: &Sandbox) -> std::path::PathBuf {
    sb.script(&json!({"turns": [
        {"tool_calls": [{"name": "write_file",
                         "arguments": {"file_path": "a.txt", "content": "A\n"}}]},
        {"tool_calls": [{"name": "read_file", "arguments": {"file_path": "a.txt"}}]},
        {"text": "done"}
    ]}))
}

/// The session id of a run's `trace: postgres:/ID` line.
fn stored_id(out: &Out) -> String {
    out.stderr
        .lines()
        .find_map(|l| l.strip_prefix("trace: postgres:/"))
        .unwrap_or_else(|| panic!("no stored trace named on stderr:\n{}", out.stderr))
        .to_string()
}

/// `rookery` with `args` in the sandbox's environment, run to its end.
fn rookery(sb: &Sandbox, args: &[&str]) -> Out {
    let mut c = sb.command();
    c.args(args);
    Running::spawn(c).wait(RUN_TIMEOUT)
}

/// Timestamps and session ids replaced: what differs between two runs of one script.
fn normalized(bytes: &[u8]) -> String {
    let text = String::from_utf8(bytes.to_vec()).expect("utf-8 trace");
    let ts = regex::Regex::new(r#""timestamp":"[^"]*""#).unwrap();
    let id = regex::Regex::new(r"session-[0-9-]+-[0-9a-f]{8}").unwrap();
    id.replace_all(&ts.replace_all(&text, r#""timestamp":"T""#), "SID")
        .into_owned()
}

#[test]
fn a_run_in_the_store_exports_what_the_files_backend_writes_and_is_listed() {
    let pg = TestPostgres::start();
    let url = pg.url();
    let sb = Sandbox::new();
    let script = sequential_script(&sb);

    sb.run(&["--script", s(&script), "go"]).expect_code(0);
    let file_trace = std::fs::read(sb.trace()).unwrap();
    std::fs::remove_file(sb.ws().join("a.txt")).unwrap();

    let out = sb.run(&["--store", &url, "--json", "--script", s(&script), "go"]);
    out.expect_code(0);
    assert!(out.stdout.contains(r#""text":"done""#), "{}", out.stdout);
    // `--json` prints the prompt as the store recorded it.
    assert!(
        out.stdout
            .lines()
            .any(|l| l.contains(r#""role":"user","text":"go""#)),
        "{}",
        out.stdout
    );
    let id = stored_id(&out);
    assert_eq!(
        sb.trace_files().len(),
        1,
        "the store run wrote a trace file"
    );

    let export = rookery(&sb, &["store", "export", "--store", &url, &id]);
    export.expect_code(0);
    assert_eq!(
        normalized(export.stdout.as_bytes()),
        normalized(&file_trace),
        "the export differs from the files backend's trace"
    );
    assert_eq!(
        export.stdout.lines().count(),
        file_trace.split(|b| *b == b'\n').count() - 1
    );

    // Listed from the store ($ROOKERY_STORE stands for --store), its lease given up at exit.
    let mut c = sb.command();
    c.env("ROOKERY_STORE", &url)
        .args(["sessions", "list", "--json"]);
    let list = Running::spawn(c).wait(RUN_TIMEOUT);
    list.expect_code(0);
    let rows: Vec<Value> = list
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 1, "{}", list.stdout);
    assert_eq!(rows[0]["id"], id.as_str());
    assert_eq!(rows[0]["workspace"], s(&sb.ws().canonicalize().unwrap()));
    assert_eq!(rows[0]["model"], "scripted/scripted");
    assert_eq!(rows[0]["status"], "idle");
    assert_eq!(rows[0]["owner_node"], Value::Null);
    assert_eq!(rows[0]["epoch"], 1);

    // Every record carries the writer's epoch, in one run of seq numbers from 0.
    let seqs = pg.query(&format!(
        "SELECT count(*), min(seq), max(seq), min(epoch), max(epoch) FROM trace_records \
         WHERE session_id = '{id}'"
    ));
    let n = export.stdout.lines().count();
    assert_eq!(
        seqs[0],
        [
            n.to_string(),
            "0".into(),
            (n - 1).to_string(),
            "1".into(),
            "1".into()
        ]
        .map(Some)
        .to_vec()
    );
}

#[test]
fn an_import_is_byte_identical_and_a_second_changes_nothing() {
    let pg = TestPostgres::start();
    let url = pg.url();
    let sb = Sandbox::new();
    let script = sequential_script(&sb);
    let run = sb.run(&["--script", s(&script), "go"]);
    run.expect_code(0);
    let file_trace = std::fs::read(sb.trace()).unwrap();
    let id = sb
        .trace()
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_suffix("_001.jsonl"))
        .unwrap()
        .to_string();

    let first = rookery(&sb, &["store", "import", "--store", &url, s(&sb.home())]);
    first.expect_code(0);
    let lines = file_trace.split(|b| *b == b'\n').count() - 1;
    assert!(
        first
            .stderr
            .contains(&format!("1 new sessions, {lines} new records")),
        "{}",
        first.stderr
    );
    let count = |pg: &TestPostgres| {
        pg.query("SELECT (SELECT count(*) FROM sessions), (SELECT count(*) FROM trace_records)")
    };
    let before = count(&pg);

    let second = rookery(&sb, &["store", "import", "--store", &url, s(&sb.home())]);
    second.expect_code(0);
    assert!(
        second.stderr.contains("0 new sessions, 0 new records"),
        "{}",
        second.stderr
    );
    assert_eq!(count(&pg), before);

    let export = rookery(&sb, &["store", "export", "--store", &url, &id]);
    export.expect_code(0);
    assert_eq!(
        export.stdout.as_bytes(),
        &file_trace[..],
        "not byte-identical"
    );

    // `sessions show --json` on the store is the same trace.
    let show = rookery(&sb, &["sessions", "show", "--json", "--store", &url, &id]);
    show.expect_code(0);
    assert_eq!(show.stdout, export.stdout);

    let unknown = rookery(&sb, &["store", "export", "--store", &url, "session-nope"]);
    unknown.expect_code(2);
    assert!(
        unknown
            .stderr
            .contains("no session session-nope in the store")
    );
}

/// `chat` fed `input` with `args`; returns its output.
fn chat(sb: &Sandbox, args: &[&str], input: &str) -> Out {
    let mut c = sb.command();
    c.arg("chat").args(args).stdin(Stdio::piped());
    let mut child = c.spawn().unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let stdout = drain(child.stdout.take().unwrap());
    let stderr = drain(child.stderr.take().unwrap());
    let deadline = Instant::now() + RUN_TIMEOUT;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chat did not end: {}", stderr.join().unwrap());
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    Out {
        code: status.code(),
        stdout: stdout.join().unwrap(),
        stderr: stderr.join().unwrap(),
    }
}

#[test]
fn chat_resumes_a_stored_session_at_its_next_turn_under_a_new_epoch() {
    let pg = TestPostgres::start();
    let url = pg.url();
    let sb = Sandbox::new();
    let script =
        sb.script(&json!({"turns": [{"text": "first answer"}, {"text": "second answer"}, {"text": "third answer"}]}));
    let (home, ws) = (sb.home(), sb.ws());
    let common = [
        "--home",
        s(&home),
        "--workspace",
        s(&ws),
        "--store",
        &url,
        "--script",
        s(&script),
    ];
    let first = chat(&sb, &common, "hello\n");
    first.expect_code(0);
    assert!(
        first.stdout.lines().any(|l| l == "first answer"),
        "{}",
        first.stdout
    );
    let id = first
        .stdout
        .lines()
        .last()
        .and_then(|l| l.strip_prefix("rookery chat --resume "))
        .unwrap()
        .to_string();

    let mut again = common.to_vec();
    again.extend(["--resume", &id]);
    let second = chat(&sb, &again, "and now?\n");
    second.expect_code(0);
    assert!(
        second.stdout.lines().any(|l| l == "second answer"),
        "{}\n{}",
        second.stdout,
        second.stderr
    );
    assert!(sb.trace_files().is_empty(), "a stored chat wrote files");

    // With no model flag and no workspace: both come from what the store recorded, as a
    // trace file's `session_meta` gives them on the files backend.
    let third = chat(
        &sb,
        &["--home", s(&home), "--store", &url, "--resume", &id],
        "and then?\n",
    );
    third.expect_code(0);
    assert!(
        third.stdout.lines().any(|l| l == "third answer"),
        "{}\n{}",
        third.stdout,
        third.stderr
    );

    let export = rookery(&sb, &["store", "export", "--store", &url, &id]);
    export.expect_code(0);
    let texts: Vec<String> = export
        .stdout
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter_map(|r| r["payload"]["text"].as_str().map(str::to_string))
        .collect();
    assert_eq!(
        texts,
        [
            "hello",
            "first answer",
            "and now?",
            "second answer",
            "and then?",
            "third answer"
        ],
        "{}",
        export.stdout
    );
    let epochs = pg.query(&format!(
        "SELECT epoch, count(*) FROM trace_records WHERE session_id = '{id}' \
         GROUP BY epoch ORDER BY epoch"
    ));
    assert_eq!(epochs.len(), 3, "{epochs:?}");
    assert_eq!(epochs[1][0].as_deref(), Some("2"));
    assert_eq!(epochs[2][0].as_deref(), Some("3"));
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn options(node: &str, ttl: Duration) -> StoreOptions {
    StoreOptions {
        node: node.to_string(),
        lease_ttl: ttl,
    }
}

#[test]
fn an_append_under_a_stale_epoch_is_refused_by_the_database() {
    let pg = TestPostgres::start();
    let url = pg.url();
    runtime().block_on(async move {
        let a = PgStore::connect(&url, options("a", Duration::from_secs(1)))
            .await
            .unwrap();
        let b = PgStore::connect(&url, options("b", Duration::from_secs(30)))
            .await
            .unwrap();
        let row = SessionRow {
            id: "session-2026-01-01-00-00-00-0000abcd".into(),
            ..SessionRow::default()
        };
        let old = take_new(&a, &row).await.unwrap();
        assert_eq!(old.lease.epoch, 1);
        append_once(&a, &old.lease, 0, &[b"{\"n\":0}\n".to_vec()])
            .await
            .unwrap();

        // Nobody renews a's lease: b gets it once it has run out, and not before.
        let deadline = Instant::now() + Duration::from_secs(30);
        let new = loop {
            match take_existing(&b, &row.id).await {
                Ok(t) => break t,
                Err(StoreError::Leased { node, .. }) => {
                    assert_eq!(node, "a");
                    assert!(Instant::now() < deadline, "the lease never ran out");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(e) => panic!("{e}"),
            }
        };
        assert_eq!((new.lease.epoch, new.next_seq), (2, 1));
        // a never gave it up: b learns whose lease it took over, and its epoch.
        assert_eq!(
            new.abandoned,
            Some(Abandoned {
                node: "a".into(),
                epoch: 1
            })
        );

        let stale = append_once(&a, &old.lease, 1, &[b"{\"n\":\"stale\"}\n".to_vec()]).await;
        assert!(
            matches!(stale, Err(StoreError::Fenced { epoch: 1, .. })),
            "{stale:?}"
        );
        append_once(&b, &new.lease, 1, &[b"{\"n\":1}\n".to_vec()])
            .await
            .unwrap();
        // And a's lease cannot be taken back while b holds it.
        assert!(matches!(
            take_existing(&a, &row.id).await,
            Err(StoreError::Leased { .. })
        ));
        // Once b gives it up cleanly, the next holder finds nobody abandoned it.
        release(&b, &new.lease).await.unwrap();
        let clean = take_existing(&a, &row.id).await.unwrap();
        assert_eq!((clean.lease.epoch, clean.abandoned), (3, None));
        release(&a, &clean.lease).await.unwrap();
    });
    let rows =
        pg.query("SELECT seq, epoch, convert_from(record, 'UTF8') FROM trace_records ORDER BY seq");
    assert_eq!(
        rows,
        vec![
            vec![
                Some("0".into()),
                Some("1".into()),
                Some("{\"n\":0}\n".into())
            ],
            vec![
                Some("1".into()),
                Some("2".into()),
                Some("{\"n\":1}\n".into())
            ],
        ]
    );
}

#[test]
fn a_session_whose_lease_moves_stops_at_once_and_writes_nothing_more() {
    let pg = TestPostgres::start();
    let url = pg.url();
    let sb = Sandbox::new();
    let id = runtime().block_on(async move {
        let store = PgStore::connect(&url, options("a", Duration::from_secs(1)))
            .await
            .unwrap();
        let host = Host::start_with_store(sb.home(), store.clone())
            .await
            .unwrap();
        let model = crate::common::scripted(json!({"turns": [{"text": "one"}, {"text": "two"}]}));
        let session = host
            .create_session(crate::common::options(&sb.ws(), model))
            .await
            .unwrap();
        session.run_task("first").await.unwrap();
        session.flush_trace().await.unwrap();
        let id = session.id().to_string();

        // Another node takes the session over (its epoch moves on).
        let client = store.client().await.unwrap();
        client
            .execute(
                "UPDATE sessions SET epoch = epoch + 1, owner_node = 'b' WHERE id = $1",
                &[&id],
            )
            .await
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        while session.session_ref().get_status() == ractor::ActorStatus::Running {
            assert!(Instant::now() < deadline, "the session still runs");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(session.start_task("second").await.is_err());
        host.shutdown().await;
        id
    });
    let epochs = pg.query(&format!(
        "SELECT DISTINCT epoch FROM trace_records WHERE session_id = '{id}'"
    ));
    assert_eq!(epochs, vec![vec![Some("1".to_string())]]);
    let owner = pg.query(&format!(
        "SELECT owner_node, epoch FROM sessions WHERE id = '{id}'"
    ));
    assert_eq!(
        owner,
        vec![vec![Some("b".to_string()), Some("2".to_string())]]
    );
}

#[test]
fn a_store_that_cannot_be_reached_is_a_clear_start_error() {
    let sb = Sandbox::new();
    let script = sb.script(&json!({"turns": [{"text": "x"}]}));
    // A port nothing listens on (bound and released).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("postgres://rookery@127.0.0.1:{port}/postgres");
    let out = sb.run(&["--store", &url, "--script", s(&script), "go"]);
    out.expect_code(2);
    assert!(
        out.stderr.contains("the store is unavailable"),
        "{}",
        out.stderr
    );
    let bad = sb.run(&["--store", "mysql://x", "--script", s(&script), "go"]);
    bad.expect_code(2);
    assert!(bad.stderr.contains("unknown trace store"), "{}", bad.stderr);
}

#[test]
fn appends_wait_out_a_database_restart_and_nothing_is_lost() {
    let mut pg = TestPostgres::start();
    let url = pg.url();
    let sb = Sandbox::new();
    let rt = runtime();
    let store = rt
        .block_on(PgStore::connect(
            &url,
            options("a", Duration::from_secs(60)),
        ))
        .unwrap();
    let host = rt
        .block_on(Host::start_with_store(sb.home(), store.clone()))
        .unwrap();
    let model = crate::common::scripted(json!({"turns": [{"text": "one"}, {"text": "two"}]}));
    let session = rt
        .block_on(host.create_session(crate::common::options(&sb.ws(), model)))
        .unwrap();
    rt.block_on(session.run_task("first")).unwrap();
    rt.block_on(session.flush_trace()).unwrap();

    // The database goes away while the second task writes its records.
    pg.stop();
    rt.block_on(session.run_task("second")).unwrap();
    let flushed = {
        let session = session.clone();
        rt.spawn(async move { session.flush_trace().await })
    };
    pg.launch();
    rt.block_on(flushed).unwrap().unwrap();
    assert_eq!(session.trace_failure(), None);
    let id = session.id().to_string();
    rt.block_on(async {
        session.close().await.unwrap();
        host.shutdown().await;
    });

    let mut out = Vec::new();
    rt.block_on(rookery::store::export::export(&store, &id, &mut out))
        .unwrap();
    let texts: Vec<String> = String::from_utf8(out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter_map(|r| r["payload"]["text"].as_str().map(str::to_string))
        .collect();
    assert_eq!(texts, ["first", "one", "second", "two"]);
    let seqs = pg.query(&format!(
        "SELECT count(*) = max(seq) + 1 FROM trace_records WHERE session_id = '{id}'"
    ));
    assert_eq!(
        seqs,
        vec![vec![Some("t".to_string())]],
        "a gap in the seq numbers"
    );
}
