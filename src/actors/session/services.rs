//! Lazy start of a session's command and subagent supervisors: each is spawned (linked to the
//! session) on the first approved call of one of its tools, so an idle session is one actor
//! (its trace file is an entry of one of the host's trace writers). A supervisor that failed is not restarted: its tools then
//! answer "unavailable", as before.
//!
//! It also binds a service-bound tool's call to the session's own service of its kind
//! ([`service`], `docs/architecture.md#service-bindings`).
//!
//! It owns no state: what it spawns goes into the `SessionState`.

use std::sync::Arc;

use ractor::ActorRef;

use super::{SessionMsg, SessionState};
use crate::actors::command_supervisor::tools::CommandTools;
use crate::actors::command_supervisor::{
    CommandEventSink, CommandOptions, CommandSupervisorHandle,
};
use crate::actors::session_api::SessionRef;
use crate::actors::subagent_supervisor::tools::SubagentTools;
use crate::actors::subagent_supervisor::{ParentLink, SubagentArgs, SubagentSupervisorHandle};
use crate::tools::{ServiceKind, ToolService};

/// The session's service of `kind`, serving one call of a tool bound to it.
pub(super) fn service(state: &SessionState, kind: &ServiceKind) -> Arc<dyn ToolService> {
    match kind {
        ServiceKind::Commands => Arc::new(CommandTools::new(state.commands.clone())),
        ServiceKind::DetachedCommands => Arc::new(
            crate::actors::command_supervisor::openvaala::DetachedCommandTools::new(
                state.commands.clone(),
            ),
        ),
        ServiceKind::Subagents => Arc::new(SubagentTools::new(
            state.subagents.clone(),
            state.options.depth,
        )),
        ServiceKind::Mcp { server } => crate::mcp::service(state.mcp.as_deref(), server),
    }
}

/// Whether a call of `tool` needs a supervisor [`ensure`] would start first (so its verdict
/// must go through the actor's async path).
pub(super) fn needs_start(state: &SessionState, tool: &str) -> bool {
    match state.options.config.tools.service_of(tool) {
        Some(ServiceKind::Commands | ServiceKind::DetachedCommands) => {
            state.commands.is_none() && state.wants_commands
        }
        Some(ServiceKind::Subagents) => state.subagents.is_none() && state.wants_subagents,
        _ => false,
    }
}

/// Spawns the supervisor `tool` needs if it is configured and not running yet.
pub(super) async fn ensure(myself: &ActorRef<SessionMsg>, state: &mut SessionState, tool: &str) {
    if !needs_start(state, tool) {
        return;
    }
    let kind = state.options.config.tools.service_of(tool).cloned();
    if matches!(
        kind,
        Some(ServiceKind::Commands | ServiceKind::DetachedCommands)
    ) {
        let me = myself.clone();
        let sink: CommandEventSink = Arc::new(move |ev| {
            let _ = me.cast(SessionMsg::Command(ev));
        });
        let spawned = CommandSupervisorHandle::spawn_with(
            state.id.clone(),
            state.options.workspace.clone(),
            sink,
            Some(myself.get_cell()),
            CommandOptions {
                env: state.options.command_env.clone(),
                env_policy: state.env_policy(),
                idle_reap: state.options.config.commands.idle_reap.0,
                sandbox: state.options.sandbox.clone(),
                ..CommandOptions::default()
            },
        )
        .await;
        match spawned {
            Ok(h) => state.commands = Some(h),
            Err(e) => {
                tracing::error!(session = %state.id, "cannot start the command supervisor: {e}");
                state.wants_commands = false;
            }
        }
    }
    if kind == Some(ServiceKind::Subagents) {
        // A child session never gets the subagent tools (depth limit 1).
        let mut template = state.options.clone();
        // A resumed parent's children are new sessions, not resumes of the parent's trace.
        template.resume = None;
        // Each child's store row names this session as its parent.
        template.parent = Some(state.id.clone());
        // A child has no MCP connections of its own: the parent's MCP tools are not offered.
        let mcp_bound: Vec<String> = template
            .config
            .tools
            .names()
            .into_iter()
            .filter(|n| {
                matches!(
                    template.config.tools.service_of(n),
                    Some(ServiceKind::Mcp { .. })
                )
            })
            .collect();
        for t in mcp_bound {
            template.config.tools.remove(&t);
        }
        for t in template.config.tools.bound_to(&ServiceKind::Subagents) {
            template.config.tools.remove(&t);
        }
        let args = SubagentArgs {
            start: state.start_child.clone(),
            template,
            parent: ParentLink {
                subscribers: state.subscribers.clone(),
                session: SessionRef(myself.get_derived()),
            },
            parent_trace: state.trace.clone(),
        };
        match SubagentSupervisorHandle::spawn(args, myself.get_cell()).await {
            Ok(h) => state.subagents = Some(h),
            Err(e) => {
                tracing::error!(session = %state.id, "cannot start the subagent supervisor: {e}");
                state.wants_subagents = false;
            }
        }
    }
}
