//! The openvaala profile's command tools (`docs/tools-openvaala.md#command-tools`): `bash`,
//! `read_command_output`, `write_stdin`, `stop_command` and `list_commands`, on the session's
//! command supervisor and command actors (the same 64-command registry as the PenguinHarness
//! tools; ids `cmd-xxxxxxxx`; output read by cursor from the ring at absolute byte offsets).
//!
//! Each function runs one call and always ends in one result. The texts live in `format.rs`;
//! processes, buffers and the registry stay with the actors.

pub mod format;

use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::{Map, Value};

use super::{CommandLease, CommandStyle, CommandSupervisorHandle, StartRequest};
use crate::actors::command::PageReply;
use crate::message::StopReason;
use crate::process::ExitInfo;
use crate::tools::{ToolContext, ToolResult, ToolService};
use format::{DEFAULT_STDIN_WAIT_S, DEFAULT_WAIT_S, MAX_WAIT_S};

/// How long stop_command waits for the command to be gone before answering.
const STOP_WAIT: Duration = Duration::from_secs(10);

/// The names of the tools served here.
pub const TOOL_NAMES: [&str; 5] = [
    "bash",
    "read_command_output",
    "write_stdin",
    "stop_command",
    "list_commands",
];

fn failed(ctx: &ToolContext, text: impl Into<String>) -> ToolResult {
    ctx.emit(text);
    ToolResult::failed()
}

fn aborted() -> ToolResult {
    ToolResult {
        stop_reason: Some(StopReason::Aborted),
        ..ToolResult::default()
    }
}

/// Emits the result of one page and completes (a non-zero exit is a normal result).
fn page_result(ctx: &ToolContext, id: &str, reply: &PageReply) -> ToolResult {
    let at_end = reply.page.next >= reply.end;
    ctx.emit(format::render(id, reply.exit.as_ref(), &reply.page, at_end));
    ToolResult::completed()
}

/// Runs `fut` unless the call is cancelled first.
async fn or_cancel<T>(ctx: &ToolContext, fut: impl std::future::Future<Output = T>) -> Option<T> {
    tokio::select! {
        biased;
        r = fut => Some(r),
        _ = ctx.cancel.cancelled() => None,
    }
}

/// Runs one call of the command tool `tool` on `commands`.
pub async fn call(
    commands: CommandSupervisorHandle,
    tool: &str,
    ctx: ToolContext,
    args: Map<String, Value>,
) -> ToolResult {
    match tool {
        "bash" => bash(commands, ctx, args).await,
        "read_command_output" => read_output(commands, ctx, args).await,
        "write_stdin" => write_stdin(commands, ctx, args).await,
        "stop_command" => stop(commands, ctx, args).await,
        "list_commands" => list(commands, ctx).await,
        other => failed(&ctx, format!("Unknown tool: {other}")),
    }
}

async fn bash(
    commands: CommandSupervisorHandle,
    ctx: ToolContext,
    args: Map<String, Value>,
) -> ToolResult {
    // A `cwd` other than the workspace is checked where it really leads (realpath): blocking
    // work. The usual call, in the workspace itself, parses in place.
    let escalated = crate::tools::escalation::requires_escalation(&args);
    let parsed = if format::cwd_is_workspace(&args) {
        format::bash_args(&ctx.env.workspace, &args)
    } else {
        let workspace = ctx.env.workspace.clone();
        match tokio::task::spawn_blocking(move || format::bash_args(&workspace, &args)).await {
            Ok(parsed) => parsed,
            Err(e) => {
                return ToolResult {
                    error: Some(format!("bash failed: {e}")),
                    ..ToolResult::default()
                };
            }
        }
    };
    let a = match parsed {
        Ok(a) => a,
        Err(t) => return failed(&ctx, t.to_string()),
    };
    let req = StartRequest {
        cmd: a.command,
        cwd: a.cwd,
        tty: a.interactive,
        background: false,
        style: CommandStyle::Detached { timeout: a.timeout },
        escalated,
        traceparent: ctx.env.otel.traceparent().map(|t| t.to_string()),
    };
    let lease = match commands.start(req).await {
        Ok(started) => started.lease,
        Err(e) => {
            // It never started: a failed result with an id of its own, in the same shape.
            let id = format!("cmd-{:08x}", rand::random::<u32>());
            let exit = ExitInfo::SpawnError(e.to_string());
            let page = Default::default();
            ctx.emit(format::render(&id, Some(&exit), &page, true));
            return ToolResult::failed();
        }
    };
    let id = lease.id().to_string();
    tracing::debug!(%id, "openvaala bash started");
    let budget = format::page_budget(&id);
    // Until the call is answered, the command is its call's: an interrupted call (or one whose
    // future is dropped unanswered) stops it, as exec_command's foreground window does.
    let guard = StopUnanswered(Some(&lease));
    match or_cancel(&ctx, lease.read_at(0, budget, a.wait, true)).await {
        Some(reply) => {
            guard.answered();
            let result = page_result(&ctx, &id, &reply);
            if let Some(note) = reply
                .exit
                .as_ref()
                .and_then(|exit| commands.sandbox_note(exit, escalated))
            {
                ctx.emit(format!("\n{note}"));
            }
            result
        }
        None => {
            drop(guard);
            interrupted(&ctx, &lease).await
        }
    }
}

/// Why a command whose `bash` call was interrupted was stopped (its exit, and the last line
/// of its output).
const INTERRUPTED: &str = "stopped: its bash call was interrupted";

/// Stops the command of a `bash` call when dropped, unless the call was answered first.
struct StopUnanswered<'a>(Option<&'a CommandLease>);

impl StopUnanswered<'_> {
    fn answered(mut self) {
        self.0 = None;
    }
}

impl Drop for StopUnanswered<'_> {
    fn drop(&mut self) {
        if let Some(lease) = self.0.take() {
            tracing::debug!(id = %lease.id(), "bash call interrupted: stopping its command");
            lease.kill(INTERRUPTED);
        }
    }
}

/// The output of an interrupted `bash` call whose command was just told to stop: its header
/// (`status: failed`, unless it had already ended by itself), the output so far and why it
/// stopped, so the model knows its id; then the close-out's interrupt note.
async fn interrupted(ctx: &ToolContext, lease: &CommandLease) -> ToolResult {
    let id = lease.id();
    let reply = lease
        .read_at(0, format::page_budget(id), Duration::ZERO, false)
        .await;
    let exit = reply
        .exit
        .clone()
        .unwrap_or_else(|| ExitInfo::Failed(INTERRUPTED.to_string()));
    let at_end = reply.page.next >= reply.end;
    ctx.emit(format::render(id, Some(&exit), &reply.page, at_end));
    aborted()
}

async fn leased(
    commands: &CommandSupervisorHandle,
    ctx: &ToolContext,
    args: &Map<String, Value>,
    tool: &str,
) -> Result<CommandLease, ToolResult> {
    let id = format::command_id(args, tool).map_err(|e| failed(ctx, e.to_string()))?;
    commands
        .lease(id)
        .await
        .filter(|l| l.id().starts_with("cmd-"))
        .ok_or_else(|| failed(ctx, format::unknown_command(id)))
}

async fn read_output(
    commands: CommandSupervisorHandle,
    ctx: ToolContext,
    args: Map<String, Value>,
) -> ToolResult {
    let lease = match leased(&commands, &ctx, &args, "read_command_output").await {
        Ok(l) => l,
        Err(r) => return r,
    };
    let id = lease.id().to_string();
    let wait = format::seconds(&args, "wait_seconds", DEFAULT_WAIT_S, MAX_WAIT_S);
    let cursor = format::cursor(&args);
    let read = lease.read_at(cursor, format::page_budget(&id), wait, false);
    match or_cancel(&ctx, read).await {
        Some(reply) => page_result(&ctx, &id, &reply),
        None => aborted(),
    }
}

async fn write_stdin(
    commands: CommandSupervisorHandle,
    ctx: ToolContext,
    args: Map<String, Value>,
) -> ToolResult {
    let chars = match format::chars(&args) {
        Ok(c) => c.to_string(),
        Err(t) => return failed(&ctx, t.to_string()),
    };
    let lease = match leased(&commands, &ctx, &args, "write_stdin").await {
        Ok(l) => l,
        Err(r) => return r,
    };
    let id = lease.id().to_string();
    // Where the output stands before the write: the answer shows what follows it.
    let probe = lease.read_at(u64::MAX, 0, Duration::ZERO, false).await;
    if !probe.tty {
        return failed(&ctx, format::not_interactive(&id));
    }
    if probe.exit.is_none() && !chars.is_empty() {
        lease.write(chars.into_bytes());
    }
    let wait = format::seconds(&args, "wait_seconds", DEFAULT_STDIN_WAIT_S, MAX_WAIT_S);
    let read = lease.read_at(probe.end, format::page_budget(&id), wait, false);
    match or_cancel(&ctx, read).await {
        Some(reply) => page_result(&ctx, &id, &reply),
        None => aborted(),
    }
}

async fn stop(
    commands: CommandSupervisorHandle,
    ctx: ToolContext,
    args: Map<String, Value>,
) -> ToolResult {
    let lease = match leased(&commands, &ctx, &args, "stop_command").await {
        Ok(l) => l,
        Err(r) => return r,
    };
    let id = lease.id().to_string();
    let probe = lease.read_at(u64::MAX, 0, Duration::ZERO, false).await;
    lease.kill("stopped by stop_command");
    let read = lease.read_at(probe.end, format::page_budget(&id), STOP_WAIT, true);
    match or_cancel(&ctx, read).await {
        Some(reply) => page_result(&ctx, &id, &reply),
        None => aborted(),
    }
}

async fn list(commands: CommandSupervisorHandle, ctx: ToolContext) -> ToolResult {
    let blocks: Vec<String> = commands
        .list()
        .await
        .iter()
        .filter(|l| l.process_id.starts_with("cmd-"))
        .map(|l| format::listing_block(&l.process_id, l.exit.as_ref(), &l.label))
        .collect();
    if blocks.is_empty() {
        ctx.emit("[no commands]");
    } else {
        ctx.emit(blocks.join("\n\n"));
    }
    ToolResult::completed()
}

/// The openvaala command tools of one session, served by its command supervisor
/// ([`ServiceKind::DetachedCommands`](crate::tools::ServiceKind::DetachedCommands)). Without a
/// supervisor each tool answers that it is unavailable.
#[derive(Clone)]
pub struct DetachedCommandTools {
    commands: Option<CommandSupervisorHandle>,
}

impl DetachedCommandTools {
    /// The openvaala profile's command tools over `commands` (`None`: every call answers that
    /// commands are unavailable).
    pub fn new(commands: Option<CommandSupervisorHandle>) -> Self {
        DetachedCommandTools { commands }
    }
}

impl ToolService for DetachedCommandTools {
    fn call(
        &self,
        tool: &str,
        ctx: ToolContext,
        args: Map<String, Value>,
    ) -> BoxFuture<'static, ToolResult> {
        let tool = tool.to_string();
        let commands = self.commands.clone();
        Box::pin(async move {
            let Some(commands) = commands else {
                return failed(
                    &ctx,
                    format!("[{tool} unavailable: no command session manager configured]"),
                );
            };
            call(commands, &tool, ctx, args).await
        })
    }
}
