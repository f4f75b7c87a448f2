//! The hibernation scenario of `rookery bench --hibernation N`: in one process, the server state
//! `rookery serve` runs on (its session directory, its `--max-resident` cap and its hibernation,
//! not a copy) gets N sessions created through it, of which at most `--resident R` stay
//! resident; the rest are hibernated by the cap. It measures the RSS (and the kB each
//! hibernated entry adds), the open descriptors, and the next task of hibernated sessions whose
//! trace holds `--trace-records T` records: from the task submitted (the request's lookup, which
//! wakes the session, then its start) to the first model request, and to the task's end.
//!
//! With a `postgres` store (`--store URL`) the state and its host run on it: the sessions are
//! created in the store, a hibernation gives their lease up, and a wake takes it back and reads
//! the trace from the database; the run then also checks (`hibernation_store.rs`) that every
//! session is in the store, that no hibernated session kept its lease, and that each wake took
//! it.
//!
//! It prints nothing (the CLI renders the figures) and never changes how a session or the
//! server works: its only instrumentation is the [`Probed`] model wrapper.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use super::model::{BenchModel, Probe, Probed};
use super::{PROMPT, Workload, make_workspace, measure};
use crate::Host;
use crate::actors::session::SessionOptions;
use crate::approval::{AllowAllApprover, ApprovalMode};
use crate::config::AgentConfig;
use crate::error::RookeryError;
use crate::message::StopReason;
use crate::model::{Model, ModelInfo, ModelSession, ModelSessionContext};
use crate::server::guard::GuardConfig;
use crate::server::state::{HibernationConfig, OpenOptions, ServerConfig, ServerState};

/// The targets the figures are printed beside.
pub const TARGET_RSS_KB: u64 = 100 * 1024;
/// Open file descriptors the run should end under.
pub const TARGET_FDS: usize = 1100;
/// The p95 wake (task submitted to first model request) should stay under this, in ms.
pub const TARGET_WAKE_MS: f64 = 50.0;
/// The p95 wake from the `postgres` store (lease taken, trace read from the database), in ms.
pub const TARGET_STORE_WAKE_MS: f64 = 20.0;

/// What to run.
#[derive(Clone)]
pub struct HibernationSpec {
    /// Sessions created through the server state.
    pub sessions: usize,
    /// `--max-resident` of the state.
    pub resident: usize,
    /// Records (at least) in the trace of each woken session.
    pub trace_records: usize,
    /// Hibernated sessions woken by a task, one after the other.
    pub wakes: usize,
    /// Where traces go.
    pub home: PathBuf,
    /// The workspace every session shares is created here.
    pub scratch: PathBuf,
    /// Called after each created session (progress display).
    pub on_create: Option<Arc<dyn Fn() + Send + Sync>>,
    /// The `postgres` store the server state runs on (`None`: the files under `home`).
    #[cfg(feature = "postgres")]
    pub store: Option<crate::store::PgStore>,
}

/// What the scenario measured.
#[derive(Debug, Clone, Default)]
pub struct HibernationOutcome {
    /// One line per check that did not pass.
    pub failures: Vec<String>,
    /// Creating all the sessions (each beyond the cap hibernating the least recently used one).
    pub create: Duration,
    /// RSS before the first session, kB.
    pub rss_start_kb: u64,
    /// When `resident` sessions were created (all resident, none hibernated yet).
    pub rss_at_cap_kb: u64,
    /// RSS once every session was created and the resident cap kept, kB.
    pub rss_after_kb: u64,
    /// Open file descriptors before the first session.
    pub fds_start: usize,
    /// Open file descriptors at the end.
    pub fds_after: usize,
    /// Sessions resident at the end.
    pub resident_after: usize,
    /// Sessions hibernated at the end.
    pub hibernated_after: usize,
    /// The most sessions seen resident after a create.
    pub resident_peak: usize,
    /// Tool turns of each woken session's earlier task, and the fewest records of their traces.
    pub turns: usize,
    /// The fewest records of the woken sessions' traces.
    pub records_min: usize,
    /// Per wake, ms, sorted: task submitted to first model request, and to the task's end.
    pub first_request_ms: Vec<f64>,
    /// Per wake, ms, sorted: task submitted to the task's end.
    pub task_end_ms: Vec<f64>,
    /// With a store: what it holds of the run's sessions once all were created (before the
    /// wakes), and at the end.
    #[cfg(feature = "postgres")]
    pub store: Option<StoreFigures>,
}

/// What the store holds of a run's sessions.
#[cfg(feature = "postgres")]
#[derive(Debug, Clone, Copy, Default)]
pub struct StoreFigures {
    /// Once every session was created and the cap kept (`leases_held` is the resident ones').
    pub created: super::hibernation_store::StoreTotals,
    /// At the end, after the wakes.
    pub end: super::hibernation_store::StoreTotals,
}

/// A failure of the scenario's set-up.
#[derive(Debug, thiserror::Error)]
pub enum HibernationBenchError {
    /// A host or session call failed.
    #[error(transparent)]
    Rookery(#[from] RookeryError),
    /// A server-state call failed.
    #[error("{what}: {message}")]
    Server {
        /// The step that failed.
        what: String,
        /// The server's error text.
        message: String,
    },
}

fn server_error(
    what: impl Into<String>,
    e: crate::server::error::ApiError,
) -> HibernationBenchError {
    HibernationBenchError::Server {
        what: what.into(),
        message: format!("{} ({})", e.message, e.code),
    }
}

/// The bench model whose K is read when a session opens it (a woken session gets the K then
/// set: 0, it answers at once).
struct Adjustable {
    base: BenchModel,
    turns: Arc<AtomicUsize>,
}

impl Model for Adjustable {
    fn info(&self) -> ModelInfo {
        self.base.info()
    }

    fn open(&self, ctx: &ModelSessionContext) -> Box<dyn ModelSession> {
        let model = BenchModel {
            turns: self.turns.load(Ordering::SeqCst),
            ..self.base.clone()
        };
        model.open(ctx)
    }
}

/// Open descriptors of this process (`/proc/self/fd`, without the one listing it).
pub fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count().saturating_sub(1))
}

/// Records (lines) of a trace file.
fn records(path: &Path) -> usize {
    std::fs::read(path).map_or(0, |b| b.iter().filter(|&&c| c == b'\n').count())
}

/// Tool turns one task needs for a trace of at least `want` records: measured on two sessions
/// of a plain host (10 and 20 turns), as records = base + per_turn × turns.
async fn calibrate(home: &Path, ws: &Path, want: usize) -> Result<usize, RookeryError> {
    let host = Host::start(home.to_path_buf()).await?;
    let mut lines = [0usize; 2];
    for (i, k) in [10usize, 20].into_iter().enumerate() {
        let model: Arc<dyn Model> = Arc::new(BenchModel {
            workload: Workload::Read,
            turns: k,
            latency: Duration::ZERO,
        });
        let mut o = SessionOptions::new(ws, model);
        o.approver = Arc::new(AllowAllApprover);
        let s = host.create_session(o).await?;
        s.run_task(PROMPT).await?;
        s.flush_trace().await?;
        lines[i] = records(&s.trace_path());
        s.close().await?;
    }
    host.shutdown().await;
    let per_turn = (lines[1].saturating_sub(lines[0]) / 10).max(1);
    let base = lines[0].saturating_sub(10 * per_turn);
    Ok(want.saturating_sub(base).div_ceil(per_turn))
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Runs the scenario (see the module doc).
pub async fn run(spec: &HibernationSpec) -> Result<HibernationOutcome, HibernationBenchError> {
    let ws = spec.scratch.join("workspace");
    make_workspace(&ws).map_err(|source| RookeryError::Setup {
        what: format!("cannot create the workspace {}", ws.display()),
        source,
    })?;
    let turns = calibrate(&spec.scratch.join("calibration"), &ws, spec.trace_records).await?;
    let mut out = HibernationOutcome {
        turns,
        rss_start_kb: measure::current_rss_kb().unwrap_or(0),
        fds_start: open_fds(),
        ..HibernationOutcome::default()
    };
    let k = Arc::new(AtomicUsize::new(turns));
    let probe = Arc::new(Probe::default());
    let model: Arc<dyn Model> = Arc::new(Probed {
        inner: Arc::new(Adjustable {
            base: BenchModel {
                workload: Workload::Read,
                turns,
                latency: Duration::ZERO,
            },
            turns: k.clone(),
        }),
        probe: probe.clone(),
    });
    #[cfg(feature = "postgres")]
    let host = match &spec.store {
        Some(store) => Host::start_with_store(spec.home.clone(), store.clone()).await?,
        None => Host::start(spec.home.clone()).await?,
    };
    #[cfg(not(feature = "postgres"))]
    let host = Host::start(spec.home.clone()).await?;
    let loopback = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
    let state = ServerState::new(
        host,
        ServerConfig {
            home: spec.home.clone(),
            model: Some(model),
            launch: crate::message::launch::Launch::default(),
            config: AgentConfig::default(),
            auth: crate::server::credentials::Authenticator::Open,
            guard: GuardConfig::new(loopback, &[], &[], Duration::from_secs(30)),
            config_dir: None,
            // Hibernated sessions do not count; a wake beyond the cap is undone by the sweeper.
            max_sessions: spec.resident.saturating_mul(2).max(spec.resident + 64),
            hooks: Arc::default(),
            permissions: Arc::default(),
            ring_bytes: crate::server::sse::RING_BYTES,
            hibernation: HibernationConfig {
                idle: None,
                max_resident: spec.resident.max(1),
            },
            sandbox: Default::default(),
            stream_token_ttl: crate::server::stream_token::DEFAULT_TTL,
            #[cfg(feature = "postgres")]
            store: spec.store.clone(),
        },
    );
    state.start_hibernation();
    let result = scenario(spec, &state, &ws, &k, &probe, &mut out).await;
    state.shutdown().await;
    result.map(|()| out)
}

fn open(ws: &Path) -> OpenOptions {
    OpenOptions {
        workspace: Some(ws.to_path_buf()),
        approval_mode: Some(ApprovalMode::AllowAll),
        config: None,
        tools_profile: None,
        sandbox: Default::default(),
        owner: None,
    }
}

async fn scenario(
    spec: &HibernationSpec,
    state: &Arc<ServerState>,
    ws: &Path,
    k: &AtomicUsize,
    probe: &Probe,
    out: &mut HibernationOutcome,
) -> Result<(), HibernationBenchError> {
    let wakes = spec.wakes.min(spec.sessions);
    let created_at = Instant::now();
    // The sessions to wake come first: a task each, so their traces hold the records.
    let mut woken = Vec::with_capacity(wakes);
    for i in 0..wakes {
        let e = state
            .create(open(ws))
            .await
            .map_err(|e| server_error("cannot create a session", e))?;
        let summary = e.handle.run_task(PROMPT).await?;
        if summary.status != StopReason::Completed {
            out.failures.push(format!(
                "session {i} ({}): its first task did not complete",
                e.id()
            ));
        }
        e.handle.flush_trace().await?;
        let n = trace_records(spec, &e).await?;
        out.records_min = if i == 0 { n } else { out.records_min.min(n) };
        woken.push(e.id().to_string());
        if let Some(f) = &spec.on_create {
            f();
        }
    }
    // A woken session answers at once: K is 0 from now on.
    k.store(0, Ordering::SeqCst);
    for i in wakes..spec.sessions {
        if i == spec.resident {
            out.rss_at_cap_kb = measure::current_rss_kb().unwrap_or(0);
        }
        state
            .create(open(ws))
            .await
            .map_err(|e| server_error("cannot create a session", e))?;
        out.resident_peak = out.resident_peak.max(state.resident_count());
        if let Some(f) = &spec.on_create {
            f();
        }
    }
    out.create = created_at.elapsed();
    // The cap is kept by each create; wait for the sweeper's share (a session still closing).
    let deadline = Instant::now() + Duration::from_secs(30);
    while state.resident_count() > spec.resident && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    out.rss_after_kb = measure::current_rss_kb().unwrap_or(0);
    if out.rss_at_cap_kb == 0 {
        out.rss_at_cap_kb = out.rss_after_kb;
    }
    out.fds_after = open_fds();
    out.resident_after = state.resident_count();
    out.hibernated_after = state.hibernated_count();
    #[cfg(feature = "postgres")]
    let created_totals = match (&spec.store, woken.first()) {
        (Some(store), Some(sample)) => Some(store_totals(store, sample).await?),
        _ => None,
    };
    if out.resident_after > spec.resident {
        out.failures.push(format!(
            "{} sessions resident, over the cap of {}",
            out.resident_after, spec.resident
        ));
    }
    if out.resident_after + out.hibernated_after != spec.sessions {
        out.failures.push(format!(
            "{} resident + {} hibernated, but {} were created",
            out.resident_after, out.hibernated_after, spec.sessions
        ));
    }
    for id in &woken {
        if state.is_served(id) {
            out.failures
                .push(format!("session {id} is resident: nothing to wake"));
            continue;
        }
        let before = probe.data().requests.len();
        let submitted = Instant::now();
        let entry = state
            .get(id)
            .await
            .map_err(|e| server_error(format!("cannot wake {id}"), e))?;
        entry.handle.start_task(PROMPT).await?;
        let summary = entry.handle.wait_idle().await?;
        let ended = Instant::now();
        match probe.data().requests.get(before) {
            Some(first) => out
                .first_request_ms
                .push(ms(first.saturating_duration_since(submitted))),
            None => out
                .failures
                .push(format!("session {id}: no model request after the wake")),
        }
        out.task_end_ms.push(ms(ended - submitted));
        #[cfg(feature = "postgres")]
        if let Some(store) = &spec.store {
            let holder = super::hibernation_store::holder(store, id)
                .await
                .map_err(RookeryError::Store)?;
            let me = &store.options().node;
            if holder.as_deref() != Some(me.as_str()) {
                out.failures.push(format!(
                    "session {id}: woken, but its lease is held by {} instead of {me}",
                    holder.as_deref().unwrap_or("nobody")
                ));
            }
        }
        let done = summary.as_ref().is_some_and(|s| {
            s.status == StopReason::Completed
                && s.final_text
                    .as_deref()
                    .is_some_and(|t| t.starts_with("Done"))
        });
        if !done {
            out.failures.push(format!(
                "session {id}: the task after the wake did not answer Done"
            ));
        }
    }
    out.first_request_ms.sort_by(f64::total_cmp);
    out.task_end_ms.sort_by(f64::total_cmp);
    #[cfg(feature = "postgres")]
    if let (Some(store), Some(created), Some(sample)) = (&spec.store, created_totals, woken.first())
    {
        let end = store_totals(store, sample).await?;
        check_store(spec, out, &created, &end);
        out.store = Some(StoreFigures { created, end });
    }
    if out.records_min < spec.trace_records && wakes > 0 {
        out.failures.push(format!(
            "a woken trace holds {} records, fewer than {}",
            out.records_min, spec.trace_records
        ));
    }
    Ok(())
}

/// Records of a created session's trace: its file's lines, or its rows in the store.
async fn trace_records(
    spec: &HibernationSpec,
    entry: &crate::server::state::SessionEntry,
) -> Result<usize, HibernationBenchError> {
    #[cfg(feature = "postgres")]
    if let Some(store) = &spec.store {
        return super::hibernation_store::records(store, entry.id())
            .await
            .map_err(|e| RookeryError::Store(e).into());
    }
    let _ = spec;
    Ok(records(&entry.handle.trace_path()))
}

#[cfg(feature = "postgres")]
async fn store_totals(
    store: &crate::store::PgStore,
    sample: &str,
) -> Result<super::hibernation_store::StoreTotals, HibernationBenchError> {
    super::hibernation_store::totals(store, sample)
        .await
        .map_err(|e| RookeryError::Store(e).into())
}

/// The store's checks: every session stored, no hibernated session holding its lease.
#[cfg(feature = "postgres")]
fn check_store(
    spec: &HibernationSpec,
    out: &mut HibernationOutcome,
    created: &super::hibernation_store::StoreTotals,
    end: &super::hibernation_store::StoreTotals,
) {
    if end.sessions != spec.sessions as u64 {
        out.failures.push(format!(
            "the store holds {} sessions of this run, but {} were created",
            end.sessions, spec.sessions
        ));
    }
    if created.leases_held > out.resident_after as u64 {
        out.failures.push(format!(
            "{} leases held by this node with {} sessions resident: hibernated sessions kept theirs",
            created.leases_held, out.resident_after
        ));
    }
}

/// The `p`-th percentile (nearest rank) of sorted values (0 for none).
pub fn percentile_ms(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<f64> = (1..=20).map(f64::from).collect();
        assert_eq!(percentile_ms(&v, 50.0), 10.0);
        assert_eq!(percentile_ms(&v, 95.0), 19.0);
        assert_eq!(percentile_ms(&[], 50.0), 0.0);
        assert_eq!(percentile_ms(&[3.0], 95.0), 3.0);
    }
}
