//! What a caller gives to create a session (`SessionOptions`), what it can ask of a running one
//! (`SessionStatus`), and the `session_meta` record a new session starts with.
//!
//! Plain data and one pure constructor; nothing here runs or records.

use std::path::PathBuf;
use std::sync::Arc;

use crate::approval::Approver;
use crate::config::AgentConfig;
use crate::message::{ModelPayload, SessionMeta};
use crate::model::Model;
use crate::trace::resume::ResumeState;

/// What a caller gives to create a session.
#[derive(Clone)]
pub struct SessionOptions {
    /// Must exist; relative tool paths resolve against it.
    pub workspace: PathBuf,
    /// The model the session asks.
    pub model: Arc<dyn Model>,
    /// Decides each tool call. The library default ([`crate::approval::DenyAllApprover`]) denies all.
    pub approver: Arc<dyn Approver>,
    /// The session's system prompt, tools, limits and policies.
    pub config: AgentConfig,
    /// `session_meta.source` (`subagent`, `schedule`); `None` for a user session.
    pub(crate) source: Option<String>,
    /// A subagent's parent session id (its store row's `parent`); `None` for a user session.
    pub(crate) parent: Option<String>,
    /// `session_meta.owner`: the principal the session belongs to (a subagent inherits its
    /// parent's; a resume restores the recorded one).
    pub owner: Option<String>,
    /// A subagent's prompt (the scripted model picks its `children` entry by it).
    pub(crate) first_prompt: Option<String>,
    /// 0 for a user session, 1 for a subagent (which gets no subagent tools).
    pub(crate) depth: u32,
    /// Continue from a trace instead of starting fresh (set by `Host::resume_session`).
    pub(crate) resume: Option<Arc<ResumeState>>,
    /// Extra environment of the session's shell commands (e.g. `HOME`); the hardened keys
    /// still win.
    pub command_env: Vec<(String, String)>,
    /// Secret values besides the provider key (e.g. the serve token): scrubbed from the trace
    /// and the stream, and never in a command's environment.
    pub secrets: Vec<String>,
    /// Recorded in `session_meta` so the session can be reopened without its flags. On a
    /// resume whose `reopened_with` is set, a new `session_meta` with these values is appended.
    pub(crate) launch: crate::message::launch::Launch,
    /// Completed turns copied in before the first task (a spawned agent's `fork_turns`):
    /// recorded as one `forked_history` event and sent first with every request.
    pub(crate) forked_history: Arc<Vec<ModelPayload>>,
    /// The session's sandbox as set up when it started (from `config.sandbox`; `None`: off).
    /// Set by the spawn, never by a caller.
    pub(crate) sandbox: Option<Arc<crate::sandbox::SessionSandbox>>,
    /// On a resume: the sandbox asked for explicitly (a flag, the API's field). Empty: the
    /// recorded one is restored; a request looser than it is refused (`NotAllowed`).
    pub resume_sandbox: crate::sandbox::SandboxRequest,
    /// A task's prompt goes to the subscribers too, not only to the trace (`rookery serve`
    /// streams it; a subagent's is always streamed to its parent).
    pub(crate) stream_prompt: bool,
    /// The OpenTelemetry span the session's tasks are children of (a subagent's: the tool
    /// call that started it); empty for a root session or with export off.
    pub(crate) otel_parent: crate::telemetry::OtelSpan,
}

impl SessionOptions {
    /// Options for a session in `workspace` on `model`, everything else the library's default
    /// (deny-all approver, default agent config).
    pub fn new(workspace: impl Into<PathBuf>, model: Arc<dyn Model>) -> Self {
        SessionOptions {
            workspace: workspace.into(),
            model,
            approver: Arc::new(crate::approval::DenyAllApprover),
            config: AgentConfig::default(),
            source: None,
            parent: None,
            owner: None,
            first_prompt: None,
            depth: 0,
            resume: None,
            command_env: Vec::new(),
            secrets: Vec::new(),
            launch: Default::default(),
            forked_history: Default::default(),
            sandbox: None,
            resume_sandbox: Default::default(),
            stream_prompt: false,
            otel_parent: Default::default(),
        }
    }
}

/// Idle, running, or failed (its trace can no longer be written; it takes no new task).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionStatus {
    /// No task runs; it takes a new one.
    Idle,
    /// A task runs.
    Running,
    /// Its trace can no longer be written; it takes no new task.
    Failed,
}

/// The `session_meta` of a new session.
pub(crate) fn session_meta(id: &str, options: &SessionOptions) -> SessionMeta {
    let info = options.model.info();
    SessionMeta {
        session_id: id.to_string(),
        provider: info.provider,
        model_id: info.model_id,
        model_context_window: info.context_window,
        system_prompt: options.config.system_prompt.clone(),
        agent_state: options.workspace.display().to_string(),
        workspace: options.workspace.display().to_string(),
        source: options.source.clone(),
        owner: options.owner.clone(),
        approval_mode: options
            .approver
            .policy()
            .map(|p| p.mode().as_str().to_string()),
        forked_from: None,
        launch: Box::new(crate::message::launch::Launch {
            tool_profile: Some(options.config.profile.name().to_string()),
            sandbox: (!options.config.sandbox.is_off()).then(|| options.config.sandbox.clone()),
            ..options.launch.clone()
        }),
    }
}
