//! Steering through the real binary: `POST /v1/sessions/{id}/steer` on `rookery serve` (queued
//! while a task runs, a task when idle, errors like every other route, a session known only on
//! disk is resumed) and a line typed at `rookery chat` on a terminal while a task runs.

use crate::common::serve as harness;

use std::io::Write;
use std::process::Stdio;
use std::time::{Duration, Instant};

use harness::*;
use reqwest::StatusCode;
use rookery::message::{EventPayload, ModelPayload, OmniMessage};
use serde_json::{Value, json};

fn blocked_script() -> Value {
    json!({"turns": [
        {"tool_calls": [{"name": "exec_command", "arguments": {
            "description": "wait", "yield_time_ms": 60000,
            "cmd": "while [ ! -f go ]; do sleep 0.05; done; echo released"}}]},
        {"text": "done"},
        {"text": "idle steer answered"},
        {"text": "after restart"}]})
}

fn steer_of(text: &str) -> String {
    format!("[user_steering]\n{text}\n[/user_steering]")
}

fn index_of(records: &[OmniMessage], pred: impl Fn(&OmniMessage) -> bool) -> Vec<usize> {
    records
        .iter()
        .enumerate()
        .filter(|(_, r)| pred(r))
        .map(|(i, _)| i)
        .collect()
}

fn is_text(r: &OmniMessage, want: &str) -> bool {
    matches!(r.as_model(), Some(ModelPayload::Text { text, .. }) if text == want)
}

fn is_begin(r: &OmniMessage) -> bool {
    matches!(r.as_event(), Some(EventPayload::RequestBegin {}))
}

/// Waits until the session's trace shows a running `exec_command` (its approval decision).
fn until_dispatched(trace: &std::path::Path) {
    let deadline = Instant::now() + WAIT;
    loop {
        let recs = rookery::trace::reader::read_trace(trace)
            .map(|r| r.records)
            .unwrap_or_default();
        if recs
            .iter()
            .any(|r| matches!(r.as_event(), Some(EventPayload::ApprovalDecision { .. })))
        {
            return;
        }
        assert!(Instant::now() < deadline, "the call never started");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steer_route_queues_while_running_starts_when_idle_and_resumes_from_disk() {
    let server = Server::start(&blocked_script());
    let id = server.create(Some("allow-all")).await;
    let after = server.task(&id, "work").await;
    until_dispatched(&server.trace(&id));
    let (status, v) = server
        .call(
            "POST",
            &format!("/v1/sessions/{id}/steer"),
            Some(json!({"text": "mind b.txt"})),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{v}");
    assert_eq!(v["steer"], "queued");
    std::fs::write(server.ws().join("go"), "").unwrap();
    let events = server.events_until_task_end(&id, after).await;
    // Streamed to the client like the rest of the task.
    assert!(
        events
            .iter()
            .any(|(_, e)| e["payload"]["text"] == steer_of("mind b.txt"))
    );
    let recs = settled_trace(&server.trace(&id)).await;
    let steer = index_of(&recs, |r| is_text(r, &steer_of("mind b.txt")));
    let begins = index_of(&recs, is_begin);
    assert_eq!(steer.len(), 1);
    assert!(begins[0] < steer[0] && steer[0] < begins[1], "{recs:#?}");

    // Idle: a steer is a task.
    let (status, v) = server
        .call(
            "POST",
            &format!("/v1/sessions/{id}/steer"),
            Some(json!({"text": "and now?"})),
        )
        .await;
    assert_eq!(
        (status, v["steer"].clone()),
        (StatusCode::ACCEPTED, json!("started"))
    );
    server
        .events_until_task_end(&id, v["events_after"].as_u64().unwrap())
        .await;

    // Bad input and unknown sessions answer like every other route.
    let (status, v) = server
        .call(
            "POST",
            &format!("/v1/sessions/{id}/steer"),
            Some(json!({"text": " "})),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{v}");
    assert_eq!(v["error"]["message"], "steer text must not be empty", "{v}");
    let (status, _) = server
        .call(
            "POST",
            "/v1/sessions/session-2020-01-01-00-00-00-00000000/steer",
            Some(json!({"text": "x"})),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // A restarted server resumes the session from its trace on the first steer.
    let dir = server.kill9();
    let server = Server::start_in(dir, None);
    let (status, v) = server
        .call(
            "POST",
            &format!("/v1/sessions/{id}/steer"),
            Some(json!({"text": "hello again"})),
        )
        .await;
    assert_eq!(
        (status, v["steer"].clone()),
        (StatusCode::ACCEPTED, json!("started")),
        "{v}"
    );
    server
        .events_until_task_end(&id, v["events_after"].as_u64().unwrap())
        .await;
    let (status, _) = server
        .call("DELETE", &format!("/v1/sessions/{id}"), None)
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, v) = server
        .call(
            "POST",
            &format!("/v1/sessions/{id}/steer"),
            Some(json!({"text": "gone?"})),
        )
        .await;
    let (s2, v2) = server
        .call("GET", &format!("/v1/sessions/{id}"), None)
        .await;
    assert_eq!((status, v["error"].clone()), (s2, v2["error"].clone()));
}

#[test]
fn a_line_typed_at_chat_while_a_task_runs_steers_it() {
    let dir = sandbox(&blocked_script());
    let p = dir.path();
    let home = p.join("home");
    let script = p.join("script.json");
    let pty = nix::pty::openpty(None, None).unwrap();
    let err_path = p.join("stderr.txt");
    let out_path = p.join("stdout.txt");
    let mut child = command(
        p,
        &[
            "chat",
            "--home",
            home.to_str().unwrap(),
            "--script",
            script.to_str().unwrap(),
            "--approve",
            "allow-all",
        ],
    )
    .stdin(Stdio::from(pty.slave))
    .stdout(std::fs::File::create(&out_path).unwrap())
    .stderr(std::fs::File::create(&err_path).unwrap())
    .spawn()
    .unwrap();
    let mut master = std::fs::File::from(pty.master);
    let wait_for = |path: &std::path::Path, what: &str| {
        let deadline = Instant::now() + WAIT;
        loop {
            let text = std::fs::read_to_string(path).unwrap_or_default();
            if text.contains(what) {
                return text;
            }
            assert!(Instant::now() < deadline, "never saw {what:?} in:\n{text}");
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    let banner = wait_for(&err_path, "a line typed while a task runs steers it");
    assert!(banner.contains("> "));
    master.write_all(b"work\n").unwrap();
    let shown = wait_for(&err_path, "steer> ");
    assert!(shown.contains("steer> "));
    let traces = home.join("traces");
    let trace = {
        let deadline = Instant::now() + WAIT;
        loop {
            let found = std::fs::read_dir(&traces).ok().and_then(|mut days| {
                let day = days.next()?.ok()?.path();
                let f = std::fs::read_dir(day).ok()?.next()?.ok()?.path();
                Some(f)
            });
            if let Some(f) = found {
                break f;
            }
            assert!(Instant::now() < deadline, "no trace");
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    until_dispatched(&trace);
    master.write_all(b"check b.txt too\n").unwrap();
    wait_for(&err_path, "rookery: steering the running task");
    std::fs::write(p.join("ws/go"), "").unwrap();
    wait_for(&out_path, "done");
    master.write_all(b"/exit\n").unwrap();
    let deadline = Instant::now() + WAIT;
    let code = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status.code();
        }
        assert!(Instant::now() < deadline, "chat did not exit");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(
        code,
        Some(0),
        "{}",
        std::fs::read_to_string(&err_path).unwrap()
    );
    let recs = rookery::trace::reader::read_trace(&trace).unwrap().records;
    let steer = index_of(&recs, |r| is_text(r, &steer_of("check b.txt too")));
    let begins = index_of(&recs, is_begin);
    assert_eq!(steer.len(), 1, "{recs:#?}");
    assert_eq!(begins.len(), 2, "one task, two requests: {recs:#?}");
    assert!(begins[0] < steer[0] && steer[0] < begins[1]);
}
