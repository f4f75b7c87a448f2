//! MCP tools against the real reference server `@modelcontextprotocol/server-everything` (npm,
//! pinned; installed on first use into a cache dir, see `tests/common/mcp.rs`), through the real
//! `rookery run` binary, over stdio and over streamable HTTP: results of echo, get-sum,
//! get-tiny-image and get-structured-content, an unknown tool and bad arguments, a call that
//! outlives `timeoutMs`, SIGKILL of the server mid-call with the reconnect after it, and no
//! server process left once the session ends.

use crate::common::mcp as support;

use std::process::{Command, Stdio};
use std::time::Instant;

use serde_json::{Value, json};
use support::*;

fn stdio_server(index: &std::path::Path, extra: Value) -> Value {
    let mut cfg = json!({"command": "node", "args": [index, "stdio"]});
    if let (Some(c), Some(e)) = (cfg.as_object_mut(), extra.as_object()) {
        c.extend(e.clone());
    }
    json!({"mcpServers": {"everything": cfg}})
}

fn call(name: &str, args: Value) -> Value {
    json!({"name": format!("mcp__everything__{name}"), "arguments": args})
}

#[test]
fn stdio_results_of_the_reference_tools() {
    let index = everything();
    let sb = Sandbox::new();
    let script = json!({"turns": [
        {"tool_calls": [
            call("echo", json!({"message": "hi from rookery"})),
            call("get-sum", json!({"a": 2, "b": 3})),
            call("get-tiny-image", json!({})),
            call("get-structured-content", json!({"location": "Chicago"})),
            call("no-such-tool", json!({})),
            call("get-sum", json!({"a": "two"}))
        ]},
        {"text": "done"}
    ]});
    let run = sb.start(&script, &stdio_server(&index, json!({})), &[]);
    let (code, lines) = run.finish();
    assert_eq!(code, 0, "{lines:#?}");
    let begin = of_kind(&lines, "mcp_connect_begin");
    let end = of_kind(&lines, "mcp_connect_end");
    assert_eq!(begin.len(), 1);
    assert_eq!(payload(begin[0])["server"], "everything");
    assert_eq!(end.len(), 1);
    assert_eq!(payload(end[0])["status"], "completed");
    assert!(
        payload(end[0])["tools"].as_u64().unwrap_or(0) >= 10,
        "{:?}",
        end[0]
    );
    assert!(payload(end[0])["ms"].is_u64());
    // The first list is announced before the first request; the server may report
    // `tools/list_changed` while the run lasts (its timing depends on the load), and each report
    // is announced again, with the same tools.
    let ready = of_kind(&lines, "tool_list_ready");
    assert!(!ready.is_empty(), "{lines:#?}");
    for announced in &ready {
        let names: Vec<&str> = payload(announced)["tools"]
            .as_array()
            .map(|a| a.iter().filter_map(|t| t["name"].as_str()).collect())
            .unwrap_or_default();
        assert!(
            names.contains(&"read_file") && names.contains(&"mcp__everything__echo"),
            "{names:?}"
        );
        assert!(names.iter().all(|n| n.len() <= 64));
    }
    let out = |id: &str| {
        lines
            .iter()
            .find(|v| kind(v) == "tool_call_output" && payload(v)["tool_call_id"] == id)
            .map(|v| {
                (
                    payload(v)["output"].as_str().unwrap_or("").to_string(),
                    payload(v)["stop_reason"].as_str().unwrap_or("").to_string(),
                )
            })
            .unwrap_or_default()
    };
    assert_eq!(
        out("call_0"),
        ("Echo: hi from rookery".into(), "completed".into())
    );
    assert_eq!(
        out("call_1"),
        ("The sum of 2 and 3 is 5.".into(), "completed".into())
    );
    let (image, status) = out("call_2");
    assert_eq!(status, "completed");
    assert!(
        image.contains("[image: image/png; this model does not take images]"),
        "{image}"
    );
    let (weather, status) = out("call_3");
    assert_eq!(status, "completed");
    let parsed: Value = serde_json::from_str(&weather).unwrap_or(Value::Null);
    assert!(parsed["temperature"].is_number(), "{weather}");
    assert_eq!(
        out("call_4"),
        (
            "Unknown tool: mcp__everything__no-such-tool".into(),
            "failed".into()
        )
    );
    let (bad, status) = out("call_5");
    assert_eq!(status, "failed");
    assert!(
        bad.contains("get-sum") && bad.contains("expected number"),
        "{bad}"
    );
}

#[test]
fn a_call_that_outlives_timeout_ms_ends_with_the_timeout_text() {
    let index = everything();
    let sb = Sandbox::new();
    let script = json!({"turns": [
        {"tool_calls": [call("trigger-long-running-operation", json!({"duration": 60, "steps": 2}))]},
        {"tool_calls": [call("echo", json!({"message": "still here"}))]},
        {"text": "done"}
    ]});
    let mut run = sb.start(
        &script,
        &stdio_server(&index, json!({"timeoutMs": 1500})),
        &[],
    );
    assert_eq!(
        run.output("call_0"),
        ("[tool timeout: exceeded 1500ms]".into(), "timeout".into())
    );
    assert_eq!(
        run.output("call_1"),
        ("Echo: still here".into(), "completed".into())
    );
    let (code, _) = run.finish();
    assert_eq!(code, 0);
}

#[test]
fn stdio_sigkill_mid_call_fails_at_once_then_reconnects_and_no_process_outlives_the_session() {
    let index = everything();
    let sb = Sandbox::new();
    let server_pids = sb.path("server.pids");
    let extra_pids = sb.path("extra.pids");
    // The server records its pid; a detached helper it leaves behind records its own.
    let launcher = format!(
        "echo $$ >> '{}'; (setsid sleep 300 & echo $! >> '{}'); exec node '{}' stdio",
        server_pids.display(),
        extra_pids.display(),
        index.display()
    );
    let mcp = json!({"mcpServers": {"everything": {"command": "bash", "args": ["-c", launcher]}}});
    let script = json!({"turns": [
        {"tool_calls": [call("trigger-long-running-operation", json!({"duration": 60, "steps": 60}))]},
        {"tool_calls": [call("echo", json!({"message": "after the crash"}))]},
        {"text": "done"}
    ]});
    let mut run = sb.start(&script, &mcp, &[]);
    run.wait_for(60, "the approval of call_0", |v| {
        kind(v) == "approval_decision" && payload(v)["tool_call_id"] == "call_0"
    });
    assert!(eventually(30, || !pids(&server_pids).is_empty()));
    let first = pids(&server_pids)[0];
    let killed = Instant::now();
    kill9(first);
    let (text, status) = run.output("call_0");
    let took = killed.elapsed();
    assert_eq!(status, "failed");
    assert!(
        text.contains("the connection was lost during the call"),
        "{text}"
    );
    // The operation would have run 60 s: the call failed because its server died.
    assert!(took.as_secs() < 10, "the call took {took:?} to fail");
    eprintln!("call failed {} ms after SIGKILL", took.as_millis());
    assert_eq!(
        run.output("call_1"),
        ("Echo: after the crash".into(), "completed".into())
    );
    let (code, lines) = run.finish();
    assert_eq!(code, 0);
    let reconnects = of_kind(&lines, "mcp_reconnect");
    assert!(
        reconnects
            .iter()
            .any(|r| payload(r)["status"] == "completed" && payload(r)["server"] == "everything"),
        "{reconnects:?}"
    );
    assert_eq!(payload(reconnects[0])["attempt"], 1);
    let all: Vec<i32> = pids(&server_pids)
        .into_iter()
        .chain(pids(&extra_pids))
        .collect();
    assert!(
        all.len() >= 4,
        "two server starts, each with a helper: {all:?}"
    );
    assert!(
        eventually(30, || all.iter().all(|p| !alive(*p))),
        "still alive after the session: {:?}",
        all.iter().filter(|p| alive(**p)).collect::<Vec<_>>()
    );
}

struct HttpServer {
    child: std::process::Child,
    port: u16,
}

impl HttpServer {
    fn start(index: &std::path::Path, port: u16) -> Self {
        let child = Command::new("node")
            .arg(index)
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the reference server");
        assert!(
            eventually(30, || std::net::TcpStream::connect(("127.0.0.1", port))
                .is_ok()),
            "the reference server did not listen on {port}"
        );
        HttpServer { child, port }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn http_results_and_sigkill_mid_call_then_reconnect() {
    let index = everything();
    let sb = Sandbox::new();
    let mut server = HttpServer::start(&index, free_port());
    let port = server.port;
    let mcp = json!({"mcpServers": {"web": {"url": format!("http://127.0.0.1:{port}/mcp")}}});
    let script = json!({"turns": [
        {"tool_calls": [
            {"name": "mcp__web__echo", "arguments": {"message": "over http"}},
            {"name": "mcp__web__get-sum", "arguments": {"a": 40, "b": 2}},
            {"name": "mcp__web__trigger-long-running-operation", "arguments": {"duration": 60, "steps": 60}}
        ]},
        {"tool_calls": [{"name": "mcp__web__echo", "arguments": {"message": "after the crash"}}]},
        {"text": "done"}
    ]});
    let mut run = sb.start(&script, &mcp, &[]);
    assert_eq!(
        run.output("call_0"),
        ("Echo: over http".into(), "completed".into())
    );
    assert_eq!(
        run.output("call_1"),
        ("The sum of 40 and 2 is 42.".into(), "completed".into())
    );
    run.wait_for(30, "the approval of call_2", |v| {
        kind(v) == "approval_decision" && payload(v)["tool_call_id"] == "call_2"
    });
    let killed = Instant::now();
    let _ = server.child.kill(); // SIGKILL
    let _ = server.child.wait();
    let (text, status) = run.output("call_2");
    let took = killed.elapsed();
    assert_eq!(status, "failed");
    assert!(
        text.contains("the connection was lost during the call"),
        "{text}"
    );
    assert!(took.as_secs() < 10, "the call took {took:?} to fail");
    eprintln!("http call failed {} ms after SIGKILL", took.as_millis());
    let _restarted = HttpServer::start(&index, port);
    assert_eq!(
        run.output("call_3"),
        ("Echo: after the crash".into(), "completed".into())
    );
    let (code, lines) = run.finish();
    assert_eq!(code, 0);
    assert!(
        of_kind(&lines, "mcp_reconnect")
            .iter()
            .any(|r| payload(r)["status"] == "completed"),
        "{lines:#?}"
    );
}

/// Through the library API: a session whose model takes images (so it has `read_image`) gets
/// the server's image attached to the output.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_is_attached_for_a_vision_model() {
    use rookery::model::model_config::ModelConfig;
    use rookery::model::scripted::ScriptedModel;
    use std::sync::Arc;

    let index = tokio::task::spawn_blocking(everything)
        .await
        .expect("install");
    let dir = tempfile::tempdir().expect("tempdir");
    let script =
        json!({"turns": [{"tool_calls": [call("get-tiny-image", json!({}))]}, {"text": "done"}]});
    let model = Arc::new(ScriptedModel::from_json_str(&script.to_string()).expect("script"));
    let mut options = rookery::SessionOptions::new(dir.path(), model);
    options.approver = Arc::new(rookery::approval::AllowAllApprover);
    let mut vision = ModelConfig::openai("http://127.0.0.1:9/v1", "vision-model");
    vision.vision = true;
    options.config.set_model(vision).expect("model");
    options.config.mcp_servers = Arc::new(
        rookery::mcp::config::from_mcp_json(&stdio_server(&index, json!({})).to_string())
            .expect("mcp config"),
    );
    let host = rookery::Host::start(dir.path().join("home"))
        .await
        .expect("host");
    let session = host.create_session(options).await.expect("session");
    let mut stream = session.subscribe().await.expect("subscribe");
    let summary = session.run_task("go").await.expect("task");
    let mut output = Value::Null;
    while let Ok(msg) = stream.try_recv() {
        let v: Value = serde_json::from_str(&msg.to_json()).unwrap_or(Value::Null);
        if kind(&v) == "tool_call_output" {
            output = payload(&v).clone();
        }
    }
    session.close().await.expect("close");
    host.shutdown().await;
    assert_eq!(
        summary.status,
        rookery::message::StopReason::Completed,
        "{output}"
    );
    assert_eq!(output["stop_reason"], "completed", "{output}");
    let images = output["images"].as_array().cloned().unwrap_or_default();
    assert_eq!(images.len(), 1, "{output}");
    assert!(
        images[0]
            .as_str()
            .unwrap_or("")
            .starts_with("data:image/png;base64,")
    );
    assert!(
        output["output"]
            .as_str()
            .unwrap_or("")
            .contains("[image: image/png, attached]")
    );
}
