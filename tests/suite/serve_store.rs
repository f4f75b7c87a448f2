//! `rookery serve --store` on a real Postgres the tests start (`tests/common/postgres.rs`),
//! through the built binary over HTTP on 127.0.0.1: sessions created, listed, run, shown and
//! downloaded from the store; hibernation gives the lease up and the next request takes it
//! back; an imported files home is listed and woken; an SSE replay past a tiny ring reads the
//! store. What happens when things go wrong is `serve_store_outages.rs`.

use crate::common::postgres::TestPostgres;
use crate::common::serve as harness;

use std::time::{Duration, Instant};

use harness::*;
use reqwest::StatusCode;
use serde_json::{Value, json};

/// A throw-away Postgres (its harness runs its own runtime: off this test's).
pub(crate) fn start_postgres() -> TestPostgres {
    tokio::task::block_in_place(TestPostgres::start)
}

/// `sql`'s rows as text (the harness's own runtime, off this test's).
pub(crate) fn query(pg: &TestPostgres, sql: &str) -> Vec<Vec<Option<String>>> {
    tokio::task::block_in_place(|| pg.query(sql))
}

/// One value of `sql`'s first row.
pub(crate) fn value(pg: &TestPostgres, sql: &str) -> Option<String> {
    query(pg, sql)
        .into_iter()
        .next()
        .and_then(|r| r.into_iter().next())
        .flatten()
}

/// The session's `owner_node` and `epoch` once `done` accepts them (polled until [`WAIT`]).
pub(crate) async fn wait_lease(
    pg: &TestPostgres,
    id: &str,
    what: &str,
    done: impl Fn(Option<&str>, i64) -> bool,
) -> (Option<String>, i64) {
    let deadline = Instant::now() + WAIT;
    loop {
        let row = query(
            pg,
            &format!("SELECT owner_node, epoch FROM sessions WHERE id = '{id}'"),
        );
        let owner = row[0][0].clone();
        let epoch: i64 = row[0][1].as_deref().unwrap().parse().unwrap();
        if done(owner.as_deref(), epoch) {
            return (owner, epoch);
        }
        assert!(
            Instant::now() < deadline,
            "{what}: owner {owner:?}, epoch {epoch}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A server on the store with `extra` flags: a node of its own (a name no other server of the
/// test run has, an advertised URL nobody forwards to, as no other node holds its sessions).
pub(crate) fn serve(pg: &TestPostgres, script: &Value, extra: &[&str]) -> Server {
    static NODES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let url = pg.url();
    let node = format!(
        "node-{}",
        NODES.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
    );
    let mut flags = vec![
        "--store",
        url.as_str(),
        "--node-id",
        node.as_str(),
        "--advertise",
        "http://127.0.0.1:1",
        "--cluster-token-env",
        "TEST_CLUSTER_TOKEN",
    ];
    flags.extend_from_slice(extra);
    Server::start_env(
        sandbox(script),
        None,
        &flags,
        None,
        &[("TEST_CLUSTER_TOKEN", "serve-store-test-cluster-secret")],
    )
}

/// The ids of `GET /v1/sessions` with their statuses.
pub(crate) async fn listed(server: &Server) -> Vec<(String, String)> {
    let (s, v) = server.call("GET", "/v1/sessions", None).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    v["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["session_id"].as_str().unwrap().to_string(),
                e["status"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// The stored trace of `id`: its records' bytes in `seq` order.
pub(crate) fn stored_trace(pg: &TestPostgres, id: &str) -> String {
    query(
        pg,
        &format!(
            "SELECT convert_from(record, 'UTF8') FROM trace_records \
             WHERE session_id = '{id}' ORDER BY seq"
        ),
    )
    .into_iter()
    .map(|r| r[0].clone().unwrap())
    .collect()
}

/// Whether the stored trace of `id` has `n` root `task_end` records.
pub(crate) fn stored_task_ends(pg: &TestPostgres, id: &str) -> usize {
    stored_trace(pg, id)
        .lines()
        .filter(|l| l.contains("\"type\":\"task_end\"") && !l.contains("\"origin\""))
        .count()
}

/// Waits until the stored trace of `id` has `n` root `task_end` records (its writer commits
/// after the stream has the event).
pub(crate) async fn wait_task_ends(pg: &TestPostgres, id: &str, n: usize) {
    let deadline = Instant::now() + WAIT;
    while stored_task_ends(pg, id) < n {
        assert!(Instant::now() < deadline, "task {n} of {id} never stored");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(stored_task_ends(pg, id), n);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_runs_lists_hibernates_and_wakes_sessions_of_the_store() {
    let pg = start_postgres();
    let script = json!({"turns": [{"text": "one"}, {"text": "two"}, {"text": "three"}]});
    let server = serve(
        &pg,
        &script,
        &["--idle-hibernate", "0", "--max-resident", "1"],
    );

    let a = server.create(None).await;
    let after = server.task(&a, "first").await;
    let events = server.events_until_task_end(&a, after).await;
    assert!(events.iter().any(|(_, v)| v["payload"]["text"] == "one"));
    let (owner, epoch) = wait_lease(&pg, &a, "held", |o, _| o.is_some()).await;
    assert_eq!(epoch, 1);
    let node = owner.unwrap();
    wait_task_ends(&pg, &a, 1).await;
    // Nothing was written under the home's traces.
    let traces = server.dir.path().join("home/traces");
    let files = walk(&traces);
    assert!(files.is_empty(), "trace files written: {files:?}");

    // A second session over --max-resident 1 hibernates the first: its lease is given up.
    let b = server.create(None).await;
    wait_lease(&pg, &a, "released at hibernation", |o, _| o.is_none()).await;
    assert_eq!(
        value(
            &pg,
            &format!("SELECT status FROM sessions WHERE id = '{a}'")
        ),
        Some("idle".into())
    );
    let list = listed(&server).await;
    assert!(list.contains(&(a.clone(), "hibernated".into())), "{list:?}");
    let (_, v) = server.call("GET", "/v1/sessions", None).await;
    for e in v["sessions"].as_array().unwrap() {
        assert!(e["last_activity"].is_string(), "{e}");
    }
    assert!(list.contains(&(b.clone(), "idle".into())), "{list:?}");

    // The download is the stored trace, byte for byte.
    let resp = server
        .req(reqwest::Method::GET, &format!("/v1/sessions/{a}/trace"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(resp.text().await.unwrap(), stored_trace(&pg, &a));

    // The next task wakes it from the store under a new epoch, on this node.
    let after = server.task(&a, "second").await;
    let events = server.events_until_task_end(&a, after).await;
    assert!(
        events.iter().any(|(_, v)| v["payload"]["text"] == "two"),
        "{events:?}"
    );
    let (owner, epoch) = wait_lease(&pg, &a, "taken back", |o, _| o.is_some()).await;
    assert_eq!((owner.as_deref(), epoch), (Some(node.as_str()), 2));
    wait_task_ends(&pg, &a, 2).await;
    let (s, v) = server.call("GET", &format!("/v1/sessions/{a}"), None).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["trace_path"], format!("postgres:/{a}"));
    let stored_at = value(
        &pg,
        &format!(
            "SELECT to_char(last_activity AT TIME ZONE 'UTC', \
             'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"') FROM sessions WHERE id = '{a}'"
        ),
    );
    assert_eq!(v["last_activity"].as_str(), stored_at.as_deref(), "{v}");

    // A fork through the API is a new stored session, served here.
    let (s, v) = server
        .call(
            "POST",
            &format!("/v1/sessions/{a}/fork"),
            Some(json!({"at_task": 1})),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    let forked = v["session_id"].as_str().unwrap().to_string();
    let fork_trace = stored_trace(&pg, &forked);
    let opening = fork_trace.lines().next().unwrap();
    assert!(
        opening.contains(&format!(
            "\"forked_from\":{{\"session_id\":\"{a}\",\"task\":1"
        )),
        "{opening}"
    );
    assert_eq!(stored_task_ends(&pg, &forked), 1, "{fork_trace}");
    wait_lease(&pg, &forked, "the fork served here", |o, e| {
        o == Some(node.as_str()) && e == 2
    })
    .await;
    // And through the command line, at its last completed task: stored, held by nobody.
    let url = pg.url();
    let out = tokio::task::block_in_place(|| {
        command(
            server.dir.path(),
            &["sessions", "fork", "--store", &url, &a],
        )
        .output()
        .unwrap()
    });
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let cli_fork = String::from_utf8(out.stdout).unwrap().trim().to_string();
    assert_eq!(stored_task_ends(&pg, &cli_fork), 2);
    let (owner, epoch) = wait_lease(&pg, &cli_fork, "stored", |_, _| true).await;
    assert_eq!((owner, epoch), (None, 1));
    let out = tokio::task::block_in_place(|| {
        command(
            server.dir.path(),
            &["sessions", "fork", "--store", &url, "--at-task", "9", &a],
        )
        .output()
        .unwrap()
    });
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("has no task 9"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for id in [&forked, &cli_fork] {
        query(&pg, &format!("DELETE FROM sessions WHERE id = '{id}'"));
    }

    // Paging by id over the store.
    let (s, v) = server.call("GET", "/v1/sessions?limit=1", None).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let first = v["sessions"][0]["session_id"].as_str().unwrap().to_string();
    let cursor = v["next_cursor"].as_str().expect("a next page").to_string();
    let (_, v) = server
        .call(
            "GET",
            &format!("/v1/sessions?limit=1&cursor={cursor}"),
            None,
        )
        .await;
    let second = v["sessions"][0]["session_id"].as_str().unwrap().to_string();
    let mut ids = vec![first, second];
    ids.sort();
    let mut want = vec![a.clone(), b.clone()];
    want.sort();
    assert_eq!(ids, want);
    assert_eq!(v["next_cursor"], Value::Null);

    // A files home imported into the store is listed and woken through serve.
    let other = tempfile::tempdir().unwrap();
    let run_home = other.path().join("home");
    let out = tokio::task::block_in_place(|| {
        command(
            server.dir.path(),
            &[
                "run",
                "--home",
                run_home.to_str().unwrap(),
                "--script",
                server.dir.path().join("script.json").to_str().unwrap(),
                "--workspace",
                server.ws().to_str().unwrap(),
                "imported",
            ],
        )
        .output()
        .unwrap()
    });
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let url = pg.url();
    let out = command(
        server.dir.path(),
        &[
            "store",
            "import",
            "--store",
            &url,
            run_home.to_str().unwrap(),
        ],
    )
    .output()
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let imported = value(
        &pg,
        &format!("SELECT id FROM sessions WHERE id NOT IN ('{a}', '{b}')"),
    )
    .expect("the imported session");
    let list = listed(&server).await;
    assert!(
        list.contains(&(imported.clone(), "hibernated".into())),
        "{list:?}"
    );
    let (s, v) = server
        .call("GET", &format!("/v1/sessions/{imported}"), None)
        .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    wait_lease(&pg, &imported, "the import woken here", |o, e| {
        o == Some(node.as_str()) && e == 1
    })
    .await;
}

/// Every file under `dir` (none when it is missing).
pub(crate) fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// Stored events `(id, message)` after `after` up to and including id `until` (partials, sent
/// without an id on the store, left out).
pub(crate) async fn events_through(
    server: &Server,
    id: &str,
    after: u64,
    until: u64,
) -> Vec<(u64, Value)> {
    let resp = server.events_from(id, after).await;
    read_events(resp, |seq, _| seq.is_some_and(|seq| seq >= until))
        .await
        .into_iter()
        .filter(|(_, v)| !payload_type(v).starts_with("partial_"))
        .map(|(seq, v)| (seq.expect("a stored event has its seq"), v))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replay_past_a_tiny_ring_reads_the_store_with_no_gap_or_duplicate() {
    let pg = start_postgres();
    let a = "A".repeat(3000);
    let b = "B".repeat(3000);
    let script = json!({"turns": [{"text": a}, {"text": b}]});
    let server = serve(&pg, &script, &["--sse-ring-bytes", "4096"]);
    let id = server.create(None).await;
    let mut live = Vec::new();
    for text in ["one", "two"] {
        let after = server.task(&id, text).await;
        live.extend(server.events_until_task_end(&id, after).await);
    }
    let last = live.last().unwrap().0;
    let replay = events_through(&server, &id, 0, last).await;
    let ids: Vec<u64> = replay.iter().map(|(s, _)| *s).collect();
    assert!(
        ids.windows(2).all(|w| w[0] < w[1]),
        "in order, once: {ids:?}"
    );
    // Ids are the store's seq: 0 is the session_meta, so the replay after 0 starts at 1.
    assert_eq!(
        ids[0], 1,
        "the first record after the session_meta, from the store"
    );
    let replayed: std::collections::HashMap<u64, &Value> =
        replay.iter().map(|(s, v)| (*s, v)).collect();
    let stored = stored_trace(&pg, &id);
    let mut old_text = false;
    for (seq, v) in &live {
        // A partial has no id of its own (the client carries the last one over).
        if payload_type(v).starts_with("partial_") {
            continue;
        }
        match replayed.get(seq) {
            Some(r) => assert_eq!(*r, v, "event {seq}"),
            None => assert!(
                payload_type(v).starts_with("partial_"),
                "event {seq} is missing from the replay: {v}"
            ),
        }
        if v["payload"]["type"] == "text" && v["payload"]["text"] == a.as_str() {
            assert!(replayed.contains_key(seq), "the first answer, under its id");
            assert!(stored.contains(&a));
            old_text = true;
        }
    }
    assert!(old_text, "the first answer was streamed");
}
