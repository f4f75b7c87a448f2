//! Fork through the real binary: `POST /v1/sessions/{id}/fork` at a task, both sides then
//! continue on their own (the resumed contexts prove it), the origin's trace is untouched, the
//! fork's `session_meta` names `forked_from`, `rookery sessions fork` forks from the command
//! line and `sessions list --all` shows forks under their origin.

use crate::common::serve as harness;

use harness::*;
use reqwest::StatusCode;
use rookery::message::Payload;
use serde_json::{Value, json};

fn script() -> Value {
    json!({"turns": [
        {"text": "one"}, {"text": "two"}, {"text": "three"}, {"text": "four"}, {"text": "five"}
    ]})
}

/// The texts of a session's resumed context, in order.
fn context(server: &Server, id: &str) -> Vec<String> {
    context_texts(&server.trace(id))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fork_at_a_task_then_both_sides_continue_independently() {
    let server = Server::start(&script());
    let id = server.create(Some("allow-all")).await;
    run_settled(&server, &id, "first").await;
    run_settled(&server, &id, "second").await;
    let origin_before = std::fs::read(server.trace(&id)).unwrap();

    let path = format!("/v1/sessions/{id}/fork");
    let (status, v) = server
        .call("POST", &path, Some(json!({"at_task": 1})))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{v}");
    let fork = v["session_id"].as_str().unwrap().to_string();
    assert_ne!(fork, id);
    assert_eq!(v.as_object().unwrap().len(), 1, "{v}");
    // The origin is untouched by the fork.
    assert_eq!(std::fs::read(server.trace(&id)).unwrap(), origin_before);

    // The fork's meta names where it came from; `seq` is the origin's task_end of task 1.
    let fork_trace = server.trace(&fork);
    assert_ne!(fork_trace, server.trace(&id));
    let records = rookery::trace::reader::read_trace(&fork_trace)
        .unwrap()
        .records;
    let Payload::SessionMeta(meta) = &records[0].payload else {
        panic!("first record is not session_meta: {records:?}")
    };
    assert_eq!(meta.session_id, fork);
    let from = meta.forked_from.clone().expect("forked_from");
    assert_eq!((from.session_id.as_str(), from.task), (id.as_str(), 1));
    let origin = rookery::trace::reader::read_trace(&server.trace(&id))
        .unwrap()
        .records;
    assert_eq!(origin[from.seq as usize].kind(), "event_msg");
    assert_eq!(
        serde_json::to_value(&origin[from.seq as usize]).unwrap()["payload"]["type"],
        "task_end"
    );
    let ends_before = origin[..from.seq as usize]
        .iter()
        .filter(|r| serde_json::to_value(r).unwrap()["payload"]["type"] == "task_end")
        .count();
    assert_eq!(ends_before, 0, "seq is the first task's end");

    // Both sides continue on their own.
    run_settled(&server, &fork, "fork side").await;
    run_settled(&server, &id, "origin side").await;
    assert_eq!(
        context(&server, &fork),
        ["first", "one", "fork side", "two"],
        "the fork has task 1, then its own"
    );
    assert_eq!(
        context(&server, &id),
        ["first", "one", "second", "two", "origin side", "three"],
        "the origin never sees the fork's task"
    );

    // Default: the last completed task. Bad tasks answer clearly.
    let (status, v) = server.call("POST", &path, None).await;
    assert_eq!(status, StatusCode::CREATED, "{v}");
    let latest = v["session_id"].as_str().unwrap().to_string();
    assert_eq!(
        context(&server, &latest),
        ["first", "one", "second", "two", "origin side", "three"]
    );
    let (status, v) = server
        .call("POST", &path, Some(json!({"at_task": 9})))
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{v}");
    assert_eq!(v["error"]["code"], "no_such_task", "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("has no task 9: 3 task(s) have ended"),
        "{v}"
    );
    let (status, v) = server
        .call("POST", &path, Some(json!({"at_task": 0})))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{v}");
    let (status, v) = server.call("POST", &path, Some(json!({"at": 1}))).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{v}");

    // The command line forks a recorded session, and lists forks under their origin.
    let home = server.dir.path().join("home");
    let out = command(
        server.dir.path(),
        &[
            "sessions",
            "--home",
            home.to_str().unwrap(),
            "fork",
            &id,
            "--at-task",
            "2",
        ],
    )
    .output()
    .unwrap();
    assert!(out.status.success(), "{out:?}");
    let cli_fork = String::from_utf8(out.stdout).unwrap().trim().to_string();
    assert!(cli_fork.starts_with("session-"), "{cli_fork}");
    let (status, v) = server
        .call("GET", &format!("/v1/sessions/{cli_fork}"), None)
        .await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(
        context(&server, &cli_fork),
        ["first", "one", "second", "two"]
    );
    let out = command(
        server.dir.path(),
        &[
            "sessions",
            "--home",
            home.to_str().unwrap(),
            "list",
            "--all",
        ],
    )
    .output()
    .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let origin_row = lines.iter().position(|l| l.starts_with(&id)).expect(&text);
    for f in [&fork, &latest, &cli_fork] {
        let row = lines
            .iter()
            .position(|l| l.starts_with(&format!("↳ {f}")))
            .unwrap_or_else(|| panic!("{f} not under its origin:\n{text}"));
        assert!(row > origin_row, "{text}");
    }
    let out = command(
        server.dir.path(),
        &[
            "sessions",
            "--home",
            home.to_str().unwrap(),
            "fork",
            &id,
            "--at-task",
            "7",
        ],
    )
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("has no task 7"),
        "{out:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forking_a_running_session_forks_its_last_completed_task() {
    let server = Server::start(&json!({"turns": [
        {"text": "one"},
        {"tool_calls": [{"name": "exec_command", "arguments": {
            "description": "wait", "yield_time_ms": 60000,
            "cmd": "while [ ! -f go ]; do sleep 0.05; done; echo released"}}]},
        {"text": "released"},
        {"text": "fork answer"}
    ]}));
    let id = server.create(Some("allow-all")).await;
    run_settled(&server, &id, "first").await;
    let after = server.task(&id, "block").await;
    assert_eq!(server.status_of(&id).await, "running");
    let path = format!("/v1/sessions/{id}/fork");
    let (status, v) = server
        .call("POST", &path, Some(json!({"at_task": 2})))
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("1 task(s) have ended"),
        "{v}"
    );
    let (status, v) = server.call("POST", &path, None).await;
    assert_eq!(status, StatusCode::CREATED, "{v}");
    let fork = v["session_id"].as_str().unwrap().to_string();
    assert_eq!(context(&server, &fork), ["first", "one"]);
    assert_eq!(server.status_of(&fork).await, "idle");
    // The origin's running task goes on undisturbed.
    assert_eq!(server.status_of(&id).await, "running");
    std::fs::write(server.ws().join("go"), "").unwrap();
    let events = server.events_until_task_end(&id, after).await;
    assert_eq!(
        events.last().unwrap().1["payload"]["status"],
        "completed",
        "{events:?}"
    );
}
