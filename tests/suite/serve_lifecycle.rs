//! End-to-end tests of the server's and the REPL's life cycle, driving the built binary:
//! SIGTERM during 20 running tasks (complete traces, exit 0 within 5 s), resume after `kill -9`,
//! and `rookery chat` (one task per line, the resume command, `--resume`).
//!
//! Each server gets its own temporary home, workspace and `$HOME`, listens on 127.0.0.1:0 and
//! has its stderr in a file of its temporary directory. Every wait is bounded.

use crate::common::serve as harness;

use std::process::Stdio;
use std::time::{Duration, Instant};

use eventsource_stream::Eventsource;
use futures::StreamExt;
use harness::*;
use reqwest::StatusCode;
use rookery::message::{EventPayload, Payload, StopReason};
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_aborts_running_tasks_and_exits_zero() {
    let mut server = Server::start(&json!({"turns": [
        {"text": "first", "tool_calls": [{"name": "read_file", "arguments": {"file_path": "a.txt"}}]},
        {"text": "slow", "delay_ms": 60000}
    ]}));
    let mut ids = Vec::new();
    for i in 0..20 {
        let id = server.create(None).await;
        server.task(&id, &format!("t{i}")).await;
        ids.push(id);
    }
    // Every task is inside its slow second request.
    let deadline = Instant::now() + WAIT;
    for id in &ids {
        let path = server.trace(id);
        loop {
            let text = std::fs::read_to_string(&path).unwrap();
            if text.matches("\"request_begin\"").count() == 2 {
                break;
            }
            assert!(Instant::now() < deadline, "{id} never reached request 2");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(server.status_of(id).await, "running");
    }
    // A connected SSE client sees the abort and then the end of its stream.
    let watcher = {
        let resp = server
            .req(
                reqwest::Method::GET,
                &format!("/v1/sessions/{}/events", ids[0]),
            )
            .send()
            .await
            .unwrap();
        tokio::spawn(async move {
            let mut stream = resp.bytes_stream().eventsource();
            let mut kinds = Vec::new();
            while let Some(Ok(ev)) = stream.next().await {
                let v: Value = serde_json::from_str(&ev.data).unwrap();
                kinds.push(format!("{} {}", payload_type(&v), v["payload"]["status"]));
            }
            kinds
        })
    };
    nix::sys::signal::kill(server.pid(), nix::sys::signal::Signal::SIGTERM).unwrap();
    let sent = Instant::now();
    let status = loop {
        if let Some(s) = server.child.try_wait().unwrap() {
            break s;
        }
        assert!(
            sent.elapsed() < Duration::from_secs(5),
            "still running after 5 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(0), "{}", server.stderr());
    let seen = tokio::time::timeout(WAIT, watcher).await.unwrap().unwrap();
    assert_eq!(seen, ["abort null", "task_end \"aborted\""]);
    for id in &ids {
        let read = rookery::trace::reader::read_trace(&server.trace(id)).unwrap();
        assert!(read.skipped_lines.is_empty() && !read.torn_tail, "{id}");
        let r = &read.records;
        assert!(matches!(r[0].payload, Payload::SessionMeta(_)));
        assert!(r.iter().any(|m| matches!(
            m.as_model(),
            Some(rookery::message::ModelPayload::ToolCallOutput { .. })
        )));
        assert!(
            matches!(r[r.len() - 2].as_event(), Some(EventPayload::Abort { .. })),
            "{id}"
        );
        assert!(
            matches!(
                r[r.len() - 1].as_event(),
                Some(EventPayload::TaskEnd {
                    status: StopReason::Aborted,
                    ..
                })
            ),
            "{id}"
        );
    }
}

#[test]
fn chat_runs_one_task_per_line_and_prints_the_resume_command() {
    let dir = sandbox(&json!({"turns": [{"text": "first answer"}, {"text": "second answer"}]}));
    let p = dir.path();
    let home = p.join("home");
    let script = p.join("script.json");
    let mut child = command(
        p,
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
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        // Typed ahead: the second line waits for the first task.
        stdin.write_all(b"hello\nagain\n/exit\n").unwrap();
    }
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{stdout}");
    assert_eq!(&lines[..2], ["first answer", "second answer"]);
    let id = lines[2].strip_prefix("rookery chat --resume ").unwrap();
    let trace = rookery::trace::paths::locate_trace(&home, id).unwrap();
    let records = rookery::trace::reader::read_trace(&trace).unwrap().records;
    let ends = records
        .iter()
        .filter(|r| matches!(r.as_event(), Some(EventPayload::TaskEnd { .. })))
        .count();
    assert_eq!(ends, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]

async fn a_killed_server_resumes_sessions_from_their_traces() {
    let server = Server::start(&json!({"turns": [{"text": "one"}, {"text": "two"}]}));
    let id = server.create(None).await;
    let after = server.task(&id, "first").await;
    server.events_until_task_end(&id, after).await;
    settled_trace(&server.trace(&id)).await;
    let server = Server::start_in(server.kill9(), None);
    // Any route resumes a session found on disk.
    assert_eq!(server.status_of(&id).await, "idle");
    let after = server.task(&id, "second").await;
    let events = server.events_until_task_end(&id, after).await;
    assert_eq!(events.last().unwrap().1["payload"]["status"], "completed");
    let records = settled_trace(&server.trace(&id)).await;
    let ends = records
        .iter()
        .filter(|r| matches!(r.as_event(), Some(EventPayload::TaskEnd { .. })))
        .count();
    assert_eq!(ends, 2);
    let (s, v) = server
        .call("POST", &format!("/v1/sessions/{id}/resume"), None)
        .await;
    assert_eq!(
        (s, v),
        (StatusCode::OK, json!({"session_id": id, "resumed": false}))
    );
}

#[test]

fn chat_resume_continues_the_same_trace() {
    let dir = sandbox(&json!({"turns": [{"text": "an answer"}]}));
    let p = dir.path();
    let home = p.join("home");
    let script = p.join("script.json");
    let chat = |stdin: &[u8], extra: &[&str]| {
        let mut args = vec!["chat", "--home", home.to_str().unwrap()];
        args.extend(["--script", script.to_str().unwrap()]);
        args.extend(extra);
        let mut child = command(p, &args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        {
            use std::io::Write;
            child.stdin.take().unwrap().write_all(stdin).unwrap();
        }
        let out = child.wait_with_output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    let first = chat(b"hello\n", &[]);
    let last = first.lines().last().unwrap().to_string();
    let id = last.strip_prefix("rookery chat --resume ").unwrap();
    // Without --workspace, the workspace comes from the trace.
    let second = chat(b"more\n/exit\n", &["--resume", id]);
    assert_eq!(second.lines().last().unwrap(), last);
    let trace = rookery::trace::paths::locate_trace(&home, id).unwrap();
    let records = rookery::trace::reader::read_trace(&trace).unwrap().records;
    let ends = records
        .iter()
        .filter(|r| matches!(r.as_event(), Some(EventPayload::TaskEnd { .. })))
        .count();
    assert_eq!(ends, 2);
    let missing = chat_status(p, &home, &script, "session-2020-01-01-00-00-00-deadbeef");
    assert_eq!(
        missing,
        format!(
            "rookery: --resume session-2020-01-01-00-00-00-deadbeef: no trace of that session under {}\n",
            home.display()
        )
    );
}

/// The stderr of a `chat --resume` that must fail with exit 2.
fn chat_status(
    dir: &std::path::Path,
    home: &std::path::Path,
    script: &std::path::Path,
    id: &str,
) -> String {
    let out = command(
        dir,
        &[
            "chat",
            "--home",
            home.to_str().unwrap(),
            "--script",
            script.to_str().unwrap(),
            "--resume",
            id,
        ],
    )
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(2));
    String::from_utf8_lossy(&out.stderr).to_string()
}
