//! How a registered tool runs: its [`ToolBinding`]. A tool is either `Local` (an
//! `Arc<dyn Tool>` that needs nothing but its [`ToolContext`]) or served by one of the session's
//! services ([`ServiceKind`]): the registry records only the kind, and the session binds the call
//! to its own service when it dispatches it ([`RegisteredTool::bind`]). The service answers
//! through [`ToolService::call`] with the call's name, context and arguments
//! (`docs/architecture.md#service-bindings`).
//!
//! This module knows no service: it must not import anything under `src/actors/` (services
//! implement [`ToolService`] beside the actor that serves them).

use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::{Map, Value};

use super::definition::ToolDefinitionConfig;
use super::{Tool, ToolContext, ToolResult};

/// Which of the session's services serves a tool.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ServiceKind {
    /// The session's command supervisor (background shell commands).
    Commands,
    /// The session's subagent supervisor (child sessions).
    Subagents,
    /// The session's connection to the MCP server `server` (tools known only at run time).
    Mcp {
        /// The server's name in the MCP config.
        server: String,
    },
    /// The session's command supervisor, serving tools whose commands are registered at once,
    /// read at cursors and stopped after their own timeout (the openvaala profile's command
    /// tools, `docs/tools-openvaala.md`).
    DetachedCommands,
}

/// How a registered tool runs.
#[derive(Clone)]
pub enum ToolBinding {
    /// An implementation that needs nothing from the session but the call's context.
    Local(Arc<dyn Tool>),
    /// Served by the session's service of this kind, bound when the call is dispatched.
    Service(ServiceKind),
}

impl ToolBinding {
    /// The service kind of a service-bound tool; `None` for a local one.
    pub fn service(&self) -> Option<&ServiceKind> {
        match self {
            ToolBinding::Local(_) => None,
            ToolBinding::Service(kind) => Some(kind),
        }
    }
}

impl std::fmt::Debug for ToolBinding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ToolBinding::Local(_) => f.write_str("Local(..)"),
            ToolBinding::Service(kind) => f.debug_tuple("Service").field(kind).finish(),
        }
    }
}

/// A session service that serves the calls of the tools bound to its [`ServiceKind`]. It
/// dispatches on the tool's name; a name it does not serve must still end in one failed
/// result (never a panic).
pub trait ToolService: Send + Sync + 'static {
    /// Runs one call of `tool` with already-parsed object arguments.
    fn call(
        &self,
        tool: &str,
        ctx: ToolContext,
        args: Map<String, Value>,
    ) -> BoxFuture<'static, ToolResult>;
}

/// Wraps a bound implementation (e.g. to time it); applied each time the tool is bound.
pub type ToolWrapper = Arc<dyn Fn(Arc<dyn Tool>) -> Arc<dyn Tool> + Send + Sync>;

/// A registry entry: the tool's definition and how it runs.
#[derive(Clone)]
pub struct RegisteredTool {
    /// The tool's definition, as the model sees it.
    pub definition: Arc<ToolDefinitionConfig>,
    /// Where its implementation comes from.
    pub binding: ToolBinding,
    /// Applied, in order, to the implementation when the tool is bound.
    pub wrappers: Vec<ToolWrapper>,
}

impl RegisteredTool {
    /// The tool ready for one call: a local implementation as is, a service-bound one bound to
    /// the service `service(kind)` returns (the session's own).
    pub fn bind(&self, service: impl FnOnce(&ServiceKind) -> Arc<dyn ToolService>) -> BoundTool {
        let mut tool: Arc<dyn Tool> = match &self.binding {
            ToolBinding::Local(tool) => tool.clone(),
            ToolBinding::Service(kind) => Arc::new(ServedTool {
                service: service(kind),
                name: self.definition.name.clone(),
            }),
        };
        for wrap in &self.wrappers {
            tool = wrap(tool);
        }
        BoundTool {
            definition: self.definition.clone(),
            tool,
        }
    }
}

/// A tool bound for one call: what the close-out runs.
#[derive(Clone)]
pub struct BoundTool {
    /// The tool's definition.
    pub definition: Arc<ToolDefinitionConfig>,
    /// The implementation that runs the call.
    pub tool: Arc<dyn Tool>,
}

/// A service-bound tool's calls, handed to its service under the tool's name.
struct ServedTool {
    service: Arc<dyn ToolService>,
    name: String,
}

impl Tool for ServedTool {
    fn call(&self, ctx: ToolContext, args: Map<String, Value>) -> BoxFuture<'static, ToolResult> {
        self.service.call(&self.name, ctx, args)
    }
}

/// The result of a call a service does not serve (emits the same text as an unknown tool).
pub fn not_served(ctx: &ToolContext, tool: &str) -> ToolResult {
    ctx.emit(format!("Unknown tool: {tool}"));
    ToolResult::failed()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::Permission;
    use serde_json::json;
    use tokio::sync::mpsc;
    use tokio_util::sync::CancellationToken;

    struct Echo(&'static str);

    impl ToolService for Echo {
        fn call(
            &self,
            tool: &str,
            ctx: ToolContext,
            _args: Map<String, Value>,
        ) -> BoxFuture<'static, ToolResult> {
            ctx.emit(format!("{} served {tool}", self.0));
            Box::pin(async { ToolResult::completed() })
        }
    }

    #[tokio::test]
    async fn a_service_bound_tool_is_served_by_the_service_the_session_gives() {
        let def = ToolDefinitionConfig::new("t", "d", json!({}), Permission::Read);
        let reg = RegisteredTool {
            definition: Arc::new(def),
            binding: ToolBinding::Service(ServiceKind::Commands),
            wrappers: Vec::new(),
        };
        let mut asked = None;
        let bound = reg.bind(|kind| {
            asked = Some(kind.clone());
            Arc::new(Echo("commands"))
        });
        assert_eq!(asked, Some(ServiceKind::Commands));
        let (tx, mut rx) = mpsc::unbounded_channel();
        let ctx = ToolContext::new(
            std::env::temp_dir(),
            "c1".into(),
            bound.definition.clone(),
            CancellationToken::new(),
            tx,
        );
        let result = bound.tool.call(ctx, Map::new()).await;
        assert_eq!(result, ToolResult::completed());
        assert_eq!(rx.recv().await.as_deref(), Some("commands served t"));
    }
}
