//! Sandboxed sessions through the real binary, on a kernel that has the mechanisms (they need
//! the kernel confinement to start at all): the setting is recorded in `session_meta` and
//! restored on resume, serve refuses a looser sandbox than its own and accepts a stricter one,
//! the file tools refuse writes outside the writable roots, reads of hidden paths, symlink and
//! `..` escapes and hard-linked files, a failed sandboxed command ends with a note naming the
//! sandbox, escalation is asked, denied or allowed and traced with `"escalation": true`, and an MCP
//! stdio server runs confined unless its entry says `"sandbox": "off"`.

use crate::common::cli as support;
use crate::common::serve as harness;

use harness::Server;
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::os::unix::fs::symlink;
use support::*;

/// The outputs in call order (concurrent calls are traced as they finish).
fn outputs(records: &[Value]) -> Vec<String> {
    call_ids(records)
        .iter()
        .map(|id| {
            output_of(records, id)["output"]
                .as_str()
                .unwrap_or("")
                .to_string()
        })
        .collect()
}

fn decisions(records: &[Value]) -> Vec<Value> {
    of_kind(records, "approval_decision")
        .into_iter()
        .map(|r| r["payload"].clone())
        .collect()
}

#[test]
fn the_file_tools_obey_the_sandbox() {
    let sb = Sandbox::new();
    let ws = sb.ws();
    let user_home = sb.path("user-home");
    std::fs::create_dir_all(user_home.join(".ssh")).unwrap();
    std::fs::write(user_home.join(".ssh/id_ed25519"), "PRIVATE-KEY").unwrap();
    std::fs::create_dir_all(sb.home()).unwrap();
    std::fs::write(sb.home().join("serve.token"), "TOKEN").unwrap();
    let outside = sb.path("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("victim.txt"), "victim\n").unwrap();
    std::fs::hard_link(outside.join("victim.txt"), ws.join("alias.txt")).unwrap();
    symlink(&outside, ws.join("escape")).unwrap();
    symlink(user_home.join(".ssh"), ws.join("keys")).unwrap();
    let write =
        |p: &str| json!({"name": "write_file", "arguments": {"file_path": p, "content": "x\n"}});
    let read = |p: String| json!({"name": "read_file", "arguments": {"file_path": p}});
    let script = sb.script(&json!({"turns": [
        {"tool_calls": [
            write("inside.txt"),
            write("../outside/new.txt"),
            write("escape/new.txt"),
            read(s(&user_home.join(".ssh/id_ed25519")).to_string()),
            read("keys/id_ed25519".into()),
            read(s(&sb.home().join("serve.token")).to_string()),
            {"name": "edit_file", "arguments": {"file_path": "alias.txt", "old_string": "victim", "new_string": "owned"}},
            {"name": "apply_patch", "arguments": {"input": "*** Begin Patch\n*** Add File: escape/patched.txt\n+x\n*** End Patch\n"}}
        ]},
        {"text": "done"}
    ]}));
    let out = sb.run(&["--script", s(&script), "--sandbox", "workspace-write", "go"]);
    out.expect_code(0);
    let records = read_records(&sb.trace());
    let meta = &of_kind(&records, "session_meta")[0];
    assert_eq!(
        meta["payload"]["sandbox"],
        json!({"mode": "workspace-write", "network": "off"})
    );
    let outs = outputs(&records);
    assert_eq!(outs.len(), 8, "{outs:?}");
    assert!(!outs[0].starts_with("sandbox"), "{}", outs[0]);
    for o in &outs[1..3] {
        assert!(o.starts_with("sandbox workspace-write: writing "), "{o}");
    }
    for o in &outs[3..6] {
        assert!(o.starts_with("sandbox workspace-write: reading "), "{o}");
    }
    assert!(outs[6].contains("hard links"), "{}", outs[6]);
    assert!(
        outs[7].starts_with("sandbox workspace-write: writing "),
        "{}",
        outs[7]
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("inside.txt")).unwrap(),
        "x\n"
    );
    assert!(!outside.join("new.txt").exists() && !outside.join("patched.txt").exists());
    assert_eq!(
        std::fs::read_to_string(outside.join("victim.txt")).unwrap(),
        "victim\n"
    );
    let all = std::fs::read_to_string(sb.trace()).unwrap() + &out.stdout;
    assert!(!all.contains("PRIVATE-KEY") && !all.contains("TOKEN\n"));
}

#[test]
fn read_only_writes_nothing_but_its_temp_dir() {
    let sb = Sandbox::new();
    let script = sb.script(&json!({"turns": [
        {"tool_calls": [
            {"name": "write_file", "arguments": {"file_path": "a.txt", "content": "x"}},
            {"name": "exec_command", "arguments": {"description": "d", "cmd": "echo t > \"$TMPDIR/t\" && cat \"$TMPDIR/t\" && echo w > in-ws.txt"}}
        ]},
        {"text": "done"}
    ]}));
    let out = sb.run(&["--script", s(&script), "--sandbox", "read-only", "go"]);
    out.expect_code(0);
    let outs = outputs(&read_records(&sb.trace()));
    assert!(
        outs[0].starts_with("sandbox read-only: writing "),
        "{}",
        outs[0]
    );
    // stdout and stderr share the pipe: the refused write's message may come first.
    assert!(outs[1].lines().any(|l| l == "t"), "{}", outs[1]);
    assert!(
        outs[1].contains("[sandbox: read-only, network off"),
        "{}",
        outs[1]
    );
    assert!(!sb.ws().join("a.txt").exists() && !sb.ws().join("in-ws.txt").exists());
}

#[test]
fn a_failed_sandboxed_command_names_the_sandbox_and_a_good_one_does_not() {
    let sb = Sandbox::new();
    let outside = sb.path("outside");
    std::fs::create_dir(&outside).unwrap();
    let cmd =
        |c: &str| json!({"name": "exec_command", "arguments": {"description": "d", "cmd": c}});
    let script = sb.script(&json!({"turns": [
        {"tool_calls": [
            cmd("true"),
            cmd(&format!("echo x > {}/cmd.txt", s(&outside))),
            cmd("echo inside > w.txt")
        ]},
        {"text": "done"}
    ]}));
    let out = sb.run(&["--script", s(&script), "--sandbox", "workspace-write", "go"]);
    out.expect_code(0);
    let outs = outputs(&read_records(&sb.trace()));
    assert!(!outs[0].contains("[sandbox:"), "{}", outs[0]);
    assert!(
        outs[1].ends_with("[sandbox: workspace-write, network off — ask with sandbox_permissions: \"require_escalated\" if the command needs more]"),
        "{}",
        outs[1]
    );
    assert!(!outs[2].contains("[sandbox:"), "{}", outs[2]);
    assert!(!outside.join("cmd.txt").exists());
    assert!(sb.ws().join("w.txt").exists());
}

#[test]
fn escalation_is_denied_under_allow_all_unless_the_config_allows_it() {
    for (allow, expect) in [(false, "deny"), (true, "allow")] {
        let sb = Sandbox::new();
        let outside = sb.path("outside");
        std::fs::create_dir(&outside).unwrap();
        let target = outside.join("escalated.txt");
        let script = sb.script(&json!({"turns": [
            {"tool_calls": [{"name": "exec_command", "arguments": {
                "description": "d", "cmd": format!("echo e > {}", s(&target)),
                "sandbox_permissions": "require_escalated", "justification": "writes outside"}}]},
            {"text": "done"}
        ]}));
        let cfg = sb.file(
            "agent.yaml",
            &format!("sandbox:\n  mode: workspace-write\n  allow_escalation: {allow}\n"),
        );
        let out = sb.run(&["--script", s(&script), "--config", s(&cfg), "go"]);
        out.expect_code(0);
        let records = read_records(&sb.trace());
        let d = decisions(&records);
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(d[0]["decision"], expect, "{d:?}");
        assert_eq!(d[0]["escalation"], true, "{d:?}");
        assert_eq!(target.exists(), allow);
        if !allow {
            let outs = outputs(&records);
            assert!(
                outs[0].starts_with("Tool call denied: running outside the sandbox"),
                "{}",
                outs[0]
            );
        }
    }
}

#[tokio::test]
async fn escalation_is_asked_under_always_ask() {
    let server = Server::start_with(
        harness::sandbox(&json!({"turns": [
            {"tool_calls": [{"name": "exec_command", "arguments": {
                "description": "d", "cmd": "echo e > ../escalated.txt",
                "sandbox_permissions": "require_escalated", "justification": "needs it"}}]},
            {"text": "done"}
        ]})),
        None,
        &["--sandbox", "workspace-write"],
    );
    let id = server.create(Some("always-ask")).await;
    let after = server.task(&id, "go").await;
    server.wait_pending(&id, 1).await;
    let (status, v) = server
        .call(
            "POST",
            &format!("/v1/sessions/{id}/approvals/call_0"),
            Some(json!({"decision": "allow"})),
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{v}");
    server.events_until_task_end(&id, after).await;
    let records = read_records(&server.trace(&id));
    let d = decisions(&records);
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(d[0]["decision"], "allow");
    assert_eq!(d[0]["escalation"], true);
    assert_eq!(d[0]["source"], "api");
    assert!(server.dir.path().join("escalated.txt").exists());
}

#[tokio::test]
async fn serve_refuses_a_looser_sandbox_and_restores_a_resumed_one() {
    let server = Server::start_with(
        harness::sandbox(&json!({"turns": [{"text": "one"}, {"text": "two"}]})),
        None,
        &["--sandbox", "workspace-write"],
    );
    let ws = server.ws();
    for looser in [json!({"mode": "off"}), json!({"network": "on"})] {
        let (status, v) = server
            .call(
                "POST",
                "/v1/sessions",
                Some(json!({"workspace": ws, "sandbox": looser})),
            )
            .await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{v}");
        assert_eq!(v["error"]["code"], "sandbox_not_allowed");
    }
    let default = server.create(None).await;
    let (_, v) = server
        .call("GET", &format!("/v1/sessions/{default}"), None)
        .await;
    assert_eq!(
        v["sandbox"],
        json!({"mode": "workspace-write", "network": "off"})
    );
    let (status, v) = server
        .call(
            "POST",
            "/v1/sessions",
            Some(json!({"workspace": ws, "sandbox": {"mode": "read-only"}})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{v}");
    let id = v["session_id"].as_str().unwrap().to_string();
    let records = read_records(&server.trace(&id));
    assert_eq!(
        of_kind(&records, "session_meta")[0]["payload"]["sandbox"],
        json!({"mode": "read-only", "network": "off"})
    );
    let (status, _) = server
        .call("DELETE", &format!("/v1/sessions/{id}"), None)
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let resume = format!("/v1/sessions/{id}/resume");
    let (status, v) = server
        .call(
            "POST",
            &resume,
            Some(json!({"sandbox": {"mode": "workspace-write"}})),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{v}");
    assert_eq!(v["error"]["code"], "sandbox_not_allowed");
    let (status, v) = server.call("POST", &resume, Some(json!({}))).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    let (_, v) = server
        .call("GET", &format!("/v1/sessions/{id}"), None)
        .await;
    assert_eq!(v["sandbox"], json!({"mode": "read-only", "network": "off"}));
}

#[test]
fn a_cli_resume_restores_the_recorded_sandbox() {
    let sb = Sandbox::new();
    let outside = sb.path("outside");
    std::fs::create_dir(&outside).unwrap();
    let script = sb.script(&json!({"turns": [
        {"text": "hi"},
        {"tool_calls": [{"name": "write_file", "arguments": {"file_path": "after.txt", "content": "x"}}]},
        {"text": "done"}
    ]}));
    sb.run(&["--script", s(&script), "--sandbox", "read-only", "go"])
        .expect_code(0);
    let trace = sb.trace();
    let id = of_kind(&read_records(&trace), "session_meta")[0]["payload"]["session_id"]
        .as_str()
        .unwrap()
        .to_string();
    let mut cmd = sb.command();
    cmd.args(["chat", "--home", s(&sb.home()), "--resume", &id]);
    cmd.stdin(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), b"again\n/exit\n").unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let outs = outputs(&read_records(&trace));
    assert!(
        outs.last()
            .unwrap()
            .starts_with("sandbox read-only: writing "),
        "{outs:?}"
    );
    assert!(!sb.ws().join("after.txt").exists());
}

/// A minimal MCP stdio server (newline-delimited JSON-RPC) whose one tool, `probe`, tries to
/// write inside its working directory (the workspace) and outside it, and to read a secret,
/// and answers what happened.
const PROBE_SERVER: &str = r#"
import json, os, sys
def attempt(f):
    try:
        f()
        return "ok"
    except Exception as e:
        return "denied(" + type(e).__name__ + ")"
def write(p):
    with open(p, "w") as fh:
        fh.write("x")
def read(p):
    with open(p) as fh:
        if fh.read() != "TOKEN":
            raise PermissionError("masked")
def probe():
    return " ".join([
        "inside=" + attempt(lambda: write("mcp-inside.txt")),
        "outside=" + attempt(lambda: write(os.environ["OUTSIDE"])),
        "secret=" + attempt(lambda: read(os.environ["SECRET"])),
    ])
for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg:
        continue
    m = msg.get("method")
    if m == "initialize":
        res = {"protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}},
               "serverInfo": {"name": "probe", "version": "1"}}
    elif m == "tools/list":
        res = {"tools": [{"name": "probe", "description": "probe the sandbox",
                          "inputSchema": {"type": "object", "properties": {}}}]}
    elif m == "tools/call":
        res = {"content": [{"type": "text", "text": probe()}]}
    else:
        res = {}
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": res}) + "\n")
    sys.stdout.flush()
"#;

#[test]
fn an_mcp_stdio_server_runs_confined_unless_its_entry_says_off() {
    let sb = Sandbox::new();
    let server = sb.file("probe_server.py", PROBE_SERVER);
    std::fs::create_dir_all(sb.home()).unwrap();
    std::fs::write(sb.home().join("serve.token"), "TOKEN").unwrap();
    let outside = sb.path("outside");
    std::fs::create_dir(&outside).unwrap();
    let entry = |name: &str, off: bool| {
        let mut e = json!({
            "command": "python3",
            "args": [s(&server)],
            "env": {
                "OUTSIDE": s(&outside.join(format!("{name}.txt"))),
                "SECRET": s(&sb.home().join("serve.token")),
            }
        });
        if off {
            e["sandbox"] = json!("off");
        }
        e
    };
    let mcp = sb.file(
        "mcp.json",
        &json!({"mcpServers": {"confined": entry("confined", false), "free": entry("free", true)}})
            .to_string(),
    );
    let script = sb.script(&json!({"turns": [
        {"tool_calls": [
            {"name": "mcp__confined__probe", "arguments": {}},
            {"name": "mcp__free__probe", "arguments": {}}
        ]},
        {"text": "done"}
    ]}));
    let out = sb.run(&[
        "--script",
        s(&script),
        "--sandbox",
        "workspace-write",
        "--mcp-config",
        s(&mcp),
        "go",
    ]);
    out.expect_code(0);
    let outs = outputs(&read_records(&sb.trace()));
    assert_eq!(outs.len(), 2, "{outs:?}");
    assert!(
        outs[0].contains("inside=ok")
            && outs[0].contains("outside=denied")
            && outs[0].contains("secret=denied"),
        "{}",
        outs[0]
    );
    assert!(!outside.join("confined.txt").exists());
    // The same server with `"sandbox": "off"` runs as the host user.
    assert!(
        outs[1].contains("outside=ok") && outs[1].contains("secret=ok"),
        "{}",
        outs[1]
    );
    assert!(outside.join("free.txt").exists());
}

#[test]
fn a_failed_sandboxed_command_seen_later_names_the_sandbox_too() {
    let sb = Sandbox::new();
    let outside = sb.path("outside");
    std::fs::create_dir(&outside).unwrap();
    let late = outside.join("late.txt");
    let script = sb.script(&json!({"turns": [
        {"tool_calls": [{"name": "exec_command", "arguments": {"description": "slow",
            "cmd": format!("sleep 1; echo x > {}", s(&late)), "yield_time_ms": 100}}]},
        {"tool_calls": [{"name": "input_command", "arguments": {"description": "poll",
            "process_id": "{{output:0:process_id (proc-[0-9a-f]+)}}", "chars": "", "yield_time_ms": 30000}}]},
        {"tool_calls": [{"name": "exec_command", "arguments": {"description": "bg",
            "run_in_background": true, "cmd": format!("echo y > {}", s(&outside.join("bg.txt")))}}]},
        {"text": "waiting", "delay_ms": 3000},
        {"text": "saw the notice"}
    ]}));
    let out = sb.run(&["--script", s(&script), "--sandbox", "workspace-write", "go"]);
    out.expect_code(0);
    let records = read_records(&sb.trace());
    let outs = outputs(&records);
    assert!(
        outs[0].contains("[process running with process_id proc-"),
        "{}",
        outs[0]
    );
    assert!(
        outs[1].ends_with("[sandbox: workspace-write, network off — ask with sandbox_permissions: \"require_escalated\" if the command needs more]"),
        "{}",
        outs[1]
    );
    let notice = records
        .iter()
        .map(|r| r.to_string())
        .find(|r| r.contains("[background_task_done]"))
        .expect("the background command's notice is in the trace");
    assert!(
        notice.contains("[sandbox: workspace-write, network off"),
        "{notice}"
    );
    assert!(!late.exists() && !outside.join("bg.txt").exists());
}
