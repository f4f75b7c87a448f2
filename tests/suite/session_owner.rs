//! A session belongs to one process and keeps its approval mode, through the built binary:
//! the mode survives a `kill -9` + restart (implicit resume), DELETE + `POST …/resume` and
//! `rookery chat --resume`, a trace that records no mode resumes as `always-ask`, and a second
//! process that opens a session held by another one is refused (409 `session_locked`, exit 2)
//! until the holder dies.

use crate::common::serve as harness;

use std::io::Write;
use std::process::Stdio;
use std::time::{Duration, Instant};

use harness::*;
use reqwest::StatusCode;
use rookery::message::{EventPayload, OmniMessage, Payload};
use serde_json::{Value, json};

fn exec_script() -> Value {
    json!({"turns": [
        {"tool_calls": [{"name": "exec_command",
                         "arguments": {"cmd": "echo ran > ran.txt", "description": "Mark it"}}]},
        {"text": "done"}
    ]})
}

/// The modes the trace records, in order: `session_meta.approval_mode`, then each change.
fn recorded_modes(records: &[OmniMessage]) -> Vec<String> {
    let mut out = Vec::new();
    for r in records {
        match &r.payload {
            // A reopening `session_meta` records the launch details, not the mode (a mode
            // change is its own event).
            Payload::SessionMeta(m) if m.launch.reopened_with.is_some() => {}
            Payload::SessionMeta(m) => out.push(m.approval_mode.clone().unwrap_or_default()),
            Payload::Event(EventPayload::ApprovalModeChanged { mode }) => out.push(mode.clone()),
            _ => {}
        }
    }
    out
}

fn read_records(path: &std::path::Path) -> Vec<OmniMessage> {
    rookery::trace::reader::read_trace(path).unwrap().records
}

/// Polls the trace until its recorded modes are `want`.
async fn wait_modes(path: &std::path::Path, want: &[&str]) {
    let deadline = Instant::now() + WAIT;
    loop {
        let got = recorded_modes(&read_records(path));
        if got == want {
            return;
        }
        assert!(Instant::now() < deadline, "modes {got:?}, want {want:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn mode_of(server: &Server, id: &str) -> String {
    let (s, v) = server
        .call("GET", &format!("/v1/sessions/{id}"), None)
        .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    v["approval_mode"].as_str().unwrap().to_string()
}

/// Runs the exec task and checks that it waits for a human; denies it and waits for the end.
async fn next_exec_asks(server: &Server, id: &str) {
    let after = server.task(id, "mark it").await;
    let pending = server.wait_pending(id, 1).await;
    assert_eq!(pending[0]["name"], "exec_command", "{pending:?}");
    let call = pending[0]["tool_call_id"].as_str().unwrap().to_string();
    let (s, v) = server
        .call(
            "POST",
            &format!("/v1/sessions/{id}/approvals/{call}"),
            Some(json!({"decision": "deny"})),
        )
        .await;
    assert_eq!(s, StatusCode::NO_CONTENT, "{v}");
    server.events_until_task_end(id, after).await;
    assert!(
        !server.ws().join("ran.txt").exists(),
        "the denied command ran"
    );
    let records = settled_trace(&server.trace(id)).await;
    let decisions: Vec<String> = records
        .iter()
        .filter_map(|r| match r.as_event() {
            Some(EventPayload::ApprovalDecision { decision, .. }) => Some(format!("{decision:?}")),
            _ => None,
        })
        .collect();
    assert_eq!(decisions.last().map(String::as_str), Some("Deny"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn always_ask_survives_a_killed_server_and_the_next_exec_asks() {
    let server = Server::start(&exec_script());
    let id = server.create(Some("always-ask")).await;
    wait_modes(&server.trace(&id), &["always-ask"]).await;
    let server = Server::start_in(server.kill9(), None);
    // Implicit resume (any route), without a mode in the request.
    assert_eq!(mode_of(&server, &id).await, "always-ask");
    next_exec_asks(&server, &id).await;
    // Restored modes are not re-recorded.
    wait_modes(&server.trace(&id), &["always-ask"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mode_changes_are_recorded_and_survive_delete_and_resume() {
    let server = Server::start(&exec_script());
    let id = server.create(Some("allow-all")).await;
    let (s, _) = server
        .call(
            "PUT",
            &format!("/v1/sessions/{id}/approval_mode"),
            Some(json!({"mode": "ALWAYS-ASK"})),
        )
        .await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    let trace = server.trace(&id);
    wait_modes(&trace, &["allow-all", "always-ask"]).await;
    let (s, _) = server
        .call("DELETE", &format!("/v1/sessions/{id}"), None)
        .await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    let (s, v) = server
        .call("POST", &format!("/v1/sessions/{id}/resume"), None)
        .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(mode_of(&server, &id).await, "always-ask");
    next_exec_asks(&server, &id).await;

    // A mode given with the resume wins, and the trace records the change.
    server
        .call("DELETE", &format!("/v1/sessions/{id}"), None)
        .await;
    let (s, v) = server
        .call(
            "POST",
            &format!("/v1/sessions/{id}/resume"),
            Some(json!({"approval_mode": "read-only"})),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(mode_of(&server, &id).await, "read-only");
    wait_modes(&trace, &["allow-all", "always-ask", "read-only"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trace_without_a_mode_resumes_as_always_ask() {
    let server = Server::start(&exec_script());
    let id = server.create(Some("allow-all")).await;
    let trace = server.trace(&id);
    wait_modes(&trace, &["allow-all"]).await;
    server
        .call("DELETE", &format!("/v1/sessions/{id}"), None)
        .await;
    // The trace of an older build: its session_meta has no approval_mode.
    let text = std::fs::read_to_string(&trace).unwrap();
    std::fs::write(&trace, text.replace(",\"approval_mode\":\"allow-all\"", "")).unwrap();
    assert_eq!(recorded_modes(&read_records(&trace)), [""]);
    let (s, v) = server
        .call("POST", &format!("/v1/sessions/{id}/resume"), None)
        .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(mode_of(&server, &id).await, "always-ask");
    // Now the trace says it.
    wait_modes(&trace, &["", "always-ask"]).await;
    next_exec_asks(&server, &id).await;
}

/// Runs `rookery chat` in the sandbox with `stdin`; returns (exit code, stdout, stderr).
fn chat(dir: &std::path::Path, stdin: &[u8], extra: &[&str]) -> (i32, String, String) {
    let home = dir.join("home");
    let script = dir.join("script.json");
    let mut args = vec!["chat", "--home", home.to_str().unwrap()];
    args.extend(["--script", script.to_str().unwrap()]);
    args.extend(extra);
    let mut child = command(dir, &args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn chat_resume_keeps_the_recorded_mode_unless_told_otherwise() {
    // A resumed chat continues the script: each of the two resumes plays one exec turn.
    let dir = sandbox(&json!({"turns": [
        {"tool_calls": [{"name": "exec_command",
                         "arguments": {"cmd": "echo ran > ran.txt", "description": "Mark it"}}]},
        {"text": "denied"},
        {"tool_calls": [{"name": "exec_command",
                         "arguments": {"cmd": "echo ran > ran.txt", "description": "Mark it"}}]},
        {"text": "done"}
    ]}));
    let p = dir.path();
    // Mode names are case-insensitive.
    let (code, out, err) = chat(p, b"/exit\n", &["--approve", "READ-ONLY"]);
    assert_eq!(code, 0, "{err}");
    let id = out
        .lines()
        .last()
        .and_then(|l| l.strip_prefix("rookery chat --resume "))
        .unwrap()
        .to_string();
    let trace = rookery::trace::paths::locate_trace(&p.join("home"), &id).unwrap();
    assert_eq!(recorded_modes(&read_records(&trace)), ["read-only"]);

    // Without --approve the resumed chat asks for the rw command; "n" denies it.
    let (code, _, err) = chat(p, b"mark it\nn\n/exit\n", &["--resume", &id]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("Allow exec_command"), "{err}");
    assert!(!p.join("ws/ran.txt").exists(), "the command ran unasked");
    let records = read_records(&trace);
    assert_eq!(recorded_modes(&records), ["read-only"]);
    assert!(records.iter().any(|r| matches!(
        r.as_event(),
        Some(EventPayload::ApprovalDecision {
            decision: rookery::message::Decision::Deny,
            ..
        })
    )));

    // An explicit --approve wins and is recorded.
    let (code, _, err) = chat(
        p,
        b"mark it\n/exit\n",
        &["--resume", &id, "--approve", "allow-all"],
    );
    assert_eq!(code, 0, "{err}");
    assert!(p.join("ws/ran.txt").exists(), "{err}");
    assert_eq!(
        recorded_modes(&read_records(&trace)),
        ["read-only", "allow-all"]
    );
}

/// Polls `/proc/locks` until `pid` holds a `FLOCK`.
fn wait_flock(pid: u32) {
    let deadline = Instant::now() + WAIT;
    loop {
        let locks = std::fs::read_to_string("/proc/locks").unwrap();
        if locks
            .lines()
            .any(|l| l.contains("FLOCK") && l.split_whitespace().nth(4) == Some(&pid.to_string()))
        {
            return;
        }
        assert!(Instant::now() < deadline, "pid {pid} never locked: {locks}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_process_owns_a_session_until_it_dies() {
    let server = Server::start(&json!({"turns": [{"text": "hi"}]}));
    let p = server.dir.path().to_path_buf();
    let id = server.create(None).await;
    let serve_pid = server.child.id();

    // The server has it open: chat --resume is refused with exit 2, naming the server's pid.
    let (code, _, err) = chat(&p, b"/exit\n", &["--resume", &id]);
    assert_eq!(code, 2, "{err}");
    assert_eq!(
        err.trim_end(),
        format!("rookery: session {id} is open in another rookery process (pid {serve_pid})")
    );

    // Closed by the server, a chat takes it and holds it while it waits for input.
    let (s, _) = server
        .call("DELETE", &format!("/v1/sessions/{id}"), None)
        .await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    let home = p.join("home");
    let script = p.join("script.json");
    let mut holder = command(
        &p,
        &[
            "chat",
            "--home",
            home.to_str().unwrap(),
            "--script",
            script.to_str().unwrap(),
            "--resume",
            &id,
        ],
    )
    .stdin(Stdio::piped())
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    let chat_pid = holder.id();
    wait_flock(chat_pid);
    let (s, v) = server
        .call("POST", &format!("/v1/sessions/{id}/resume"), None)
        .await;
    assert_eq!(s, StatusCode::CONFLICT, "{v}");
    assert_eq!(v["error"]["code"], "session_locked");
    assert_eq!(
        v["error"]["message"],
        format!("session {id} is open in another rookery process (pid {chat_pid})")
    );

    // kill -9 of the holder frees it: the server resumes the session and runs a task.
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(chat_pid as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    holder.wait().unwrap();
    let (s, v) = server
        .call("POST", &format!("/v1/sessions/{id}/resume"), None)
        .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let after = server.task(&id, "hello").await;
    let events = server.events_until_task_end(&id, after).await;
    assert_eq!(events.last().unwrap().1["payload"]["status"], "completed");
}
