//! The failover workload of `rookery bench --failover N`: K (≥ 2) real `rookery serve` node
//! processes on one Postgres store with a short lease TTL (`failover_nodes.rs`); N sessions
//! created on node A, each given a scripted task: most finish it (a short command, then a text),
//! `in_flight` of them (spread evenly) are inside a long `exec_command` when A dies. Once every
//! session is there (in the store) and held by A, A gets SIGKILL; then every session is sent a
//! new task through the surviving nodes (round-robin), concurrently with at most
//! [`CONCURRENCY`] in flight, each retried on 409 and 503 every [`RETRY_BACKOFF`] until 202.
//! Each session's time from the kill to its 202, and to its new task's completed `task_end` in
//! the store (polled every [`POLL`]; at most one poll and one query late), are the figures.
//!
//! The nodes are stopped on every path (and killed when this process dies); the run's sessions
//! and node rows are deleted from the store at the end. It measures only; the CLI renders.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::failover_nodes::{NodeSet, NodeSetup, NodeStartError};
use super::failover_requests::{Accepted, Api, RequestError, accept, create, wait_listed};
use super::failover_store::{self as fstore, Progress};
use super::measure::percentile;
use crate::store::{PgStore, StoreError, StoreOptions};

/// The lease TTL of the nodes unless `--lease-ttl` says otherwise.
pub const DEFAULT_LEASE_TTL_SECS: u64 = 3;
/// What the goal adds to the lease TTL: every session accepted within TTL + 2 s.
pub const GOAL_SLACK: Duration = Duration::from_secs(2);
/// New tasks being sent at once after the kill.
pub const CONCURRENCY: usize = 32;
/// The wait before a task refused with 409 or 503 is sent again.
pub const RETRY_BACKOFF: Duration = Duration::from_millis(50);
/// How often the store is asked which new tasks completed.
pub const POLL: Duration = Duration::from_millis(20);

/// Sessions created (and given their first task) at once.
const SETUP_CONCURRENCY: usize = 16;
/// The file whose presence in a workspace makes the first task's command run long.
const IN_FLIGHT_MARKER: &str = ".bench-in-flight";
/// One request's limit.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// What to run.
#[derive(Debug, Clone)]
pub struct FailoverSpec {
    /// The postgres store's URL.
    pub store_url: String,
    /// Sessions on the node that dies.
    pub sessions: usize,
    /// Of those, the ones inside a long command when it dies.
    pub in_flight: usize,
    /// Node processes (at least 2).
    pub nodes: usize,
    /// The nodes' lease TTL.
    pub lease_ttl: Duration,
    /// The program the nodes run (`rookery`).
    pub exe: PathBuf,
    /// Where the nodes' homes, the script and the workspaces go.
    pub scratch: PathBuf,
}

/// One session's figures.
#[derive(Debug, Clone)]
pub struct SessionFigures {
    /// Inside a long command at the kill.
    pub in_flight: bool,
    /// From the kill to the 202.
    pub accepted: Duration,
    /// From the kill to its new task's completion seen in the store.
    pub completed: Duration,
    /// Requests sent until the 202 (the refused ones included).
    pub attempts: u32,
    /// The node that took the task (`Rookery-Node`).
    pub node: String,
}

/// The figures of a run.
#[derive(Debug, Clone)]
pub struct FailoverOutcome {
    /// The nodes' lease TTL.
    pub lease_ttl: Duration,
    /// The nodes (`--node-id`, pid), A first.
    pub nodes: Vec<(String, u32)>,
    /// Creating the N sessions and running their first tasks up to the kill.
    pub setup: Duration,
    /// Each session's figures, in creation order.
    pub sessions: Vec<SessionFigures>,
    /// Sessions whose lost task the store shows ended `node_lost`.
    pub node_lost: u64,
    /// Sessions deleted from the store at the end.
    pub deleted: u64,
}

fn sorted_us(v: impl Iterator<Item = Duration>) -> Vec<u64> {
    let mut v: Vec<u64> = v.map(|d| d.as_micros() as u64).collect();
    v.sort_unstable();
    v
}

impl FailoverOutcome {
    /// Sessions that were in flight at the kill.
    pub fn in_flight(&self) -> usize {
        self.sessions.iter().filter(|s| s.in_flight).count()
    }

    /// The `p`th percentile of the times to 202, in ms.
    pub fn accepted_ms(&self, p: f64) -> f64 {
        percentile(&sorted_us(self.sessions.iter().map(|s| s.accepted)), p) as f64 / 1000.0
    }

    /// The `p`th percentile of the times to completion, in ms.
    pub fn completed_ms(&self, p: f64) -> f64 {
        percentile(&sorted_us(self.sessions.iter().map(|s| s.completed)), p) as f64 / 1000.0
    }

    /// The largest time to 202 among the sessions that were (or were not) in flight, in ms.
    pub fn accepted_max_ms(&self, in_flight: bool) -> f64 {
        self.sessions
            .iter()
            .filter(|s| s.in_flight == in_flight)
            .map(|s| s.accepted.as_micros() as u64)
            .max()
            .unwrap_or(0) as f64
            / 1000.0
    }

    /// The goal: lease TTL + 2 s.
    pub fn goal(&self) -> Duration {
        self.lease_ttl + GOAL_SLACK
    }

    /// Whether every session was accepted within the goal.
    pub fn goal_met(&self) -> bool {
        !self.sessions.is_empty() && self.sessions.iter().all(|s| s.accepted <= self.goal())
    }

    /// Requests refused (409, 503) before the 202s.
    pub fn retries(&self) -> u64 {
        self.sessions
            .iter()
            .map(|s| u64::from(s.attempts.saturating_sub(1)))
            .sum()
    }

    /// Sessions per node that took their new task.
    pub fn served_by(&self) -> BTreeMap<String, usize> {
        let mut by = BTreeMap::new();
        for s in &self.sessions {
            *by.entry(s.node.clone()).or_insert(0) += 1;
        }
        by
    }
}

/// Why the workload could not run.
#[derive(Debug, thiserror::Error)]
pub enum FailoverBenchError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A node did not start.
    #[error(transparent)]
    Node(#[from] NodeStartError),
    /// A local file or directory could not be made.
    #[error("{what}: {source}")]
    Io {
        /// What failed.
        what: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A request failed, was answered wrongly or not in time.
    #[error(transparent)]
    Request(#[from] RequestError),
    /// The HTTP client could not be built.
    #[error("cannot build the HTTP client: {0}")]
    Client(#[source] reqwest::Error),
    /// The run's own checks failed (a session not held, a task not completed, bad sizes).
    #[error("{0}")]
    Check(String),
}

/// Whether session `i` of `n` is one of the `k` in flight (spread evenly over the creation
/// order, so they meet the finished ones in the queue after the kill).
pub fn is_in_flight(i: usize, n: usize, k: usize) -> bool {
    n > 0 && (i + 1) * k / n > i * k / n
}

/// The nodes' script: a command (long in a workspace with the marker), then a text.
fn script() -> Value {
    json!({"turns": [
        {"tool_calls": [{"name": "exec_command", "arguments": {
            "description": "the failover bench's first command",
            "cmd": format!("if [ -e {IN_FLIGHT_MARKER} ]; then exec sleep 600; fi; echo finished"),
            "yield_time_ms": 600_000}}]},
        {"text": "first task done"}
    ]})
}

/// Writes the script, the two workspaces and the shell home; the nodes' setup.
fn prepare(spec: &FailoverSpec) -> Result<(NodeSetup, [PathBuf; 2]), FailoverBenchError> {
    let io = |what: String| move |source| FailoverBenchError::Io { what, source };
    let finished = spec.scratch.join("ws-finished");
    let in_flight = spec.scratch.join("ws-in-flight");
    let shell_home = spec.scratch.join("shell-home");
    for dir in [&finished, &in_flight, &shell_home] {
        std::fs::create_dir_all(dir).map_err(io(format!("cannot create {}", dir.display())))?;
    }
    let marker = in_flight.join(IN_FLIGHT_MARKER);
    std::fs::write(&marker, "").map_err(io(format!("cannot write {}", marker.display())))?;
    let script_path = spec.scratch.join("script.json");
    std::fs::write(&script_path, script().to_string())
        .map_err(io(format!("cannot write {}", script_path.display())))?;
    let secret = || uuid::Uuid::new_v4().simple().to_string();
    let setup = NodeSetup {
        exe: spec.exe.clone(),
        store_url: spec.store_url.clone(),
        script: script_path,
        shell_home,
        dir: spec.scratch.join("nodes"),
        lease_ttl_secs: spec.lease_ttl.as_secs().max(1),
        max_sessions: spec.sessions.saturating_mul(2).max(1000),
        token: secret(),
        cluster_token: secret(),
    };
    Ok((setup, [finished, in_flight]))
}

/// Runs the workload (see the module doc).
pub async fn run(spec: &FailoverSpec) -> Result<FailoverOutcome, FailoverBenchError> {
    let (setup, workspaces) = prepare(spec)?;
    let options = StoreOptions {
        node: format!("bench-failover-{}", std::process::id()),
        lease_ttl: spec.lease_ttl,
    };
    let store = PgStore::connect(&spec.store_url, options).await?;
    let mut set = NodeSet::default();
    let mut ids = Vec::new();
    let result = drive(spec, &setup, &workspaces, &store, &mut set, &mut ids).await;
    set.stop().await;
    let node_ids: Vec<String> = set.nodes.iter().map(|n| n.id.clone()).collect();
    let deleted = fstore::delete(&store, &ids, &node_ids).await;
    let mut out = result?;
    out.deleted = deleted?;
    Ok(out)
}

async fn drive(
    spec: &FailoverSpec,
    setup: &NodeSetup,
    workspaces: &[PathBuf; 2],
    store: &PgStore,
    set: &mut NodeSet,
    ids: &mut Vec<String>,
) -> Result<FailoverOutcome, FailoverBenchError> {
    if spec.nodes < 2 || spec.sessions == 0 || spec.in_flight > spec.sessions {
        return Err(FailoverBenchError::Check(format!(
            "cannot run {} sessions ({} in flight) on {} nodes: at least 2 nodes and 1 session",
            spec.sessions, spec.in_flight, spec.nodes
        )));
    }
    let tag = std::process::id();
    for i in 1..=spec.nodes {
        set.start(setup, &format!("failover-{tag}-{i}")).await?;
    }
    let api = Api {
        client: reqwest::Client::builder()
            .no_proxy()
            .timeout(REQUEST_TIMEOUT)
            .build()
            .map_err(FailoverBenchError::Client)?,
        token: setup.token.clone(),
    };
    let all: Vec<String> = set.nodes.iter().map(|n| n.id.clone()).collect();
    for node in &set.nodes {
        wait_listed(&api, &node.base, &all).await?;
    }
    let a = &set.nodes[0];
    let (a_id, a_base) = (a.id.clone(), a.base.clone());
    let survivors: Vec<String> = set.nodes[1..].iter().map(|n| n.base.clone()).collect();

    // N sessions on A, each with its first task.
    let started = Instant::now();
    let n = spec.sessions;
    let kinds: Vec<bool> = (0..n).map(|i| is_in_flight(i, n, spec.in_flight)).collect();
    let created: Vec<Result<String, RequestError>> = futures::stream::iter(kinds.clone())
        .map(|in_flight| {
            let (api, base) = (api.clone(), a_base.clone());
            let ws = workspaces[usize::from(in_flight)].clone();
            async move { create(&api, &base, &ws).await }
        })
        .buffered(SETUP_CONCURRENCY)
        .collect()
        .await;
    for c in created {
        ids.push(c?);
    }
    let ids: &[String] = ids;
    wait_ready(store, ids, &kinds).await?;
    let held = fstore::held_by(store, ids, &a_id).await?;
    if held != n as u64 {
        return Err(FailoverBenchError::Check(format!(
            "node {a_id} holds {held} of the {n} sessions created on it, not all"
        )));
    }
    let setup_took = started.elapsed();

    // A dies.
    let killed = Instant::now();
    set.nodes[0]
        .kill9()
        .await
        .map_err(|source| FailoverBenchError::Io {
            what: format!("cannot kill node {a_id}"),
            source,
        })?;

    let (tx, rx) = mpsc::channel::<(usize, i64)>(n.max(1));
    let accept_deadline = killed + spec.lease_ttl + Duration::from_secs(60);
    let accepting = async {
        // Unordered: a session still refused holds no other session's slot.
        let mut answers: Vec<(usize, Result<Accepted, RequestError>)> =
            futures::stream::iter(ids.iter().cloned().enumerate())
                .map(|(i, id)| {
                    let base = survivors[i % survivors.len()].clone();
                    let (tx, api) = (tx.clone(), api.clone());
                    async move {
                        let got = accept(&api, &base, &id, killed, accept_deadline).await;
                        if let Ok(got) = &got {
                            let _ = tx.send((i, got.3)).await;
                        }
                        (i, got)
                    }
                })
                .buffer_unordered(CONCURRENCY)
                .collect()
                .await;
        drop(tx);
        answers.sort_by_key(|(i, _)| *i);
        answers
    };
    let complete_deadline = killed + spec.lease_ttl + Duration::from_secs(120);
    let (answers, completions) = tokio::join!(
        accepting,
        completions(store, ids, rx, killed, complete_deadline)
    );
    let mut accepted = Vec::with_capacity(n);
    for (_, a) in answers {
        accepted.push(a?);
    }
    let completions = completions?;
    let mut sessions = Vec::with_capacity(n);
    for (i, (attempts, took, node, _)) in accepted.into_iter().enumerate() {
        let Some(done) = completions.get(&i) else {
            return Err(FailoverBenchError::Check(format!(
                "session {}'s new task did not complete",
                ids[i]
            )));
        };
        sessions.push(SessionFigures {
            in_flight: kinds[i],
            accepted: took,
            completed: *done,
            attempts,
            node,
        });
    }
    let node_lost = fstore::node_lost(store, ids).await?;
    Ok(FailoverOutcome {
        lease_ttl: spec.lease_ttl,
        nodes: set.nodes.iter().map(|n| (n.id.clone(), n.pid)).collect(),
        setup: setup_took,
        sessions,
        node_lost,
        deleted: 0,
    })
}

/// Waits until every session's first task is where it must be at the kill: completed, or
/// (in flight) its command called and not answered.
async fn wait_ready(
    store: &PgStore,
    ids: &[String],
    kinds: &[bool],
) -> Result<(), FailoverBenchError> {
    let deadline = Instant::now() + Duration::from_secs(120) + POLL * ids.len() as u32;
    loop {
        let progress = fstore::progress(store, ids).await?;
        let mut waiting = 0;
        for (id, in_flight) in ids.iter().zip(kinds) {
            let p = progress.get(id).copied().unwrap_or(Progress::default());
            if *in_flight && (p.outputs > 0 || p.completed > 0) {
                return Err(FailoverBenchError::Check(format!(
                    "session {id}'s long command ended before the kill ({p:?})"
                )));
            }
            let ready = if *in_flight {
                p.calls > 0
            } else {
                p.completed > 0
            };
            waiting += usize::from(!ready);
        }
        if waiting == 0 {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(FailoverBenchError::Check(format!(
                "{waiting} of the {} sessions' first tasks did not get far enough in time",
                ids.len()
            )));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Polls the store for the new tasks' completions as their 202s arrive on `rx` (session index,
/// event id); each session's time from `killed` to the poll that first saw it (the instant the
/// query was sent: a record it sees was committed before that).
async fn completions(
    store: &PgStore,
    ids: &[String],
    mut rx: mpsc::Receiver<(usize, i64)>,
    killed: Instant,
    deadline: Instant,
) -> Result<BTreeMap<usize, Duration>, FailoverBenchError> {
    let mut pending: BTreeMap<String, (usize, i64)> = BTreeMap::new();
    let mut done = BTreeMap::new();
    let mut closed = false;
    loop {
        loop {
            match rx.try_recv() {
                Ok((i, after)) => {
                    pending.insert(ids[i].clone(), (i, after));
                }
                Err(mpsc::error::TryRecvError::Empty) => break,
                Err(mpsc::error::TryRecvError::Disconnected) => {
                    closed = true;
                    break;
                }
            }
        }
        if !pending.is_empty() {
            let asked = Instant::now();
            let waiting: Vec<(String, i64)> = pending
                .iter()
                .map(|(id, (_, after))| (id.clone(), *after))
                .collect();
            for id in fstore::completed_after(store, &waiting).await? {
                if let Some((i, _)) = pending.remove(&id) {
                    done.insert(i, asked.duration_since(killed));
                }
            }
        }
        if closed && pending.is_empty() {
            return Ok(done);
        }
        if Instant::now() > deadline {
            return Err(FailoverBenchError::Check(format!(
                "{} new tasks did not complete within {:.0} s of the kill",
                pending.len(),
                deadline.duration_since(killed).as_secs_f64()
            )));
        }
        tokio::time::sleep(POLL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_flight_sessions_are_spread_and_counted() {
        for (n, k) in [(100, 50), (100, 0), (100, 100), (5, 2), (7, 3), (1, 1)] {
            let picked: Vec<usize> = (0..n).filter(|i| is_in_flight(*i, n, k)).collect();
            assert_eq!(picked.len(), k, "{n} {k}");
        }
        let picked: Vec<usize> = (0..10).filter(|i| is_in_flight(*i, 10, 5)).collect();
        assert_eq!(picked, vec![1, 3, 5, 7, 9]);
    }

    #[test]
    fn the_goal_is_the_ttl_plus_two_seconds_for_every_session() {
        let s = |ms: u64| SessionFigures {
            in_flight: false,
            accepted: Duration::from_millis(ms),
            completed: Duration::from_millis(ms + 10),
            attempts: 3,
            node: "b".into(),
        };
        let mut out = FailoverOutcome {
            lease_ttl: Duration::from_secs(3),
            nodes: vec![],
            setup: Duration::ZERO,
            sessions: vec![s(2000), s(5000)],
            node_lost: 0,
            deleted: 0,
        };
        assert!(out.goal_met());
        assert_eq!(out.retries(), 4);
        assert_eq!(out.accepted_ms(100.0), 5000.0);
        out.sessions.push(s(5001));
        assert!(!out.goal_met());
        out.sessions.clear();
        assert!(!out.goal_met());
    }
}
