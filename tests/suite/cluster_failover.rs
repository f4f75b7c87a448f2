//! Failover of a killed serve node (`docs/guide/cluster.md`, failure table): three real
//! `rookery serve` nodes on one real Postgres with a short lease TTL; a session created on A runs
//! a long `exec_command`; once its `tool_call` is in the store, A is killed with SIGKILL. A new
//! task sent through B is accepted (202) within the lease TTL + 2 s (plus slack for a loaded
//! machine; 503 `node_unreachable` and 409 are retried until then) and completes on B. The
//! store's trace then has every call paired (the one in flight got its placeholder), the lost
//! task's `task_end` (`failed`, `node_lost`) and the new task's `completed` one; A's command
//! (its process and everything carrying its cookie) is gone.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::cluster::{TTL, answer, gone, node, query, runtime, texts, wait_for};
use crate::common::cli::{call_ids, check_pairing, of_kind, output_of};
use crate::common::postgres::TestPostgres;
use crate::common::serve::{Server, WAIT, command, read_events, sandbox};

/// The command no other test runs, so its `tool_call` is found in the store by its text.
const LONG: &str = "exec sleep 600.25";

/// What a loaded 2-core machine may add to TTL + 2 s before the new task is accepted.
const SLACK: Duration = Duration::from_secs(20);

/// The `ROOKERY_CMD` cookie in process `pid`'s environment.
fn cookie_of(pid: i32) -> String {
    let env = std::fs::read(format!("/proc/{pid}/environ")).expect("the command's environ");
    env.split(|b| *b == 0)
        .find_map(|kv| kv.strip_prefix(b"ROOKERY_CMD="))
        .map(|v| String::from_utf8_lossy(v).into_owned())
        .unwrap_or_else(|| panic!("no ROOKERY_CMD cookie in command {pid}'s environment"))
}

/// Live (non-zombie) processes whose environment carries `cookie`.
fn carrying(cookie: &str) -> Vec<i32> {
    let want = format!("ROOKERY_CMD={cookie}");
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| !gone(*pid))
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.split(|b| *b == 0).any(|kv| kv == want.as_bytes()))
        })
        .collect()
}

/// Events of session `id` through `server` after `after`, up to its first `completed`
/// `task_end`; also the stream's `Rookery-Node`.
async fn until_completed(server: &Server, id: &str, after: u64) -> (String, Vec<Value>) {
    let resp = server.events_from(id, after).await;
    let node = resp.headers()["rookery-node"].to_str().unwrap().to_string();
    let events = read_events(resp, |_, v| {
        v["payload"]["type"] == "task_end" && v["payload"]["status"] == "completed"
    })
    .await;
    (node, events.into_iter().map(|(_, v)| v).collect())
}

#[test]
fn a_killed_node_fails_over_within_the_lease_ttl_with_every_call_paired() {
    let pg = TestPostgres::start();
    runtime().block_on(killed_owner(&pg));
}

async fn killed_owner(pg: &TestPostgres) {
    // The first task's command runs long and writes its pid; the next task only answers.
    let script = json!({"turns": [
        {"tool_calls": [{"name": "exec_command", "arguments": {
            "description": "wait", "cmd": format!("echo $$ > cmd.pid; {LONG}"),
            "yield_time_ms": 120_000}}]},
        {"text": "after the failover"}
    ]});
    let a = node(&pg.url(), "a", &script);
    let b = node(&pg.url(), "b", &script);
    let c = node(&pg.url(), "c", &script);
    let id = a.create(None).await;
    a.task(&id, "first").await;

    // The call is in the store and its command runs: A dies mid-command.
    wait_for(
        pg,
        &format!(
            "SELECT (count(*) > 0)::text FROM trace_records WHERE session_id = '{id}' \
             AND convert_from(record, 'UTF8') LIKE '%\"type\":\"tool_call\"%{LONG}%'"
        ),
        "true",
    )
    .await;
    let pid_file = a.ws().join("cmd.pid");
    let deadline = Instant::now() + WAIT;
    let pid: i32 = loop {
        if let Some(pid) = std::fs::read_to_string(&pid_file)
            .ok()
            .and_then(|t| t.trim().parse().ok())
            && !gone(pid)
        {
            break pid;
        }
        assert!(Instant::now() < deadline, "the command never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let cookie = cookie_of(pid);
    assert_eq!(carrying(&cookie), vec![pid]);
    // The workspace stays: the session runs on in it elsewhere.
    let _a_dir = a.kill9();
    let killed = Instant::now();

    // A new task through B: 503 (A unreachable) or 409 until A's lease runs out, then 202.
    let ttl = Duration::from_secs(TTL.parse().unwrap());
    let bound = ttl + Duration::from_secs(2) + SLACK;
    let (node, after) = loop {
        let (status, node, v) = answer(
            b.req(reqwest::Method::POST, &format!("/v1/sessions/{id}/tasks"))
                .json(&json!({"text": "second"})),
        )
        .await;
        match status {
            StatusCode::ACCEPTED => break (node, v["events_after"].as_u64().unwrap()),
            StatusCode::CONFLICT | StatusCode::SERVICE_UNAVAILABLE => {
                assert!(
                    killed.elapsed() < bound,
                    "no node took the task within {bound:?} of the kill: {status} {v}"
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            other => panic!("the task through B: {other} {v}"),
        }
    };
    let took = killed.elapsed();
    assert!(took < bound, "accepted after {took:?} (bound {bound:?})");
    eprintln!("failover: the task was accepted {took:?} after the kill (TTL {ttl:?})");
    assert_eq!(
        node, "b",
        "the session moved to the node that took the task"
    );
    let (node, events) = until_completed(&b, &id, after).await;
    assert_eq!(node, "b");
    assert_eq!(texts(&events), vec!["after the failover"], "{events:#?}");
    assert_eq!(events.last().unwrap()["payload"]["status"], "completed");
    // The takeover's records come before the task's `events_after`: its stream is the task's.
    assert!(
        events.iter().all(|v| v["payload"]["reason"] != "node_lost"),
        "{events:#?}"
    );
    // Any node now sends it to B.
    let (status, node, v) =
        answer(c.req(reqwest::Method::GET, &format!("/v1/sessions/{id}"))).await;
    assert_eq!((status, node.as_str()), (StatusCode::OK, "b"), "{v}");

    // The store's trace: every call paired, the lost task failed, the new one completed.
    let dir = sandbox(&script);
    let out = command(dir.path(), &["store", "export", "--store", &pg.url(), &id])
        .env_remove("ROOKERY_STORE")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let records: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    check_pairing(&records, false);
    let ids = call_ids(&records);
    assert_eq!(ids.len(), 1, "{records:#?}");
    let output = output_of(&records, &ids[0]);
    assert!(
        output["output"]
            .as_str()
            .is_some_and(|o| o.starts_with("[interrupted:")),
        "{output}"
    );
    let ends = of_kind(&records, "task_end");
    assert_eq!(ends.len(), 2, "{records:#?}");
    assert_eq!(ends[0]["payload"]["status"], "failed");
    assert_eq!(ends[0]["payload"]["reason"], "node_lost");
    assert_eq!(ends[1]["payload"]["status"], "completed");
    // The placeholder and the lost task's end come before the new task's text.
    let pos = |f: &dyn Fn(&Value) -> bool| records.iter().position(f).unwrap();
    let placeholder = pos(&|r| {
        r["payload"]["tool_call_id"] == ids[0].as_str()
            && r["payload"]["type"] == "tool_call_output"
    });
    let lost = pos(&|r| r["payload"]["reason"] == "node_lost");
    let second = pos(&|r| r["payload"]["text"] == "second");
    assert!(placeholder < lost && lost < second, "{records:#?}");
    // Written by the new holder, under its epoch.
    let epochs = query(
        pg,
        &format!(
            "SELECT DISTINCT epoch::text FROM trace_records WHERE session_id = '{id}' \
             AND convert_from(record, 'UTF8') LIKE '%node_lost%'"
        ),
    );
    assert_eq!(epochs, vec![vec![Some("2".to_string())]]);

    // A's command died with it: its process and everything that carried its cookie.
    let deadline = Instant::now() + WAIT;
    while !gone(pid) || !carrying(&cookie).is_empty() {
        assert!(
            Instant::now() < deadline,
            "the killed node's command lives on: {pid} gone: {}, with its cookie: {:?}",
            gone(pid),
            carrying(&cookie)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
