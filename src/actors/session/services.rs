//! Lazy start of a session's command and subagent supervisors: each is spawned (linked to the
//! session) on the first approved call of one of its tools, so an idle session costs two actors
//! (itself and its trace actor). A supervisor that failed is not restarted: its tools then
//! answer "unavailable", as before.
//!
//! It owns no state: what it spawns goes into the `SessionState`.

use std::sync::Arc;

use ractor::ActorRef;

use super::{COMMAND_TOOLS, SessionMsg, SessionState};
use crate::actors::command_supervisor::{
    CommandEventSink, CommandOptions, CommandSupervisorHandle,
};
use crate::actors::subagent_supervisor::{
    ParentLink, SUBAGENT_TOOLS, SubagentArgs, SubagentSupervisorHandle,
};

/// Spawns the supervisor `tool` needs if it is configured and not running yet.
pub(super) async fn ensure(myself: &ActorRef<SessionMsg>, state: &mut SessionState, tool: &str) {
    if state.commands.is_none() && state.wants_commands && COMMAND_TOOLS.contains(&tool) {
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
    if state.subagents.is_none() && state.wants_subagents && SUBAGENT_TOOLS.contains(&tool) {
        let mut template = state.options.clone();
        for t in SUBAGENT_TOOLS {
            template.config.tools.remove(t);
        }
        let args = SubagentArgs {
            env: state.env.clone(),
            template,
            parent: ParentLink {
                subscribers: state.subscribers.clone(),
                session: myself.clone(),
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
