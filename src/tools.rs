//! Tools: the `Tool` trait every builtin and library-registered tool implements, the context a
//! call runs with, and the result it reports to the close-out.
//!
//! A tool streams text through [`ToolContext::emit`] and returns a [`ToolResult`]; it never
//! builds protocol messages itself. Framing, timeouts, truncation and notes belong to
//! [`close_out`], never to a tool. This module tree imports nothing from `src/actors/`: a tool
//! served by a session service is bound to it by the session ([`binding`],
//! `docs/architecture.md#service-bindings`).
//!
//! Glossary (one name per concept):
//! - [`Tool`]: an implementation that runs calls.
//! - [`ToolDefinitionConfig`]: what the model and the close-out know of a tool (name, schema,
//!   permission, timeout, output cap).
//! - [`ToolBinding`]: how a registered tool runs: `Local` (an `Arc<dyn Tool>`) or `Service` (a
//!   [`ServiceKind`] of the session).
//! - [`ToolService`]: a session service serving the calls of the tools bound to its kind.
//! - [`RegisteredTool`]: a registry entry: definition + binding.
//! - [`BoundTool`]: a registered tool bound for one call (definition + implementation): what the
//!   close-out runs.
//! - [`close_out::ToolCallInfo`]: the call to run (id, name, raw arguments), from the model.
//! - [`ToolEnv`]: what the session lends to one call (workspace, shared scope, write-lock
//!   ticket).
//! - [`ToolContext`]: what a running call sees: its [`ToolEnv`] plus its id, definition, cancel,
//!   write lock and output channel.
//! - [`ToolResult`]: what a call hands back when it ends (verdict, note, images, error).
//! - [`ToolReply`]: the finished text and verdict of a blocking file tool ([`BlockingFn`]),
//!   turned into a [`ToolResult`] by [`BlockingTool`].
//!
//! Each tool is found in one step under its profile: `profile/penguin/` and
//! `profile/openvaala/` hold every tool's definition and code (or, for a tool served by an
//! actor, a pointer to it). The files directly in `tools/` are the shared building blocks.
//!
//! (`SessionEnv` in `src/actors/spawn.rs` is not a tool type: what every session of a host
//! shares, i.e. where traces go and the byte counter.)

pub mod args;
pub mod binding;
pub mod canonical;
pub mod capped_read;
pub mod close_out;
pub mod definition;
pub mod diff_render;
pub mod escalation;
pub mod file_target;
pub mod fs_atomic;
pub mod image_source;
pub mod opened_at;
pub mod path_hint;
pub mod path_locks;
pub mod profile;
pub mod registry;
pub mod sandbox_guard;
pub mod secret_guard;
pub mod session_scope;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::sync::mpsc;

// What a `Tool` implementation names in its signatures, so an implementer needs no other crate.
pub use crate::message::StopReason;
pub use binding::{
    BoundTool, RegisteredTool, ServiceKind, ToolBinding, ToolService, ToolWrapper, not_served,
};
pub use futures::future::BoxFuture;
use path_locks::{PathGuard, PathKey, PathTicket};
pub use registry::{Permission, ToolDefinitionConfig, ToolRegistry};
pub use serde_json::{Map, Value};
pub use tokio_util::sync::CancellationToken;

/// What a tool hands back when it ends. Text was already streamed through the context.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolResult {
    /// The tool's own verdict (`completed` when `None`).
    pub stop_reason: Option<StopReason>,
    /// A note appended after the (possibly truncated) content, never cut (e.g. `[exit code: 1]`).
    pub note: Option<String>,
    /// Data URLs attached to a completed output.
    pub images: Vec<String>,
    /// The tool failed the way a thrown error would: becomes `[tool error] <msg>`.
    pub error: Option<String>,
}

impl ToolResult {
    /// A completed result with no note.
    pub fn completed() -> Self {
        Self::default()
    }

    /// A `failed` result with no note.
    pub fn failed() -> Self {
        ToolResult {
            stop_reason: Some(StopReason::Failed),
            ..Self::default()
        }
    }

    /// This result with `note` appended after the content.
    pub fn with_note(mut self, note: impl Into<String>) -> Self {
        self.note = Some(note.into());
        self
    }
}

/// A finished synchronous tool's text and verdict (what the file tools return).
#[derive(Debug, Clone, PartialEq)]
pub struct ToolReply {
    /// The output text the model reads.
    pub text: String,
    /// How the call ended.
    pub stop_reason: StopReason,
}

impl<E: std::error::Error> From<Result<String, E>> for ToolReply {
    /// `Ok` text completes; an error fails with its text.
    fn from(r: Result<String, E>) -> Self {
        match r {
            Ok(text) => ToolReply::ok(text),
            Err(e) => ToolReply::fail(e.to_string()),
        }
    }
}

impl ToolReply {
    /// A completed reply of `text`.
    pub fn ok(text: impl Into<String>) -> Self {
        ToolReply {
            text: text.into(),
            stop_reason: StopReason::Completed,
        }
    }

    /// A `failed` reply of `text`.
    pub fn fail(text: impl Into<String>) -> Self {
        ToolReply {
            text: text.into(),
            stop_reason: StopReason::Failed,
        }
    }
}

/// What the session lends to one call: its workspace, what its calls share, and the call's
/// write-lock ticket. A running call sees it as [`ToolContext::env`]. (The session's services
/// reach a call through the tool's binding, never through the context.)
#[derive(Clone, Debug)]
pub struct ToolEnv {
    /// Absolute workspace directory; relative paths resolve against it.
    pub workspace: PathBuf,
    /// The call's place in the session's call order, for the per-file write locks (`None`:
    /// the call is not serialized against others). The close-out spends it before the tool
    /// runs (a running call sees `None`; the lock it bought is [`ToolContext::path_guard`]).
    pub path_ticket: Option<PathTicket>,
    /// What the session's calls share (e.g. the instructions files already brought).
    pub scope: session_scope::SessionScope,
    /// The call's `execute_tool` span (empty with OpenTelemetry export off): a command gets
    /// its `TRACEPARENT`, a subagent's task becomes its child.
    pub otel: crate::telemetry::OtelSpan,
}

impl ToolEnv {
    /// The environment of a call in `workspace` that shares nothing and is not serialized.
    pub fn new(workspace: PathBuf) -> Self {
        ToolEnv {
            workspace,
            path_ticket: None,
            scope: session_scope::SessionScope::default(),
            otel: Default::default(),
        }
    }
}

/// Everything a running call may use: what the session lent it ([`ToolEnv`]) and what the
/// close-out gives it. Cheap to clone.
#[derive(Clone)]
pub struct ToolContext {
    /// The session's loan: workspace and shared scope (`env.workspace`, `env.scope`).
    pub env: ToolEnv,
    /// The id of the call being run.
    pub tool_call_id: String,
    /// The configured definition of the tool (limits, permission).
    pub definition: Arc<ToolDefinitionConfig>,
    /// Fires on user abort or the per-tool timeout; long tools must watch it.
    pub cancel: CancellationToken,
    /// The per-file write lock the call holds (see [`Tool::write_keys`]), kept alive by
    /// whatever does the call's work.
    pub path_guard: Option<Arc<PathGuard>>,
    output: mpsc::UnboundedSender<String>,
}

impl ToolContext {
    /// The context of a call in `workspace` that shares nothing with other calls.
    pub fn new(
        workspace: PathBuf,
        tool_call_id: String,
        definition: Arc<ToolDefinitionConfig>,
        cancel: CancellationToken,
        output: mpsc::UnboundedSender<String>,
    ) -> Self {
        Self::with_env(
            ToolEnv::new(workspace),
            tool_call_id,
            definition,
            cancel,
            output,
        )
    }

    /// The context of a call the session lent `env`.
    pub fn with_env(
        env: ToolEnv,
        tool_call_id: String,
        definition: Arc<ToolDefinitionConfig>,
        cancel: CancellationToken,
        output: mpsc::UnboundedSender<String>,
    ) -> Self {
        ToolContext {
            env,
            tool_call_id,
            definition,
            cancel,
            path_guard: None,
            output,
        }
    }

    /// Streams a piece of output. Empty text is ignored.
    pub fn emit(&self, text: impl Into<String>) {
        let text = text.into();
        if !text.is_empty() {
            // The receiver lives as long as the close-out; after it is gone nobody listens.
            let _ = self.output.send(text);
        }
    }

    /// Resolves a path argument against the workspace.
    pub fn resolve(&self, path: &str) -> PathBuf {
        resolve_path(&self.env.workspace, path)
    }
}

/// `path` if absolute, else `workspace/path`.
pub fn resolve_path(workspace: &Path, path: &str) -> PathBuf {
    let p = Path::new(path);
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        workspace.join(p)
    }
}

/// A tool the model can call. Implementations must not panic on any input; if one does, the
/// close-out turns the panic into a failed output. Nor may the returned future block its
/// thread (blocking work belongs on the blocking pool, as [`BlockingTool`] does it): its first
/// poll runs in the calling session's own task, and a call that is over then (a small file read
/// in place, a refused argument) is never spawned; the timeout only watches a call that goes on.
///
/// A tool of your own, registered in a session's config (every type it names comes from
/// `rookery::tools`):
///
/// ```
/// use std::sync::Arc;
///
/// use rookery::tools::{
///     BoxFuture, CancellationToken, Map, Permission, Tool, ToolContext, ToolDefinitionConfig,
///     ToolRegistry, ToolResult, Value,
/// };
///
/// /// Says how many characters its `text` argument has.
/// struct CountChars;
///
/// impl Tool for CountChars {
///     fn call(&self, ctx: ToolContext, args: Map<String, Value>) -> BoxFuture<'static, ToolResult> {
///         Box::pin(async move {
///             let Some(text) = args.get("text").and_then(Value::as_str) else {
///                 // Told to the model as `[tool error] ...`: it can fix its call.
///                 return ToolResult {
///                     error: Some("`text` must be a string".to_string()),
///                     ..ToolResult::failed()
///                 };
///             };
///             ctx.emit(format!("{} characters", text.chars().count()));
///             ToolResult::completed()
///         })
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let definition = ToolDefinitionConfig::new(
///     "count_chars",
///     "Counts the characters of a text.",
///     serde_json::json!({
///         "type": "object",
///         "properties": {"text": {"type": "string"}},
///         "required": ["text"]
///     }),
///     Permission::Read,
/// );
/// // In a session: `options.config.tools.register(definition, Arc::new(CountChars))`.
/// let mut registry = ToolRegistry::empty();
/// registry.register(definition.clone(), Arc::new(CountChars));
/// assert!(registry.get("count_chars").is_some());
///
/// // Called directly, as the session's close-out would call it:
/// let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
/// let ctx = ToolContext::new(
///     std::env::temp_dir(),
///     "call_1".to_string(),
///     Arc::new(definition),
///     CancellationToken::new(),
///     tx,
/// );
/// let mut args = Map::new();
/// args.insert("text".to_string(), Value::from("héllo"));
/// let result = CountChars.call(ctx, args).await;
/// assert_eq!(result, ToolResult::completed());
/// assert_eq!(rx.recv().await.as_deref(), Some("5 characters"));
/// # }
/// ```
pub trait Tool: Send + Sync + 'static {
    /// Runs one call with already-parsed object arguments.
    fn call(&self, ctx: ToolContext, args: Map<String, Value>) -> BoxFuture<'static, ToolResult>;

    /// The files a call with `args` writes: calls of one session writing one file run one
    /// after another in call order. Default: none.
    fn write_keys(&self, _workspace: &Path, _args: &Map<String, Value>) -> Vec<PathKey> {
        Vec::new()
    }
}

/// What a blocking tool writes: `fn(workspace, args) -> keys` (see [`Tool::write_keys`]).
pub type WriteKeysFn = fn(&Path, &Map<String, Value>) -> Vec<PathKey>;

/// A blocking file tool: `fn(workspace, args, definition) -> ToolReply`.
pub type BlockingFn = fn(&Path, &Map<String, Value>, &ToolDefinitionConfig) -> ToolReply;

/// Adapts a blocking `fn(workspace, args, definition) -> ToolReply` (the file tools) to [`Tool`]:
/// runs it on the blocking pool and streams its text as one delta. (read_file, which knows from
/// the `stat` it takes anyway whether a call is small, has its own adapter: `read_file::ReadFile`.)
pub struct BlockingTool {
    run: BlockingFn,
    writes: Option<WriteKeysFn>,
}

impl BlockingTool {
    /// A tool running `run` on the blocking pool; it writes no path (see `writing`).
    pub fn new(run: BlockingFn) -> Self {
        BlockingTool { run, writes: None }
    }

    /// Declares what a call writes (its calls on one file are serialized in call order).
    pub fn writing(mut self, writes: WriteKeysFn) -> Self {
        self.writes = Some(writes);
        self
    }
}

impl Tool for BlockingTool {
    fn call(&self, ctx: ToolContext, args: Map<String, Value>) -> BoxFuture<'static, ToolResult> {
        let run = self.run;
        Box::pin(async move {
            let workspace = ctx.env.workspace.clone();
            let def = ctx.definition.clone();
            run_file_work(&ctx, Placement::Pool, move || run(&workspace, &args, &def)).await
        })
    }

    fn write_keys(&self, workspace: &Path, args: &Map<String, Value>) -> Vec<PathKey> {
        self.writes.map_or_else(Vec::new, |f| f(workspace, args))
    }
}

/// The text of a caught panic payload.
pub fn panic_message(payload: Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        format!("tool panicked: {s}")
    } else if let Some(s) = payload.downcast_ref::<String>() {
        format!("tool panicked: {s}")
    } else {
        "tool panicked".to_string()
    }
}

/// Where a file tool's blocking work runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// On the calling task: a hop to the blocking pool costs more than reading a small local
    /// file.
    InPlace,
    /// On tokio's blocking pool.
    Pool,
}

/// Runs a file tool's blocking `work` where `placement` says (a panic becomes a failed output)
/// and streams its text as one delta. The call's write lock lives as long as the work, even if
/// the calling task is aborted meanwhile.
pub async fn run_file_work(
    ctx: &ToolContext,
    placement: Placement,
    work: impl FnOnce() -> ToolReply + Send + 'static,
) -> ToolResult {
    let outcome = match placement {
        Placement::InPlace => {
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)).map_err(panic_message)
        }
        Placement::Pool => {
            let guard = ctx.path_guard.clone();
            tokio::task::spawn_blocking(move || {
                let _guard = guard;
                work()
            })
            .await
            .map_err(|e| {
                if e.is_panic() {
                    panic_message(e.into_panic())
                } else {
                    e.to_string()
                }
            })
        }
    };
    match outcome {
        Ok(reply) => {
            ctx.emit(reply.text);
            ToolResult {
                stop_reason: Some(reply.stop_reason),
                ..ToolResult::default()
            }
        }
        Err(error) => ToolResult {
            error: Some(error),
            ..ToolResult::default()
        },
    }
}
