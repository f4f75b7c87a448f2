//! `send_message` and `wait_agent` of the parent (`docs/collaboration.md#send_message`): a
//! message starts a new round of an idle agent, waits in its queue while it is busy (`normal`)
//! or joins its current round (`steer`), optionally on another model (`model` /
//! `reasoning_effort`, see `switch.rs`); `wait_agent` waits on the parent's inbox.

use futures::future::BoxFuture;
use serde_json::{Map, Value};

use super::super::SubagentSupervisorHandle;
use super::{fail, supervisor, switch, target, wait_inbox, wait_timeout};
use crate::actors::session_api::SteerOutcome;
use crate::actors::subagent_supervisor::child::QUEUE_CAP;
use crate::message::Sender;
use crate::tools::{ToolContext, ToolResult, args};

/// The `send_message` tool: queues a message for an agent (and maybe switches its model).
pub struct SendMessage;

impl SendMessage {
    pub(in crate::actors::subagent_supervisor) fn call(
        subagents: Option<SubagentSupervisorHandle>,
        depth: u32,
        _ctx: ToolContext,
        args: Map<String, Value>,
    ) -> BoxFuture<'static, ToolResult> {
        Box::pin(async move {
            let child = match target(subagents, depth, &args, "send_message").await {
                Ok(c) => c,
                Err(r) => return r,
            };
            let message = match args::require_nonblank_str(&args, "message", "send_message") {
                Ok(m) => m.to_string(),
                Err(e) => return fail(e.to_string()),
            };
            let mode = args::opt_str(&args, "mode").unwrap_or("normal");
            if mode != "normal" && mode != "steer" {
                return fail(format!(
                    "[send_message error: mode must be normal or steer (got {mode})]"
                ));
            }
            let switch = match switch::choice(&args) {
                Ok(c) => c,
                Err(e) => return fail(e.to_string()),
            };
            let id = child.id.clone();
            // The switch is checked first: a name that does not resolve sends nothing. It
            // applies now when the message starts a round or steers the running one; a queued
            // message's round applies it when it starts.
            let mut applied = false;
            let mut model_line = String::new();
            if let Some(choice) = &switch {
                let running = child.is_running();
                let apply = !running || mode == "steer";
                let when = match (running, mode) {
                    (false, _) => "its next round runs on it",
                    (true, "steer") => "from the next request of its current round",
                    _ => "the queued message's round runs on it",
                };
                match switch::switch(&child.session, &id, choice.clone(), apply, when).await {
                    Ok(line) => model_line = format!("\n{line}"),
                    Err(refused) => return fail(refused.to_string()),
                }
                applied = apply;
            }
            if !child.is_running() {
                if let (Some(choice), false) = (&switch, applied)
                    && let Err(refused) = switch::switch(
                        &child.session,
                        &id,
                        choice.clone(),
                        true,
                        "its next round runs on it",
                    )
                    .await
                {
                    return fail(refused.to_string());
                }
                child.begin_round();
                return match child
                    .session
                    .start_task_as(message, Some(Sender::ParentAgent))
                    .await
                {
                    Ok(()) => ToolResult::completed().with_note(format!(
                        "{id} was idle: the message started its next round; it reports when the round ends{model_line}"
                    )),
                    Err(e) => fail(format!("[send_message error: {e}]")),
                };
            }
            if mode == "steer" {
                return match child
                    .session
                    .steer_as(message, Some(Sender::ParentAgent))
                    .await
                {
                    Ok(SteerOutcome::Queued) => ToolResult::completed().with_note(format!(
                        "steered {id}: the message joins its current round before its next request{model_line}"
                    )),
                    Ok(SteerOutcome::Started) => {
                        child.begin_round();
                        ToolResult::completed().with_note(format!(
                            "{id} had just finished: the message started its next round{model_line}"
                        ))
                    }
                    Err(e) => fail(format!("[send_message error: {e}]")),
                };
            }
            if !child.enqueue(message, switch.filter(|_| !applied)) {
                return fail(format!(
                    "[send_message error: {id} is busy and already has {QUEUE_CAP} queued messages; wait for its report (wait_agent) or steer it (mode: steer)]"
                ));
            }
            // The agent may be waiting in wait_agent: it wakes and can end its round.
            let _ = child
                .session
                .poke("a message from the parent is queued".into());
            ToolResult::completed().with_note(format!(
                "queued for {id} (position {}): it starts a new round when the current one ends{model_line}",
                child.queued()
            ))
        })
    }
}

/// The `wait_agent` tool: waits for an agent's report or message.
pub struct WaitAgent;

impl WaitAgent {
    pub(in crate::actors::subagent_supervisor) fn call(
        subagents: Option<SubagentSupervisorHandle>,
        depth: u32,
        ctx: ToolContext,
        args: Map<String, Value>,
    ) -> BoxFuture<'static, ToolResult> {
        Box::pin(async move {
            let timeout = match wait_timeout(&args) {
                Ok(t) => t,
                Err(r) => return r,
            };
            let subagents = match supervisor(subagents, depth, "wait_agent") {
                Ok(s) => s,
                Err(r) => return r,
            };
            match subagents.parent_inbox().await {
                Ok(inbox) => wait_inbox(&ctx, inbox, timeout).await,
                Err(e) => fail(format!("[wait_agent error: {e}]")),
            }
        })
    }
}
