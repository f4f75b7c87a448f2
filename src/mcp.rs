//! MCP servers as tools. Each configured server (see [`config`]) gets one supervised
//! [`connection::McpConnection`] actor under its session, spawned at the session's first
//! request; its tools join the session's registry as `mcp__<server>__<tool>` ([`names`]) and go
//! through the same close-out, approval, hooks and policy as the built-in tools.
//!
//! Connections are per session, not shared by the host: a stdio server is a child process that
//! belongs to the session's process tree (killed with it), servers keep per-connection state
//! (subscriptions, logging levels, cwd), and a crash of one session's server must not fail
//! another session's calls. [`McpSet`] is the session's view: it starts the actors, gathers
//! their tool lists before each request and rewrites the registry when a list changed. It knows
//! nothing of the turn loop. The tools are service-bound (`ServiceKind::Mcp { server }`): the
//! registry records the binding, and the session binds each call to [`service`].

// The stand-in of a build without the `mcp` feature; compiled (and tested) in every build.
#[cfg_attr(feature = "mcp", allow(dead_code, unreachable_pub))]
mod absent;
#[cfg(feature = "mcp")]
pub(crate) mod call;
#[cfg(feature = "mcp")]
pub mod client;
pub mod config;
#[cfg(feature = "mcp")]
pub mod connection;
#[cfg(feature = "mcp")]
pub(crate) mod convert;
mod env_expand;
pub mod names;
#[cfg(feature = "mcp")]
pub mod stdio;
#[cfg(feature = "mcp")]
pub(crate) mod tool;

#[cfg(feature = "mcp")]
use std::collections::HashMap;
#[cfg(feature = "mcp")]
use std::path::Path;
#[cfg(feature = "mcp")]
use std::sync::Arc;
#[cfg(feature = "mcp")]
use std::time::Duration;

#[cfg(feature = "mcp")]
use ractor::{Actor, ActorCell, ActorRef};
#[cfg(feature = "mcp")]
use serde_json::Value;

#[cfg(not(feature = "mcp"))]
pub use absent::{McpSet, connection, service};
pub use config::{McpConfigError, McpPermission, McpServerConfig, McpTransport};
#[cfg(feature = "mcp")]
use connection::{McpArgs, McpConnection, McpMsg, McpSink, SyncReply};

#[cfg(feature = "mcp")]
use crate::tools::binding::{ServiceKind, ToolService};
#[cfg(feature = "mcp")]
use crate::tools::{Permission, ToolDefinitionConfig, ToolRegistry};

/// One configured server of a session.
#[cfg(feature = "mcp")]
struct Slot {
    config: Arc<McpServerConfig>,
    actor: Option<ActorRef<McpMsg>>,
    /// The list version the registry holds (0: none yet).
    version: u64,
    /// (model-facing name, the server's name) of the tools registered for this server.
    names: Vec<(String, String)>,
    /// The failure the model was told about (told once per failure).
    told: Option<String>,
}

/// The MCP servers of one session.
#[cfg(feature = "mcp")]
pub struct McpSet {
    slots: Vec<Slot>,
    vision: bool,
    /// The session's confinement, for its stdio servers.
    sandbox: Option<Arc<crate::sandbox::Confinement>>,
}

/// What a sync changed.
#[derive(Debug, Default)]
pub struct Applied {
    /// The registry's tool list changed (announce it again).
    pub changed: bool,
    /// One-line notes for the model (servers without tools).
    pub notes: Vec<String>,
}

#[cfg(feature = "mcp")]
impl McpSet {
    /// `None` when no server is configured.
    /// With `sandbox`, every stdio server whose entry does not say `"sandbox": "off"` starts
    /// confined by it.
    pub fn new(
        configs: &[McpServerConfig],
        vision: bool,
        sandbox: Option<Arc<crate::sandbox::Confinement>>,
    ) -> Option<Self> {
        if configs.is_empty() {
            return None;
        }
        Some(McpSet {
            slots: configs
                .iter()
                .map(|c| Slot {
                    config: Arc::new(c.clone()),
                    actor: None,
                    version: 0,
                    names: Vec::new(),
                    told: None,
                })
                .collect(),
            vision,
            sandbox,
        })
    }

    /// Spawns the connection actors not yet running, linked to `supervisor`.
    pub async fn start(&mut self, workspace: &Path, sink: McpSink, supervisor: ActorCell) {
        for slot in &mut self.slots {
            if slot.actor.is_some() {
                continue;
            }
            let args = McpArgs {
                config: slot.config.clone(),
                workspace: workspace.to_path_buf(),
                sandbox: self.sandbox.clone(),
                sink: sink.clone(),
            };
            match Actor::spawn_linked(None, McpConnection, args, supervisor.clone()).await {
                Ok((actor, _)) => slot.actor = Some(actor),
                Err(e) => {
                    tracing::error!(server = %slot.config.name, "cannot start the MCP connection: {e}")
                }
            }
        }
    }

    /// Whether `id` is one of this set's connection actors.
    pub fn owns(&self, id: ractor::ActorId) -> bool {
        self.slots
            .iter()
            .any(|s| s.actor.as_ref().is_some_and(|a| a.get_id() == id))
    }

    /// A future gathering every server's current list, in parallel (each connects on its first
    /// sync). It does not borrow the set.
    pub fn sync_all(&self) -> impl Future<Output = Vec<SyncReply>> + Send + 'static {
        let asks: Vec<(String, Option<ActorRef<McpMsg>>, u64)> = self
            .slots
            .iter()
            .map(|s| {
                (
                    s.config.name.clone(),
                    s.actor.clone(),
                    s.config.connect_timeout_ms,
                )
            })
            .collect();
        async move {
            let calls = asks.into_iter().map(|(server, actor, limit)| async move {
                let failed = |why: &str| SyncReply {
                    server: server.clone(),
                    tools: Vec::new(),
                    version: 0,
                    error: Some(why.to_string()),
                };
                let Some(actor) = actor else {
                    return failed("its connection could not be started");
                };
                // The actor answers within connectTimeoutMs; the margin covers a loaded host.
                let wait = Duration::from_millis(limit.saturating_add(5000));
                match tokio::time::timeout(wait, async { ractor::call!(actor, McpMsg::Sync) }).await
                {
                    Ok(Ok(r)) => r,
                    Ok(Err(_)) => failed("its connection has stopped"),
                    Err(_) => failed("it did not answer in time"),
                }
            });
            futures::future::join_all(calls).await
        }
    }

    /// Puts the lists of `replies` into `registry` (replacing a server's old tools).
    pub fn apply(&mut self, registry: &mut ToolRegistry, replies: Vec<SyncReply>) -> Applied {
        let mut applied = Applied::default();
        for reply in replies {
            let Some(slot) = self
                .slots
                .iter_mut()
                .find(|s| s.config.name == reply.server)
            else {
                continue;
            };
            match &reply.error {
                Some(e) if slot.told.as_deref() != Some(e.as_str()) => {
                    slot.told = Some(e.clone());
                    let tools = if slot.names.is_empty() {
                        "its tools are not available"
                    } else {
                        "its tools fail until it is back"
                    };
                    applied.notes.push(format!(
                        "[MCP server \"{}\" is unavailable ({e}); {tools}]",
                        reply.server
                    ));
                }
                Some(_) => {}
                None => slot.told = None,
            }
            if reply.version == slot.version || reply.version == 0 {
                continue;
            }
            slot.version = reply.version;
            for (n, _) in slot.names.drain(..) {
                registry.remove(&n);
            }
            if slot.actor.is_none() {
                continue;
            }
            for t in &reply.tools {
                let Some(tool_name) = t.get("name").and_then(Value::as_str) else {
                    continue;
                };
                let name =
                    names::tool_name(&reply.server, tool_name, |n| registry.get(n).is_some());
                let def = definition(&slot.config, &name, t);
                registry.register_service(
                    def,
                    ServiceKind::Mcp {
                        server: reply.server.clone(),
                    },
                );
                slot.names.push((name, tool_name.to_string()));
            }
            applied.changed = true;
        }
        applied
    }

    /// Stops every connection actor (which closes its connection and sweeps its processes) and
    /// waits for them.
    pub async fn shutdown(&mut self) {
        for slot in &mut self.slots {
            if let Some(actor) = slot.actor.take() {
                let _ = actor
                    .stop_and_wait(None, Some(Duration::from_secs(5)))
                    .await;
            }
        }
    }

    /// Server names with their registered (model-facing) tool names.
    pub fn registered(&self) -> HashMap<String, Vec<String>> {
        self.slots
            .iter()
            .map(|s| {
                let names = s.names.iter().map(|(n, _)| n.clone()).collect();
                (s.config.name.clone(), names)
            })
            .collect()
    }
}

/// The service behind `ServiceKind::Mcp { server }` in a session with `set` (none: every call
/// is the close-out's unknown-tool text).
#[cfg(feature = "mcp")]
pub fn service(set: Option<&McpSet>, server: &str) -> Arc<dyn ToolService> {
    let slot = set.and_then(|s| s.slots.iter().find(|slot| slot.config.name == server));
    Arc::new(tool::McpService {
        server: Arc::from(server),
        actor: slot.and_then(|s| s.actor.clone()),
        vision: set.is_some_and(|s| s.vision),
        tools: slot.map(|s| s.names.clone()).unwrap_or_default(),
        timeout_ms: slot.map_or(0, |s| s.config.timeout_ms),
    })
}

/// The definition of a server's tool `t` (JSON `Tool`) under its model-facing `name`.
#[cfg(feature = "mcp")]
pub fn definition(cfg: &McpServerConfig, name: &str, t: &Value) -> ToolDefinitionConfig {
    let description = t
        .get("description")
        .and_then(Value::as_str)
        .or_else(|| t.get("title").and_then(Value::as_str))
        .unwrap_or("")
        .to_string();
    let mut parameters = t
        .get("inputSchema")
        .cloned()
        .unwrap_or_else(|| serde_json::json!({"type": "object", "properties": {}}));
    if parameters.get("type").is_none()
        && let Some(o) = parameters.as_object_mut()
    {
        o.insert("type".into(), Value::String("object".into()));
    }
    let read_only = t
        .get("annotations")
        .and_then(|a| a.get("readOnlyHint"))
        .and_then(Value::as_bool)
        == Some(true);
    let permission = match cfg.permission {
        McpPermission::Read => Permission::Read,
        McpPermission::ReadWrite => Permission::ReadWrite,
        McpPermission::Auto if read_only => Permission::Read,
        McpPermission::Auto => Permission::ReadWrite,
    };
    let mut def = ToolDefinitionConfig::new(name, &description, parameters, permission);
    // The call's own timer (`tool.rs`) ends it `timeout` at `timeoutMs`; the close-out's timer is
    // only a backstop behind it.
    def.timeout_ms = if cfg.timeout_ms > 0 {
        cfg.timeout_ms.saturating_add(tool::TIMEOUT_BACKSTOP_MS)
    } else {
        cfg.timeout_ms
    };
    def.max_output_length = cfg.max_output_length;
    // Calls of a turn to one server's tools that may change its state run one at a time, in
    // call order (as Claude Code does: only `readOnlyHint: true` tools run concurrently).
    if !read_only {
        def.exclusive = Some(format!("mcp:{}", cfg.name));
    }
    // The server's schema is the server's: no `description` property is added or removed.
    def.call_description = true;
    def
}

#[cfg(test)]
#[cfg(feature = "mcp")]
mod tests {
    use super::*;
    use serde_json::json;

    fn cfg(permission: McpPermission) -> McpServerConfig {
        let mut c = config::parse_entry("s", &json!({"command": "x", "timeoutMs": 700})).unwrap();
        c.permission = permission;
        c
    }

    #[test]
    fn permission_follows_read_only_hint_in_auto() {
        let ro = json!({"name": "a", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": true}});
        let rw = json!({"name": "b", "inputSchema": {"type": "object"}});
        assert_eq!(
            definition(&cfg(McpPermission::Auto), "n", &ro).permission,
            Permission::Read
        );
        assert_eq!(
            definition(&cfg(McpPermission::Auto), "n", &rw).permission,
            Permission::ReadWrite
        );
        assert_eq!(
            definition(&cfg(McpPermission::ReadWrite), "n", &ro).permission,
            Permission::ReadWrite
        );
        assert_eq!(
            definition(&cfg(McpPermission::Read), "n", &rw).permission,
            Permission::Read
        );
        assert_eq!(
            definition(&cfg(McpPermission::Auto), "n", &rw).timeout_ms,
            700 + tool::TIMEOUT_BACKSTOP_MS
        );
    }

    #[test]
    fn only_read_only_tools_run_alongside_each_other() {
        let ro = json!({"name": "a", "annotations": {"readOnlyHint": true}});
        let rw = json!({"name": "b", "annotations": {"readOnlyHint": false}});
        // The hint decides, whatever the configured permission says.
        assert_eq!(
            definition(&cfg(McpPermission::Read), "n", &ro).exclusive,
            None
        );
        assert_eq!(
            definition(&cfg(McpPermission::Read), "n", &rw)
                .exclusive
                .as_deref(),
            Some("mcp:s")
        );
    }
}
