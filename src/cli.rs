//! The `rookery` command line: argument definitions and dispatch to subcommands.
//!
//! Parsing only; each subcommand lives in its own file under `cli/` and returns its exit code or
//! a [`CliError`], which `main` prints once. Usage and configuration errors exit 2 with a
//! one-line reason on stderr. Flags with a fixed set of values list them in their help
//! ([`choices`]).

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
pub mod auth;
pub mod bench;
mod bench_args;
mod bench_failover;
mod bench_forwarding;
mod bench_hibernation;
mod bench_meta;
mod bench_nodes;
mod bench_report;
mod bench_rounds;
mod bench_sandbox;
pub mod bench_trace;
pub mod chat;
pub mod cluster_args;
pub mod completions;
pub mod config_show;
pub mod error;
pub mod live;
pub mod model_args;
pub mod otel_args;
pub mod output_schema_file;
pub mod render;
pub mod reopen;
pub mod run;
pub mod serve;
pub mod sessions;
#[cfg(target_os = "linux")]
pub mod startup;
pub mod status_line;
pub mod store;
pub mod store_args;
pub mod terminal_text;
pub mod webhook_args;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use clap::{Args, Parser, Subcommand};

use crate::approval::ApprovalMode;
pub use bench_args::{BenchAction, BenchArgs, BenchModelArgs};
pub use error::CliError;
use model_args::ModelArgs;

/// A flag's values with one line of help each: `-h` lists them as `[possible values: …]`,
/// `--help` one per line, and a missing or unknown value names them. A new flag with a fixed
/// set of values (e.g. a tool profile) is `value_parser = choices(&[…]).try_map(…)`.
pub fn choices(values: &'static [(&'static str, &'static str)]) -> PossibleValuesParser {
    PossibleValuesParser::new(
        values
            .iter()
            .map(|(name, help)| PossibleValue::new(*name).help(*help)),
    )
}

/// The approval modes of `--approve`.
pub const APPROVAL_MODES: &[(&str, &str)] = &[
    ("allow-all", "run every tool call (the default)"),
    ("deny-all", "deny every tool call"),
    (
        "read-only",
        "allow tools with permission r, ask for the rest",
    ),
    ("always-ask", "ask before every tool call"),
];

/// The workloads of `bench --workload`.
pub const WORKLOADS: &[(&str, &str)] = &[
    ("exec", "every model turn calls exec_command `true`"),
    ("read", "every model turn calls read_file on a 20-line file"),
];

/// What `--version` prints after `rookery `: the package version and the commit built.
pub const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (", env!("ROOKERY_COMMIT"), ")");

/// The command line of `rookery`.
#[derive(Debug, Parser)]
#[command(
    name = "rookery",
    version = VERSION,
    about = "An actor-based session runtime for LLM agents",
    arg_required_else_help = true
)]
pub struct Cli {
    /// The subcommand to run.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands of `rookery`.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run one task in a new session and print its transcript.
    Run(RunArgs),
    /// Chat with one session: each input line is a task (Ctrl-C aborts it, /exit quits).
    Chat(ChatArgs),
    /// Serve sessions over HTTP + SSE.
    Serve(Box<ServeArgs>),
    /// Run the standard load workload (N sessions x K tool calls) and print its figures.
    Bench(BenchArgs),
    /// List, show and delete recorded sessions (ids may be abbreviated).
    Sessions(sessions::SessionsArgs),
    /// The postgres trace store: migrate its schema, export a trace, import a files home.
    Store(store::StoreArgs),
    /// Inspect the config a session would get (`config show`).
    Config(config_show::ConfigArgs),
    /// Print a shell completion script (e.g. `source <(rookery completions bash)`).
    Completions(completions::CompletionsArgs),
    /// Print the manual page (roff), e.g. `rookery man | man -l -`.
    Man,
    /// Helpers of `rookery serve --auth` (e.g. `rookery auth hash-token`).
    Auth(auth::AuthArgs),
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
    /// Which model to use (`--script`, `--provider`, `--model`, …).
    #[command(flatten)]
    pub model: ModelArgs,
    /// Where the session lives (`--store`, `--lease-ttl`).
    #[command(flatten)]
    pub store: store_args::StoreArgs,
    /// An agent config (YAML): system_prompt, max_turns, retry, tools.builtin, model. Read in
    /// place of the project's .rookery/config.yaml, above the user config (docs/configuration.md).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Read no user or project config file (as ROOKERY_NO_CONFIG=1); --config still applies.
    #[arg(long)]
    pub no_config_discovery: bool,
    /// PreToolUse/PostToolUse hooks: a Claude Code settings.json or its `hooks` object (run
    /// besides the config's `hooks:`).
    #[arg(long, value_name = "FILE")]
    pub hooks: Option<PathBuf>,
    /// A Claude Code settings.json: its `hooks` and `permissions` (other keys are ignored
    /// with a warning).
    #[arg(long, value_name = "FILE")]
    pub settings: Option<PathBuf>,
    /// MCP servers: a Claude Code style `.mcp.json` (`{"mcpServers": {...}}`), besides the
    /// config's `tools.mcpServers`.
    #[arg(long, value_name = "FILE")]
    pub mcp_config: Option<PathBuf>,
    /// How tool calls are approved (default allow-all; a resumed chat keeps its recorded mode).
    #[arg(long, value_name = "MODE", ignore_case = true,
          value_parser = choices(APPROVAL_MODES).try_map(|s| s.parse::<ApprovalMode>()))]
    pub approve: Option<ApprovalMode>,
    /// Stop after N model turns (<= 0: unlimited). Overrides the config.
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub max_turns: Option<i64>,
    /// The tool surface: penguin (default) or openvaala. Overrides the config's tools.profile.
    #[arg(long, value_name = "PROFILE", value_parser = parse_profile)]
    pub tools_profile: Option<crate::tools::profile::ToolProfile>,
    /// `--sandbox` and `--sandbox-network`.
    #[command(flatten)]
    pub sandbox: SandboxArgs,
}

/// The formats of `serve --log-format`.
pub const LOG_FORMATS: &[(&str, &str)] = &[
    ("text", "one human-readable line an event"),
    ("json", "one JSON object an event, with its fields and span"),
];

/// The sandbox modes of `--sandbox`.
pub const SANDBOX_MODES: &[(&str, &str)] = &[
    ("off", "no confinement: commands run with your rights"),
    (
        "read-only",
        "commands read anywhere but the denied paths and write only their temp dir",
    ),
    (
        "workspace-write",
        "as read-only, plus writes inside the workspace and the writable roots",
    ),
];

/// `--sandbox-network` values.
pub const SANDBOX_NETWORK: &[(&str, &str)] = &[
    ("off", "no IP sockets, no host unix sockets"),
    ("on", "the network as without a sandbox"),
];

/// `--sandbox` and `--sandbox-network` (they override the config's `sandbox:`).
#[derive(Debug, Clone, Default, Args)]
pub struct SandboxArgs {
    /// Confine the session's commands and file tools: off, read-only or workspace-write
    /// (default: the config's sandbox.mode, else off; a resumed session keeps its own and
    /// refuses a looser one).
    #[arg(long = "sandbox", value_name = "MODE",
          value_parser = choices(SANDBOX_MODES).try_map(|s| s.parse::<crate::sandbox::SandboxMode>()))]
    pub mode: Option<crate::sandbox::SandboxMode>,
    /// Network of a sandboxed session's commands: off or on (default: the config's
    /// sandbox.network, else off).
    #[arg(long = "sandbox-network", value_name = "ON|OFF",
          value_parser = choices(SANDBOX_NETWORK).try_map(|s| s.parse::<crate::sandbox::NetworkAccess>()))]
    pub network: Option<crate::sandbox::NetworkAccess>,
}

impl SandboxArgs {
    /// What the flags ask (nothing when neither is given).
    pub fn request(&self) -> crate::sandbox::SandboxRequest {
        crate::sandbox::SandboxRequest {
            mode: self.mode,
            network: self.network,
        }
    }
}

fn parse_profile(
    s: &str,
) -> Result<crate::tools::profile::ToolProfile, crate::tools::profile::UnknownProfile> {
    s.parse()
}

/// The flags and prompt of `rookery run`.
#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// The session's flags.
    #[command(flatten)]
    pub session: SessionArgs,
    /// Print every complete message and event as one JSON line.
    #[arg(long)]
    pub json: bool,
    /// With --json, also print streaming partials.
    #[arg(long, requires = "json")]
    pub partials: bool,
    /// On a terminal, do not show the model's thinking as it streams.
    #[arg(long)]
    pub hide_thinking: bool,
    /// A JSON Schema file the final answer must meet (JSON; `task_end` carries it as `output`).
    #[arg(long, value_name = "FILE")]
    pub output_schema: Option<std::path::PathBuf>,
    /// How many times an answer that does not meet --output-schema is sent back (default 2).
    #[arg(long, value_name = "N", requires = "output_schema")]
    pub max_output_retries: Option<u32>,
    /// The task for the agent (`-`: read it from stdin).
    #[arg(value_name = "PROMPT")]
    pub prompt: String,
    /// OpenTelemetry export.
    #[command(flatten)]
    pub otel: otel_args::OtelArgs,
}

/// The flags of `rookery chat`.
#[derive(Debug, Clone, Args)]
pub struct ChatArgs {
    /// The session's flags.
    #[command(flatten)]
    pub session: SessionArgs,
    /// Continue an earlier session (its trace is appended to).
    #[arg(long, value_name = "ID")]
    pub resume: Option<String>,
    /// On a terminal, do not show the model's thinking as it streams.
    #[arg(long)]
    pub hide_thinking: bool,
    /// OpenTelemetry export.
    #[command(flatten)]
    pub otel: otel_args::OtelArgs,
}

/// The flags of `rookery serve`.
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
    /// The model of new sessions.
    #[command(flatten)]
    pub model: ModelArgs,
    /// The sandbox of served sessions and the loosest one a client may ask for: off, read-only
    /// or workspace-write (default: the config's sandbox.mode, else workspace-write; serve
    /// refuses to start when this machine cannot enforce it, unless `--sandbox off`).
    #[arg(long = "sandbox", value_name = "MODE",
          value_parser = choices(SANDBOX_MODES).try_map(|s| s.parse::<crate::sandbox::SandboxMode>()))]
    pub sandbox: Option<crate::sandbox::SandboxMode>,
    /// Network of served sessions' commands, and the most a client may ask for: off or on
    /// (default: the config's sandbox.network, else off).
    #[arg(long = "sandbox-network", value_name = "ON|OFF",
          value_parser = choices(SANDBOX_NETWORK).try_map(|s| s.parse::<crate::sandbox::NetworkAccess>()))]
    pub sandbox_network: Option<crate::sandbox::NetworkAccess>,
    /// A node of a cluster on the postgres store (`--node-id`, `--advertise`,
    /// `--cluster-token-env`).
    #[command(flatten)]
    pub cluster: cluster_args::ClusterArgs,
    /// The bearer token every route but /healthz needs, read from this environment variable
    /// (default: a random token generated at start and written to `<home>/serve.token`).
    #[arg(long, value_name = "VAR", conflicts_with_all = ["no_auth", "auth"])]
    pub token_env: Option<String>,
    /// The principals (YAML): each with a role, hashed static tokens, workspace roots and
    /// quotas (see docs/guide/principals.md); replaces the one token.
    #[arg(long, value_name = "FILE", conflicts_with = "no_auth")]
    pub auth: Option<PathBuf>,
    /// JWT bearer tokens (with --auth): a JWKS file of RS256, ES256 or EdDSA public keys.
    #[arg(long, value_name = "FILE", requires = "auth")]
    pub jwt_jwks: Option<PathBuf>,
    /// JWT bearer tokens (with --auth): the HS256 secret, read from this environment variable.
    #[arg(long, value_name = "VAR", requires = "auth")]
    pub jwt_hs256_secret_env: Option<String>,
    /// The `iss` a JWT must have.
    #[arg(long, value_name = "ISS", requires = "auth")]
    pub jwt_issuer: Option<String>,
    /// The `aud` a JWT must have.
    #[arg(long, value_name = "AUD", requires = "auth")]
    pub jwt_audience: Option<String>,
    /// The claim that says a JWT subject's role (`admin` or else `user`; default `role`).
    #[arg(long, value_name = "NAME", requires = "auth")]
    pub jwt_role_claim: Option<String>,
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
    /// A Claude Code settings.json for every served session: its `hooks` and `permissions`
    /// (other keys are ignored with a warning).
    #[arg(long, value_name = "FILE")]
    pub settings: Option<PathBuf>,
    /// MCP servers of sessions that name no config: a Claude Code style `.mcp.json`.
    #[arg(long, value_name = "FILE")]
    pub mcp_config: Option<PathBuf>,
    /// At most N sessions served at once (more are refused with 503).
    #[arg(long, value_name = "N", default_value_t = 1000)]
    pub max_sessions: usize,
    /// Hibernate a session idle this many seconds (0: never); the next request resumes it.
    #[arg(long, value_name = "SECS", default_value_t = 600)]
    pub idle_hibernate: u64,
    /// At most N sessions resident; beyond, the least recently used idle ones hibernate.
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    pub max_resident: usize,
    /// Bytes of messages (partials included) each session keeps for `Last-Event-ID` replay,
    /// besides the count of 4096; a replay from before them reads the trace.
    #[arg(long, value_name = "BYTES", default_value_t = crate::server::sse::RING_BYTES)]
    pub sse_ring_bytes: usize,
    /// Close a connection that has no request in progress for this many milliseconds: one
    /// that sends nothing or half a request head, or sits idle between keep-alive requests.
    /// Streaming responses (the event stream) are never cut.
    #[arg(long, value_name = "MS", default_value_t = 10_000)]
    pub header_timeout_ms: u64,
    /// At most N connections open at once; more are answered 503 and closed (default: half
    /// the descriptor limit, at most 10000).
    #[arg(long, value_name = "N")]
    pub max_connections: Option<usize>,
    /// How long a request body may take to arrive, in milliseconds (408 after that).
    #[arg(long, value_name = "MS", default_value_t = 30_000, hide = true)]
    pub body_timeout_ms: u64,
    /// How long a stream token (`POST /v1/sessions/{id}/stream_token`) is accepted, in
    /// milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 60_000, hide = true)]
    pub stream_token_ttl_ms: u64,
    /// The length of a schedule minute in milliseconds (schedules' cron patterns count these
    /// minutes from the Unix epoch; shorter than 60000 only for tests).
    #[arg(long, value_name = "MS", default_value_t = crate::server::schedules::DEFAULT_MINUTE_MS, value_parser = clap::value_parser!(u64).range(50..), hide = true)]
    pub schedule_minute_ms: u64,
    /// `--webhook`, `--webhook-secret-env`, `--webhook-allow` and their delivery policy (boxed:
    /// `ServeArgs` is the largest `Command`).
    #[command(flatten)]
    pub webhooks: Box<webhook_args::WebhookArgs>,
    /// Print the API's OpenAPI 3.1 document (what `GET /v1/openapi.json` answers) and exit,
    /// starting no server.
    #[arg(long)]
    pub print_openapi: bool,
    /// OpenTelemetry export.
    #[command(flatten)]
    pub otel: otel_args::OtelArgs,
    /// The format of log lines on stderr: text (default) or json (one object a line).
    #[arg(long, value_name = "FORMAT", default_value = "text",
          value_parser = choices(LOG_FORMATS))]
    pub log_format: String,
    /// Where the served sessions live (`--store`, `--lease-ttl`; default: the files under the
    /// home).
    #[command(flatten)]
    pub store: store_args::StoreArgs,
}

impl Cli {
    /// Whether log lines are JSON objects (`serve --log-format json`).
    pub fn json_logs(&self) -> bool {
        matches!(&self.command, Command::Serve(a) if a.log_format == "json")
    }
}

/// Runs the parsed command: the process exit code, or the error `main` prints. OpenTelemetry
/// export runs around it when `--otel` asks for it.
pub async fn dispatch(cli: Cli) -> Result<ExitCode, CliError> {
    let telemetry = match &cli.command {
        Command::Run(a) => a.otel.start()?,
        Command::Chat(a) => a.otel.start()?,
        Command::Serve(a) => a.otel.start()?,
        Command::Bench(a) => a.otel.start()?,
        _ => None,
    };
    let result = run_command(cli).await;
    if let Some(telemetry) = telemetry {
        telemetry.shutdown().await;
    }
    result
}

/// Runs the parsed command.
async fn run_command(cli: Cli) -> Result<ExitCode, CliError> {
    match cli.command {
        Command::Run(args) => run::run(args).await,
        Command::Chat(args) => chat::chat(args).await,
        Command::Serve(args) => serve::serve(*args).await,
        Command::Bench(args) => bench::bench(args).await,
        Command::Sessions(args) => sessions::sessions(args).await,
        Command::Store(args) => store::store(args).await,
        Command::Config(args) => config_show::config(&args),
        Command::Completions(args) => completions::completions(&args),
        Command::Man => completions::man(),
        Command::Auth(args) => auth::auth(&args),
    }
}
