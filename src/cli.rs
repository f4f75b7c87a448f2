//! The `rookery` command line: argument definitions and dispatch to subcommands.
//!
//! Parsing only; each subcommand lives in its own file under `cli/`. Usage and configuration
//! errors exit 2 with a one-line reason on stderr.

/// Like `eprintln!`, but a closed or broken stderr is ignored instead of panicking: the CLI
/// must end quietly when the reader of its output goes away (`rookery run … 2>&1 | head -1`).
macro_rules! errln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}
/// Like `eprint!`, ignoring a closed stderr (see `errln!`).
macro_rules! errp {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stderr(), $($arg)*);
    }};
}
/// Like `println!`, ignoring a closed stdout (see `errln!`).
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

pub mod approve_prompt;
pub mod bench;
pub mod chat;
pub mod model_args;
pub mod render;
pub mod reopen;
pub mod run;
pub mod serve;
pub mod sessions;

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::approval::ApprovalMode;
use model_args::ModelArgs;

#[derive(Debug, Parser)]
#[command(
    name = "rookery",
    version,
    about = "An actor-based session runtime for LLM agents",
    arg_required_else_help = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run one task in a new session and print its transcript.
    Run(RunArgs),
    /// Chat with one session: each input line is a task (Ctrl-C aborts it, /exit quits).
    Chat(ChatArgs),
    /// Serve sessions over HTTP + SSE.
    Serve(ServeArgs),
    /// Run the standard load workload (N sessions x K tool calls) and print its figures.
    Bench(BenchArgs),
    /// List, show and delete recorded sessions (ids may be abbreviated).
    Sessions(sessions::SessionsArgs),
}

/// Options shared by every subcommand that runs sessions.
#[derive(Debug, Clone, Args)]
pub struct SessionArgs {
    /// Working directory of the session (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// Where traces go (default: $ROOKERY_HOME, else ~/.rookery).
    #[arg(long, value_name = "DIR")]
    pub home: Option<PathBuf>,
    #[command(flatten)]
    pub model: ModelArgs,
    /// An agent config (YAML): system_prompt, max_turns, retry, tools.builtin, model.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// PreToolUse/PostToolUse hooks: a Claude Code settings.json or its `hooks` object (run
    /// besides the config's `hooks:`).
    #[arg(long, value_name = "FILE")]
    pub hooks: Option<PathBuf>,
    /// How tool calls are approved (default allow-all; a resumed chat keeps its recorded mode).
    #[arg(long, value_name = "MODE", value_parser = parse_mode)]
    pub approve: Option<ApprovalMode>,
    /// Stop after N model turns (<= 0: unlimited). Overrides the config.
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub max_turns: Option<i64>,
    /// The tool surface: penguin (default) or openvaala. Overrides the config's tools.profile.
    #[arg(long, value_name = "PROFILE", value_parser = parse_profile)]
    pub tools_profile: Option<crate::tools::profile::ToolProfile>,
}

fn parse_profile(s: &str) -> Result<crate::tools::profile::ToolProfile, String> {
    s.parse()
        .map_err(|e: crate::tools::profile::UnknownProfile| e.to_string())
}

fn parse_mode(s: &str) -> Result<ApprovalMode, String> {
    s.parse()
}

#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub session: SessionArgs,
    /// Print every complete message and event as one JSON line.
    #[arg(long)]
    pub json: bool,
    /// With --json, also print streaming partials.
    #[arg(long, requires = "json")]
    pub partials: bool,
    /// The task for the agent.
    #[arg(value_name = "PROMPT")]
    pub prompt: String,
}

#[derive(Debug, Clone, Args)]
pub struct ChatArgs {
    #[command(flatten)]
    pub session: SessionArgs,
    /// Continue an earlier session (its trace is appended to).
    #[arg(long, value_name = "ID")]
    pub resume: Option<String>,
}

#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// Address to listen on (port 0 picks a free port; the first stdout line names it).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:7878")]
    pub listen: String,
    /// Where traces go (default: $ROOKERY_HOME, else ~/.rookery).
    #[arg(long, value_name = "DIR")]
    pub home: Option<PathBuf>,
    /// The agent config (YAML) of sessions that name none.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// The tool surface of sessions that name none: penguin (default) or openvaala.
    /// Overrides the config's tools.profile; `tools_profile` in `POST /v1/sessions` wins.
    #[arg(long, value_name = "PROFILE", value_parser = parse_profile)]
    pub tools_profile: Option<crate::tools::profile::ToolProfile>,
    #[command(flatten)]
    pub model: ModelArgs,
    /// The bearer token every route but /healthz needs, read from this environment variable
    /// (default: a random token generated at start and written to `<home>/serve.token`).
    #[arg(long, value_name = "VAR", conflicts_with = "no_auth")]
    pub token_env: Option<String>,
    /// Serve without a token (refused unless the listen address is loopback).
    #[arg(long)]
    pub no_auth: bool,
    /// A browser origin allowed to call the API, e.g. http://localhost:3000 (repeatable).
    #[arg(long, value_name = "ORIGIN")]
    pub allow_origin: Vec<String>,
    /// A host name clients may use in `Host` besides the listen address, localhost and
    /// loopback addresses (repeatable).
    #[arg(long, value_name = "NAME")]
    pub allow_host: Vec<String>,
    /// The directory of named session configs (`config: "<name>"` is `DIR/<name>.yaml` or `.yml`).
    #[arg(long, value_name = "DIR")]
    pub config_dir: Option<PathBuf>,
    /// PreToolUse/PostToolUse hooks of every served session: a Claude Code settings.json or
    /// its `hooks` object.
    #[arg(long, value_name = "FILE")]
    pub hooks: Option<PathBuf>,
    /// At most N sessions served at once (more are refused with 503).
    #[arg(long, value_name = "N", default_value_t = 1000)]
    pub max_sessions: usize,
    /// How long a request body may take to arrive, in milliseconds (408 after that).
    #[arg(long, value_name = "MS", default_value_t = 30_000, hide = true)]
    pub body_timeout_ms: u64,
}

#[derive(Debug, Clone, Args)]
pub struct BenchArgs {
    /// The tool every model turn calls: `exec` (exec_command `true`) or `read` (read_file).
    #[arg(long, value_name = "WORKLOAD", default_value = "exec", value_parser = parse_workload)]
    pub workload: crate::bench::Workload,
    /// Concurrent sessions, each running one task.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub sessions: usize,
    /// Tool calls per session (K).
    #[arg(long, value_name = "K", default_value_t = 10)]
    pub turns: usize,
    /// Delay of each built-in model answer.
    #[arg(long, value_name = "MS", default_value_t = 0)]
    pub model_latency_ms: u64,
    #[command(flatten)]
    pub model: ModelArgs,
    /// Where traces go (default: a temp dir, removed afterwards).
    #[arg(long, value_name = "DIR")]
    pub home: Option<PathBuf>,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
    /// Create N idle sessions (trace header written, no task) and report the RSS per session.
    #[arg(long, value_name = "N")]
    pub idle_sessions: Option<usize>,
    /// Also measure the spawn floors (`bash -lc true`) in the same run and print the ratios.
    #[arg(long)]
    pub floor: bool,
    /// Spawns of the concurrent floor.
    #[arg(long, value_name = "N", default_value_t = 1000)]
    pub floor_spawns: usize,
    /// Concurrent workers of the concurrent floor.
    #[arg(long, value_name = "N", default_value_t = 100)]
    pub floor_workers: usize,
    /// Serve the workload's model as a loopback OpenAI-compatible endpoint (prints its base URL).
    #[arg(long)]
    pub serve_mock: bool,
    /// Address of `--serve-mock` (port 0 picks a free port).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0")]
    pub listen: String,
}

fn parse_workload(s: &str) -> Result<crate::bench::Workload, String> {
    s.parse()
}

/// Runs the parsed command; returns the process exit code.
pub async fn dispatch(cli: Cli) -> i32 {
    match cli.command {
        Command::Run(args) => run::run(args).await,
        Command::Chat(args) => chat::chat(args).await,
        Command::Serve(args) => serve::serve(args).await,
        Command::Bench(args) => bench::bench(args).await,
        Command::Sessions(args) => sessions::sessions(args),
    }
}
