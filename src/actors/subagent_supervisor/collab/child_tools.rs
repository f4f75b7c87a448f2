//! The tools a spawned agent gets from its parent: `send_message` (to `parent` only) and
//! `wait_agent` (on its own inbox). They hold a [`ChildLink`]: the parent session and the
//! agent's own session, set once it is spawned.
//!
//! They never reach the parent's supervisor: an agent cannot spawn, list or steer others.
//! They stay `Local` tools (not bound to `ServiceKind::Subagents`): what serves them is the
//! link to this one agent's parent and session, not a service of the agent's session (which
//! has no subagent supervisor, depth limit 1), and the session drops every tool bound to
//! `Subagents` from a child's configuration.

use std::sync::{Arc, OnceLock};

use futures::future::BoxFuture;
use serde_json::{Map, Value};

use super::{fail, wait_inbox, wait_timeout};
use crate::actors::session_api::{SessionHandle, SessionRef};
use crate::actors::subagent_supervisor::report::message_to_parent;
use crate::tools::profile::collaboration_definition;
use crate::tools::{Tool, ToolContext, ToolRegistry, ToolResult, args};

/// How a spawned agent reaches its parent and its own session.
#[derive(Clone)]
pub struct ChildLink {
    /// The parent session.
    pub parent: SessionRef,
    /// The agent's id.
    pub agent_id: String,
    /// The agent's own session (set right after it is spawned).
    pub own: Arc<OnceLock<SessionHandle>>,
}

/// Registers the agent's `send_message` and `wait_agent` in `tools`.
pub fn register(tools: &mut ToolRegistry, link: ChildLink) {
    if let Some(d) = collaboration_definition("send_message") {
        tools.register(d, Arc::new(ChildSendMessage(link.clone())));
    }
    if let Some(d) = collaboration_definition("wait_agent") {
        tools.register(d, Arc::new(ChildWaitAgent(link)));
    }
}

struct ChildSendMessage(ChildLink);

impl Tool for ChildSendMessage {
    fn call(&self, _ctx: ToolContext, args: Map<String, Value>) -> BoxFuture<'static, ToolResult> {
        let link = self.0.clone();
        Box::pin(async move {
            let target = match args::require_nonblank_str(&args, "target", "send_message") {
                Ok(t) => t,
                Err(e) => return fail(e.to_string()),
            };
            if target != "parent" {
                return fail(format!(
                    "[send_message error: an agent can message only its parent (target: parent), not {target}]"
                ));
            }
            let message = match args::require_nonblank_str(&args, "message", "send_message") {
                Ok(m) => m.to_string(),
                Err(e) => return fail(e.to_string()),
            };
            let mode = match args::opt_str(&args, "mode").unwrap_or("normal") {
                m @ ("normal" | "steer") => m,
                other => {
                    return fail(format!(
                        "[send_message error: mode must be normal or steer (got {other})]"
                    ));
                }
            };
            let sent = link.parent.agent_input(
                message_to_parent(&link.agent_id, mode, &message),
                format!("message from agent {}", link.agent_id),
            );
            if sent.is_err() {
                return fail("[send_message error: the parent session has ended]");
            }
            ToolResult::completed()
                .with_note("sent to parent; it reaches the parent's model with its next request")
        })
    }
}

struct ChildWaitAgent(ChildLink);

impl Tool for ChildWaitAgent {
    fn call(&self, ctx: ToolContext, args: Map<String, Value>) -> BoxFuture<'static, ToolResult> {
        let link = self.0.clone();
        Box::pin(async move {
            let timeout = match wait_timeout(&args) {
                Ok(t) => t,
                Err(r) => return r,
            };
            let Some(own) = link.own.get() else {
                return fail("[wait_agent error: the agent's session is not ready]");
            };
            match own.inbox().await {
                Ok(inbox) => wait_inbox(&ctx, inbox, timeout).await,
                Err(e) => fail(format!("[wait_agent error: {e}]")),
            }
        })
    }
}
