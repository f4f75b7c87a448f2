//! MCP cases the reference server cannot show, against a small MCP server built here with
//! rmcp's server side (streamable HTTP on a loopback port the test picks), driven through the
//! real `rookery run` binary: `notifications/tools/list_changed` picked up before the next
//! request (`tool_list_ready` again), a failed refresh keeping the old list, `isError` results,
//! resource links and embedded resources, a slow tool past `timeoutMs`, the server dying
//! mid-call (and coming back), and a server that cannot be reached at all.

use crate::common::mcp as support;

use std::borrow::Cow;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ListToolsResult, PaginatedRequestParams,
    ProtocolVersion, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};
use support::*;
use tokio_util::sync::CancellationToken;

#[derive(Default)]
struct Flags {
    extra: AtomicBool,
    broken_list: AtomicBool,
    /// `tools/list` requests served so far.
    lists: AtomicUsize,
}

impl Flags {
    /// Streamable HTTP carries the notification on another stream than the call's result, so
    /// the tool answers only once the client has come back for the list (up to 20 s).
    async fn wait_for_list_after(&self, before: usize) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.lists.load(Ordering::SeqCst) <= before && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

#[derive(Clone)]
struct TestServer {
    flags: Arc<Flags>,
}

fn tool(name: &str, read_only: bool) -> Value {
    json!({"name": name, "description": format!("test tool {name}"),
           "inputSchema": {"type": "object", "properties": {"ms": {"type": "number"}}},
           "annotations": {"readOnlyHint": read_only}})
}

fn result(v: Value) -> Result<CallToolResponse, ErrorData> {
    support::call_result(v)
}

impl ServerHandler for TestServer {
    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(&[ProtocolVersion::V_2025_11_25])
    }

    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        self.flags.lists.fetch_add(1, Ordering::SeqCst);
        if self.flags.broken_list.load(Ordering::SeqCst) {
            return Err(ErrorData::internal_error("the tool list is broken", None));
        }
        let mut tools = vec![
            tool("hello", true),
            tool("add_tool", false),
            tool("break_list", false),
            tool("slow", true),
            tool("fail", true),
            tool("links", true),
        ];
        if self.flags.extra.load(Ordering::SeqCst) {
            tools.push(tool("extra", true));
        }
        serde_json::from_value(json!({"tools": tools}))
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let text = |t: &str| json!({"content": [{"type": "text", "text": t}]});
        match request.name.as_ref() {
            "hello" => result(text("hello from rust")),
            "add_tool" => {
                self.flags.extra.store(true, Ordering::SeqCst);
                let before = self.flags.lists.load(Ordering::SeqCst);
                let _ = context.peer.notify_tool_list_changed().await;
                self.flags.wait_for_list_after(before).await;
                result(text("added"))
            }
            "break_list" => {
                self.flags.broken_list.store(true, Ordering::SeqCst);
                let before = self.flags.lists.load(Ordering::SeqCst);
                let _ = context.peer.notify_tool_list_changed().await;
                self.flags.wait_for_list_after(before).await;
                result(text("broken"))
            }
            "extra" => result(text("extra works")),
            "slow" => {
                let ms = request
                    .arguments
                    .as_ref()
                    .and_then(|a| a.get("ms"))
                    .and_then(Value::as_u64)
                    .unwrap_or(60_000);
                tokio::time::sleep(Duration::from_millis(ms)).await;
                result(text("slow done"))
            }
            "fail" => result(
                json!({"content": [{"type": "text", "text": "it went wrong"}], "isError": true}),
            ),
            "links" => result(json!({"content": [
                {"type": "resource_link", "uri": "file:///notes.md", "name": "notes", "description": "the notes"},
                {"type": "resource", "resource": {"uri": "file:///a.txt", "mimeType": "text/plain", "text": "inline text"}},
                {"type": "resource", "resource": {"uri": "file:///b.bin", "blob": "AAEC"}}
            ]})),
            other => Err(ErrorData::invalid_params(format!("no tool {other}"), None)),
        }
    }
}

/// The server on `port` (0: any); cancel the token to take it down with every connection.
async fn serve(port: u16, flags: Arc<Flags>) -> (u16, CancellationToken) {
    let ct = CancellationToken::new();
    let server = TestServer { flags };
    let service: StreamableHttpService<TestServer, LocalSessionManager> =
        StreamableHttpService::new(
            move || Ok(server.clone()),
            Arc::new(LocalSessionManager::default()),
            StreamableHttpServerConfig::default()
                .with_sse_keep_alive(Some(Duration::from_millis(200)))
                .with_cancellation_token(ct.child_token()),
        );
    let router = axum::Router::new().nest_service("/mcp", service);
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let stop = ct.clone();
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    // A crash, not a shutdown: the serving task and every open connection go at once.
    tokio::spawn(async move {
        stop.cancelled().await;
        task.abort();
    });
    (port, ct)
}

fn mcp_config(port: u16, extra: Value) -> Value {
    let mut cfg = json!({"url": format!("http://127.0.0.1:{port}/mcp")});
    if let (Some(c), Some(e)) = (cfg.as_object_mut(), extra.as_object()) {
        c.extend(e.clone());
    }
    json!({"mcpServers": {"rs": cfg}})
}

fn call(name: &str, args: Value) -> Value {
    json!({"name": format!("mcp__rs__{name}"), "arguments": args})
}

/// Runs the blocking `rookery` driver off the runtime that serves the MCP server.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f).await.expect("driver")
}

fn tool_names(v: &Value) -> Vec<String> {
    payload(v)["tools"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|t| t["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_changed_is_picked_up_and_a_failed_refresh_keeps_the_old_list() {
    let (port, _ct) = serve(0, Arc::default()).await;
    let lines = blocking(move || {
        let sb = Sandbox::new();
        let script = json!({"turns": [
            {"tool_calls": [call("add_tool", json!({}))]},
            {"tool_calls": [call("extra", json!({}))]},
            {"tool_calls": [call("break_list", json!({}))]},
            {"tool_calls": [call("extra", json!({}))]},
            {"text": "done"}
        ]});
        let run = sb.start(&script, &mcp_config(port, json!({})), &[]);
        let (code, lines) = run.finish();
        assert_eq!(code, 0, "{lines:#?}");
        lines
    })
    .await;
    let ready = of_kind(&lines, "tool_list_ready");
    assert_eq!(
        ready.len(),
        2,
        "announced at start and after list_changed: {ready:#?}"
    );
    assert!(!tool_names(ready[0]).contains(&"mcp__rs__extra".to_string()));
    assert!(tool_names(ready[1]).contains(&"mcp__rs__extra".to_string()));
    // The second announcement comes before the request that can use the new tool.
    let pos = |pred: &dyn Fn(&Value) -> bool| lines.iter().position(pred).unwrap_or(usize::MAX);
    let second_ready =
        pos(&|v| kind(v) == "tool_list_ready" && tool_names(v).len() > tool_names(ready[0]).len());
    let extra_call = pos(&|v| kind(v) == "tool_call" && payload(v)["tool_call_id"] == "call_1");
    assert!(second_ready < extra_call);
    let out = |id: &str| {
        lines
            .iter()
            .find(|v| kind(v) == "tool_call_output" && payload(v)["tool_call_id"] == id)
            .map(|v| payload(v)["output"].as_str().unwrap_or("").to_string())
            .unwrap_or_default()
    };
    assert_eq!(out("call_0"), "added");
    assert_eq!(out("call_1"), "extra works");
    assert_eq!(out("call_2"), "broken");
    // The refresh after break_list failed: the old list (with extra) stays, and works.
    assert_eq!(out("call_3"), "extra works");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn results_errors_links_and_timeout() {
    let (port, _ct) = serve(0, Arc::default()).await;
    let lines = blocking(move || {
        let sb = Sandbox::new();
        let script = json!({"turns": [
            {"tool_calls": [
                call("hello", json!({})),
                call("fail", json!({})),
                call("links", json!({})),
                call("slow", json!({"ms": 60000}))
            ]},
            {"text": "done"}
        ]});
        let run = sb.start(&script, &mcp_config(port, json!({"timeoutMs": 1000})), &[]);
        let (code, lines) = run.finish();
        assert_eq!(code, 0, "{lines:#?}");
        lines
    })
    .await;
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
        ("hello from rust".into(), "completed".into())
    );
    assert_eq!(out("call_1"), ("it went wrong".into(), "failed".into()));
    assert_eq!(
        out("call_2"),
        (
            "[resource: file:///notes.md] the notes\ninline text\n[resource: file:///b.bin (binary)]".into(),
            "completed".into()
        )
    );
    assert_eq!(
        out("call_3"),
        ("[tool timeout: exceeded 1000ms]".into(), "timeout".into())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_dying_mid_call_fails_the_call_at_once_and_comes_back() {
    let flags: Arc<Flags> = Arc::default();
    let (port, ct) = serve(0, flags.clone()).await;
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let (back_tx, back_rx) = tokio::sync::oneshot::channel::<()>();
    let driver = tokio::task::spawn_blocking(move || {
        let sb = Sandbox::new();
        let script = json!({"turns": [
            {"tool_calls": [call("slow", json!({"ms": 60000}))]},
            {"tool_calls": [call("hello", json!({}))]},
            {"text": "done"}
        ]});
        let mut run = sb.start(&script, &mcp_config(port, json!({})), &[]);
        run.wait_for(60, "the approval of call_0", |v| {
            kind(v) == "approval_decision" && payload(v)["tool_call_id"] == "call_0"
        });
        let _ = tx.send(());
        let killed = Instant::now();
        let (text, status) = run.output("call_0");
        let took = killed.elapsed();
        let _ = back_tx.send(());
        let second = run.output("call_1");
        let (code, lines) = run.finish();
        (text, status, took, second, code, lines)
    });
    let _ = tokio::task::spawn_blocking(move || rx.recv()).await;
    ct.cancel();
    let _ = back_rx.await;
    let (_port, _ct2) = serve(port, flags).await;
    let (text, status, took, second, code, lines) = driver.await.expect("driver");
    assert_eq!(status, "failed");
    assert!(
        text.contains("the connection was lost during the call"),
        "{text}"
    );
    assert!(took.as_secs() < 10, "the call took {took:?} to fail");
    eprintln!("call failed {} ms after the server died", took.as_millis());
    assert_eq!(second, ("hello from rust".into(), "completed".into()));
    assert_eq!(code, 0);
    assert!(
        of_kind(&lines, "mcp_reconnect")
            .iter()
            .any(|r| payload(r)["status"] == "completed" && payload(r)["server"] == "rs"),
        "{lines:#?}"
    );
}

#[test]
fn an_unreachable_server_leaves_the_session_running_with_a_note() {
    let sb = Sandbox::new();
    let port = free_port();
    let script = json!({"turns": [
        {"tool_calls": [{"name": "read_file", "arguments": {"file_path": "missing.txt"}}]},
        {"text": "done"}
    ]});
    let mcp = json!({"mcpServers": {
        "gone": {"url": format!("http://127.0.0.1:{port}/mcp"), "connectTimeoutMs": 3000},
        "nocmd": {"command": "/nonexistent/mcp-server"}
    }});
    let run = sb.start(&script, &mcp, &[]);
    let (code, lines) = run.finish();
    assert_eq!(code, 0, "{lines:#?}");
    let ends = of_kind(&lines, "mcp_connect_end");
    assert_eq!(ends.len(), 2);
    assert!(
        ends.iter()
            .all(|e| payload(e)["status"] != "completed" && payload(e)["error"].is_string()),
        "{ends:#?}"
    );
    assert_eq!(of_kind(&lines, "mcp_connect_begin").len(), 2);
    let notes: Vec<String> = lines
        .iter()
        .filter(|v| kind(v) == "text" && payload(v)["role"] == "user")
        .filter_map(|v| payload(v)["text"].as_str().map(str::to_string))
        .filter(|t| t.starts_with("[MCP server"))
        .collect();
    assert_eq!(notes.len(), 2, "{lines:#?}");
    assert!(
        notes
            .iter()
            .any(|n| n.contains("\"gone\"") && n.contains("not available")),
        "{notes:?}"
    );
    assert!(notes.iter().all(|n| !n.contains('\n')));
}

#[test]
fn invalid_mcp_configs_are_start_up_errors_naming_the_entry() {
    let sb = Sandbox::new();
    let script = sb.write("s.json", r#"{"turns": [{"text": "hi"}]}"#);
    let run = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_rookery"))
            .env("ROOKERY_NO_CONFIG", "1")
            .arg("run")
            .arg("--workspace")
            .arg(sb.path("ws"))
            .arg("--home")
            .arg(sb.path("home"))
            .arg("--script")
            .arg(&script)
            .args(args)
            .arg("go")
            .env("HOME", sb.path("userhome"))
            .stdin(std::process::Stdio::null())
            .output()
            .expect("run rookery");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let bad = sb.write("bad.json", r#"{"mcpServers": {"broken": {"args": ["x"]}}}"#);
    let (code, err) = run(&["--mcp-config", bad.to_str().unwrap_or_default()]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("\"broken\"") && err.contains("command"),
        "{err}"
    );
    let yaml = sb.write(
        "agent.yaml",
        "tools:\n  mcpServers:\n    - name: bad name\n      config: {command: x}\n",
    );
    let (code, err) = run(&["--config", yaml.to_str().unwrap_or_default()]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("\"bad name\""), "{err}");
    let (code, err) = run(&["--mcp-config", "/nonexistent/.mcp.json"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("/nonexistent/.mcp.json"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permission_auto_follows_read_only_hint_through_the_approval_mode() {
    let (port, _ct) = serve(0, Arc::default()).await;
    let lines = blocking(move || {
        let sb = Sandbox::new();
        let script = json!({"turns": [
            {"tool_calls": [call("hello", json!({})), call("add_tool", json!({}))]},
            {"text": "done"}
        ]});
        let run = sb.start(
            &script,
            &mcp_config(port, json!({})),
            &["--approve", "read-only"],
        );
        let (code, lines) = run.finish();
        assert_eq!(code, 0, "{lines:#?}");
        lines
    })
    .await;
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
    // hello has readOnlyHint: true (permission r); add_tool has not (rw: asked, and with no
    // terminal denied).
    assert_eq!(
        out("call_0"),
        ("hello from rust".into(), "completed".into())
    );
    assert_eq!(
        out("call_1"),
        ("Tool call denied by user.".into(), "aborted".into())
    );
}
