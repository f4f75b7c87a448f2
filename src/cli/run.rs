//! `rookery run`: one task in a new session, printed as a transcript or as JSON lines.
//!
//! Exit codes: 0 when the task completed, 1 when it failed or was aborted, 2 for usage or
//! configuration errors, 130 after Ctrl-C (SIGINT), which aborts the task (every tool call keeps
//! its output; SIGTERM aborts it too, exit 1). A trace that cannot be written fails the run
//! (exit 1, `rookery: trace write failed: …` on stderr). The prompt `-` is read from stdin.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use tokio::signal::unix::{Signal, SignalKind, signal};

use super::approve_prompt::TerminalApprover;
use super::live::{LiveView, TerminalStyle};
use super::status_line::StatusLine;
use super::{CliError, RunArgs, SessionArgs, render};
use crate::Host;
use crate::actors::session::SessionOptions;
use crate::actors::session_api::OutputSchema;
use crate::approval::{ApprovalMode, PolicyApprover};
use crate::config::AgentConfig;
use crate::config::ConfigError;
use crate::message::launch::Launch;
use crate::message::{EventPayload, ModelPayload, StopReason};
use crate::trace::paths;

/// What a session-running subcommand needs, resolved from its flags.
pub struct Resolved {
    /// The Rookery home (traces).
    pub home: PathBuf,
    /// The options of the session to open.
    pub options: SessionOptions,
}

/// Resolves the shared session flags: workspace, model, config, approval.
pub fn resolve(args: &SessionArgs) -> Result<Resolved, CliError> {
    resolve_with_status(args, StatusLine::disabled())
}

/// [`resolve`], with the terminal approver pausing `status` (the spinner) while it asks.
pub fn resolve_with_status(args: &SessionArgs, status: StatusLine) -> Result<Resolved, CliError> {
    let workspace = match &args.workspace {
        Some(w) => w.clone(),
        None => std::env::current_dir()
            .map_err(|e| CliError::startup_io("cannot read the current directory", e))?,
    };
    if !workspace.is_dir() {
        return Err(ConfigError::Workspace(workspace).into());
    }
    let home = paths::rookery_home(args.home.as_deref());
    let mut config = load_layers(args, &workspace, &home)?.config;
    if let Some(m) = args.max_turns {
        config.max_turns = m;
    }
    if let Some(path) = &args.mcp_config {
        config.add_mcp_config(path)?;
    }
    if let Some(p) = args.tools_profile {
        config.set_profile(p)?;
    }
    // The flags win over the config's `sandbox:` (a resume weighs them in the host instead).
    config.sandbox = args.sandbox.request().apply(&config.sandbox);
    if let Some(path) = &args.hooks {
        let extra = crate::hooks::HooksConfig::from_file(path).map_err(ConfigError::from)?;
        config.hooks = Arc::new(config.hooks.merged(&extra));
    }
    if let Some(path) = &args.settings {
        let settings = crate::config::settings::Settings::from_file(path)?;
        config.hooks = Arc::new(config.hooks.merged(&settings.hooks));
        config.permissions = Arc::new(config.permissions.merged(&settings.permissions));
    }
    let model = super::model_args::resolve_model(&args.model, &mut config)?;
    let approver = Arc::new(PolicyApprover::new(
        args.approve.unwrap_or(ApprovalMode::AllowAll),
        Arc::new(TerminalApprover::with_status(status)),
    ));
    let mut options = SessionOptions::new(workspace, model);
    options.launch = launch_of(args, &config);
    options.resume_sandbox = args.sandbox.request();
    options.approver = approver;
    options.config = config;
    Ok(Resolved { home, options })
}

/// The config of the user file, the project file (or `--config FILE`) and the `ROOKERY_*`
/// environment, merged (`config::loader`); the flags are the caller's to apply.
pub fn load_layers(
    args: &SessionArgs,
    workspace: &std::path::Path,
    home: &std::path::Path,
) -> Result<crate::config::loader::Loaded, CliError> {
    let env = crate::model::environment::process_env;
    let discover = !args.no_config_discovery && !crate::config::discovery::disabled_by_env(&env);
    let m = &args.model;
    let provider_flag = match (&m.script, &m.provider, &m.base_url) {
        (Some(_), _, _) => Some(("scripted", "--script")),
        (None, Some(p), _) => Some((p.as_str(), "--provider")),
        (None, None, Some(_)) => {
            Some((crate::model::environment::implied_provider(), "--base-url"))
        }
        (None, None, None) => None,
    };
    Ok(crate::config::loader::load(
        &crate::config::loader::Sources {
            workspace,
            explicit: args.config.as_deref(),
            discover,
            home: Some(home),
            env: &env,
            provider_flag,
        },
    )?)
}

/// What `session_meta` records to reopen a session started with `args` (paths made absolute).
fn launch_of(args: &SessionArgs, config: &AgentConfig) -> Launch {
    launch_from(&args.model, args.config.as_deref(), config)
}

/// What `session_meta` records of the model flags, the config file and the resolved config.
pub fn launch_from(
    model_args: &super::model_args::ModelArgs,
    config_path: Option<&std::path::Path>,
    config: &AgentConfig,
) -> Launch {
    let absolute = |p: &std::path::Path| {
        std::path::absolute(p)
            .unwrap_or_else(|_| p.to_path_buf())
            .display()
            .to_string()
    };
    let script = model_args.script.as_deref().map(absolute);
    let model = config.model.as_ref().filter(|_| script.is_none());
    Launch {
        base_url: model.and_then(|m| m.base_url.clone()),
        api_key_env: model.and_then(|m| m.api_key_env.clone()),
        tool_profile: Some(config.profile.name().to_string()),
        script_position: script.as_ref().map(|_| 0),
        script,
        config: config_path.map(absolute),
        reopened_with: None,
        sandbox: None,
    }
}

/// The exit code of a run ended by Ctrl-C (128 + SIGINT), as shells report it.
pub const EXIT_INTERRUPTED: u8 = 130;

/// `rookery run`: one task in a new session, its transcript printed (or JSON lines with `--json`).
pub async fn run(mut args: RunArgs) -> Result<ExitCode, CliError> {
    // Installed before anything is created, so an early Ctrl-C still aborts cleanly.
    let mut interrupts = Interrupts::install()
        .map_err(|e| CliError::startup_io("cannot install signal handlers", e))?;
    if args.prompt == "-" {
        tokio::select! {
            prompt = prompt_from_stdin() => args.prompt = prompt?,
            sig = interrupts.recv() => return Ok(ExitCode::from(sig.exit_code())),
        }
    }
    let schema = args
        .output_schema
        .as_deref()
        .map(|path| super::output_schema_file::load(path, args.max_output_retries))
        .transpose()?;
    // On a terminal (and without --json) the transcript streams, with a spinner on stderr.
    let view = (!args.json && std::io::stdout().is_terminal()).then(|| {
        let style = TerminalStyle::detect();
        let status = StatusLine::new(style.spinner);
        LiveView::new(std::io::stdout(), style, status, !args.hide_thinking)
    });
    let status = view
        .as_ref()
        .map_or_else(StatusLine::disabled, |v| v.status().clone());
    let resolved = resolve_with_status(&args.session, status)?;
    let host = args.session.store.host(resolved.home.clone()).await?;
    let result = run_in_host(&host, resolved.options, &args, schema, interrupts, view).await;
    host.shutdown().await;
    result
}

/// The user's prompt as the session's trace recorded it (the last root user text without a
/// sender so far).
async fn recorded_prompt(
    host: &Host,
    session: &crate::actors::session::SessionHandle,
) -> Option<crate::message::OmniMessage> {
    session.flush_trace().await.ok()?;
    let read = match host.store() {
        Some(store) => {
            let trace = crate::store::listing::read_trace(store, session.id())
                .await
                .ok()?;
            crate::trace::reader::parse_trace_bytes(&trace.latest)
        }
        None => crate::trace::reader::read_trace(&session.trace_path()).ok()?,
    };
    read.records.into_iter().rev().find(|r| {
        !r.has_origin()
            && matches!(
                r.as_model(),
                // The user's own text: not a harness-sent one (schema or Stop hook feedback)
                // the task may already have recorded by now.
                Some(p @ ModelPayload::Text { sender: None, .. })
                    if p.role() == crate::message::Role::User
            )
    })
}

/// The prompt of `run -`: all of stdin, without its trailing whitespace (the newline of `echo`).
async fn prompt_from_stdin() -> Result<String, CliError> {
    use tokio::io::AsyncReadExt;
    let mut bytes = Vec::new();
    tokio::io::stdin()
        .read_to_end(&mut bytes)
        .await
        .map_err(|e| CliError::startup_io("run -: cannot read the prompt from stdin", e))?;
    let text = String::from_utf8(bytes).map_err(|e| {
        CliError::usage(format!(
            "run -: the prompt on stdin is not valid UTF-8 (invalid byte at offset {})",
            e.utf8_error().valid_up_to()
        ))
    })?;
    let prompt = text.trim_end();
    if prompt.trim().is_empty() {
        return Err(CliError::usage("run -: stdin held no prompt"));
    }
    Ok(prompt.to_string())
}

/// Which signal interrupted the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Interrupt {
    Int,
    Term,
}

impl Interrupt {
    /// 130 for Ctrl-C; SIGTERM keeps the code of an aborted task.
    fn exit_code(self) -> u8 {
        match self {
            Interrupt::Int => EXIT_INTERRUPTED,
            Interrupt::Term => 1,
        }
    }
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

    async fn recv(&mut self) -> Interrupt {
        tokio::select! {
            _ = self.int.recv() => Interrupt::Int,
            _ = self.term.recv() => Interrupt::Term,
        }
    }
}

async fn run_in_host(
    host: &Host,
    options: SessionOptions,
    args: &RunArgs,
    schema: Option<OutputSchema>,
    mut interrupts: Interrupts,
    mut view: Option<LiveView<std::io::Stdout>>,
) -> Result<ExitCode, CliError> {
    let session = host
        .create_session_for_task(options)
        .await
        .map_err(CliError::Start)?;
    let mut rx = session.subscribe().await.map_err(CliError::Failed)?;
    let started = match schema {
        Some(schema) => {
            session
                .start_structured_task(args.prompt.clone(), schema)
                .await
        }
        None => session.start_task(args.prompt.clone()).await,
    };
    started.map_err(CliError::Failed)?;
    let mut status = StopReason::Failed;
    if let Some(v) = view.as_mut() {
        v.waiting();
    }
    let mut stdout = std::io::stdout();
    if args.json {
        let _ = writeln!(stdout, "{}", session.meta_message().to_json());
    }
    // The prompt is recorded, not streamed: with --json its trace record follows the meta. It
    // is in the trace's queue once the task has emitted anything (the session records the
    // prompt, then starts emitting), so it is read at the first message.
    let mut prompt_pending = args.json;
    let mut transcript = render::Transcript::default();
    let mut interrupted = None;
    loop {
        let msg = tokio::select! {
            m = rx.recv() => m,
            sig = interrupts.recv(), if interrupted.is_none() => {
                interrupted = Some(sig);
                if let Some(v) = view.as_mut() {
                    v.stop();
                }
                errln!("rookery: interrupted; aborting the task");
                let _ = session.abort();
                continue;
            }
        };
        let Some(msg) = msg else { break };
        if prompt_pending {
            prompt_pending = false;
            if let Some(prompt) = recorded_prompt(host, &session).await {
                let _ = writeln!(stdout, "{}", prompt.to_json());
            }
        }
        let is_partial = msg.as_model().is_some_and(ModelPayload::is_partial);
        if args.json {
            if !is_partial || args.partials {
                let _ = writeln!(stdout, "{}", msg.to_json());
            }
        } else if let Some(v) = view.as_mut() {
            v.show(&msg);
        } else if let Some(text) = transcript.render(&msg) {
            let _ = writeln!(stdout, "{text}");
        }
        if let Some(EventPayload::TaskEnd { status: s, .. }) = msg.as_event()
            && !msg.has_origin()
        {
            status = *s;
            break;
        }
    }
    if let Some(v) = view.as_mut() {
        v.stop();
    }
    let _ = stdout.flush();
    let _ = session.close().await;
    errln!("trace: {}", session.trace_path().display());
    // Checked after the close, which waits for the last records: a trace that lost a record
    // fails the run even when the task itself completed.
    if let Some(failure) = session.trace_failure() {
        return Err(CliError::TraceFailed(failure));
    }
    if interrupted == Some(Interrupt::Int) {
        return Ok(ExitCode::from(EXIT_INTERRUPTED));
    }
    Ok(ExitCode::from(if status == StopReason::Completed {
        0
    } else {
        1
    }))
}
