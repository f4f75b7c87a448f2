//! The flags of `rookery bench`: the workload, its floors and rounds, the scenarios
//! (`--hibernation`, `--trace-appends`, `--forwarding`, `--failover`, a sandboxed `exec`), the
//! model to measure, and `bench compare`.
//!
//! Definitions only: `bench.rs` and its siblings check and run them.

use std::path::PathBuf;

use clap::builder::TypedValueParser;
use clap::{Args, Subcommand};

use super::model_args::ModelArgs;
use super::{WORKLOADS, choices, otel_args, store_args};

/// The flags of `rookery bench`.
#[derive(Debug, Clone, Args)]
pub struct BenchArgs {
    /// The tool every model turn calls.
    #[arg(long, value_name = "WORKLOAD", default_value = "exec",
          value_parser = choices(WORKLOADS).try_map(|s| s.parse::<crate::bench::Workload>()))]
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
    /// An HTTP model to run the workload against instead of the built-in one.
    #[command(flatten)]
    pub model: BenchModelArgs,
    /// Where traces go (default: a temp dir, removed afterwards).
    #[arg(long, value_name = "DIR")]
    pub home: Option<PathBuf>,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
    /// Also write the run's report as one self-contained HTML page with charts (alone or with
    /// --json; not with --idle-sessions, --trace-appends, --hibernation, --sandbox or
    /// --serve-mock).
    #[arg(long, value_name = "FILE.html", conflicts_with_all = [
        "idle_sessions", "trace_appends", "hibernation", "sandbox", "serve_mock",
    ])]
    pub report: Option<PathBuf>,
    /// Create N idle sessions (trace header written, no task) and report the RSS per session
    /// (no workload runs: not with --workload, --sessions, --turns, a model or --floor).
    #[arg(long, value_name = "N", conflicts_with_all = [
        "workload", "sessions", "turns", "model_latency_ms", "provider", "base_url", "model",
        "api_key_env", "floor", "serve_mock",
    ])]
    pub idle_sessions: Option<usize>,
    /// Append N records in bursts through the trace writer and through a raw `write(2)` loop
    /// (the floor), 3 interleaved rounds, and print both and their ratio (no workload runs).
    #[arg(long, value_name = "N", conflicts_with_all = [
        "workload", "sessions", "turns", "model_latency_ms", "provider", "base_url", "model",
        "api_key_env", "floor", "serve_mock", "idle_sessions",
    ])]
    pub trace_appends: Option<usize>,
    /// Create N sessions through the server's session directory with at most --resident of
    /// them resident (the rest hibernate) and report RSS, open descriptors and the next task
    /// of hibernated sessions (no workload: not with --workload, --sessions, --turns, a model,
    /// --floor, --idle-sessions or --trace-appends).
    #[arg(long, value_name = "N", group = "node_scenarios", conflicts_with_all = [
        "workload", "sessions", "turns", "model_latency_ms", "provider", "base_url", "model",
        "api_key_env", "floor", "serve_mock", "idle_sessions", "trace_appends",
    ])]
    pub hibernation: Option<usize>,
    /// Run two cluster nodes in this process on the postgres store (--store, $ROOKERY_STORE) and send
    /// a session's GET N times to its owner and N times through the other node, interleaved;
    /// print the p95 a forward adds (no workload runs).
    #[arg(long, value_name = "N", conflicts_with_all = [
        "workload", "sessions", "turns", "model_latency_ms", "provider", "base_url", "model",
        "api_key_env", "floor", "serve_mock", "idle_sessions", "trace_appends", "hibernation",
        "report", "sandbox",
    ])]
    pub forwarding: Option<usize>,
    /// Start --nodes K (default 2) `rookery serve` processes on the postgres store (--store,
    /// $ROOKERY_STORE), N (default 100) sessions on the first, kill -9 it and time each
    /// session's next task through the others: until accepted (202) and until completed
    /// (no workload runs).
    #[arg(long, value_name = "N", num_args = 0..=1, default_missing_value = "100",
        group = "node_scenarios", conflicts_with_all = [
        "workload", "sessions", "turns", "model_latency_ms", "provider", "base_url", "model",
        "api_key_env", "floor", "serve_mock", "idle_sessions", "trace_appends", "hibernation",
        "report", "sandbox", "forwarding", "rounds",
    ])]
    pub failover: Option<usize>,
    /// With --failover: sessions inside a long `exec_command` when their node is killed
    /// (default: half of N, spread evenly; the others have finished their task).
    #[arg(long, value_name = "K", requires = "failover")]
    pub in_flight: Option<usize>,
    /// With --hibernation: the `--max-resident` cap.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 1000,
        requires = "hibernation"
    )]
    pub resident: usize,
    /// With --hibernation: records (at least) in the trace of each woken session.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 1000,
        requires = "hibernation"
    )]
    pub trace_records: usize,
    /// With --hibernation: hibernated sessions woken by a task, one after the other.
    #[arg(long, value_name = "N", default_value_t = 20, requires = "hibernation")]
    pub wakes: usize,
    /// With --hibernation and a postgres --store: spread the N sessions over K processes (this
    /// one runs itself K times, concurrently; --resident and --wakes are each node's; default
    /// 1). With --failover: the node processes, at least 2 (default 2).
    #[arg(long, value_name = "K", requires = "node_scenarios")]
    pub nodes: Option<usize>,
    /// With --hibernation and a postgres --store: this process's node name in the store
    /// (default `<host>-<pid>`).
    #[arg(long, value_name = "NAME", requires = "hibernation")]
    pub node_id: Option<String>,
    /// Also measure the spawn floors (`bash -lc true`) in the same run and print the ratios;
    /// with `--provider openai`, the HTTP floor (the run's bodies resent by a bare client), and
    /// the spawn floors only for `--workload exec`.
    #[arg(long)]
    pub floor: bool,
    /// Spawns of the concurrent floor.
    #[arg(long, value_name = "N", default_value_t = 1000)]
    pub floor_spawns: usize,
    /// Concurrent workers of the concurrent floor.
    #[arg(long, value_name = "N", default_value_t = 100)]
    pub floor_workers: usize,
    /// Run the workload R times, each round with its floors (`--floor`), and report the
    /// median of every figure, then each round's (`per_round` in `--json`).
    #[arg(long, value_name = "R", default_value_t = 1,
        value_parser = clap::value_parser!(u32).range(1..=100),
        conflicts_with_all = ["idle_sessions", "trace_appends", "hibernation", "serve_mock"])]
    pub rounds: u32,
    /// With `--workload exec`: spawn the workload's N x K commands through the command spawn
    /// path inside this sandbox mode, against the same commands unsandboxed and the spawn
    /// floor, in interleaved rounds (3 unless --rounds says more), and print the ratios.
    #[arg(long, value_name = "MODE", conflicts_with_all = [
        "idle_sessions", "trace_appends", "hibernation", "serve_mock", "provider", "base_url",
    ])]
    pub sandbox: Option<crate::sandbox::SandboxMode>,
    /// With `--sandbox`: the sandboxed commands' network (`off` or `on`).
    #[arg(
        long,
        value_name = "on|off",
        default_value = "off",
        requires = "sandbox"
    )]
    pub sandbox_network: crate::sandbox::NetworkAccess,
    /// Serve the workload's model as a loopback OpenAI-compatible endpoint (prints its base URL).
    #[arg(long)]
    pub serve_mock: bool,
    /// Worker threads of `--serve-mock`.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub mock_threads: usize,
    /// Address of `--serve-mock` (port 0 picks a free port).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0")]
    pub listen: String,
    /// With --trace-appends: append into this `postgres://…` store (default
    /// $ROOKERY_STORE) against a bare client's inserts of the same records; with --forwarding:
    /// the store of its two nodes; with --hibernation: run the server state on it; the other
    /// scenarios run on files.
    #[command(flatten)]
    pub store: store_args::StoreArgs,
    /// `compare A.json B.json`: the ratio B/A of every figure of two `--json` results.
    #[command(subcommand)]
    pub action: Option<BenchAction>,
    /// OpenTelemetry export.
    #[command(flatten)]
    pub otel: otel_args::OtelArgs,
}

/// What `rookery bench` does besides running a workload.
#[derive(Debug, Clone, Subcommand)]
pub enum BenchAction {
    /// Print the ratio B/A of every figure two `rookery bench --json` results both carry.
    Compare {
        /// The first result (the baseline).
        a: PathBuf,
        /// The second result.
        b: PathBuf,
    },
}

/// The HTTP model of `bench` (its own model is built in: there is no `--script`).
#[derive(Debug, Clone, Default, Args)]
pub struct BenchModelArgs {
    /// An OpenAI-compatible provider (`openai`, `vllm`, …) to measure instead of the built-in
    /// model (see --serve-mock).
    #[arg(long, value_name = "NAME")]
    pub provider: Option<String>,
    /// The server's base URL; requests go to `{URL}/chat/completions`.
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// The model name sent to the server.
    #[arg(long, value_name = "NAME")]
    pub model: Option<String>,
    /// The environment variable holding the API key (default OPENAI_API_KEY; unset = no key).
    #[arg(long, value_name = "VAR")]
    pub api_key_env: Option<String>,
}

impl BenchModelArgs {
    /// The same flags as the other subcommands' model flags.
    pub fn model_args(&self) -> ModelArgs {
        ModelArgs {
            script: None,
            provider: self.provider.clone(),
            base_url: self.base_url.clone(),
            model: self.model.clone(),
            api_key_env: self.api_key_env.clone(),
        }
    }
}
