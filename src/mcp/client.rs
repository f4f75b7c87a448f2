//! Opening one MCP connection with rmcp: the stdio child process (its own process group, the
//! session's `ROOKERY_CMD` cookie, stderr to the log, stdout watched for lines over the limit
//! by `stdio.rs`) or a streamable-HTTP client, the `initialize` handshake and the first tool
//! list, all under `connectTimeoutMs`.
//!
//! A [`Live`] connection is a [`Peer`] to send requests on and two tokens: `dead` fires when
//! the transport ends, `stop` closes it. The running service sits in a watcher task; this module
//! does not retry or reconnect (that is the connection actor's job).

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{ClientRequest, Tool as McpToolDef};
use rmcp::service::{NotificationContext, RoleClient};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, Peer, ServiceExt};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::config::{McpServerConfig, McpTransport};
use super::stdio::{self, StdoutWatch};
use crate::process::tree;

/// How a connection attempt or a request failed (the text the trace and the model see).
#[derive(Debug, Clone, thiserror::Error)]
pub enum McpError {
    /// The server's command cannot be started.
    #[error("cannot start {command}: {reason}")]
    Spawn {
        /// The command as configured.
        command: String,
        /// The operating system's reason.
        reason: String,
    },
    /// The entry cannot be used as configured (the text says why).
    #[error("{0}")]
    Config(String),
    /// The transport or the `initialize` handshake failed.
    #[error("connect failed: {0}")]
    Connect(String),
    /// The connect or request did not finish in time (the limit, in milliseconds).
    #[error("timed out after {0} ms")]
    Timeout(u64),
    /// The server answered the request with an error, or the request failed.
    #[error("{0}")]
    Request(String),
    /// The connection closed before the answer.
    #[error("the connection closed")]
    Closed,
}

/// Called on `notifications/tools/list_changed`.
pub type ListChanged = Arc<dyn Fn() + Send + Sync>;

/// The client side: answers the server's requests with rmcp's defaults and reports
/// `tools/list_changed`.
#[derive(Clone)]
pub struct Handler {
    /// Called when the server reports `tools/list_changed`.
    pub on_list_changed: ListChanged,
}

impl ClientHandler for Handler {
    fn on_tool_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        (self.on_list_changed)();
        std::future::ready(())
    }
}

/// An open connection.
pub struct Live {
    /// The handle requests are sent through.
    pub peer: Peer<RoleClient>,
    /// Fires when the transport ended (the child exited, the stream broke).
    pub dead: CancellationToken,
    /// Cancel to close the connection (the watcher then reaps the child).
    pub stop: CancellationToken,
    /// The `ROOKERY_CMD` cookie of a stdio server's processes.
    pub cookie: Option<String>,
    /// The watch of a stdio server's stdout (`stdio.rs`).
    pub stdout: Option<StdoutWatch>,
}

impl Live {
    /// Closes the connection and sweeps a stdio server's processes (off this thread).
    pub fn close(&self) {
        self.stop.cancel();
        if let Some(cookie) = &self.cookie {
            tree::sweep_later(
                cookie.clone(),
                Duration::from_millis(500),
                false,
                Box::new(|| {}),
            );
        }
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        self.close();
    }
}

/// Connects, handshakes and lists the tools within the server's `connectTimeoutMs`. A stdio
/// server starts confined by `sandbox` unless its entry says `"sandbox": "off"`.
pub async fn connect(
    cfg: &McpServerConfig,
    handler: Handler,
    workspace: &Path,
    sandbox: Option<Arc<crate::sandbox::Confinement>>,
) -> Result<(Live, Vec<Value>), McpError> {
    let limit = cfg.connect_timeout_ms;
    let stop = CancellationToken::new();
    let dead = CancellationToken::new();
    let (cookie, stdio, attempt) = match &cfg.transport {
        McpTransport::Stdio {
            command,
            args,
            env,
            cwd,
        } => {
            let cookie = tree::new_cookie();
            crate::process::guard::ensure();
            let mut cmd = tokio::process::Command::new(command);
            cmd.args(args)
                .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
                .env(tree::COOKIE_VAR, &cookie)
                .current_dir(match cwd {
                    Some(c) => crate::tools::resolve_path(workspace, &c.to_string_lossy()),
                    None => workspace.to_path_buf(),
                })
                .process_group(0)
                .kill_on_drop(true);
            if let Some(conf) = sandbox.filter(|_| !cfg.sandbox_off) {
                // SAFETY: `apply_in_child` makes only raw system calls on data built before
                // the fork (async-signal-safe, no allocation), as `pre_exec` requires.
                unsafe {
                    cmd.pre_exec(move || conf.apply_in_child());
                }
            }
            cmd.stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped());
            let spawn_error = |reason: String| McpError::Spawn {
                command: command.clone(),
                reason,
            };
            let mut child = cmd.spawn().map_err(|e| spawn_error(e.to_string()))?;
            let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
                return Err(spawn_error("its stdin or stdout is not a pipe".into()));
            };
            if let Some(stderr) = child.stderr.take() {
                forward_stderr(cfg.name.clone(), stderr);
            }
            let watch = StdoutWatch::new();
            let fut = handler.serve((stdio::Watched::new(stdout, watch.clone()), stdin));
            (Some(cookie), Some((child, watch)), serve(fut, limit).await)
        }
        McpTransport::Http { url, headers } => {
            let mut map = HashMap::new();
            for (k, v) in headers {
                let name = reqwest::header::HeaderName::try_from(k.as_str())
                    .map_err(|e| McpError::Config(format!("header {k:?}: {e}")))?;
                let value = reqwest::header::HeaderValue::try_from(v.as_str())
                    .map_err(|e| McpError::Config(format!("header {k:?}: {e}")))?;
                map.insert(name, value);
            }
            let config = StreamableHttpClientTransportConfig::with_uri(url.as_str())
                .custom_headers(map)
                .control_request_timeout(Duration::from_millis(limit));
            let transport = StreamableHttpClientTransport::from_config(config);
            (None, None, serve(handler.serve(transport), limit).await)
        }
    };
    let cleanup = |cookie: &Option<String>| {
        if let Some(c) = cookie {
            tree::sweep_later(
                c.clone(),
                Duration::from_millis(500),
                false,
                Box::new(|| {}),
            );
        }
    };
    let service = match attempt {
        Ok(s) => s,
        Err(e) => {
            // Dropping the child kills it; the sweep takes what it started.
            cleanup(&cookie);
            return Err(e);
        }
    };
    let (child, watch) = stdio.unzip();
    let peer = service.peer().clone();
    let live = Live {
        peer,
        dead: dead.clone(),
        stop: stop.clone(),
        cookie,
        stdout: watch,
    };
    // The watcher owns the service: it closes it on `stop` and reports its end on `dead`.
    tokio::spawn(async move {
        let mut service = service;
        let closed = tokio::select! {
            _ = stop.cancelled() => false,
            _ = wait_closed(&service) => true,
        };
        if !closed {
            let _ = service.close_with_timeout(Duration::from_secs(2)).await;
        }
        dead.cancel();
        drop(service);
        if let Some(child) = child {
            reap(child).await;
        }
    });
    let tools = match with_timeout(limit, live.peer.list_all_tools()).await {
        Ok(tools) => tools,
        Err(e) => return Err(e),
    };
    Ok((live, tools.iter().map(tool_json).collect()))
}

/// Waits a little for a stdio server whose stdin was closed to exit, then kills it.
async fn reap(mut child: tokio::process::Child) {
    if tokio::time::timeout(Duration::from_secs(2), child.wait())
        .await
        .is_err()
    {
        let _ = child.start_kill();
        let _ = child.wait().await;
    }
}

async fn serve<F, S>(fut: F, limit: u64) -> Result<S, McpError>
where
    F: Future<Output = Result<S, rmcp::service::ClientInitializeError>>,
{
    match tokio::time::timeout(Duration::from_millis(limit), fut).await {
        Ok(Ok(s)) => Ok(s),
        Ok(Err(e)) => Err(McpError::Connect(e.to_string())),
        Err(_) => Err(McpError::Timeout(limit)),
    }
}

/// Resolves when the service's transport has closed (polled: rmcp reports it as a flag).
async fn wait_closed<S>(service: &rmcp::service::RunningService<RoleClient, S>)
where
    S: rmcp::Service<RoleClient>,
{
    loop {
        if service.is_closed() || service.peer().is_transport_closed() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Runs a request with its own timeout (rmcp's streamable-HTTP client may never resolve one).
pub async fn with_timeout<T>(
    ms: u64,
    fut: impl Future<Output = Result<T, rmcp::ServiceError>>,
) -> Result<T, McpError> {
    match tokio::time::timeout(Duration::from_millis(ms), fut).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(rmcp::ServiceError::TransportClosed | rmcp::ServiceError::TransportSend(_))) => {
            Err(McpError::Closed)
        }
        Ok(Err(e)) => Err(McpError::Request(e.to_string())),
        Err(_) => Err(McpError::Timeout(ms)),
    }
}

/// Pings the server, within `ms`.
pub async fn ping(peer: &Peer<RoleClient>, ms: u64) -> Result<(), McpError> {
    with_timeout(
        ms,
        peer.send_request(ClientRequest::PingRequest(Default::default())),
    )
    .await
    .map(|_| ())
}

/// A server's tool definition as JSON (`name`, `description`, `inputSchema`, `annotations`).
pub fn tool_json(tool: &McpToolDef) -> Value {
    serde_json::to_value(tool).unwrap_or(Value::Null)
}

fn forward_stderr(server: String, stderr: tokio::process::ChildStderr) {
    use tokio::io::AsyncBufReadExt;
    tokio::spawn(async move {
        let mut lines = tokio::io::BufReader::new(stderr).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            tracing::debug!(server = %server, "mcp server stderr: {line}");
        }
    });
}
