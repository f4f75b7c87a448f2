//! `rookery run`: one task in a new session, printed as a transcript or as JSON lines.
//!
//! Exit codes: 0 when the task completed, 1 when it failed or was aborted, 2 for usage or
//! configuration errors. Ctrl-C aborts the task (every tool call keeps its output). A trace that
//! cannot be written fails the run (exit 1, `rookery: trace write failed: …` on stderr).

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use tokio::signal::unix::{Signal, SignalKind, signal};

use super::approve_prompt::TerminalApprover;
use super::{RunArgs, SessionArgs, render};
use crate::Host;
use crate::actors::session::SessionOptions;
use crate::approval::{ApprovalMode, PolicyApprover};
use crate::config::AgentConfig;
use crate::error::ConfigError;
use crate::message::launch::Launch;
use crate::message::{EventPayload, ModelPayload, StopReason};
use crate::trace::paths;

/// What a session-running subcommand needs, resolved from its flags.
pub struct Resolved {
    pub home: PathBuf,
    pub options: SessionOptions,
}

/// Resolves the shared session flags: workspace, model, config, approval.
pub fn resolve(args: &SessionArgs) -> Result<Resolved, ConfigError> {
    let workspace = match &args.workspace {
        Some(w) => w.clone(),
        None => std::env::current_dir().map_err(|e| ConfigError::Other(e.to_string()))?,
    };
    if !workspace.is_dir() {
        return Err(ConfigError::Workspace(workspace));
    }
    let mut config = match &args.config {
        Some(path) => AgentConfig::from_file(path)?,
        None => AgentConfig::default(),
    };
    if let Some(m) = args.max_turns {
        config.max_turns = m;
    }
    if let Some(p) = args.tools_profile {
        config.set_profile(p)?;
    }
    if let Some(path) = &args.hooks {
        let extra = crate::hooks::HooksConfig::from_file(path)
            .map_err(|e| ConfigError::Other(e.to_string()))?;
        config.hooks = Arc::new(config.hooks.merged(&extra));
    }
    let model = super::model_args::resolve_model(&args.model, &mut config)?;
    let approver = Arc::new(PolicyApprover::new(
        args.approve.unwrap_or(ApprovalMode::AllowAll),
        Arc::new(TerminalApprover::default()),
    ));
    let mut options = SessionOptions::new(workspace, model);
    options.launch = launch_of(args, &config);
    options.approver = approver;
    options.config = config;
    Ok(Resolved {
        home: paths::rookery_home(args.home.as_deref()),
        options,
    })
}

/// What `session_meta` records to reopen a session started with `args` (paths made absolute).
fn launch_of(args: &SessionArgs, config: &AgentConfig) -> Launch {
    let absolute = |p: &std::path::Path| {
        std::path::absolute(p)
            .unwrap_or_else(|_| p.to_path_buf())
            .display()
            .to_string()
    };
    let script = args.model.script.as_deref().map(absolute);
    let model = config.model.as_ref().filter(|_| script.is_none());
    Launch {
        base_url: model.and_then(|m| m.base_url.clone()),
        api_key_env: model.and_then(|m| m.api_key_env.clone()),
        tool_profile: Some(config.profile.name().to_string()),
        script_position: script.as_ref().map(|_| 0),
        script,
        config: args.config.as_deref().map(absolute),
        reopened_with: None,
    }
}

pub async fn run(args: RunArgs) -> i32 {
    // Installed before anything is created, so an early Ctrl-C still aborts cleanly.
    let interrupts = match Interrupts::install() {
        Ok(i) => i,
        Err(e) => {
            errln!("rookery: cannot install signal handlers: {e}");
            return 2;
        }
    };
    let resolved = match resolve(&args.session) {
        Ok(r) => r,
        Err(e) => {
            errln!("rookery: {e}");
            return 2;
        }
    };
    let host = match Host::start(resolved.home.clone()).await {
        Ok(h) => h,
        Err(e) => {
            errln!("rookery: {e}");
            return 2;
        }
    };
    let code = run_in_host(&host, resolved.options, &args, interrupts).await;
    host.shutdown().await;
    code
}

/// SIGINT and SIGTERM, both meaning "abort the task".
struct Interrupts {
    int: Signal,
    term: Signal,
}

impl Interrupts {
    fn install() -> std::io::Result<Self> {
        Ok(Interrupts {
            int: signal(SignalKind::interrupt())?,
            term: signal(SignalKind::terminate())?,
        })
    }

    async fn recv(&mut self) {
        tokio::select! {
            _ = self.int.recv() => {}
            _ = self.term.recv() => {}
        }
    }
}

async fn run_in_host(
    host: &Host,
    options: SessionOptions,
    args: &RunArgs,
    mut interrupts: Interrupts,
) -> i32 {
    let session = match host.create_session(options).await {
        Ok(s) => s,
        Err(e) => {
            errln!("rookery: {e}");
            return 2;
        }
    };
    let mut rx = match session.subscribe().await {
        Ok(rx) => rx,
        Err(e) => {
            errln!("rookery: {e}");
            return 1;
        }
    };
    if let Err(e) = session.start_task(args.prompt.clone()).await {
        errln!("rookery: {e}");
        return 1;
    }
    let mut status = StopReason::Failed;
    let mut stdout = std::io::stdout().lock();
    if args.json {
        let _ = writeln!(stdout, "{}", session.meta_message().to_json());
    }
    let mut interrupted = false;
    loop {
        let msg = tokio::select! {
            m = rx.recv() => m,
            _ = interrupts.recv(), if !interrupted => {
                interrupted = true;
                errln!("rookery: interrupted; aborting the task");
                let _ = session.abort();
                continue;
            }
        };
        let Some(msg) = msg else { break };
        let is_partial = msg.as_model().is_some_and(ModelPayload::is_partial);
        if args.json {
            if !is_partial || args.partials {
                let _ = writeln!(stdout, "{}", msg.to_json());
            }
        } else if let Some(text) = render::render(&msg) {
            let _ = writeln!(stdout, "{text}");
        }
        if let Some(EventPayload::TaskEnd { status: s }) = msg.as_event()
            && !msg.has_origin()
        {
            status = *s;
            break;
        }
    }
    let _ = stdout.flush();
    let _ = session.close().await;
    if !args.json {
        errln!("trace: {}", session.trace_path().display());
    }
    // Checked after the close, which waits for the last records: a trace that lost a record
    // fails the run even when the task itself completed.
    if let Some(failure) = session.trace_failure() {
        errln!("rookery: {failure}");
        return 1;
    }
    if status == StopReason::Completed {
        0
    } else {
        1
    }
}
