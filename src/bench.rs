//! The standard load workload of `rookery bench`: N concurrent sessions in one host, each with its
//! own workspace holding `bench-input.txt`, each running one task (`Run the benchmark task.`,
//! allow-all) against a model that asks for one tool call (`exec_command true` or `read_file
//! bench-input.txt`) per request until K tool results are in the conversation. It creates the
//! fixtures, runs the sessions, checks every one of them and gathers the figures; idle sessions
//! (no task) for the footprint.
//!
//! It prints nothing (the CLI renders the report) and never changes how a session works: the
//! only instrumentation is the [`model::Probed`] model wrapper and the [`model::TimedTool`] tool
//! wrapper, both outside the runtime.

pub(crate) mod actor_floor;
#[cfg(feature = "postgres")]
pub mod failover;
#[cfg(feature = "postgres")]
pub mod failover_nodes;
#[cfg(feature = "postgres")]
pub(crate) mod failover_requests;
#[cfg(feature = "postgres")]
pub mod failover_store;
#[cfg(feature = "postgres")]
pub mod forwarding;
pub mod hibernation;
#[cfg(feature = "postgres")]
pub mod hibernation_store;
#[cfg_attr(not(feature = "cli"), allow(dead_code))]
pub(crate) mod latency;
// The floors and figures only `rookery bench` prints (`crate::cli`).
#[cfg(feature = "cli")]
pub(crate) mod http_floor;
#[cfg_attr(not(feature = "cli"), allow(dead_code))]
pub(crate) mod measure;
pub mod mock;
pub mod model;
pub mod report_charts;
pub mod report_html;
pub mod sampler;
#[cfg(feature = "cli")]
pub(crate) mod sandboxed;
#[cfg(feature = "postgres")]
pub mod store_appends;
pub mod trace_appends;

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::Host;
use crate::actors::session::SessionOptions;
use crate::approval::AllowAllApprover;
use crate::config::AgentConfig;
use crate::error::RookeryError;
use crate::message::{EventPayload, ModelPayload, StopReason};
use crate::model::Model;
use model::{BenchModel, Probe, Probed, TimedTool};

/// The user message of every bench task.
pub const PROMPT: &str = "Run the benchmark task.";
/// The file every workspace holds.
pub const INPUT_FILE: &str = "bench-input.txt";

/// Which tool the model asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Workload {
    /// `exec_command true` per request.
    Exec,
    /// `read_file bench-input.txt` per request.
    Read,
}

impl Workload {
    /// The workload's name in flags and reports (`exec`, `read`).
    pub fn as_str(self) -> &'static str {
        match self {
            Workload::Exec => "exec",
            Workload::Read => "read",
        }
    }

    /// The tool the model asks for.
    pub fn tool_name(self) -> &'static str {
        match self {
            Workload::Exec => "exec_command",
            Workload::Read => "read_file",
        }
    }

    /// The exact arguments of the tool call.
    pub fn arguments(self) -> &'static str {
        match self {
            Workload::Exec => r#"{"description":"Run a no-op command.","cmd":"true"}"#,
            Workload::Read => r#"{"file_path":"bench-input.txt"}"#,
        }
    }
}

/// A workload name that is neither `exec` nor `read`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown workload `{0}` (expected exec or read)")]
pub struct UnknownWorkload(pub String);

impl FromStr for Workload {
    type Err = UnknownWorkload;

    fn from_str(s: &str) -> Result<Self, UnknownWorkload> {
        match s {
            "exec" => Ok(Workload::Exec),
            "read" => Ok(Workload::Read),
            _ => Err(UnknownWorkload(s.to_string())),
        }
    }
}

/// The text of `bench-input.txt`: 20 lines `line {j}: the quick brown fox …`.
pub fn input_text() -> String {
    (1..=20)
        .map(|j| format!("line {j}: the quick brown fox jumps over the lazy dog\n"))
        .collect()
}

/// A directory removed (recursively) when dropped.
#[derive(Debug)]
pub struct TempDir(PathBuf);

impl TempDir {
    /// A fresh directory under the system temp dir, named `<prefix>-<pid>-<random>`.
    pub fn new(prefix: &str) -> std::io::Result<Self> {
        let path = std::env::temp_dir().join(format!(
            "{prefix}-{}-{:08x}",
            std::process::id(),
            rand::random::<u32>()
        ));
        std::fs::create_dir_all(&path)?;
        Ok(TempDir(path))
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// What to run.
#[derive(Clone)]
pub struct Spec {
    /// Which tool the model asks for.
    pub workload: Workload,
    /// Concurrent sessions, one task each.
    pub sessions: usize,
    /// Tool results each session's task gathers before the model answers.
    pub turns: usize,
    /// `None`: the built-in [`BenchModel`] (with `latency`); else this model (e.g. HTTP).
    pub model: Option<Arc<dyn Model>>,
    /// The built-in model's delay before each answer.
    pub latency: Duration,
    /// The agent config of every session (its tools; the model section for an HTTP model).
    pub config: AgentConfig,
    /// Where traces go.
    pub home: PathBuf,
    /// Workspaces are created here.
    pub scratch: PathBuf,
    /// `HOME` of the spawned shells (an empty directory).
    pub shell_home: PathBuf,
    /// Called once per finished tool call (progress display).
    pub on_call: Option<Arc<dyn Fn() + Send + Sync>>,
}

/// What a workload run measured.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// One line per session that did not pass its check.
    pub failures: Vec<String>,
    /// Wall time from the tasks' start to the last session idle.
    pub wall: Duration,
    /// Time to create all the sessions.
    pub session_create: Duration,
    /// Harness overhead per tool turn, µs, sorted.
    pub overheads_us: Vec<u64>,
    /// Latency of each tool call (model stream end to the request carrying its result), µs,
    /// sorted.
    pub tool_call_us: Vec<u64>,
    /// CPU, resident set and finished tool calls over the timed window.
    pub series: sampler::Series,
    /// CPU seconds of this process and of its children, from session creation to the last
    /// session idle (workspace set-up and teardown excluded).
    pub cpu_s: f64,
    /// CPU seconds of the reaped children (the tools' processes) in the same window.
    pub children_cpu_s: f64,
    /// This process's user and system CPU seconds inside the timed window only (from the tasks'
    /// start to the last session idle), without session creation and teardown.
    pub run_user_s: f64,
    /// This process's system CPU seconds inside the timed window.
    pub run_sys_s: f64,
    /// `write(2)` calls the host's trace writers made (all sessions, through their close).
    pub trace_writes: u64,
}

/// What one session's watcher counted.
#[derive(Debug, Default)]
struct Seen {
    outputs: usize,
    failed_outputs: usize,
    /// Calls of another tool than the workload's, by name (a model serving another workload).
    other_tools: std::collections::BTreeMap<String, usize>,
}

fn make_workspace(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join(INPUT_FILE), input_text())
}

/// Removes a workspace [`make_workspace`] made once its session is done: the input file and
/// the directory, two `unlink`s instead of the nine calls a recursive removal makes per
/// directory (open, stat, two `fcntl`, two reads of the entries, close); a workspace with
/// anything else in it is removed recursively. Failures are left to the scratch directory's
/// own removal.
fn remove_workspace(dir: &Path) {
    let _ = std::fs::remove_file(dir.join(INPUT_FILE));
    if std::fs::remove_dir(dir).is_err() {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// The config of one session: `base` with the workload's tool wrapped in a [`TimedTool`].
fn session_config(base: &AgentConfig, workload: Workload, probe: &Arc<Probe>) -> AgentConfig {
    let mut config = base.clone();
    let probe = probe.clone();
    config.tools.wrap(
        workload.tool_name(),
        Arc::new(move |inner| {
            Arc::new(TimedTool {
                inner,
                probe: probe.clone(),
            })
        }),
    );
    config
}

/// Runs the workload to its end and checks every session.
pub async fn run(spec: &Spec) -> Result<Outcome, RookeryError> {
    let host = Host::start(spec.home.clone()).await?;
    let result = run_in(&host, spec).await;
    host.shutdown().await;
    result.map(|outcome| Outcome {
        trace_writes: host.trace_writes(),
        ..outcome
    })
}

async fn run_in(host: &Host, spec: &Spec) -> Result<Outcome, RookeryError> {
    let base_model: Arc<dyn Model> = match &spec.model {
        Some(m) => m.clone(),
        None => Arc::new(BenchModel {
            workload: spec.workload,
            turns: spec.turns,
            latency: spec.latency,
        }),
    };
    let mut probes = Vec::with_capacity(spec.sessions);
    let mut options = Vec::with_capacity(spec.sessions);
    let mut workspaces = Vec::with_capacity(spec.sessions);
    for i in 0..spec.sessions {
        let ws = spec.scratch.join(format!("ws-{i}"));
        make_workspace(&ws).map_err(|source| RookeryError::Setup {
            what: format!("cannot create the workspace {}", ws.display()),
            source,
        })?;
        workspaces.push(ws.clone());
        let probe = Arc::new(Probe::default());
        let model = Arc::new(Probed {
            inner: base_model.clone(),
            probe: probe.clone(),
        });
        let mut o = SessionOptions::new(ws, model);
        o.approver = Arc::new(AllowAllApprover);
        o.config = session_config(&spec.config, spec.workload, &probe);
        o.command_env = vec![("HOME".to_string(), spec.shell_home.display().to_string())];
        probes.push(probe);
        options.push(o);
    }

    // Once per process, before anything is measured: a process compiles the default command
    // policy on its first shell call (about 3 ms); compiled here, the turns measure the steady
    // state, as the default tool set is built before the sessions are.
    if spec.workload == Workload::Exec
        && let Some(o) = options.first()
    {
        o.config.command_policy.prepare();
    }
    let cpu0 = measure::self_usage();
    let child0 = measure::children_usage();
    let created_at = Instant::now();
    let mut sessions = Vec::with_capacity(spec.sessions);
    // Each session's meta goes out with its task's start, as in `rookery run`.
    for o in options {
        sessions.push(host.create_session_for_task(o).await?);
    }
    let session_create = created_at.elapsed();

    let mut watchers = Vec::with_capacity(sessions.len());
    for s in &sessions {
        let mut rx = s.subscribe().await?;
        let on_call = spec.on_call.clone();
        let tool = spec.workload.tool_name();
        watchers.push(tokio::spawn(async move {
            let mut seen = Seen::default();
            while let Some(msg) = rx.recv().await {
                if let Some(ModelPayload::ToolCall { name, .. }) = msg.as_model()
                    && name != tool
                {
                    *seen.other_tools.entry(name.clone()).or_default() += 1;
                }
                if let Some(ModelPayload::ToolCallOutput { stop_reason, .. }) = msg.as_model() {
                    seen.outputs += 1;
                    if *stop_reason != StopReason::Completed {
                        seen.failed_outputs += 1;
                    }
                    if let Some(f) = &on_call {
                        f();
                    }
                }
                if matches!(msg.as_event(), Some(EventPayload::TaskEnd { .. })) {
                    break;
                }
            }
            seen
        }));
    }

    let run0 = measure::self_usage();
    // Tool calls finished so far (each counted by its session's timed tool as it returns).
    let counted = probes.clone();
    let sampler = sampler::Sampler::start(Arc::new(move || {
        counted.iter().map(|p| p.tool_calls() as u64).sum()
    }));
    let started = Instant::now();
    let starts = futures::future::join_all(sessions.iter().map(|s| s.start_task(PROMPT))).await;
    for r in starts {
        r?;
    }
    let summaries = futures::future::join_all(sessions.iter().map(|s| s.wait_idle())).await;
    let wall = started.elapsed();
    let series = sampler.map(sampler::Sampler::finish).unwrap_or_default();
    let run1 = measure::self_usage();
    let run = run1.since(&run0);
    let cpu_s = run1.cpu_since(&cpu0);
    let children_cpu_s = measure::children_usage().cpu_since(&child0);

    let mut failures = Vec::new();
    let mut overheads_us = Vec::with_capacity(spec.sessions * spec.turns);
    let mut tool_call_us = Vec::with_capacity(spec.sessions * spec.turns);
    for (i, ((session, summary), watcher)) in
        sessions.iter().zip(summaries).zip(watchers).enumerate()
    {
        let seen = watcher.await.unwrap_or_default();
        let problem = match summary {
            Ok(Some(s)) => check(&s, &seen, spec.workload, spec.turns),
            Ok(None) => Some("no task summary".to_string()),
            Err(e) => Some(e.to_string()),
        };
        if let Some(p) = problem {
            failures.push(format!("session {i} ({}): {p}", session.id()));
        }
        let data = probes[i].data();
        overheads_us.extend(data.overheads_us());
        tool_call_us.extend(data.tool_call_latencies_us());
    }
    overheads_us.sort_unstable();
    tool_call_us.sort_unstable();
    for ws in &workspaces {
        remove_workspace(ws);
    }
    Ok(Outcome {
        failures,
        wall,
        session_create,
        overheads_us,
        tool_call_us,
        series,
        cpu_s,
        children_cpu_s,
        run_user_s: run.user_s,
        run_sys_s: run.sys_s,
        trace_writes: 0,
    })
}

/// `None` when a session ran exactly `turns` calls of the workload's tool with `turns`
/// completed outputs and answered `Done…`; else what was wrong.
fn check(
    summary: &crate::TaskSummary,
    seen: &Seen,
    workload: Workload,
    turns: usize,
) -> Option<String> {
    let mut problems = Vec::new();
    for (name, n) in &seen.other_tools {
        problems.push(format!(
            "the model called {name} {n} times, but the {} workload calls {} (is the model serving another workload?)",
            workload.as_str(),
            workload.tool_name()
        ));
    }
    if summary.status != StopReason::Completed {
        problems.push(format!(
            "task {} ({})",
            summary.status.as_str(),
            summary.abort_reason.as_deref().unwrap_or("no reason")
        ));
    }
    if summary.tool_calls != turns {
        problems.push(format!(
            "{} tool calls, expected {turns}",
            summary.tool_calls
        ));
    }
    if seen.outputs != turns {
        problems.push(format!("{} tool outputs, expected {turns}", seen.outputs));
    }
    if seen.failed_outputs > 0 {
        problems.push(format!(
            "{} tool outputs not completed",
            seen.failed_outputs
        ));
    }
    let text = summary.final_text.as_deref().unwrap_or("");
    if !text.starts_with("Done") {
        problems.push(format!("final text {text:?} does not start with Done"));
    }
    (!problems.is_empty()).then(|| problems.join("; "))
}

/// What the idle run measured.
#[derive(Debug, Clone, Copy, Default)]
pub struct IdleOutcome {
    /// Time to create all the idle sessions.
    pub create: Duration,
    /// RSS before and after creating the sessions (trace headers written), kB.
    pub rss_before_kb: u64,
    /// RSS after creating them, kB.
    pub rss_after_kb: u64,
    /// kB one empty supervised ractor actor adds, measured right after (the sessions still
    /// open): the floor of an idle session, which is one such actor.
    pub actor_floor_kb: f64,
}

/// Creates `n` idle sessions (trace header written, no task), measures the RSS they add, then,
/// with the sessions still open, the RSS `n` empty supervised actors add (the floor); then
/// closes everything.
pub async fn idle(
    n: usize,
    home: &Path,
    workspace: &Path,
    config: AgentConfig,
) -> Result<IdleOutcome, RookeryError> {
    let host = Host::start(home.to_path_buf()).await?;
    let model: Arc<dyn Model> = Arc::new(BenchModel {
        workload: Workload::Read,
        turns: 0,
        latency: Duration::ZERO,
    });
    let mut o = SessionOptions::new(workspace, model);
    o.approver = Arc::new(AllowAllApprover);
    o.config = config;
    let rss_before_kb = measure::current_rss_kb().unwrap_or(0);
    let t = Instant::now();
    let mut sessions = Vec::with_capacity(n);
    let mut failed = None;
    for _ in 0..n {
        match host.create_session(o.clone()).await {
            Ok(s) => sessions.push(s),
            Err(e) => {
                failed = Some(e);
                break;
            }
        }
    }
    // Every header is on disk: `create_session` returns once it is written.
    let create = t.elapsed();
    let rss_after_kb = measure::current_rss_kb().unwrap_or(0);
    let floor = match failed {
        None => Some(actor_floor::EmptyActors::spawn(n).await),
        Some(_) => None,
    };
    host.shutdown().await;
    if let Some(e) = failed {
        return Err(e);
    }
    let floor = floor.transpose()?;
    let actor_floor_kb = floor.as_ref().map_or(0.0, |f| f.per_actor_kb());
    if let Some(f) = floor {
        f.stop().await;
    }
    Ok(IdleOutcome {
        create,
        rss_before_kb,
        rss_after_kb,
        actor_floor_kb,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_workspace_is_removed_with_whatever_a_session_left_in_it() {
        let scratch = tempfile::tempdir().unwrap();
        let plain = scratch.path().join("ws-0");
        let used = scratch.path().join("ws-1");
        make_workspace(&plain).unwrap();
        make_workspace(&used).unwrap();
        std::fs::create_dir_all(used.join("out/deep")).unwrap();
        std::fs::write(used.join("out/deep/log.txt"), "x").unwrap();
        remove_workspace(&plain);
        remove_workspace(&used);
        assert!(!plain.exists() && !used.exists());
        assert_eq!(std::fs::read_dir(scratch.path()).unwrap().count(), 0);
    }

    #[test]
    fn input_has_twenty_lines() {
        let text = input_text();
        assert_eq!(text.lines().count(), 20);
        assert_eq!(
            text.lines().nth(4),
            Some("line 5: the quick brown fox jumps over the lazy dog")
        );
    }

    #[test]
    fn workload_names() {
        assert_eq!("exec".parse::<Workload>(), Ok(Workload::Exec));
        assert_eq!(
            "write".parse::<Workload>().map_err(|e| e.to_string()),
            Err("unknown workload `write` (expected exec or read)".to_string())
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn read_workload_passes_its_check() {
        let dir = tempfile::tempdir().unwrap();
        let spec = Spec {
            workload: Workload::Read,
            sessions: 2,
            turns: 3,
            model: None,
            latency: Duration::ZERO,
            config: AgentConfig::default(),
            home: dir.path().join("home"),
            scratch: dir.path().join("scratch"),
            shell_home: dir.path().to_path_buf(),
            on_call: None,
        };
        let out = run(&spec).await.unwrap();
        assert!(out.failures.is_empty(), "{:?}", out.failures);
        assert_eq!(out.overheads_us.len(), 6);
        assert_eq!(measure::dir_totals(&spec.home.join("traces")).0, 2);
    }
}
