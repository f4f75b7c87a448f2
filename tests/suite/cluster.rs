//! A cluster of three `rookery serve` nodes on 127.0.0.1 sharing one real Postgres (started by
//! the test, `tests/common/postgres.rs`): `GET /v1/cluster` lists them; a session created on A
//! takes a task through B and streams its events through C, every answer naming A in
//! `Rookery-Node`; a forwarded request without the cluster token is refused 401
//! `cluster_unauthorized`; an owner frozen with SIGSTOP until its lease moves writes no record
//! of its stale epoch after the move once SIGCONT wakes it, has stopped its copy (its command
//! killed) and forwards the session to the new owner. Also the start refusals of the cluster
//! flags.

use crate::common::serve as harness;

use std::net::TcpListener;
use std::time::{Duration, Instant};

use harness::*;
use nix::sys::signal::{Signal, kill};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::common::postgres::TestPostgres;

/// The client token every node accepts.
pub(crate) const TOKEN: &str = "cluster-test-client-token-0123456789";
/// The secret the nodes share.
pub(crate) const CLUSTER_TOKEN: &str = "cluster-test-shared-secret-0123456789";
/// The lease TTL of the nodes, in seconds.
pub(crate) const TTL: &str = "2";

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// A node named `name` on the store at `url`, running `script`.
pub(crate) fn node(url: &str, name: &str, script: &Value) -> Server {
    node_with(url, name, script, Some(TOKEN), &[], &[])
}

/// [`node`] with the client token `token` (`None`: `extra` says how clients authenticate),
/// more flags (`extra`) and variables (`env`).
pub(crate) fn node_with(
    url: &str,
    name: &str,
    script: &Value,
    token: Option<&str>,
    extra: &[&str],
    env: &[(&str, &str)],
) -> Server {
    node_full(sandbox(script), url, name, token, extra, env)
}

/// A node named `name` on the store at `url`, in the sandbox `dir` (a restart keeps its
/// workspace and home), with the flags `extra` too.
pub(crate) fn node_in(dir: tempfile::TempDir, url: &str, name: &str, extra: &[&str]) -> Server {
    node_full(dir, url, name, Some(TOKEN), extra, &[])
}

fn node_full(
    dir: tempfile::TempDir,
    url: &str,
    name: &str,
    token: Option<&str>,
    extra: &[&str],
    env: &[(&str, &str)],
) -> Server {
    let port = free_port().to_string();
    let listen = format!("127.0.0.1:{port}");
    let advertise = format!("http://127.0.0.1:{port}");
    let mut args = vec![
        "--listen",
        &listen,
        "--store",
        url,
        "--lease-ttl",
        TTL,
        "--node-id",
        name,
        "--advertise",
        &advertise,
        "--cluster-token-env",
        "TEST_CLUSTER_TOKEN",
    ];
    args.extend(extra);
    let mut vars = vec![("TEST_CLUSTER_TOKEN", CLUSTER_TOKEN)];
    vars.extend(env);
    Server::start_env(dir, token, &args, None, &vars)
}

/// The `Rookery-Node` of an answer.
fn node_of(resp: &reqwest::Response) -> String {
    resp.headers()
        .get("rookery-node")
        .unwrap_or_else(|| panic!("no Rookery-Node in {:?}", resp.headers()))
        .to_str()
        .unwrap()
        .to_string()
}

/// Sends `r`; the status, the `Rookery-Node` and the JSON body.
pub(crate) async fn answer(r: reqwest::RequestBuilder) -> (StatusCode, String, Value) {
    let resp = tokio::time::timeout(WAIT, r.send())
        .await
        .expect("an answer in time")
        .expect("request");
    let status = resp.status();
    let node = node_of(&resp);
    let text = resp.text().await.unwrap();
    let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (status, node, body)
}

/// Events of session `id` through `server` after `after`, up to the session's own `task_end`;
/// also the stream's `Rookery-Node`.
async fn events_through(server: &Server, id: &str, after: u64) -> (String, Vec<Value>) {
    let resp = server.events_from(id, after).await;
    let node = node_of(&resp);
    let events = read_events(resp, |_, v| {
        v["payload"]["type"] == "task_end" && v.get("origin").is_none()
    })
    .await;
    (node, events.into_iter().map(|(_, v)| v).collect())
}

/// The assistant texts of `events`.
pub(crate) fn texts(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|v| &v["payload"])
        .filter(|p| p["type"] == "text" && p["role"] == "assistant")
        .map(|p| p["text"].as_str().unwrap().to_string())
        .collect()
}

pub(crate) fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// `sql`'s rows as text, from a thread of its own (the helper runs a runtime of its own).
pub(crate) fn query(pg: &TestPostgres, sql: &str) -> Vec<Vec<Option<String>>> {
    std::thread::scope(|s| s.spawn(|| pg.query(sql)).join().unwrap())
}

#[test]
fn three_nodes_serve_one_session_from_any_of_them() {
    let pg = TestPostgres::start();
    runtime().block_on(three_nodes(&pg));
}

async fn three_nodes(pg: &TestPostgres) {
    let script = json!({"turns": [{"text": "answered"}]});
    let a = node(&pg.url(), "a", &script);
    let b = node(&pg.url(), "b", &script);
    let c = node(&pg.url(), "c", &script);

    // Every node lists the three (each registered before it printed its address).
    for n in [&a, &b, &c] {
        let (status, _, v) = answer(n.req(reqwest::Method::GET, "/v1/cluster")).await;
        assert_eq!(status, StatusCode::OK, "{v}");
        let listed: Vec<(&str, &str)> = v["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| {
                assert!(n["last_heartbeat"].as_str().unwrap().ends_with('Z'), "{n}");
                (
                    n["node_id"].as_str().unwrap(),
                    n["advertise"].as_str().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            listed,
            vec![
                ("a", a.base.as_str()),
                ("b", b.base.as_str()),
                ("c", c.base.as_str())
            ]
        );
    }
    // The cluster's routes need the client's token like every other.
    let bare = reqwest::Client::new()
        .get(format!("{}/v1/cluster", b.base))
        .send()
        .await
        .unwrap();
    assert_eq!(bare.status(), StatusCode::UNAUTHORIZED);

    // Created on A: A holds it.
    let (status, node, v) = answer(
        a.req(reqwest::Method::POST, "/v1/sessions")
            .json(&json!({"workspace": a.ws()})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{v}");
    assert_eq!(node, "a");
    let id = v["session_id"].as_str().unwrap().to_string();

    // A task through B runs on A; its events through C come from A.
    let (status, node, v) = answer(
        b.req(reqwest::Method::POST, &format!("/v1/sessions/{id}/tasks"))
            .json(&json!({"text": "go"})),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{v}");
    assert_eq!(node, "a", "the task ran where the lease is");
    let after = v["events_after"].as_u64().unwrap();
    let (node, events) = events_through(&c, &id, after).await;
    assert_eq!(node, "a");
    assert_eq!(texts(&events), vec!["answered"]);
    assert_eq!(events.last().unwrap()["payload"]["status"], "completed");

    // Reads through any node come from A too.
    for n in [&a, &b, &c] {
        let (status, node, v) =
            answer(n.req(reqwest::Method::GET, &format!("/v1/sessions/{id}"))).await;
        assert_eq!(status, StatusCode::OK, "{v}");
        assert_eq!(node, "a");
        assert_eq!(v["session_id"], id.as_str());
    }
    let (_, _, v) = answer(c.req(reqwest::Method::GET, "/v1/cluster")).await;
    let resident: Vec<i64> = v["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["resident_sessions"].as_i64().unwrap())
        .collect();
    assert_eq!(resident, vec![1, 0, 0]);

    // A forwarded request must carry the cluster token: missing or wrong, 401.
    let path = format!("/v1/sessions/{id}");
    for token in [None, Some("wrong"), Some(&CLUSTER_TOKEN[1..])] {
        let mut r = a
            .req(reqwest::Method::GET, &path)
            .header("Rookery-Forwarded-By", "b");
        if let Some(t) = token {
            r = r.header("Rookery-Cluster-Token", t);
        }
        let (status, _, v) = answer(r).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{token:?}: {v}");
        assert_eq!(v["error"]["code"], "cluster_unauthorized", "{v}");
    }
    let (status, _, v) = answer(
        a.req(reqwest::Method::GET, &path)
            .header("Rookery-Cluster-Token", "wrong"),
    )
    .await;
    assert_eq!(v["error"]["code"], "cluster_unauthorized", "{status}: {v}");
    // With the right one it is served where it is (never forwarded again).
    let (status, node, v) = answer(
        a.req(reqwest::Method::GET, &path)
            .header("Rookery-Forwarded-By", "b")
            .header("Rookery-Cluster-Token", CLUSTER_TOKEN),
    )
    .await;
    assert_eq!((status, node.as_str()), (StatusCode::OK, "a"), "{v}");
    // A forwarded request for a session another node holds is not sent on: 503.
    let (status, node, v) = answer(
        c.req(reqwest::Method::GET, &path)
            .header("Rookery-Forwarded-By", "b")
            .header("Rookery-Cluster-Token", CLUSTER_TOKEN),
    )
    .await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{v}");
    assert_eq!(
        (v["error"]["code"].as_str(), node.as_str()),
        (Some("session_elsewhere"), "c")
    );
    for n in [&a, &b, &c] {
        assert!(!n.stderr().contains(CLUSTER_TOKEN), "the token is in a log");
    }
}

#[test]
fn a_store_node_without_its_cluster_flags_is_refused_at_start() {
    let dir = sandbox(&json!({"turns": []}));
    // Refused before any connection: this store needs no database.
    let url = "postgres://nobody@127.0.0.1:1/none";
    let run = |extra: &[&str], env: &[(&str, &str)]| {
        let mut args = vec!["serve", "--listen", "127.0.0.1:0", "--store", url];
        args.extend(extra);
        let out = command(dir.path(), &args)
            .envs(env.iter().copied())
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, err) = run(&[], &[]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("--node-id is required with a postgres store"),
        "{err}"
    );
    let (code, err) = run(&["--node-id", "a"], &[]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--advertise is required"), "{err}");
    let flags = [
        "--node-id",
        "a",
        "--advertise",
        "http://127.0.0.1:1",
        "--cluster-token-env",
        "TEST_CLUSTER_TOKEN",
    ];
    let (code, err) = run(&flags, &[("TEST_CLUSTER_TOKEN", "")]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("the environment variable TEST_CLUSTER_TOKEN is not set or empty"),
        "{err}"
    );
    let (code, err) = run(&flags, &[("TEST_CLUSTER_TOKEN", "short")]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("at least 16 characters"), "{err}");
    // And the flags mean nothing without a postgres store.
    let out = command(
        dir.path(),
        &["serve", "--listen", "127.0.0.1:0", "--node-id", "a"],
    )
    .env_remove("ROOKERY_STORE")
    .output()
    .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--node-id: only with a postgres store"),
        "{err}"
    );
}

/// Polls `sql` (one row, one column) until it is `want`.
pub(crate) async fn wait_for(pg: &TestPostgres, sql: &str, want: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let rows = query(pg, sql);
        if rows
            .first()
            .and_then(|r| r.first())
            .cloned()
            .flatten()
            .as_deref()
            == Some(want)
        {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{sql} never gave {want}: {rows:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Whether process `pid` is gone (or a zombie nobody will run again).
pub(crate) fn gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z')),
    }
}

#[test]
fn a_frozen_owner_loses_its_session_and_writes_nothing_after_the_move() {
    let pg = TestPostgres::start();
    runtime().block_on(frozen_owner(&pg));
}

async fn frozen_owner(pg: &TestPostgres) {
    // The first task's command runs long and writes its pid; the next task only answers.
    let script = json!({"turns": [
        {"tool_calls": [{"name": "exec_command", "arguments": {
            "description": "wait", "cmd": "echo $$ > cmd.pid; exec sleep 120"}}]},
        {"text": "after the move"}
    ]});
    let a = node(&pg.url(), "a", &script);
    let b = node(&pg.url(), "b", &script);
    let id = a.create(None).await;
    a.task(&id, "first").await;
    let pid_file = a.ws().join("cmd.pid");
    let deadline = Instant::now() + WAIT;
    let pid: i32 = loop {
        if let Some(pid) = std::fs::read_to_string(&pid_file)
            .ok()
            .and_then(|t| t.trim().parse().ok())
        {
            break pid;
        }
        assert!(Instant::now() < deadline, "the command never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let lease = format!(
        "SELECT (lease_expiry < now())::text FROM sessions WHERE id = '{id}' AND epoch = 1"
    );
    wait_for(pg, &lease.replace("lease_expiry < now()", "true"), "true").await;

    // Frozen mid-command until its lease expires: the next task through B moves the session.
    kill(a.pid(), Signal::SIGSTOP).unwrap();
    wait_for(pg, &lease, "true").await;
    let (status, node, v) = answer(
        b.req(reqwest::Method::POST, &format!("/v1/sessions/{id}/tasks"))
            .json(&json!({"text": "second"})),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{v}");
    assert_eq!(
        node, "b",
        "the session moved to the node that took the task"
    );
    let after = v["events_after"].as_u64().unwrap();
    let (node, events) = events_through(&b, &id, after).await;
    assert_eq!(node, "b");
    assert_eq!(texts(&events), vec!["after the move"]);
    assert_eq!(events.last().unwrap()["payload"]["status"], "completed");
    let epoch = format!("SELECT epoch::text FROM sessions WHERE id = '{id}'");
    wait_for(pg, &epoch, "2").await;

    // Thawed, the old owner finds its lease gone: it stops its copy (the command dies with
    // it) and sends the session's requests to B.
    kill(a.pid(), Signal::SIGCONT).unwrap();
    let deadline = Instant::now() + WAIT;
    while !gone(pid) || !a.stderr().contains(&format!("stopping session {id}")) {
        assert!(
            Instant::now() < deadline,
            "the old owner still runs its copy (command {pid} gone: {}):\n{}",
            gone(pid),
            a.stderr()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (status, node, v) =
        answer(a.req(reqwest::Method::GET, &format!("/v1/sessions/{id}"))).await;
    assert_eq!((status, node.as_str()), (StatusCode::OK, "b"), "{v}");

    // Nothing of epoch 1 after the first record of epoch 2; epoch 2's records follow on.
    let stale = query(
        pg,
        &format!(
            "SELECT count(*)::text FROM trace_records WHERE session_id = '{id}' AND epoch = 1
               AND seq > (SELECT min(seq) FROM trace_records
                           WHERE session_id = '{id}' AND epoch = 2)"
        ),
    );
    assert_eq!(stale, vec![vec![Some("0".to_string())]]);
    let epochs = query(
        pg,
        &format!(
            "SELECT epoch::text, count(*)::text FROM trace_records WHERE session_id = '{id}'
              GROUP BY epoch ORDER BY epoch"
        ),
    );
    assert_eq!(epochs.len(), 2, "{epochs:?}");
    // The old owner ran no other tool: one command only was ever started.
    let calls = query(
        pg,
        &format!(
            "SELECT count(*)::text FROM trace_records WHERE session_id = '{id}'
               AND convert_from(record, 'UTF8') LIKE '%\"type\":\"tool_call\"%'"
        ),
    );
    assert_eq!(calls, vec![vec![Some("1".to_string())]]);
}

#[test]
fn a_session_whose_lease_moves_has_its_command_killed() {
    use rookery::store::{PgStore, StoreOptions};
    let pg = TestPostgres::start();
    let url = pg.url();
    let sb = crate::common::cli::Sandbox::new();
    let ws = sb.ws();
    runtime().block_on(async move {
        let options = StoreOptions {
            node: "a".to_string(),
            lease_ttl: Duration::from_secs(2),
        };
        let store = PgStore::connect(&url, options).await.unwrap();
        let host = rookery::Host::start_with_store(sb.home(), store.clone())
            .await
            .unwrap();
        let model = crate::common::scripted(json!({"turns": [
            {"tool_calls": [{"name": "exec_command", "arguments": {
                "description": "wait", "cmd": "echo $$ > cmd.pid; exec sleep 120"}}]},
            {"text": "never"}
        ]}));
        let session = host
            .create_session(crate::common::options(&ws, model))
            .await
            .unwrap();
        session.start_task("first").await.unwrap();
        let deadline = Instant::now() + WAIT;
        let pid: i32 = loop {
            if let Some(pid) = std::fs::read_to_string(ws.join("cmd.pid"))
                .ok()
                .and_then(|t| t.trim().parse().ok())
            {
                break pid;
            }
            assert!(Instant::now() < deadline, "the command never started");
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        // Another node takes the session (its epoch moves on).
        store
            .client()
            .await
            .unwrap()
            .execute(
                "UPDATE sessions SET epoch = epoch + 1, owner_node = 'b' WHERE id = $1",
                &[&session.id()],
            )
            .await
            .unwrap();
        let deadline = Instant::now() + WAIT;
        while !gone(pid) || session.session_ref().get_status() == ractor::ActorStatus::Running {
            assert!(
                Instant::now() < deadline,
                "command {pid} gone: {}; session {:?}",
                gone(pid),
                session.session_ref().get_status()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        host.shutdown().await;
    });
}

#[test]
fn the_forwarding_bench_reports_the_p95_a_forward_adds() {
    let pg = TestPostgres::start();
    let dir = sandbox(&json!({"turns": []}));
    let url = pg.url();
    let out = command(
        dir.path(),
        &["bench", "--forwarding", "20", "--json", "--store", &url],
    )
    .env_remove("ROOKERY_STORE")
    .output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["forwarding"], 20, "{v}");
    for key in [
        "direct_p50_ms",
        "direct_p95_ms",
        "forwarded_p50_ms",
        "forwarded_p95_ms",
    ] {
        assert!(v[key].as_f64().unwrap() > 0.0, "{key}: {v}");
    }
    assert!(v["added_p95_ms"].is_f64(), "{v}");
    assert_eq!(v["target_added_p95_ms"], 1.0);
    // It leaves no node behind, and its session closed.
    assert_eq!(
        query(&pg, "SELECT count(*)::text FROM nodes"),
        vec![vec![Some("0".to_string())]]
    );
    // Without a postgres store it says what to pass.
    let out = command(dir.path(), &["bench", "--forwarding", "20"])
        .env_remove("ROOKERY_STORE")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("pass --store postgres://"), "{stderr}");
}
