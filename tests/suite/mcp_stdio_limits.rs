//! A stdio MCP server pushed to its limits, through the real `rookery run` binary: 200,000
//! `notifications/tools/list_changed` in a row (coalesced into a few `tools/list` requests,
//! with the growth of the rookery process's peak RSS read from /proc), and a result over the stdio
//! transport's 16 MiB line limit (the call fails at once naming the limit, instead of waiting
//! its whole `timeoutMs`). The server is rmcp's server side in this process, reached over
//! loopback TCP through a `bash` relay that is the configured stdio command, so rookery speaks
//! to a real child process over real pipes.

use crate::common::mcp as support;

use std::borrow::Cow;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ListToolsResult, PaginatedRequestParams,
    ProtocolVersion, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Value, json};
use support::*;

/// Notifications of the storm.
const STORM: usize = 200_000;

#[derive(Default)]
struct Flags {
    /// `tools/list` requests served.
    lists: AtomicUsize,
    /// Told when `hold` starts; `hold` ends when `release` is notified.
    held: Mutex<Option<std::sync::mpsc::Sender<()>>>,
    release: tokio::sync::Notify,
}

#[derive(Clone)]
struct LimitServer {
    flags: Arc<Flags>,
}

fn text(t: &str) -> Result<CallToolResponse, ErrorData> {
    call_result(json!({"content": [{"type": "text", "text": t}]}))
}

impl ServerHandler for LimitServer {
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
        let tools: Vec<Value> = ["storm", "huge", "hold", "hello"]
            .iter()
            .map(|n| json!({"name": n, "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": true}}))
            .collect();
        serde_json::from_value(json!({ "tools": tools }))
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        match request.name.as_ref() {
            "storm" => {
                for _ in 0..STORM {
                    if context.peer.notify_tool_list_changed().await.is_err() {
                        return Err(ErrorData::internal_error("the client went away", None));
                    }
                }
                text("stormed")
            }
            // 17 MiB of text: one JSON-RPC line over the 16 MiB limit.
            "huge" => text(&"x".repeat(17 * 1024 * 1024)),
            "hold" => {
                if let Some(tx) = self.flags.held.lock().unwrap().take() {
                    let _ = tx.send(());
                }
                let _ =
                    tokio::time::timeout(Duration::from_secs(120), self.flags.release.notified())
                        .await;
                text("held")
            }
            "hello" => text("hello"),
            other => Err(ErrorData::invalid_params(format!("no tool {other}"), None)),
        }
    }
}

/// Serves every connection to a loopback port; returns the port.
async fn serve(flags: Arc<Flags>) -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("addr").port();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let server = LimitServer {
                flags: flags.clone(),
            };
            tokio::spawn(async move {
                if let Ok(service) = server.serve(stream).await {
                    let _ = service.waiting().await;
                }
            });
        }
    });
    port
}

/// The server as a stdio command: `bash` relaying its stdin and stdout to the loopback port.
fn mcp_config(port: u16, timeout_ms: u64) -> Value {
    let relay = format!("exec 3<>/dev/tcp/127.0.0.1/{port}; cat <&3 & exec cat >&3");
    json!({"mcpServers": {"rs": {"command": "bash", "args": ["-c", relay], "timeoutMs": timeout_ms}}})
}

fn call(name: &str) -> Value {
    json!({"name": format!("mcp__rs__{name}"), "arguments": {}})
}

/// Peak resident memory of `pid` in KiB (`VmHWM` of /proc/<pid>/status).
fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_changed_storm_costs_a_few_tools_list_and_little_memory() {
    let flags: Arc<Flags> = Arc::default();
    let (held_tx, held_rx) = std::sync::mpsc::channel();
    *flags.held.lock().unwrap() = Some(held_tx);
    let port = serve(flags.clone()).await;
    let release = flags.clone();
    let (storm, peak, code, lines) = tokio::task::spawn_blocking(move || {
        let sb = Sandbox::new();
        let script = json!({"turns": [
            {"tool_calls": [call("storm")]},
            {"tool_calls": [call("hold")]},
            {"text": "done"}
        ]});
        let mut run = sb.start(&script, &mcp_config(port, 600_000), &[]);
        run.wait_for(120, "the approval of the storm", |v| {
            kind(v) == "approval_decision" && payload(v)["tool_call_id"] == "call_0"
        });
        // The peak before the storm: what the binary, the runtime and the connection cost,
        // which grows with the build (its dependencies), not with the storm.
        let before = peak_rss_kib(run.child.id());
        let started = Instant::now();
        run.wait_for(300, "the output of the storm", |v| {
            kind(v) == "tool_call_output" && payload(v)["tool_call_id"] == "call_0"
        });
        let storm = (run.output("call_0"), started.elapsed());
        // The next turn's call runs: the storm is behind us; read the peak while rookery lives.
        held_rx
            .recv_timeout(Duration::from_secs(300))
            .expect("the hold call never reached the server");
        let peak = (before, peak_rss_kib(run.child.id()));
        release.release.notify_one();
        let (code, lines) = run.finish();
        (storm, peak, code, lines)
    })
    .await
    .expect("driver");
    assert_eq!(code, 0, "{lines:#?}");
    let (storm, took) = storm;
    assert_eq!(storm.0, "stormed", "{storm:?}");
    let lists = flags.lists.load(Ordering::SeqCst);
    let (before, peak) = peak;
    eprintln!(
        "storm of {STORM} in {took:?}: {lists} tools/list requests, rookery peak RSS {before} KiB \
         before it, {peak} KiB after"
    );
    // One at connect, then at most one in flight and one pending, one every 500 ms at most,
    // while the storm lasts (not one per notification).
    let bound = 3 + 2 * took.as_secs() as usize + 2;
    assert!(
        lists <= bound,
        "{lists} tools/list requests for a storm of {took:?}"
    );
    // The storm's 200,000 notifications (about 20 MB of JSON lines) are read and dropped one by
    // one: the peak grows by far less than they weigh.
    assert!(
        peak.saturating_sub(before) < 8 * 1024,
        "rookery's peak RSS grew from {before} KiB to {peak} KiB during the storm"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_over_the_line_limit_fails_the_call_at_once() {
    let port = serve(Arc::default()).await;
    let (huge, took, hello, code, lines) = tokio::task::spawn_blocking(move || {
        let sb = Sandbox::new();
        let script = json!({"turns": [
            {"tool_calls": [call("huge")]},
            {"tool_calls": [call("hello")]},
            {"text": "done"}
        ]});
        let mut run = sb.start(&script, &mcp_config(port, 30_000), &[]);
        run.wait_for(120, "the approval of call_0", |v| {
            kind(v) == "approval_decision" && payload(v)["tool_call_id"] == "call_0"
        });
        let started = Instant::now();
        let huge = run.output("call_0");
        let took = started.elapsed();
        let hello = run.output("call_1");
        let (code, lines) = run.finish();
        (huge, took, hello, code, lines)
    })
    .await
    .expect("driver");
    assert_eq!(code, 0, "{lines:#?}");
    eprintln!("the oversized result failed its call after {took:?}");
    assert_eq!(huge.1, "failed", "{huge:?}");
    assert!(
        huge.0
            .contains("16 MiB message limit of the stdio transport"),
        "{huge:?}"
    );
    // Far from the 30 s timeoutMs (the answer itself takes a moment to write and read).
    assert!(took < Duration::from_secs(15), "{took:?}");
    // The connection is still good.
    assert_eq!(hello, ("hello".to_string(), "completed".to_string()));
}
