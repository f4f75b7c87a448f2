//! The sandbox setting's plumbing through the real binary, on any kernel: flags and config are
//! validated, a sandboxed session never runs unsandboxed (it starts with its sandbox recorded,
//! or not at all, exit 2 / 422 `sandbox_unavailable`), a resume never comes back looser than its
//! trace recorded (exit 2, 403 `sandbox_not_allowed`), serve without a usable sandbox refuses
//! to start unless `--sandbox off`, and `GET /v1/sessions/{id}` shows the sandbox.

use crate::common::cli as support;
use crate::common::serve as harness;

use harness::Server;
use reqwest::StatusCode;
use serde_json::{Value, json};
use support::*;

/// The trace's first line with `session_meta.sandbox` set to `sandbox` (a session recorded
/// as sandboxed, whatever this kernel can do).
fn record_sandbox(trace: &std::path::Path, sandbox: Value) {
    let text = std::fs::read_to_string(trace).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let mut meta: Value = serde_json::from_str(&lines[0]).unwrap();
    assert_eq!(meta["type"], "session_meta", "{meta}");
    meta["payload"]["sandbox"] = sandbox;
    lines[0] = meta.to_string();
    std::fs::write(trace, lines.join("\n") + "\n").unwrap();
}

fn first_meta(trace: &std::path::Path) -> Value {
    read_records(trace)
        .into_iter()
        .find(|r| kind(r) == "session_meta")
        .expect("a session_meta")
}

#[test]
fn bad_sandbox_flags_and_config_are_usage_errors() {
    let sb = Sandbox::new();
    let script = sb.script(&json!({"turns": [{"text": "hi"}]}));
    let out = sb.run(&["--script", s(&script), "--sandbox", "loose", "go"]);
    out.expect_code(2);
    assert!(out.stderr.contains("read-only"), "{}", out.stderr);
    let out = sb.run(&["--script", s(&script), "--sandbox-network", "maybe", "go"]);
    out.expect_code(2);
    let cfg = sb.file("agent.yaml", "sandbox:\n  mode: loose\n");
    let out = sb.run(&["--script", s(&script), "--config", s(&cfg), "go"]);
    out.expect_code(2);
    assert!(out.stderr.contains("sandbox"), "{}", out.stderr);
    assert!(sb.trace_files().is_empty());
}

#[test]
fn a_sandboxed_run_starts_with_its_sandbox_recorded_or_not_at_all() {
    for mode in ["read-only", "workspace-write"] {
        let sb = Sandbox::new();
        let outside = sb.path("outside");
        std::fs::create_dir(&outside).unwrap();
        let escape = format!("echo x > {}/escaped.txt", s(&outside));
        let script = sb.script(&json!({"turns": [
            {"tool_calls": [{"name": "exec_command", "arguments": {"description": "d", "cmd": escape}}]},
            {"text": "hi"}
        ]}));
        let out = sb.run(&["--script", s(&script), "--sandbox", mode, "go"]);
        if out.code == Some(2) {
            // Fail closed: no session, and the reason names the mode.
            assert!(
                out.stderr
                    .contains(&format!("sandbox `{mode}` is unavailable on this machine")),
                "{}",
                out.stderr
            );
            assert!(sb.trace_files().is_empty());
        } else {
            out.expect_code(0);
            let meta = first_meta(&sb.trace());
            assert_eq!(meta["payload"]["sandbox"]["mode"], mode, "{meta}");
        }
        // Either way, nothing ran unconfined.
        assert!(!outside.join("escaped.txt").exists(), "{mode}");
    }
}

#[test]
fn a_missing_writable_root_stops_the_session() {
    let sb = Sandbox::new();
    let script = sb.script(&json!({"turns": [{"text": "hi"}]}));
    let cfg = sb.file(
        "agent.yaml",
        "sandbox:\n  mode: workspace-write\n  writable_roots: [../no-such-dir]\n",
    );
    let out = sb.run(&["--script", s(&script), "--config", s(&cfg), "go"]);
    out.expect_code(2);
    assert!(out.stderr.contains("no-such-dir"), "{}", out.stderr);
    assert!(sb.trace_files().is_empty());
}

#[test]
fn a_cli_resume_never_comes_back_looser() {
    let sb = Sandbox::new();
    let script = sb.script(&json!({"turns": [{"text": "hi"}, {"text": "again"}]}));
    sb.run(&["--script", s(&script), "go"]).expect_code(0);
    let trace = sb.trace();
    record_sandbox(&trace, json!({"mode": "read-only", "network": "off"}));
    let id = first_meta(&trace)["payload"]["session_id"]
        .as_str()
        .unwrap()
        .to_string();
    for looser in [
        vec!["--sandbox", "off"],
        vec!["--sandbox", "workspace-write"],
        vec!["--sandbox-network", "on"],
    ] {
        let mut cmd = sb.command();
        cmd.args(["chat", "--home", s(&sb.home()), "--resume", &id]);
        cmd.args(&looser);
        let out = Running::spawn(cmd).wait(RUN_TIMEOUT);
        out.expect_code(2);
        assert!(
            out.stderr
                .contains("is looser than allowed (`read-only, network off`)"),
            "{looser:?}: {}",
            out.stderr
        );
    }
    // No flag: the recorded sandbox comes back (or, where it cannot be had, nothing starts).
    let before = std::fs::read_to_string(&trace).unwrap();
    let mut cmd = sb.command();
    cmd.args(["chat", "--home", s(&sb.home()), "--resume", &id]);
    let out = Running::spawn(cmd).wait(RUN_TIMEOUT);
    if out.code == Some(2) {
        assert!(
            out.stderr
                .contains("sandbox `read-only` is unavailable on this machine"),
            "{}",
            out.stderr
        );
        assert_eq!(std::fs::read_to_string(&trace).unwrap(), before);
    } else {
        out.expect_code(0);
    }
}

#[tokio::test]
async fn serve_without_a_usable_sandbox_needs_an_explicit_off() {
    let dir = harness::sandbox(&json!({"turns": [{"text": "hi"}]}));
    let p = dir.path().to_path_buf();
    let home = p.join("home");
    let script = p.join("script.json");
    // `--sandbox workspace-write` given, so the helper adds no `--sandbox off`.
    let mut serve = harness::command(
        &p,
        &[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--home",
            home.to_str().unwrap(),
            "--script",
            script.to_str().unwrap(),
            "--sandbox",
            "workspace-write",
        ],
    );
    let mut child = serve
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    let stdout = child.stdout.take().unwrap();
    let mut reader = std::io::BufReader::new(stdout);
    std::io::BufRead::read_line(&mut reader, &mut first).unwrap();
    if first.is_empty() {
        // It did not start: exit 2 and why, with the way out.
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(2));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("sandbox `workspace-write` is unavailable on this machine")
                && err.contains("pass --sandbox off"),
            "{err}"
        );
        return;
    }
    // It started: then its sessions really get the sandbox it promised.
    let base = first
        .trim()
        .strip_prefix("listening on ")
        .unwrap()
        .to_string();
    let token = harness::read_token_file(&home);
    let resp = reqwest::Client::new()
        .post(format!("{base}/v1/sessions"))
        .bearer_auth(token)
        .json(&json!({"workspace": p.join("ws")}))
        .send()
        .await
        .unwrap();
    let status = resp.status();
    let v: Value = resp.json().await.unwrap();
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(status, StatusCode::CREATED, "{v}");
}

#[tokio::test]
async fn serve_shows_the_sandbox_and_refuses_a_looser_resume() {
    let server = Server::start(&json!({"turns": [{"text": "one"}, {"text": "two"}]}));
    // A stricter sandbox than the server's `off` may be asked for: it runs, or nothing does.
    let body = json!({"workspace": server.ws(), "sandbox": {"mode": "read-only"}});
    let (status, v) = server.call("POST", "/v1/sessions", Some(body)).await;
    if status == StatusCode::UNPROCESSABLE_ENTITY {
        assert_eq!(v["error"]["code"], "sandbox_unavailable", "{v}");
        assert!(
            v["error"]["message"]
                .as_str()
                .unwrap()
                .contains("read-only"),
            "{v}"
        );
    } else {
        assert_eq!(status, StatusCode::CREATED, "{v}");
        let sid = v["session_id"].as_str().unwrap();
        let (_, v) = server
            .call("GET", &format!("/v1/sessions/{sid}"), None)
            .await;
        assert_eq!(v["sandbox"], json!({"mode": "read-only", "network": "off"}));
    }
    let id = server.create(None).await;
    let (status, v) = server
        .call("GET", &format!("/v1/sessions/{id}"), None)
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(v["sandbox"], json!({"mode": "off", "network": "off"}));
    let after = server.task(&id, "go").await;
    server.events_until_task_end(&id, after).await;
    let (status, _) = server
        .call("DELETE", &format!("/v1/sessions/{id}"), None)
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    record_sandbox(
        &server.trace(&id),
        json!({"mode": "workspace-write", "network": "off"}),
    );
    let resume = format!("/v1/sessions/{id}/resume");
    for looser in [json!({"mode": "off"}), json!({"network": "on"})] {
        let (status, v) = server
            .call("POST", &resume, Some(json!({"sandbox": looser})))
            .await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{v}");
        assert_eq!(v["error"]["code"], "sandbox_not_allowed", "{v}");
    }
    let (status, v) = server
        .call("POST", &resume, Some(json!({"sandbox": {"mode": "lax"}})))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{v}");
    assert_eq!(v["error"]["code"], "invalid_sandbox", "{v}");
    // Asked for nothing: the recorded sandbox, or no session where it cannot be had.
    let (status, v) = server.call("POST", &resume, Some(json!({}))).await;
    if status == StatusCode::UNPROCESSABLE_ENTITY {
        assert_eq!(v["error"]["code"], "sandbox_unavailable", "{v}");
    } else {
        assert_eq!(status, StatusCode::OK, "{v}");
        let (_, v) = server
            .call("GET", &format!("/v1/sessions/{id}"), None)
            .await;
        assert_eq!(v["sandbox"]["mode"], "workspace-write", "{v}");
    }
}
