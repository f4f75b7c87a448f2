//! `McpConnection`: the actor that owns one MCP server connection of a session. It connects on
//! the first `Sync` or `Lease` (traced `mcp_connect_begin` / `mcp_connect_end`), lends the live
//! peer to tool calls, refreshes the tool list on `notifications/tools/list_changed`, and when
//! the transport dies reconnects with backoff (1 s doubling, 5 tries, each traced as
//! `mcp_reconnect`). Calls asking for a connection while it (re)connects wait for it.
//!
//! The handler never awaits I/O: connects and list refreshes run in spawned tasks that cast
//! their results back tagged with a generation, so stale results are dropped. Refreshes are
//! coalesced: at most one `tools/list` is in flight and one more is pending, however many
//! `list_changed` notifications arrive meanwhile, and one starts at most every
//! [`REFRESH_SPACING`] (a storm of notifications costs a few requests). Dropping the
//! state closes the connection and sweeps a stdio server's process tree.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use rmcp::Peer;
use rmcp::service::RoleClient;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::client::{self, Handler, Live, McpError};
use super::config::McpServerConfig;
use super::stdio::StdoutWatch;
use crate::message::{EventPayload, OmniMessage, StopReason};

/// Reconnect tries after the transport died.
pub const RECONNECT_TRIES: u32 = 5;
/// Backoff before reconnect try 1 (doubling after each).
pub const RECONNECT_BASE_MS: u64 = 1000;

/// Least time between the starts of two `tools/list` refreshes.
pub const REFRESH_SPACING: Duration = Duration::from_millis(500);

/// Where the connection's trace records go (the session records and streams them).
pub type McpSink = Arc<dyn Fn(OmniMessage) + Send + Sync>;

/// The server's tool list as the session should see it.
#[derive(Debug, Clone)]
pub struct SyncReply {
    /// The server's name.
    pub server: String,
    /// The server's tools (JSON `Tool` objects), filtered by enabled/disabled_tools.
    pub tools: Vec<Value>,
    /// Bumped on every new list.
    pub version: u64,
    /// Why the server has no connection (a failed connect, reconnects given up).
    pub error: Option<String>,
}

/// A connection lent to one call.
#[derive(Clone)]
pub struct Lease {
    /// The handle the call's request goes through.
    pub peer: Peer<RoleClient>,
    /// Fires when this connection's transport ends.
    pub dead: CancellationToken,
    /// The connection's generation (a `Broken` report names it, so a stale one is ignored).
    pub generation: u64,
    /// The watch of a stdio server's stdout.
    pub stdout: Option<StdoutWatch>,
}

/// Why a call gets no connection: the connect failed, reconnects gave up, or the session ended
/// (`reason`; the failure was already recorded, as text, when it happened).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("MCP server \"{server}\" is unavailable: {reason}")]
pub struct Unavailable {
    /// The server's name.
    pub server: String,
    /// Why (the text already recorded).
    pub reason: String,
}

/// Messages of an [`McpConnection`]: requests of the session's calls, and the results of its
/// own connects, refreshes and timers (each tagged with the generation it belongs to).
pub enum McpMsg {
    /// Connects if never tried; replies with the current list once no connect or refresh is
    /// pending.
    Sync(RpcReplyPort<SyncReply>),
    /// A live connection for one call (waits while connecting or reconnecting).
    Lease(RpcReplyPort<Result<Lease, Unavailable>>),
    /// A call saw the connection die (e.g. an HTTP server that stopped answering pings).
    Broken {
        /// The generation of the connection the call used.
        generation: u64,
    },
    /// A connect finished.
    Connected {
        /// The generation the connect started.
        generation: u64,
        /// The reconnect try it was, or `None` for the first connect.
        reconnect: Option<u32>,
        /// How long it took, in milliseconds.
        ms: u64,
        /// The connection and its tool list, or why it failed.
        result: Result<Box<(Live, Vec<Value>)>, McpError>,
    },
    /// The transport of a connection ended.
    Dead {
        /// The connection's generation.
        generation: u64,
    },
    /// The server reported `tools/list_changed`.
    ListChanged {
        /// The connection's generation.
        generation: u64,
    },
    /// A `tools/list` refresh finished.
    Refreshed {
        /// The connection's generation.
        generation: u64,
        /// The new list, or why the fetch failed.
        result: Result<Vec<Value>, McpError>,
    },
    /// The backoff before a reconnect is over: try again.
    Reconnect {
        /// The 1-based reconnect try.
        attempt: u32,
    },
    /// The spacing after the last refresh is over: fetch the list.
    RefreshNow {
        /// The connection's generation.
        generation: u64,
    },
}

enum Phase {
    Idle,
    Connecting,
    Up(Live),
    Reconnecting,
    Failed(String),
}

/// The actor owning one server's connection for one session.
pub struct McpConnection;

/// What an [`McpConnection`] starts with.
pub struct McpArgs {
    /// The server entry.
    pub config: Arc<McpServerConfig>,
    /// The session's workspace (a stdio server's default working directory).
    pub workspace: PathBuf,
    /// The session's confinement (a stdio server starts under it unless its entry says
    /// `"sandbox": "off"`).
    pub sandbox: Option<Arc<crate::sandbox::Confinement>>,
    /// Where the connection's trace events (`mcp_connect_*`, `mcp_reconnect`) go.
    pub sink: McpSink,
}

/// The state of an [`McpConnection`]: its phase, generation and pending requests.
pub struct McpState {
    cfg: Arc<McpServerConfig>,
    workspace: PathBuf,
    sandbox: Option<Arc<crate::sandbox::Confinement>>,
    sink: McpSink,
    phase: Phase,
    generation: u64,
    tools: Vec<Value>,
    version: u64,
    /// A `tools/list` refresh is in flight (or waits for its spacing).
    refreshing: bool,
    /// When the last refresh started.
    last_refresh: Option<Instant>,
    /// A `list_changed` arrived while one was in flight: refresh once more after it.
    refresh_pending: bool,
    /// Set by the connection's handler when it sends `ListChanged`, cleared when that is
    /// handled: a burst of notifications puts one message in the mailbox, not one each.
    list_changed: Arc<AtomicBool>,
    sync_waiters: Vec<RpcReplyPort<SyncReply>>,
    lease_waiters: Vec<RpcReplyPort<Result<Lease, Unavailable>>>,
}

impl McpState {
    fn reply(&self) -> SyncReply {
        SyncReply {
            server: self.cfg.name.clone(),
            tools: self.tools.clone(),
            version: self.version,
            error: match &self.phase {
                Phase::Failed(e) => Some(e.clone()),
                _ => None,
            },
        }
    }

    fn settle_syncs(&mut self) {
        let reply = self.reply();
        for w in self.sync_waiters.drain(..) {
            let _ = w.send(reply.clone());
        }
    }

    fn lease(&self) -> Option<Lease> {
        match &self.phase {
            Phase::Up(live) => Some(Lease {
                peer: live.peer.clone(),
                dead: live.dead.clone(),
                generation: self.generation,
                stdout: live.stdout.clone(),
            }),
            _ => None,
        }
    }

    fn settle_leases(&mut self) {
        let outcome = match (&self.phase, self.lease()) {
            (_, Some(l)) => Ok(l),
            (Phase::Failed(e), None) => Err(e.clone()),
            _ => return,
        };
        let outcome = outcome.map_err(|e| self.unavailable(&e));
        for w in self.lease_waiters.drain(..) {
            let _ = w.send(outcome.clone());
        }
    }

    fn unavailable(&self, why: &str) -> Unavailable {
        Unavailable {
            server: self.cfg.name.clone(),
            reason: why.to_string(),
        }
    }

    fn offered(&self, tools: Vec<Value>) -> Vec<Value> {
        tools
            .into_iter()
            .filter(|t| {
                t.get("name")
                    .and_then(Value::as_str)
                    .is_some_and(|n| self.cfg.offers(n))
            })
            .collect()
    }

    fn record(&self, payload: EventPayload) {
        (self.sink)(OmniMessage::event(payload));
    }
}

fn connect_task(myself: &ActorRef<McpMsg>, state: &mut McpState, reconnect: Option<u32>) {
    state.generation += 1;
    let generation = state.generation;
    state.phase = match reconnect {
        None => Phase::Connecting,
        Some(_) => Phase::Reconnecting,
    };
    if reconnect.is_none() {
        state.record(EventPayload::McpConnectBegin {
            servers: Vec::new(),
            server: Some(state.cfg.name.clone()),
        });
    }
    let me = myself.clone();
    let flag = Arc::new(AtomicBool::new(false));
    state.list_changed = flag.clone();
    let on_list_changed: client::ListChanged = Arc::new(move || {
        if !flag.swap(true, Ordering::AcqRel) {
            let _ = me.cast(McpMsg::ListChanged { generation });
        }
    });
    let cfg = state.cfg.clone();
    let workspace = state.workspace.clone();
    let sandbox = state.sandbox.clone();
    let me = myself.clone();
    tokio::spawn(async move {
        let started = Instant::now();
        let result = client::connect(&cfg, Handler { on_list_changed }, &workspace, sandbox)
            .await
            .map(Box::new);
        let _ = me.cast(McpMsg::Connected {
            generation,
            reconnect,
            ms: started.elapsed().as_millis() as u64,
            result,
        });
    });
}

/// Starts one `tools/list` refresh of the live connection (the caller checked none is in
/// flight): now, or once [`REFRESH_SPACING`] has passed since the last one started. Its result
/// comes back as `Refreshed`.
fn refresh(myself: &ActorRef<McpMsg>, state: &mut McpState) {
    if state.lease().is_none() {
        return;
    }
    state.refreshing = true;
    let wait = state.last_refresh.map_or(Duration::ZERO, |t| {
        REFRESH_SPACING.saturating_sub(t.elapsed())
    });
    if wait.is_zero() {
        fetch(myself, state);
    } else {
        let generation = state.generation;
        myself.send_after(wait, move || McpMsg::RefreshNow { generation });
    }
}

fn fetch(myself: &ActorRef<McpMsg>, state: &mut McpState) {
    let Some(lease) = state.lease() else {
        state.refreshing = false;
        return;
    };
    state.last_refresh = Some(Instant::now());
    let generation = state.generation;
    let limit = state.cfg.connect_timeout_ms;
    let me = myself.clone();
    tokio::spawn(async move {
        let result = client::with_timeout(limit, lease.peer.list_all_tools())
            .await
            .map(|tools| tools.iter().map(client::tool_json).collect());
        let _ = me.cast(McpMsg::Refreshed { generation, result });
    });
}

fn backoff(attempt: u32) -> Duration {
    Duration::from_millis(RECONNECT_BASE_MS << attempt.saturating_sub(1).min(10))
}

impl Actor for McpConnection {
    type Msg = McpMsg;
    type State = McpState;
    type Arguments = McpArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<McpMsg>,
        args: McpArgs,
    ) -> Result<McpState, ActorProcessingErr> {
        Ok(McpState {
            cfg: args.config,
            workspace: args.workspace,
            sandbox: args.sandbox,
            sink: args.sink,
            phase: Phase::Idle,
            generation: 0,
            tools: Vec::new(),
            version: 0,
            refreshing: false,
            last_refresh: None,
            refresh_pending: false,
            list_changed: Arc::default(),
            sync_waiters: Vec::new(),
            lease_waiters: Vec::new(),
        })
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<McpMsg>,
        state: &mut McpState,
    ) -> Result<(), ActorProcessingErr> {
        // Dropping the live connection closes it and sweeps its processes.
        state.phase = Phase::Failed("the session ended".into());
        state.settle_leases();
        state.settle_syncs();
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<McpMsg>,
        message: McpMsg,
        state: &mut McpState,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            McpMsg::Sync(reply) => match &state.phase {
                Phase::Idle => {
                    state.sync_waiters.push(reply);
                    connect_task(&myself, state, None);
                }
                Phase::Connecting => state.sync_waiters.push(reply),
                Phase::Up(_) if state.refreshing => state.sync_waiters.push(reply),
                _ => {
                    let _ = reply.send(state.reply());
                }
            },
            McpMsg::Lease(reply) => match (&state.phase, state.lease()) {
                (_, Some(l)) => {
                    let _ = reply.send(Ok(l));
                }
                (Phase::Failed(e), _) => {
                    let _ = reply.send(Err(state.unavailable(e)));
                }
                (Phase::Idle, _) => {
                    state.lease_waiters.push(reply);
                    connect_task(&myself, state, None);
                }
                _ => state.lease_waiters.push(reply),
            },
            McpMsg::Connected {
                generation,
                reconnect,
                ms,
                result,
            } => {
                if generation != state.generation {
                    return Ok(());
                }
                let server = state.cfg.name.clone();
                match result {
                    Ok(boxed) => {
                        let (live, tools) = *boxed;
                        let dead = live.dead.clone();
                        let me = myself.clone();
                        tokio::spawn(async move {
                            dead.cancelled().await;
                            let _ = me.cast(McpMsg::Dead { generation });
                        });
                        state.tools = state.offered(tools);
                        state.version += 1;
                        state.phase = Phase::Up(live);
                        match reconnect {
                            None => state.record(EventPayload::McpConnectEnd {
                                status: StopReason::Completed,
                                results: Vec::new(),
                                server: Some(server),
                                tools: Some(state.tools.len() as u64),
                                ms: Some(ms),
                                error: None,
                            }),
                            Some(attempt) => state.record(EventPayload::McpReconnect {
                                server,
                                attempt,
                                status: StopReason::Completed,
                                error: None,
                            }),
                        }
                        tracing::info!(server = %state.cfg.name, tools = state.tools.len(), ms, "MCP server connected");
                    }
                    Err(e) => {
                        let error = e.to_string();
                        tracing::warn!(server = %state.cfg.name, "MCP connect failed: {error}");
                        let status = if matches!(e, McpError::Timeout(_)) {
                            StopReason::Timeout
                        } else {
                            StopReason::Failed
                        };
                        match reconnect {
                            None => {
                                state.record(EventPayload::McpConnectEnd {
                                    status,
                                    results: Vec::new(),
                                    server: Some(server),
                                    tools: Some(0),
                                    ms: Some(ms),
                                    error: Some(error.clone()),
                                });
                                state.phase = Phase::Failed(error);
                            }
                            Some(attempt) => {
                                state.record(EventPayload::McpReconnect {
                                    server,
                                    attempt,
                                    status,
                                    error: Some(error.clone()),
                                });
                                if attempt < RECONNECT_TRIES {
                                    myself.send_after(backoff(attempt + 1), move || {
                                        McpMsg::Reconnect {
                                            attempt: attempt + 1,
                                        }
                                    });
                                } else {
                                    state.phase = Phase::Failed(format!(
                                        "reconnecting failed {RECONNECT_TRIES} times (last: {error})"
                                    ));
                                }
                            }
                        }
                    }
                }
                state.settle_leases();
                state.settle_syncs();
            }
            McpMsg::Dead { generation } | McpMsg::Broken { generation } => {
                if generation != state.generation || !matches!(state.phase, Phase::Up(_)) {
                    return Ok(());
                }
                tracing::warn!(server = %state.cfg.name, "MCP connection lost; reconnecting");
                // Dropping the live connection closes it and sweeps the old processes.
                state.phase = Phase::Reconnecting;
                state.refreshing = false;
                state.refresh_pending = false;
                state.generation += 1;
                state.settle_syncs();
                myself.send_after(backoff(1), || McpMsg::Reconnect { attempt: 1 });
            }
            McpMsg::Reconnect { attempt } => {
                if matches!(state.phase, Phase::Reconnecting) {
                    connect_task(&myself, state, Some(attempt));
                }
            }
            McpMsg::ListChanged { generation } => {
                if generation != state.generation {
                    return Ok(());
                }
                // A notification after this point sends a new message; those before it are
                // covered by the refresh started or pending below.
                state.list_changed.store(false, Ordering::Release);
                if state.refreshing {
                    state.refresh_pending = true;
                    return Ok(());
                }
                refresh(&myself, state);
            }
            McpMsg::RefreshNow { generation } => {
                if generation == state.generation && state.refreshing {
                    fetch(&myself, state);
                }
            }
            McpMsg::Refreshed { generation, result } => {
                if generation != state.generation {
                    return Ok(());
                }
                state.refreshing = false;
                match result {
                    Ok(tools) => {
                        state.tools = state.offered(tools);
                        state.version += 1;
                    }
                    Err(e) => tracing::warn!(
                        server = %state.cfg.name,
                        "refreshing the MCP tool list failed ({e}); keeping the old list"
                    ),
                }
                state.settle_syncs();
                if std::mem::take(&mut state.refresh_pending) {
                    refresh(&myself, state);
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_from_one_second() {
        let ladder: Vec<u64> = (1..=5).map(|n| backoff(n).as_millis() as u64).collect();
        assert_eq!(ladder, vec![1000, 2000, 4000, 8000, 16000]);
    }
}
