//! The session's side of its MCP servers: starts their connection actors with the first task,
//! holds each model request until every server's tool list is known (they connect in parallel
//! on the first one; later ones cost one actor round trip), then puts changed lists into the
//! session's registry, announces them with `tool_list_ready` and tells the model, in one line,
//! about a server that has no connection.
//!
//! It owns no state of its own: the set lives in `SessionState::mcp`.

use std::sync::Arc;

use ractor::ActorRef;

use super::{SessionMsg, SessionState, turn};
use crate::mcp::McpSet;
use crate::mcp::connection::{McpSink, SyncReply};
use crate::message::{Sender, build};

/// The MCP servers of a new session (`None` without servers, and for a subagent, which uses
/// its parent's connections through the tools it inherits).
pub(super) fn set_for(options: &super::SessionOptions) -> Option<Box<McpSet>> {
    if options.depth > 0 {
        return None;
    }
    let vision = options.config.tools.get("read_image").is_some();
    let confinement = options.sandbox.as_ref().map(|s| s.confinement().clone());
    McpSet::new(&options.config.mcp_servers, vision, confinement).map(Box::new)
}

/// Spawns the connection actors that are not running yet (no I/O: they connect on first sync).
pub(super) async fn start(myself: &ActorRef<SessionMsg>, state: &mut SessionState) {
    let Some(set) = state.mcp.as_mut() else {
        return;
    };
    let me = myself.clone();
    let sink: McpSink = Arc::new(move |msg| {
        let _ = me.cast(SessionMsg::McpRecord(msg));
    });
    set.start(&state.options.workspace, sink, myself.get_cell())
        .await;
}

/// Starts the sync of the servers' lists for the request of `turn`/`attempt`, which waits for
/// it (`Effect::SyncMcp`); the answer arrives as `SessionMsg::McpSynced`.
pub(super) fn sync(myself: &ActorRef<SessionMsg>, state: &SessionState, turn: u64, attempt: u32) {
    let Some(set) = state.mcp.as_ref() else {
        return;
    };
    let sync = set.sync_all();
    let me = myself.clone();
    tokio::spawn(async move {
        let replies = sync.await;
        let _ = me.cast(SessionMsg::McpSynced {
            turn,
            attempt,
            replies,
        });
    });
}

/// The lists arrived: update the registry, announce, note, and send the request.
pub(super) fn on_synced(
    myself: &ActorRef<SessionMsg>,
    state: &mut SessionState,
    turn_id: u64,
    attempt: u32,
    replies: Vec<SyncReply>,
) {
    if turn::live_task(state, turn_id).is_none_or(|t| t.turn.attempt != attempt) {
        return;
    }
    let Some(mut set) = state.mcp.take() else {
        return;
    };
    let applied = set.apply(&mut state.options.config.tools, replies);
    state.mcp = Some(set);
    if applied.changed {
        state.tool_specs = state.options.config.tools.shared_model_specs();
    }
    if applied.changed || !state.tools_announced {
        state.tools_announced = true;
        state.emit(build::tool_list_ready(state.tool_specs.clone()), true);
    }
    for note in applied.notes {
        let msg = build::user_text(note, Some(Sender::Harness));
        if let (Some(p), Some(task)) = (msg.as_model().cloned(), state.task.as_mut()) {
            task.turn.base_input.push(p);
        }
        state.emit(msg, true);
    }
    state.mcp_synced = Some((turn_id, attempt));
    turn::begin_request(myself, state);
}
