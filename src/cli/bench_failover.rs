//! `rookery bench --failover N`: checks the flags, runs [`crate::bench::failover`] (K `rookery
//! serve` processes on the postgres store of `--store` or `$ROOKERY_STORE`, N sessions on the
//! first, which is then killed with SIGKILL) and renders its figures as text or one JSON object:
//! the time from the kill until each session's next task is accepted (202) and completed, the
//! lost tasks ended `node_lost`, and the goal (every session accepted within the lease
//! TTL + 2 s) met or not.
//!
//! Exit codes: 0 when the run's checks held (every in-flight task ended `node_lost`, every
//! session deleted at the end), whether the goal was met or not (a figure, shown); 1 when a
//! check failed or the run could not finish; 2 for usage errors. It owns the rendering, never
//! the measuring.

use std::process::ExitCode;
use std::time::Duration;

use serde_json::{Value, json};

use super::{BenchArgs, CliError};
use crate::bench::TempDir;
use crate::bench::failover::{self, DEFAULT_LEASE_TTL_SECS, FailoverOutcome, FailoverSpec};
use crate::trace::store_choice::{STORE_ENV, StoreChoice};

/// Whole microseconds as ms, so a session's figure and the percentiles over them (taken in
/// microseconds) are equal when they are the same sample.
fn ms(d: Duration) -> f64 {
    d.as_micros() as f64 / 1000.0
}

/// `rookery bench --failover N`.
pub(super) async fn bench(args: &BenchArgs, n: usize) -> Result<ExitCode, CliError> {
    if n == 0 {
        return Err(CliError::usage("--failover must be at least 1"));
    }
    let nodes = args.nodes.unwrap_or(2);
    if nodes < 2 {
        return Err(CliError::usage(
            "--nodes: --failover needs at least 2 nodes (one is killed, the others take over)",
        ));
    }
    let in_flight = args.in_flight.unwrap_or(n / 2);
    if in_flight > n {
        return Err(CliError::usage(format!(
            "--in-flight {in_flight}: at most --failover ({n}) sessions can be in flight"
        )));
    }
    if args.node_id.is_some() {
        return Err(CliError::usage(
            "--node-id: --failover names its nodes itself",
        ));
    }
    let choice = StoreChoice::resolve(args.store.store.as_deref())
        .map_err(|e| CliError::usage(e.to_string()))?;
    let store_url = match choice {
        StoreChoice::Postgres(url) => url,
        StoreChoice::Files => {
            return Err(CliError::usage(format!(
                "--failover runs serve nodes on a postgres store: pass --store postgres://USER@HOST:PORT/DB (or set ${STORE_ENV})"
            )));
        }
    };
    let exe = std::env::current_exe()
        .map_err(|e| CliError::startup_io("cannot find this program to run the nodes", e))?;
    let scratch = TempDir::new("rookery-bench-failover")
        .map_err(|e| CliError::startup_io("cannot create a temp dir", e))?;
    let spec = FailoverSpec {
        store_url,
        sessions: n,
        in_flight,
        nodes,
        lease_ttl: Duration::from_secs(args.store.lease_ttl.unwrap_or(DEFAULT_LEASE_TTL_SECS)),
        exe,
        scratch: args
            .home
            .clone()
            .unwrap_or_else(|| scratch.path().to_path_buf()),
    };
    let out = failover::run(&spec).await.map_err(|e| CliError::Io {
        what: "failover bench".to_string(),
        source: std::io::Error::other(e.to_string()),
        code: 1,
    })?;
    let v = report(&spec, &out);
    print(args.json, &v);
    let mut failed = false;
    if out.node_lost != out.in_flight() as u64 {
        failed = true;
        errln!(
            "rookery: bench check failed: {} lost tasks ended node_lost, but {} sessions were in flight",
            out.node_lost,
            out.in_flight()
        );
    }
    if out.deleted != n as u64 {
        failed = true;
        errln!(
            "rookery: bench check failed: {} of the {n} sessions were deleted from the store at the end",
            out.deleted
        );
    }
    Ok(ExitCode::from(u8::from(failed)))
}

/// The run's figures as one JSON object.
fn report(spec: &FailoverSpec, out: &FailoverOutcome) -> Value {
    let n = out.sessions.len();
    json!({
        "failover": spec.sessions,
        "store": "postgres",
        "nodes": out.nodes.len(),
        "node_processes": out.nodes.iter().map(|(id, pid)| json!({"node_id": id, "pid": pid})).collect::<Vec<_>>(),
        "killed_node": out.nodes.first().map(|(id, _)| id.clone()),
        "lease_ttl_s": out.lease_ttl.as_secs(),
        "in_flight": out.in_flight(),
        "setup_ms": ms(out.setup),
        "accepted": n,
        "accepted_p50_ms": out.accepted_ms(50.0),
        "accepted_p95_ms": out.accepted_ms(95.0),
        "accepted_all_ms": out.accepted_ms(100.0),
        "accepted_all_in_flight_ms": out.accepted_max_ms(true),
        "accepted_all_finished_ms": out.accepted_max_ms(false),
        "completed": n,
        "completed_p50_ms": out.completed_ms(50.0),
        "completed_p95_ms": out.completed_ms(95.0),
        "completed_all_ms": out.completed_ms(100.0),
        "node_lost": out.node_lost,
        "refused_requests": out.retries(),
        "served_by": out.served_by(),
        "goal_ms": ms(out.goal()),
        "goal_met": out.goal_met(),
        "deleted_sessions": out.deleted,
        "concurrency": failover::CONCURRENCY,
        "retry_backoff_ms": ms(failover::RETRY_BACKOFF),
        "completion_poll_ms": ms(failover::POLL),
        "per_session": out.sessions.iter().map(|s| json!({
            "in_flight": s.in_flight,
            "accepted_ms": ms(s.accepted),
            "completed_ms": ms(s.completed),
            "attempts": s.attempts,
            "node": s.node,
        })).collect::<Vec<_>>(),
    })
}

fn print(json: bool, v: &Value) {
    if json {
        outln!("{v}");
        return;
    }
    let g = |k: &str| v.get(k).cloned().unwrap_or(Value::Null);
    outln!(
        "failover: {} sessions on node {} ({} in flight), killed with SIGKILL; {} nodes, lease TTL {} s",
        g("failover"),
        g("killed_node").as_str().unwrap_or("?"),
        g("in_flight"),
        g("nodes"),
        g("lease_ttl_s"),
    );
    outln!(
        "accepted (202)   p50 {} ms  p95 {} ms  all {} ms (in flight: {} ms, finished: {} ms); {} requests refused (409/503) before",
        g("accepted_p50_ms"),
        g("accepted_p95_ms"),
        g("accepted_all_ms"),
        g("accepted_all_in_flight_ms"),
        g("accepted_all_finished_ms"),
        g("refused_requests"),
    );
    outln!(
        "completed        p50 {} ms  p95 {} ms  all {} ms (seen in the store, polled every {} ms)",
        g("completed_p50_ms"),
        g("completed_p95_ms"),
        g("completed_all_ms"),
        g("completion_poll_ms"),
    );
    outln!(
        "lost tasks       {} ended node_lost; taken over by {}",
        g("node_lost"),
        g("served_by"),
    );
    outln!(
        "goal             every session accepted within TTL + 2 s = {} ms: {}",
        g("goal_ms"),
        if g("goal_met") == Value::Bool(true) {
            "met"
        } else {
            "NOT met"
        }
    );
}
