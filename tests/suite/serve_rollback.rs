//! Rollback through the real binary: `POST /v1/sessions/{id}/rollback` drops the last tasks
//! from the context (the answer says files are not reverted), is refused while a task runs and
//! for more tasks than the context holds, is recorded, and a restarted server resumes the
//! context without the dropped tasks; `/rollback N` in `rookery chat` does the same.

use crate::common::serve as harness;

use std::io::Write;
use std::process::Stdio;

use harness::*;
use reqwest::StatusCode;
use serde_json::{Value, json};

fn script() -> Value {
    json!({"turns": [
        {"text": "one"}, {"text": "two"}, {"text": "three"},
        {"tool_calls": [{"name": "exec_command", "arguments": {
            "description": "wait", "yield_time_ms": 60000,
            "cmd": "while [ ! -f go ]; do sleep 0.05; done; echo released"}}]},
        {"text": "four"}, {"text": "five"}
    ]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rollback_drops_tasks_and_a_restart_resumes_without_them() {
    let server = Server::start(&script());
    let id = server.create(Some("allow-all")).await;
    for t in ["first", "second", "third"] {
        run_settled(&server, &id, t).await;
    }
    let path = format!("/v1/sessions/{id}/rollback");
    for bad in [json!({"tasks": 0}), json!({"tasks": 4}), json!({"n": 1})] {
        let (status, v) = server.call("POST", &path, Some(bad.clone())).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}: {v}");
    }
    let (status, v) = server.call("POST", &path, Some(json!({"tasks": 2}))).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(v, json!({"dropped_tasks": 2, "files_reverted": false}));
    // Recorded: the trace says what was dropped, and a resume of it now has task 1 only.
    let trace = server.trace(&id);
    let deadline = std::time::Instant::now() + WAIT;
    let record = loop {
        let recs = rookery::trace::reader::read_trace(&trace).unwrap().records;
        if let Some(r) = recs
            .iter()
            .map(|r| serde_json::to_value(r).unwrap())
            .find(|r| r["payload"]["type"] == "rollback")
        {
            break r;
        }
        assert!(std::time::Instant::now() < deadline, "no rollback record");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    assert_eq!(record["payload"]["tasks"], 2, "{record}");
    assert_eq!(record["payload"]["messages"], 4, "{record}");
    assert_eq!(context_texts(&trace), ["first", "one"]);

    // Refused while a task runs (the task was accepted before `task` returned, and waits for
    // `go`).
    let after = server.task(&id, "block").await;
    let (status, v) = server.call("POST", &path, Some(json!({"tasks": 1}))).await;
    assert_eq!(status, StatusCode::CONFLICT, "{v}");
    assert_eq!(v["error"]["code"], "session_busy", "{v}");
    std::fs::write(server.ws().join("go"), "").unwrap();
    server.events_until_task_end(&id, after).await;
    settled_trace(&trace).await;

    // A restarted server rebuilds the context without the dropped tasks.
    let dir = server.kill9();
    let server = Server::start_in(dir, None);
    run_settled(&server, &id, "again").await;
    let got = context_texts(&server.trace(&id));
    assert_eq!(got.first().map(String::as_str), Some("first"), "{got:?}");
    assert!(
        !got.iter()
            .any(|t| t == "second" || t == "two" || t == "third"),
        "{got:?}"
    );
    assert_eq!(&got[got.len() - 2..], ["again", "five"], "{got:?}");
    assert!(
        got.iter().any(|t| t == "block") && got.iter().any(|t| t == "four"),
        "{got:?}"
    );
}

#[test]
fn slash_rollback_in_chat_drops_the_last_task() {
    let dir = sandbox(&json!({"turns": [{"text": "one"}, {"text": "two"}, {"text": "three"}]}));
    let home = dir.path().join("home");
    let script = dir.path().join("script.json");
    let mut child = command(
        dir.path(),
        &[
            "chat",
            "--home",
            home.to_str().unwrap(),
            "--script",
            script.to_str().unwrap(),
        ],
    )
    .stdin(Stdio::piped())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"first\nsecond\n/rollback 1\n/rollback 5\nthird\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr
            .contains("rolled back 1 task(s) (2 message(s)); files they changed are not reverted"),
        "{stderr}"
    );
    assert!(
        stderr.contains("cannot roll back 5 task(s): the context holds 1 completed task(s)"),
        "{stderr}"
    );
    let files = crate::common::cli::trace_files(&home);
    assert_eq!(context_texts(&files[0]), ["first", "one", "third", "three"]);
}
