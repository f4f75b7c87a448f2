//! The stand-in for MCP connections in a build without the `mcp` feature: the same names the
//! session uses ([`McpSet`], [`service`], [`connection::SyncReply`]), with no client behind them.
//!
//! A config file naming servers is refused when it is read (`config::from_servers_list`,
//! `config::from_file`). A library user who fills `AgentConfig::mcp_servers` by hand still gets a
//! session that says so: every server is reported unavailable, once, to the model and in the
//! log. Nothing here connects, spawns or registers a tool.

use std::sync::Arc;

use ractor::ActorCell;

use super::config::McpServerConfig;
use super::{Applied, config};
use crate::tools::ToolRegistry;
use crate::tools::binding::{ToolService, not_served};

/// The session's side of the connection types, reduced to what it passes along.
pub mod connection {
    use std::sync::Arc;

    use crate::message::OmniMessage;

    /// Where a connection's trace records would go (never called without the `mcp` feature).
    pub type McpSink = Arc<dyn Fn(OmniMessage) + Send + Sync>;

    /// A server's answer to a sync: always "unavailable" in this build.
    #[derive(Debug, Clone)]
    pub struct SyncReply {
        /// The server's name.
        pub server: String,
        /// Why the server has no connection.
        pub error: Option<String>,
    }
}

use connection::{McpSink, SyncReply};

/// The configured servers of a session in a build that cannot reach them.
pub struct McpSet {
    /// (server name, told the model already).
    servers: Vec<(String, bool)>,
}

impl McpSet {
    /// `None` when no server is configured; otherwise a set whose servers are all unavailable.
    pub fn new(
        configs: &[McpServerConfig],
        _vision: bool,
        _sandbox: Option<Arc<crate::sandbox::Confinement>>,
    ) -> Option<Self> {
        if configs.is_empty() {
            return None;
        }
        let names: Vec<String> = configs.iter().map(|c| c.name.clone()).collect();
        tracing::error!(
            servers = %names.join(", "),
            "{}",
            config::NO_MCP_SUPPORT
        );
        Some(McpSet {
            servers: names.into_iter().map(|n| (n, false)).collect(),
        })
    }

    /// Nothing to start.
    pub async fn start(
        &mut self,
        _workspace: &std::path::Path,
        _sink: McpSink,
        _supervisor: ActorCell,
    ) {
    }

    /// No actor belongs to this set.
    pub fn owns(&self, _id: ractor::ActorId) -> bool {
        false
    }

    /// Every server, unavailable.
    pub fn sync_all(&self) -> impl Future<Output = Vec<SyncReply>> + Send + 'static {
        let replies: Vec<SyncReply> = self
            .servers
            .iter()
            .map(|(name, _)| SyncReply {
                server: name.clone(),
                error: Some(config::NO_MCP_SUPPORT.to_string()),
            })
            .collect();
        std::future::ready(replies)
    }

    /// One note per server, the first time; the registry is left as it is.
    pub fn apply(&mut self, _registry: &mut ToolRegistry, replies: Vec<SyncReply>) -> Applied {
        let mut applied = Applied::default();
        for reply in replies {
            let Some(slot) = self.servers.iter_mut().find(|(n, _)| *n == reply.server) else {
                continue;
            };
            if let (Some(e), false) = (&reply.error, slot.1) {
                slot.1 = true;
                applied.notes.push(format!(
                    "[MCP server \"{}\" is unavailable ({e}); its tools are not available]",
                    reply.server
                ));
            }
        }
        applied
    }

    /// Nothing to stop.
    pub async fn shutdown(&mut self) {}
}

/// No tool is ever bound to an MCP server in this build: every call is the unknown-tool text.
pub fn service(_set: Option<&McpSet>, _server: &str) -> Arc<dyn ToolService> {
    Arc::new(Unserved)
}

/// The service of a server this build cannot reach.
struct Unserved;

impl ToolService for Unserved {
    fn call(
        &self,
        tool: &str,
        ctx: crate::tools::ToolContext,
        _args: serde_json::Map<String, serde_json::Value>,
    ) -> futures::future::BoxFuture<'static, crate::tools::ToolResult> {
        let result = not_served(&ctx, tool);
        Box::pin(async move { result })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::tools::{Permission, ToolContext, ToolDefinitionConfig};

    fn configs() -> Vec<McpServerConfig> {
        ["a", "b"]
            .iter()
            .map(|n| config::parse_entry(n, &json!({"command": "x"})).unwrap())
            .collect()
    }

    #[tokio::test]
    async fn every_server_is_reported_unavailable_once() {
        assert!(McpSet::new(&[], false, None).is_none());
        let mut set = McpSet::new(&configs(), false, None).unwrap();
        let mut registry = ToolRegistry::default();
        let replies = set.sync_all().await;
        assert_eq!(replies.len(), 2);
        let applied = set.apply(&mut registry, replies);
        assert!(!applied.changed);
        assert_eq!(
            applied.notes,
            ["a", "b"]
                .map(|n| format!(
                    "[MCP server \"{n}\" is unavailable (this build has no MCP support: \
                     rebuild with the `mcp` feature); its tools are not available]"
                ))
                .to_vec()
        );
        // Told once: the next request's sync adds no note.
        let again = set.sync_all().await;
        assert!(set.apply(&mut registry, again).notes.is_empty());
        assert!(registry.get("mcp__a__t").is_none());
    }

    #[tokio::test]
    async fn a_call_bound_to_a_server_gets_the_unknown_tool_text() {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let def = ToolDefinitionConfig::new("mcp__a__t", "", json!({}), Permission::Read);
        let ctx = ToolContext::new(
            std::env::temp_dir(),
            "c1".into(),
            Arc::new(def),
            tokio_util::sync::CancellationToken::new(),
            tx,
        );
        let result = service(None, "a")
            .call("mcp__a__t", ctx, serde_json::Map::new())
            .await;
        assert_eq!(result, crate::tools::ToolResult::failed());
        assert_eq!(rx.try_recv().unwrap(), "Unknown tool: mcp__a__t");
    }
}
