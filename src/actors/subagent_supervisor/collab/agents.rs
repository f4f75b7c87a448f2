//! `interrupt_agent`, `list_agents` and `read_session_history`
//! (`docs/collaboration.md#interrupt_agent`): cancel an agent's round, list the agents, page
//! an agent's history (read from its trace), newest first.

use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::{Map, Value};

use super::super::SubagentSupervisorHandle;
use super::{fail, supervisor, target};
use crate::message::{ModelPayload, Role};
use crate::tools::{ToolContext, ToolResult};

/// Longest wait for an interrupted round to end.
const INTERRUPT_WAIT: Duration = Duration::from_secs(30);
/// `read_session_history`'s default and largest page.
pub const HISTORY_LIMIT: usize = 20;
/// `read_session_history`'s largest page.
pub const HISTORY_MAX: usize = 100;
/// Longest text shown of one history entry, in characters.
const ENTRY_CHARS: usize = 2000;

/// The `interrupt_agent` tool: cancels an agent's running round.
pub struct InterruptAgent;

impl InterruptAgent {
    pub(in crate::actors::subagent_supervisor) fn call(
        subagents: Option<SubagentSupervisorHandle>,
        depth: u32,
        ctx: ToolContext,
        args: Map<String, Value>,
    ) -> BoxFuture<'static, ToolResult> {
        Box::pin(async move {
            let child = match target(subagents, depth, &args, "interrupt_agent").await {
                Ok(c) => c,
                Err(r) => return r,
            };
            if !child.is_running() {
                return fail(format!(
                    "[interrupt_agent error: {} is idle; nothing to interrupt]",
                    child.id
                ));
            }
            child.mark_interrupted();
            let mut watch = child.watch();
            if let Err(e) = child.session.abort() {
                return fail(format!("[interrupt_agent error: {e}]"));
            }
            let deadline = tokio::time::Instant::now() + INTERRUPT_WAIT;
            while child.is_running() {
                tokio::select! {
                    changed = watch.changed() => if changed.is_err() { break },
                    _ = tokio::time::sleep_until(deadline) => {
                        return ToolResult::completed().with_note(format!(
                            "interrupt sent to {}; its round has not ended yet (its report will say interrupted)",
                            child.id
                        ));
                    }
                    _ = ctx.cancel.cancelled() => break,
                }
            }
            ToolResult::completed().with_note(format!(
                "interrupted {}: its round ended (running calls aborted); its report says status: interrupted",
                child.id
            ))
        })
    }
}

/// The `list_agents` tool: the session's agents and their state.
pub struct ListAgents;

impl ListAgents {
    pub(in crate::actors::subagent_supervisor) fn call(
        subagents: Option<SubagentSupervisorHandle>,
        depth: u32,
        ctx: ToolContext,
        _args: Map<String, Value>,
    ) -> BoxFuture<'static, ToolResult> {
        Box::pin(async move {
            let subagents = match supervisor(subagents, depth, "list_agents") {
                Ok(s) => s,
                Err(r) => return r,
            };
            let children = subagents.list().await;
            if children.is_empty() {
                ctx.emit("no agents (spawn_agent starts one)");
                return ToolResult::completed();
            }
            let mut lines = Vec::new();
            for c in children {
                let l = c.listing();
                let (task, agent, rounds, interrupted) = c.agent_info();
                let status = if c.error().is_some() {
                    "failed"
                } else if l.running {
                    "running"
                } else if interrupted {
                    "interrupted"
                } else {
                    "idle"
                };
                let meta = c.session.meta();
                let (model, window) = c.switched_model().unwrap_or_else(|| {
                    (
                        format!("{}/{}", meta.provider, meta.model_id),
                        meta.model_context_window.clone(),
                    )
                });
                lines.push(format!(
                    "{} status: {status} task: {} agent: {} model: {model} rounds: {rounds} tokens: {} context_window: {window} queued: {}",
                    l.id,
                    if task.is_empty() { l.label.clone() } else { task },
                    agent.as_deref().unwrap_or("default"),
                    l.tokens,
                    c.queued(),
                ));
            }
            ctx.emit(lines.join("\n"));
            ToolResult::completed()
        })
    }
}

/// The `read_session_history` tool: a page of an agent's history, newest first.
pub struct ReadSessionHistory;

/// One history entry as a line.
fn entry(n: usize, m: &ModelPayload) -> String {
    let (kind, text) = match m {
        ModelPayload::Text { role, text, .. } => (
            if *role == Role::User {
                "user"
            } else {
                "assistant"
            },
            text.clone(),
        ),
        ModelPayload::Thinking { thinking, .. } => ("thinking", thinking.clone()),
        ModelPayload::ToolCall {
            name, arguments, ..
        } => ("tool_call", format!("{name} {arguments}")),
        ModelPayload::ToolCallOutput {
            output,
            stop_reason,
            ..
        } => ("tool_output", format!("({stop_reason}) {output}")),
        other => ("other", format!("{other:?}")),
    };
    // One line per entry: line breaks are shown as `\n`.
    let text = text.replace('\n', "\\n");
    let count = text.chars().count();
    let shown: String = text.chars().take(ENTRY_CHARS).collect();
    let cut = if count > ENTRY_CHARS {
        format!(" [... {} more chars]", count - ENTRY_CHARS)
    } else {
        String::new()
    };
    format!("#{n} {kind}: {shown}{cut}")
}

/// A read_session_history argument outside `1..=max` (`got`: the value given, as JSON).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("[read_session_history error: {key} must be a whole number from 1 to {max} (got {got})]")]
struct OutOfRange {
    key: String,
    max: usize,
    got: String,
}

/// A whole number argument in `1..=max`, or `None` when absent.
fn bounded(args: &Map<String, Value>, key: &str, max: usize) -> Result<Option<usize>, OutOfRange> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => match v
            .as_u64()
            .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
        {
            Some(n) if n >= 1 && (n as usize) <= max => Ok(Some(n as usize)),
            _ => Err(OutOfRange {
                key: key.to_string(),
                max,
                got: v.to_string(),
            }),
        },
    }
}

impl ReadSessionHistory {
    pub(in crate::actors::subagent_supervisor) fn call(
        subagents: Option<SubagentSupervisorHandle>,
        depth: u32,
        ctx: ToolContext,
        args: Map<String, Value>,
    ) -> BoxFuture<'static, ToolResult> {
        Box::pin(async move {
            let child = match target(subagents, depth, &args, "read_session_history").await {
                Ok(c) => c,
                Err(r) => return r,
            };
            let limit = match bounded(&args, "limit", HISTORY_MAX) {
                Ok(l) => l.unwrap_or(HISTORY_LIMIT),
                Err(e) => return fail(e.to_string()),
            };
            let _ = child.session.flush_trace().await;
            let path = child.session.trace_path();
            let read =
                tokio::task::spawn_blocking(move || crate::trace::reader::read_trace(&path)).await;
            let records = match read {
                Ok(Ok(r)) => r.records,
                Ok(Err(e)) => return fail(format!("[read_session_history error: {e}]")),
                Err(e) => return fail(format!("[read_session_history error: {e}]")),
            };
            let items: Vec<ModelPayload> = records
                .iter()
                .filter(|r| !r.has_origin())
                .filter_map(|r| r.as_model())
                .filter(|m| !m.is_partial())
                .cloned()
                .collect();
            let total = items.len();
            if total == 0 {
                ctx.emit(format!("{} has no history yet", child.id));
                return ToolResult::completed();
            }
            let cursor = match bounded(&args, "cursor", total) {
                Ok(c) => c.unwrap_or(total),
                Err(_) => {
                    return fail(format!(
                        "[read_session_history error: cursor must be a whole number from 1 to {total} (the next_cursor of a previous page)]"
                    ));
                }
            };
            let low = cursor.saturating_sub(limit);
            let mut lines = vec![format!(
                "{} history: entries {cursor} down to {} of {total}, newest first",
                child.id,
                low + 1
            )];
            for n in (low + 1..=cursor).rev() {
                lines.push(entry(n, &items[n - 1]));
            }
            lines.push(if low == 0 {
                "(start of history)".to_string()
            } else {
                format!("next_cursor: {low} (pass it as cursor for older entries)")
            });
            ctx.emit(lines.join("\n"));
            ToolResult::completed()
        })
    }
}
