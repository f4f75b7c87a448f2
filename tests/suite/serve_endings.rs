//! How `rookery serve` ends tasks and sessions, through the binary: SIGTERM with 40 busy
//! sessions, `POST …/abort` while an approval is pending and `DELETE` of a busy session each
//! leave every trace with exactly one output per call (before `abort` and `task_end`); a trace
//! on a full filesystem marks its session `failed`; the SSE client gauge follows disconnects.

use crate::common::paired;
use crate::common::serve as harness;
use crate::common::tmpfs;

use std::time::{Duration, Instant};

use harness::*;
use paired::assert_trace_paired;
use reqwest::StatusCode;
use rookery::message::{EventPayload, ModelPayload, StopReason};
use serde_json::{Value, json};

/// Three foreground commands in one turn that outlive any test.
fn three_sleeps() -> Value {
    let call = json!({"name": "exec_command",
        "arguments": {"description": "wait", "cmd": "sleep 30"}});
    json!({"turns": [{"tool_calls": [call.clone(), call.clone(), call]}, {"text": "unreached"}]})
}

/// Waits until the trace holds `n` approval decisions (its calls are approved and dispatched).
async fn until_decided(server: &Server, id: &str, n: usize) {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(path) = rookery::trace::paths::locate_trace(&server.dir.path().join("home"), id)
        {
            let recs = rookery::trace::reader::read_trace(&path).unwrap().records;
            let decided = recs
                .iter()
                .filter(|r| matches!(r.as_event(), Some(EventPayload::ApprovalDecision { .. })))
                .count();
            if decided >= n {
                return;
            }
        }
        assert!(Instant::now() < deadline, "{id}: {n} decisions never came");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn ends_with_abort_and_task_end(recs: &[rookery::OmniMessage], status: StopReason) {
    let n = recs.len();
    assert!(n >= 2);
    assert!(
        matches!(recs[n - 2].as_event(), Some(EventPayload::Abort { .. })),
        "{:?}",
        recs[n - 2]
    );
    assert!(
        matches!(recs[n - 1].as_event(), Some(EventPayload::TaskEnd { status: s, .. }) if *s == status),
        "{:?}",
        recs[n - 1]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_with_forty_busy_sessions_pairs_every_call_of_every_trace() {
    let server = Server::start(&three_sleeps());
    let mut ids = Vec::new();
    for _ in 0..40 {
        let id = server.create(None).await;
        server.task(&id, "wait").await;
        ids.push(id);
    }
    for id in &ids {
        until_decided(&server, id, 3).await;
    }
    let traces: Vec<_> = ids.iter().map(|id| server.trace(id)).collect();
    nix::sys::signal::kill(server.pid(), nix::sys::signal::Signal::SIGTERM).unwrap();
    let mut server = server;
    let deadline = Instant::now() + WAIT;
    let status = loop {
        if let Some(s) = server.child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "serve did not stop on SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(0), "{}", server.stderr());
    let mut calls = 0;
    for path in &traces {
        let read = rookery::trace::reader::read_trace(path).unwrap();
        assert!(read.skipped_lines.is_empty() && !read.torn_tail, "{path:?}");
        let outs = assert_trace_paired(&read.records);
        assert_eq!(outs.len(), 3, "{path:?}");
        assert!(outs.iter().all(|o| o.1 == StopReason::Aborted), "{outs:?}");
        ends_with_abort_and_task_end(&read.records, StopReason::Aborted);
        calls += outs.len();
    }
    assert_eq!(calls, 120);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abort_while_an_approval_is_pending_denies_it_in_the_trace() {
    let server = Server::start(&json!({"turns": [
        {"tool_calls": [
            {"name": "read_file", "arguments": {"file_path": "a.txt"}},
            {"name": "read_file", "arguments": {"file_path": "b.txt"}}]},
        {"text": "unreached"}]}));
    let id = server.create(Some("always-ask")).await;
    server.task(&id, "read").await;
    server.wait_pending(&id, 1).await;
    let (s, v) = server
        .call("POST", &format!("/v1/sessions/{id}/abort"), None)
        .await;
    assert_eq!(s, StatusCode::ACCEPTED, "{v}");
    let recs = settled_trace(&server.trace(&id)).await;
    let outs = assert_trace_paired(&recs);
    assert_eq!(
        outs,
        vec![
            ("Tool call denied by user.".to_string(), StopReason::Aborted),
            ("Tool call denied by user.".to_string(), StopReason::Aborted),
        ]
    );
    ends_with_abort_and_task_end(&recs, StopReason::Aborted);
    assert_eq!(server.status_of(&id).await, "idle");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_of_a_busy_session_pairs_every_call() {
    let server = Server::start(&three_sleeps());
    let id = server.create(None).await;
    server.task(&id, "wait").await;
    until_decided(&server, &id, 3).await;
    let path = server.trace(&id);
    let (s, v) = server
        .call("DELETE", &format!("/v1/sessions/{id}"), None)
        .await;
    assert_eq!(s, StatusCode::NO_CONTENT, "{v}");
    let recs = settled_trace(&path).await;
    let outs = assert_trace_paired(&recs);
    assert_eq!(outs.len(), 3);
    ends_with_abort_and_task_end(&recs, StopReason::Aborted);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sse_client_gauge_goes_down_when_a_client_disconnects() {
    let server = Server::start(&json!({"turns": [{"text": "hi"}]}));
    let id = server.create(None).await;
    let resp = server
        .req(reqwest::Method::GET, &format!("/v1/sessions/{id}/events"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(server.metric("rookery_sse_clients").await, 1);
    drop(resp);
    let deadline = Instant::now() + Duration::from_secs(60);
    while server.metric("rookery_sse_clients").await != 0 {
        assert!(Instant::now() < deadline, "the gauge never went down");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trace_on_a_full_filesystem_marks_the_session_failed() {
    let dir = sandbox(&json!({"turns": [{"text": "hi", "repeat": 3}]}));
    let Some(fs) = tmpfs::SmallFs::mount(
        &dir.path().join("home"),
        "a_trace_on_a_full_filesystem_marks_the_session_failed",
    ) else {
        return;
    };
    let server = Server::start_in(dir, None);
    let id = server.create(None).await;
    let before = server.trace(&id);
    // The trace actor writes the meta line asynchronously: wait for it before filling the disk.
    let deadline = Instant::now() + WAIT;
    let meta = loop {
        let meta = std::fs::read(&before).unwrap();
        if meta.ends_with(b"\n") {
            break meta;
        }
        assert!(Instant::now() < deadline, "the meta line never came");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    fs.fill("filler");
    // A task text larger than any free room left in the trace file's last page.
    let text = "x".repeat(64 * 1024);
    server.task(&id, &text).await;
    let deadline = Instant::now() + WAIT;
    while server.status_of(&id).await != "failed" {
        assert!(Instant::now() < deadline, "the session never failed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (_, v) = server
        .call("GET", &format!("/v1/sessions/{id}"), None)
        .await;
    let error = v["error"].as_str().unwrap_or_default().to_string();
    assert!(
        error.starts_with("trace write failed: No space left on device (")
            && error.ends_with(&format!("{})", before.display())),
        "{v}"
    );
    // No new task; the API says why.
    let (s, v) = server
        .call(
            "POST",
            &format!("/v1/sessions/{id}/tasks"),
            Some(json!({"text": "again"})),
        )
        .await;
    assert_eq!(s, StatusCode::CONFLICT, "{v}");
    assert_eq!(v["error"]["code"], "session_failed", "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("trace write failed"),
        "{v}"
    );
    assert_eq!(
        server.metric("rookery_sessions{status=\"failed\"}").await,
        1
    );
    // What was written before is intact: the meta line, whole.
    let after = std::fs::read(&before).unwrap();
    assert!(after.starts_with(&meta), "the trace was damaged");
    let read = rookery::trace::reader::read_trace(&before).unwrap();
    assert!(read.skipped_lines.is_empty() && !read.torn_tail);
    assert!(
        !read.records.iter().any(|r| matches!(
            r.as_model(),
            Some(ModelPayload::Text { text, .. }) if text.len() > 1000
        )),
        "the oversized task text cannot be in the trace"
    );
    drop(server);
    drop(fs);
}

#[test]
fn serve_refuses_a_home_where_no_trace_can_be_written() {
    let dir = sandbox(&json!({"turns": [{"text": "hi"}]}));
    let file = dir.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    let script = dir.path().join("script.json");
    let out = command(
        dir.path(),
        &[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--home",
            file.to_str().unwrap(),
            "--script",
            script.to_str().unwrap(),
        ],
    )
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        stderr.trim_end(),
        format!(
            "rookery: cannot create traces under {}: Not a directory (pass --home DIR, or set ROOKERY_HOME, to a directory rookery can write)",
            file.display()
        )
    );
}
