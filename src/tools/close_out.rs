//! The close-out: runs one approved tool call and frames everything it produces as
//! `partial_tool_call_output` (start → delta* → stop) followed by one complete
//! `tool_call_output` (`docs/close-out.md`). It owns unknown-tool and argument failures, the
//! per-tool timeout merged with the user's cancel, head-keeping truncation, the notes block and
//! the stop_reason precedence.
//!
//! It must not know any particular tool, never panics and never returns an error: every failure
//! becomes a failed output. It does not write traces or archives (no recovery archive here).

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use serde_json::{Map, Value};
use tokio::sync::mpsc;
use tokio::task::JoinError;
use tokio::time::Sleep;
use tokio_util::sync::CancellationToken;

use super::path_locks::PathKey;
use super::{BoundTool, ToolContext, ToolEnv, ToolResult, panic_message};
use crate::message::{EventType, OmniMessage, StopReason, build};

/// How long a cancelled tool may take to return before its task is aborted.
const CANCEL_GRACE: Duration = Duration::from_secs(2);

const ABORTED_NOTE: &str = "[interrupted: tool aborted by user]";
const EMPTY_NOTE: &str = "[no output]";

/// A tool call to run (from the model's complete tool_call).
#[derive(Debug, Clone)]
pub struct ToolCallInfo {
    /// The model's id of the call.
    pub tool_call_id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments JSON text as the model sent it.
    pub arguments: String,
}

/// Where the partials go.
type Emit = Arc<dyn Fn(OmniMessage) + Send + Sync>;

/// Runs one call through the close-out and returns the complete `tool_call_output` message.
/// `tool` is the registry lookup result, bound by the session (None = unknown tool). Every `partial_tool_call_output`
/// (start, deltas, stop) is passed to `emit` as it happens, before this returns. Never panics and
/// never returns an error: every failure is a failed output.
pub async fn execute(
    call: ToolCallInfo,
    tool: Option<BoundTool>,
    env: ToolEnv,
    user_cancel: CancellationToken,
    emit: Arc<dyn Fn(OmniMessage) + Send + Sync>,
) -> OmniMessage {
    let id = call.tool_call_id.clone();
    emit(partial(
        &id,
        EventType::Start,
        String::new(),
        StopReason::Completed,
    ));

    let Some(tool) = tool else {
        tracing::warn!(tool = %call.name, tool_call_id = %id, "unknown tool");
        return fail_early(&id, &emit, format!("Unknown tool: {}", call.name));
    };
    let args = match parse_arguments(&call.name, &call.arguments) {
        Ok(args) => args,
        Err(e) => {
            tracing::debug!(tool = %call.name, tool_call_id = %id, "bad tool arguments");
            return fail_early(&id, &emit, e.to_string());
        }
    };
    run_tool(&call.name, id, tool, args, env, user_cancel, emit).await
}

/// Arguments a call cannot run with; the texts are the tool output the model sees.
#[derive(Debug, thiserror::Error)]
enum BadArguments {
    #[error(
        "Tool call \"{name}\" failed: the arguments field is empty. Re-issue the call with a complete JSON object."
    )]
    Empty { name: String },
    #[error(
        "Tool call \"{name}\" failed: the arguments are not valid JSON ({source}). Re-issue the call with one complete, valid JSON object."
    )]
    NotJson {
        name: String,
        #[source]
        source: serde_json::Error,
    },
}

/// The arguments as an object: blank and invalid JSON are failures with the exact texts; any
/// other JSON value than an object counts as `{}`.
fn parse_arguments(name: &str, raw: &str) -> Result<Map<String, Value>, BadArguments> {
    if raw.trim().is_empty() {
        return Err(BadArguments::Empty {
            name: name.to_string(),
        });
    }
    match serde_json::from_str::<Value>(raw) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Ok(Map::new()),
        Err(source) => Err(BadArguments::NotJson {
            name: name.to_string(),
            source,
        }),
    }
}

fn partial(id: &str, event: EventType, text: String, stop_reason: StopReason) -> OmniMessage {
    build::partial_tool_call_output(id, event, text, Vec::new(), stop_reason)
}

/// Failure before the tool runs: delta(text), stop(failed), complete(failed).
fn fail_early(id: &str, emit: &Emit, text: String) -> OmniMessage {
    emit(partial(
        id,
        EventType::Delta,
        text.clone(),
        StopReason::Completed,
    ));
    emit(partial(
        id,
        EventType::Stop,
        String::new(),
        StopReason::Failed,
    ));
    build::tool_call_output(id, text, Vec::new(), StopReason::Failed)
}

/// Online head-keeping truncation of the tool's text, forwarding what fits as deltas.
struct OutputStream {
    id: String,
    emit: Emit,
    /// Cap in characters; `None` = unlimited.
    cap: Option<usize>,
    visible: String,
    visible_chars: usize,
    produced_chars: usize,
}

impl OutputStream {
    fn push(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        let chars = text.chars().count();
        self.produced_chars = self.produced_chars.saturating_add(chars);
        let room = match self.cap {
            Some(cap) => cap.saturating_sub(self.visible_chars),
            None => usize::MAX,
        };
        if room == 0 {
            return;
        }
        // The chunk is the text's first `room` characters when it has more.
        let (chunk, chunk_chars) = if chars > room {
            let end = text.char_indices().nth(room).map_or(text.len(), |(i, _)| i);
            (&text[..end], room)
        } else {
            (text, chars)
        };
        self.visible_chars += chunk_chars;
        self.visible.push_str(chunk);
        (self.emit)(partial(
            &self.id,
            EventType::Delta,
            chunk.to_string(),
            StopReason::Completed,
        ));
    }

    fn truncated(&self) -> bool {
        self.produced_chars > self.visible_chars
    }
}

/// How the tool's call ended.
enum Ending {
    /// The call was over on its first poll, made in place (no task was spawned).
    Ready(ToolResult),
    /// The first poll, made in place, panicked.
    PanickedInPlace(String),
    /// The task ran to its end (or panicked, or was cancelled by the runtime).
    Joined(Result<ToolResult, JoinError>),
    /// It did not return within the grace period after a cancel and was aborted.
    Abandoned,
}

/// Waits on an optional timer; never completes when there is none.
async fn wait_opt(timer: &mut Option<Pin<Box<Sleep>>>) {
    match timer.as_mut() {
        Some(t) => t.await,
        None => std::future::pending::<()>().await,
    }
}

async fn run_tool(
    name: &str,
    id: String,
    tool: BoundTool,
    args: Map<String, Value>,
    env: ToolEnv,
    user_cancel: CancellationToken,
    emit: Emit,
) -> OmniMessage {
    let definition = tool.definition.clone();
    let exclusive = definition.exclusive.clone();
    let timeout_ms = definition.timeout_ms;
    let cap = (definition.max_output_length > 0)
        .then(|| usize::try_from(definition.max_output_length).unwrap_or(usize::MAX));

    let cancel = user_cancel.child_token();
    let (tx, mut rx) = mpsc::unbounded_channel::<String>();
    let mut ctx = ToolContext::with_env(env, id.clone(), definition, cancel.clone(), tx);
    let imp = tool.tool;
    let ticket = ctx.env.path_ticket.take();
    let workspace = ctx.env.workspace.clone();
    let tool_name = name.to_string();
    // Calling the tool inside the future puts a panic of `call` itself under the catch too.
    let mut call = Box::pin(async move {
        let mut ctx = ctx;
        // A sandboxed session's file tools touch only what its processes could.
        if let Some(layout) = ctx.env.scope.sandbox()
            && let Err(denied) = super::sandbox_guard::check_call(
                layout,
                &tool_name,
                imp.as_ref(),
                &workspace,
                &args,
            )
        {
            ctx.emit(denied.to_string());
            return ToolResult::failed();
        }
        if let Some(ticket) = ticket {
            // Calls writing one file run in call order; the wait counts against the timeout
            // and ends with a cancel.
            let mut keys = imp.write_keys(&workspace, &args);
            // A tool changing a shared resource holds it the same way.
            keys.extend(exclusive.map(PathKey::Resource));
            tokio::select! {
                guard = ticket.acquire(keys) => ctx.path_guard = Some(Arc::new(guard)),
                _ = ctx.cancel.cancelled() => return ToolResult::default(),
            }
        }
        imp.call(ctx, args).await
    });

    let mut out = OutputStream {
        id: id.clone(),
        emit: emit.clone(),
        cap,
        visible: String::new(),
        visible_chars: 0,
        produced_chars: 0,
    };

    // A call that is over on its first poll (a small file read in place, a bad argument) needs
    // no task of its own, nor a timer; any other goes on in its own task, which polls it again
    // (registering the task's waker) under the timeout and the cancel.
    let early = {
        let mut first_poll = Context::from_waker(Waker::noop());
        std::panic::catch_unwind(AssertUnwindSafe(|| call.as_mut().poll(&mut first_poll)))
            .map_err(panic_message)
    };
    let (ending, timed_out) = match early {
        Ok(Poll::Ready(result)) => (Ending::Ready(result), false),
        Err(msg) => (Ending::PanickedInPlace(msg), false),
        Ok(Poll::Pending) => {
            let handle = tokio::spawn(call);
            supervise(name, &id, handle, timeout_ms, &cancel, &mut rx, &mut out).await
        }
    };
    // What the tool sent before it ended is still queued; later sends (leaked clones of the
    // context) are dropped with the receiver.
    while let Ok(text) = rx.try_recv() {
        out.push(&text);
    }
    drop(rx);

    let (result, thrown) = match ending {
        Ending::Ready(result) | Ending::Joined(Ok(result)) => {
            let thrown = result.error.clone();
            (result, thrown)
        }
        Ending::PanickedInPlace(msg) => {
            tracing::warn!(tool = %name, tool_call_id = %id, "{msg}");
            (ToolResult::default(), Some(msg))
        }
        Ending::Joined(Err(e)) if e.is_panic() => {
            let msg = panic_message(e.into_panic());
            tracing::warn!(tool = %name, tool_call_id = %id, "{msg}");
            (ToolResult::default(), Some(msg))
        }
        Ending::Joined(Err(e)) => (ToolResult::default(), Some(e.to_string())),
        Ending::Abandoned if user_cancel.is_cancelled() || timed_out => {
            (ToolResult::default(), None)
        }
        Ending::Abandoned => (
            ToolResult::default(),
            Some("tool did not return after being cancelled".to_string()),
        ),
    };

    finalize(
        out,
        result,
        thrown,
        user_cancel.is_cancelled(),
        timed_out,
        timeout_ms,
    )
}

/// Waits for the tool's task under its timeout and the cancel (with the grace period after
/// which a task that ignores the cancel is aborted), streaming what it sends meanwhile.
/// Returns how it ended and whether the timeout fired.
async fn supervise(
    name: &str,
    id: &str,
    mut handle: tokio::task::JoinHandle<ToolResult>,
    timeout_ms: i64,
    cancel: &CancellationToken,
    rx: &mut mpsc::UnboundedReceiver<String>,
    out: &mut OutputStream,
) -> (Ending, bool) {
    let mut timer: Option<Pin<Box<Sleep>>> = (timeout_ms > 0).then(|| {
        let ms = u64::try_from(timeout_ms).unwrap_or(u64::MAX);
        Box::pin(tokio::time::sleep(Duration::from_millis(ms)))
    });
    let mut grace: Option<Pin<Box<Sleep>>> = None;
    let mut timed_out = false;
    let ending = loop {
        tokio::select! {
            biased;
            res = &mut handle => break Ending::Joined(res),
            _ = wait_opt(&mut timer) => {
                timer = None;
                timed_out = true;
                tracing::debug!(tool = %name, tool_call_id = %id, timeout_ms, "tool timed out");
                cancel.cancel();
            }
            _ = cancel.cancelled(), if grace.is_none() => {
                grace = Some(Box::pin(tokio::time::sleep(CANCEL_GRACE)));
            }
            _ = wait_opt(&mut grace) => {
                tracing::warn!(tool = %name, tool_call_id = %id, "tool ignored cancel; task aborted");
                handle.abort();
                break Ending::Abandoned;
            }
            Some(text) = rx.recv() => out.push(&text),
        }
    };
    (ending, timed_out)
}

/// Notes, stop_reason and the closing messages (`docs/close-out.md#notes`, `#stop-reason-precedence`).
fn finalize(
    out: OutputStream,
    result: ToolResult,
    thrown: Option<String>,
    user_aborted: bool,
    timed_out: bool,
    timeout_ms: i64,
) -> OmniMessage {
    let aborted = user_aborted || (!timed_out && result.stop_reason == Some(StopReason::Aborted));
    let mut notes: Vec<String> = Vec::new();
    if let Some(cap) = out.cap.filter(|_| out.truncated()) {
        notes.push(format!("[output truncated: exceeded {cap} chars]"));
    }
    if let Some(note) = result.note.filter(|n| !n.is_empty()) {
        notes.push(note);
    }
    let stop_reason = if aborted {
        notes.push(ABORTED_NOTE.to_string());
        StopReason::Aborted
    } else if timed_out {
        notes.push(format!("[tool timeout: exceeded {timeout_ms}ms]"));
        StopReason::Failed
    } else if let Some(msg) = thrown {
        notes.push(format!("[tool error] {msg}"));
        StopReason::Failed
    } else {
        result.stop_reason.unwrap_or(StopReason::Completed)
    };
    if out.visible.is_empty() && notes.is_empty() {
        notes.push(EMPTY_NOTE.to_string());
    }

    let id = out.id.as_str();
    let mut output = out.visible;
    if !notes.is_empty() {
        let block = notes.join("\n");
        let suffix = if output.is_empty() {
            block
        } else {
            format!("\n{block}")
        };
        output.push_str(&suffix);
        (out.emit)(partial(id, EventType::Delta, suffix, StopReason::Completed));
    }
    let images = if stop_reason == StopReason::Completed {
        result.images
    } else {
        Vec::new()
    };
    if !images.is_empty() {
        (out.emit)(build::partial_tool_call_output(
            id,
            EventType::Delta,
            String::new(),
            images.clone(),
            StopReason::Completed,
        ));
    }
    (out.emit)(partial(id, EventType::Stop, String::new(), stop_reason));
    build::tool_call_output(id, output, images, stop_reason)
}

#[cfg(test)]
mod tests;
