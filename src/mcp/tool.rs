//! `McpTool`: one tool of an MCP server as a Rookery [`Tool`]. A call borrows the live
//! connection from the server's actor (waiting while it reconnects), sends `tools/call`, and
//! while it waits pings the server: a call whose server died fails at once instead of hanging
//! (rmcp's streamable-HTTP client may never resolve it). The close-out owns the timeout text.
//! The request itself is `call.rs`'s (which also fails it when its answer was too large).
//!
//! It converts results through `convert`; it never reconnects by itself.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use ractor::ActorRef;
use rmcp::model::CallToolRequestParams;
use serde_json::{Map, Value};

use super::call::call_tool;
use super::client::{self, McpError};
use super::connection::{Lease, McpMsg, Unavailable};
use super::convert::convert;
use super::stdio::StdoutWatch;
use crate::tools::binding::{ToolService, not_served};
use crate::tools::{Tool, ToolContext, ToolResult};

/// How often a waiting call pings its server, and how long a ping may take.
const PING_EVERY: Duration = Duration::from_millis(400);
const PING_TIMEOUT_MS: u64 = 1200;

/// How long after `timeoutMs` the close-out's own timer fires, should a call not end by itself.
pub(crate) const TIMEOUT_BACKSTOP_MS: i64 = 2000;

/// One MCP tool call's runner: sends the call to its server's connection and converts the
/// result (with the server's timeout and the output cap).
pub(crate) struct McpTool {
    /// The server's name.
    pub server: Arc<str>,
    /// The tool's name on the server.
    pub tool: Arc<str>,
    /// The connection actor of the server.
    pub actor: ActorRef<McpMsg>,
    /// The session's model takes images.
    pub vision: bool,
    /// The server's `timeoutMs` (`<= 0`: none): past it the call ends `timeout`.
    pub timeout_ms: i64,
}

/// A call past the server's `timeoutMs`: `timeout`, with the close-out's timeout text.
fn timed_out(timeout_ms: i64) -> ToolResult {
    ToolResult {
        stop_reason: Some(crate::message::StopReason::Timeout),
        note: Some(format!("[tool timeout: exceeded {timeout_ms}ms]")),
        ..ToolResult::default()
    }
}

fn failed(ctx: &ToolContext, text: String) -> ToolResult {
    ctx.emit(text);
    ToolResult::failed()
}

/// Resolves when the server stops answering pings (a transport error, or two pings in a row
/// timing out). A stdio server that kept sending while its ping answer was late is alive: the
/// answer waits behind its other messages (e.g. a flood of notifications).
async fn liveness(lease: &Lease) -> McpError {
    let mut timeouts = 0;
    let read = || lease.stdout.as_ref().map(StdoutWatch::read);
    loop {
        tokio::time::sleep(PING_EVERY).await;
        let before = read();
        match client::ping(&lease.peer, PING_TIMEOUT_MS).await {
            Ok(()) => timeouts = 0,
            Err(McpError::Timeout(_)) if before.is_some() && read() != before => timeouts = 0,
            Err(McpError::Timeout(ms)) => {
                timeouts += 1;
                if timeouts >= 2 {
                    return McpError::Timeout(ms);
                }
            }
            Err(e) => return e,
        }
    }
}

impl Tool for McpTool {
    fn call(&self, ctx: ToolContext, args: Map<String, Value>) -> BoxFuture<'static, ToolResult> {
        let server = self.server.clone();
        let tool = self.tool.clone();
        let actor = self.actor.clone();
        let vision = self.vision;
        let timeout_ms = self.timeout_ms;
        Box::pin(async move {
            let limit = u64::try_from(timeout_ms).ok().filter(|ms| *ms > 0);
            let timer = async {
                match limit {
                    Some(ms) => tokio::time::sleep(std::time::Duration::from_millis(ms)).await,
                    None => std::future::pending().await,
                }
            };
            tokio::pin!(timer);
            let lease = tokio::select! {
                l = async { ractor::call!(actor, McpMsg::Lease) } => l,
                _ = ctx.cancel.cancelled() => return ToolResult::failed(),
                _ = &mut timer => return timed_out(timeout_ms),
            };
            let lease = match lease {
                Ok(Ok(l)) => l,
                Ok(Err(e)) => return failed(&ctx, e.to_string()),
                Err(_) => {
                    let stopped = Unavailable {
                        server: server.to_string(),
                        reason: "its connection has stopped".to_string(),
                    };
                    return failed(&ctx, stopped.to_string());
                }
            };
            let params = CallToolRequestParams::new(tool.to_string()).with_arguments(args);
            let outcome = tokio::select! {
                r = call_tool(&lease.peer, params, lease.stdout.as_ref()) => r,
                _ = lease.dead.cancelled() => Err(McpError::Closed),
                e = liveness(&lease) => {
                    let _ = actor.cast(McpMsg::Broken { generation: lease.generation });
                    Err(match e { McpError::Request(_) => McpError::Closed, other => other })
                }
                // Abort or the close-out's timeout: the close-out writes the output.
                _ = ctx.cancel.cancelled() => return ToolResult::failed(),
                // `timeoutMs` passed: the call ends `timeout` with the close-out's timeout text.
                _ = &mut timer => return timed_out(timeout_ms),
            };
            // A request that failed because the transport went away is a lost connection.
            let outcome = match outcome {
                Err(McpError::Request(_))
                    if lease.dead.is_cancelled() || lease.peer.is_transport_closed() =>
                {
                    Err(McpError::Closed)
                }
                other => other,
            };
            match outcome {
                Ok(result) => {
                    let json = serde_json::to_value(&result).unwrap_or(Value::Null);
                    let c = convert(&json, vision);
                    ctx.emit(c.text);
                    ToolResult {
                        stop_reason: Some(if c.is_error {
                            crate::message::StopReason::Failed
                        } else {
                            crate::message::StopReason::Completed
                        }),
                        images: c.images,
                        ..ToolResult::default()
                    }
                }
                Err(McpError::Closed) | Err(McpError::Timeout(_)) => {
                    let _ = actor.cast(McpMsg::Broken {
                        generation: lease.generation,
                    });
                    failed(
                        &ctx,
                        format!(
                            "MCP server \"{server}\": the connection was lost during the call (the server exited or stopped answering); reconnecting"
                        ),
                    )
                }
                Err(e) => failed(&ctx, format!("MCP server \"{server}\": {e}")),
            }
        })
    }
}

/// The session's service for one server's tools (`ServiceKind::Mcp`): maps a model-facing name
/// to the server's tool and calls it through [`McpTool`].
pub(crate) struct McpService {
    /// The server's name.
    pub server: Arc<str>,
    /// The connection actor; `None` until the set starts it (or when it could not start).
    pub actor: Option<ActorRef<McpMsg>>,
    /// The session's model takes images.
    pub vision: bool,
    /// (model-facing name, the server's name) of every registered tool.
    pub tools: Vec<(String, String)>,
    /// The server's `timeoutMs`.
    pub timeout_ms: i64,
}

impl ToolService for McpService {
    fn call(
        &self,
        tool: &str,
        ctx: ToolContext,
        args: Map<String, Value>,
    ) -> BoxFuture<'static, ToolResult> {
        let found = self.tools.iter().find(|(n, _)| n == tool);
        match (found, &self.actor) {
            (Some((_, server_tool)), Some(actor)) => McpTool {
                server: self.server.clone(),
                tool: Arc::from(server_tool.as_str()),
                actor: actor.clone(),
                vision: self.vision,
                timeout_ms: self.timeout_ms,
            }
            .call(ctx, args),
            _ => {
                let result = not_served(&ctx, tool);
                Box::pin(async move { result })
            }
        }
    }
}
