//! `rookery bench --hibernation N --store URL --nodes K`: the hibernation scenario spread over K
//! processes on one postgres store. This process runs its own binary K times, concurrently, each
//! `bench --hibernation N/K --json --node-id bench-<pid>-<i>` (the remainder of N/K spread one
//! each over the first nodes, so they create N in all; `--resident`, `--trace-records`,
//! `--wakes` and `--lease-ttl` passed on as given: each node's), the store's URL in the
//! child's `$ROOKERY_STORE` rather than on its command line, where `ps` would show a password.
//! It then aggregates their JSON: each node's own figures (its RSS, its wake percentiles), the
//! wake percentiles over all nodes' wakes, and the store's sessions against N.
//!
//! The nodes stay in this process's process group (Ctrl-C or a kill of the group reaches them
//! all), get SIGKILL when this process dies (the parent-death signal) and are killed when it
//! drops them. A node that ends without its JSON (crashed, refused its arguments, lost the
//! store) stops the others and is reported with its exit status and the end of its stderr.
//!
//! It owns the orchestration and the aggregate's rendering; the measuring is each node's.

use std::io::Write;
use std::process::{ExitCode, ExitStatus, Stdio};

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::watch;

use super::{BenchArgs, CliError};
use crate::bench::hibernation::{TARGET_STORE_WAKE_MS, percentile_ms};

/// The most of a node's stdout kept (its one JSON line).
const MAX_STDOUT: usize = 4 << 20;
/// The end of a node's stderr kept for its report.
const STDERR_TAIL: usize = 8 << 10;

/// One node's process and what it printed.
struct NodeRun {
    name: String,
    pid: u32,
    status: std::io::Result<ExitStatus>,
    stdout: Vec<u8>,
    stderr_tail: Vec<u8>,
    /// Killed because another node failed.
    stopped: bool,
}

impl NodeRun {
    /// The node's JSON result (its last stdout line), when it exited 0 or 1 with one.
    fn result(&self) -> Option<Value> {
        let code = self.status.as_ref().ok()?.code()?;
        if code > 1 {
            return None;
        }
        let text = std::str::from_utf8(&self.stdout).ok()?;
        let line = text.lines().rev().find(|l| !l.trim().is_empty())?;
        let v: Value = serde_json::from_str(line).ok()?;
        v.is_object().then_some(v)
    }

    /// Why the node gave no result, for the user.
    fn failure(&self) -> String {
        let status = match &self.status {
            Ok(s) => s.to_string(),
            Err(e) => format!("cannot be waited for: {e}"),
        };
        let tail = String::from_utf8_lossy(&self.stderr_tail);
        let tail = tail.trim();
        let why = if self.stopped {
            "stopped because another node failed".to_string()
        } else {
            format!("failed ({status}) without its JSON result")
        };
        if tail.is_empty() {
            format!(
                "node {} (pid {}) {why}; it wrote nothing on stderr",
                self.name, self.pid
            )
        } else {
            format!(
                "node {} (pid {}) {why}; the end of its stderr:\n{tail}",
                self.name, self.pid
            )
        }
    }
}

/// Sessions of node `i` of `k` for `n` in all.
fn share(n: usize, k: usize, i: usize) -> usize {
    n / k + usize::from(i < n % k)
}

/// Reads `r` to its end, keeping at most `max` bytes (the first ones).
async fn read_bounded(r: Option<impl AsyncRead + Unpin>, max: usize) -> Vec<u8> {
    let mut kept = Vec::new();
    let Some(mut r) = r else { return kept };
    let mut buf = [0u8; 8192];
    while let Ok(n) = r.read(&mut buf).await {
        if n == 0 {
            break;
        }
        let room = max.saturating_sub(kept.len()).min(n);
        kept.extend_from_slice(&buf[..room]);
    }
    kept
}

/// Reads `r` to its end, keeping its last `max` bytes.
async fn read_tail(r: Option<impl AsyncRead + Unpin>, max: usize) -> Vec<u8> {
    let mut kept = Vec::new();
    let Some(mut r) = r else { return kept };
    let mut buf = [0u8; 8192];
    while let Ok(n) = r.read(&mut buf).await {
        if n == 0 {
            break;
        }
        kept.extend_from_slice(&buf[..n]);
        if kept.len() > 2 * max {
            kept.drain(..kept.len() - max);
        }
    }
    if kept.len() > max {
        kept.drain(..kept.len() - max);
    }
    kept
}

/// The command line of node `i` (`name`) with `sessions` sessions.
fn node_command(
    exe: &std::path::Path,
    args: &BenchArgs,
    url: &str,
    name: &str,
    sessions: usize,
) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(exe);
    cmd.arg("bench")
        .arg("--hibernation")
        .arg(sessions.to_string())
        .arg("--resident")
        .arg(args.resident.to_string())
        .arg("--trace-records")
        .arg(args.trace_records.to_string())
        .arg("--wakes")
        .arg(args.wakes.to_string())
        .arg("--node-id")
        .arg(name)
        .arg("--json")
        .env("ROOKERY_STORE", url);
    if let Some(secs) = args.store.lease_ttl {
        cmd.arg("--lease-ttl").arg(secs.to_string());
    }
    if let Some(home) = &args.home {
        cmd.arg("--home").arg(home.join(name));
    }
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: the closure runs between fork and exec and makes only async-signal-safe raw
    // system calls (prctl, getppid); the error it builds does not allocate.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            // This process may have died before prctl took effect.
            if libc::getppid() != parent {
                return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        });
    }
    cmd
}

/// Runs node `name` to its end (or until `stop` says another node failed).
async fn run_node(
    mut child: tokio::process::Child,
    name: String,
    mut stop: watch::Receiver<bool>,
) -> NodeRun {
    let pid = child.id().unwrap_or(0);
    let stdout = read_bounded(child.stdout.take(), MAX_STDOUT);
    let stderr = read_tail(child.stderr.take(), STDERR_TAIL);
    let waited = async {
        tokio::select! {
            status = child.wait() => (status, false),
            () = async { drop(stop.wait_for(|s| *s).await) } => {
                let _ = child.start_kill();
                (child.wait().await, true)
            }
        }
    };
    let ((status, stopped), stdout, stderr_tail) = tokio::join!(waited, stdout, stderr);
    NodeRun {
        name,
        pid,
        status,
        stdout,
        stderr_tail,
        stopped,
    }
}

/// Runs the K nodes and prints their aggregate (see the module doc). The caller has connected
/// to the store once already (a bad URL fails before any node starts; the migrations are
/// applied once).
pub(super) async fn bench(args: &BenchArgs, n: usize, url: &str) -> Result<ExitCode, CliError> {
    let k = args.nodes.unwrap_or(1);
    let exe = std::env::current_exe()
        .map_err(|e| CliError::startup_io("cannot find this program to run the nodes", e))?;
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut running = FuturesUnordered::new();
    for i in 0..k {
        let name = format!("bench-{}-{}", std::process::id(), i + 1);
        let child = node_command(&exe, args, url, &name, share(n, k, i))
            .spawn()
            .map_err(|e| CliError::startup_io(format!("cannot start node {name}"), e))?;
        running.push(run_node(child, name, stop_rx.clone()));
    }
    let mut runs = Vec::with_capacity(k);
    while let Some(run) = running.next().await {
        if run.result().is_none() {
            let _ = stop_tx.send(true);
        }
        runs.push(run);
    }
    runs.sort_by_key(|r| {
        r.name
            .rsplit('-')
            .next()
            .and_then(|i| i.parse::<usize>().ok())
    });
    let broken: Vec<&NodeRun> = runs.iter().filter(|r| r.result().is_none()).collect();
    if !broken.is_empty() {
        // The node that failed first, then the ones stopped for it.
        for r in broken.iter().filter(|r| !r.stopped) {
            errln!("rookery: bench {}", r.failure());
        }
        for r in broken.iter().filter(|r| r.stopped) {
            errln!("rookery: bench {}", r.failure());
        }
        return Ok(ExitCode::from(1));
    }
    let nodes: Vec<Value> = runs.iter().filter_map(NodeRun::result).collect();
    let v = aggregate(args, n, &nodes);
    print(args.json, &v);
    let mut failed = false;
    for (r, node) in runs.iter().zip(&nodes) {
        if node.get("ok") != Some(&Value::Bool(true)) {
            failed = true;
            let tail = String::from_utf8_lossy(&r.stderr_tail);
            for line in tail.lines().filter(|l| !l.trim().is_empty()) {
                errln!("rookery: node {}: {line}", r.name);
            }
        }
    }
    if v.get("store_sessions") != Some(&json!(n)) {
        failed = true;
        errln!(
            "rookery: bench check failed: the nodes stored {} sessions, not {n}",
            v.get("store_sessions").cloned().unwrap_or(Value::Null)
        );
    }
    Ok(ExitCode::from(u8::from(failed)))
}

fn r3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// The nodes' figures together: the wake percentiles over all their wakes, the largest RSS,
/// the store's sessions, and each node's own JSON under `per_node`.
fn aggregate(args: &BenchArgs, n: usize, nodes: &[Value]) -> Value {
    let u = |v: &Value, key: &str| v.get(key).and_then(Value::as_u64).unwrap_or(0);
    let mut samples: Vec<f64> = nodes
        .iter()
        .filter_map(|v| v.get("wake_first_request_samples_ms")?.as_array().cloned())
        .flatten()
        .filter_map(|x| x.as_f64())
        .collect();
    samples.sort_by(f64::total_cmp);
    let p95 = percentile_ms(&samples, 95.0);
    let ok = nodes
        .iter()
        .all(|v| v.get("ok") == Some(&Value::Bool(true)));
    let stored: u64 = nodes.iter().map(|v| u(v, "store_sessions")).sum();
    json!({
        "hibernation_sessions": n,
        "store": "postgres",
        "nodes": nodes.len(),
        "resident_cap_per_node": args.resident,
        "wakes": samples.len(),
        "trace_records": args.trace_records,
        "ok": ok && stored == n as u64,
        "failed_checks": nodes.iter().map(|v| u(v, "failed_checks")).sum::<u64>(),
        "store_sessions": stored,
        "rss_after_kb_max": nodes.iter().map(|v| u(v, "rss_after_kb")).max().unwrap_or(0),
        "wake_first_request_p50_ms": r3(percentile_ms(&samples, 50.0)),
        "wake_first_request_p95_ms": r3(p95),
        "wake_first_request_p99_ms": r3(percentile_ms(&samples, 99.0)),
        "wake_target_ms": TARGET_STORE_WAKE_MS,
        "wake_target_met": !samples.is_empty() && p95 <= TARGET_STORE_WAKE_MS,
        "per_node": nodes,
    })
}

fn print(json: bool, v: &Value) {
    let mut out = std::io::stdout().lock();
    if json {
        let _ = writeln!(out, "{v}");
        return;
    }
    let g = |v: &Value, k: &str| v.get(k).cloned().unwrap_or(Value::Null);
    let _ = writeln!(
        out,
        "hibernation on the postgres store: {} sessions over {} nodes, at most {} resident each: {}",
        g(v, "hibernation_sessions"),
        g(v, "nodes"),
        g(v, "resident_cap_per_node"),
        if g(v, "ok") == Value::Bool(true) {
            "ok"
        } else {
            "FAILED"
        }
    );
    let _ = writeln!(
        out,
        "{:<22} {:>9} {:>10} {:>12} {:>9} {:>9} {:>9}",
        "node", "sessions", "rss kB", "kB/hibern.", "wake p50", "wake p95", "wake p99"
    );
    for node in v
        .get("per_node")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        // Padded as text: a JSON value's Display ignores the width.
        let t = |k: &str| match g(node, k) {
            Value::String(s) => s,
            other => other.to_string(),
        };
        let _ = writeln!(
            out,
            "{:<22} {:>9} {:>10} {:>12} {:>9} {:>9} {:>9}",
            t("node"),
            t("hibernation_sessions"),
            t("rss_after_kb"),
            t("rss_per_hibernated_kb"),
            t("wake_first_request_p50_ms"),
            t("wake_first_request_p95_ms"),
            t("wake_first_request_p99_ms"),
        );
    }
    let _ = writeln!(
        out,
        "wake -> first request  p50 {} ms, p95 {} ms, p99 {} ms over {} wakes (target p95 <= {} ms: {})",
        g(v, "wake_first_request_p50_ms"),
        g(v, "wake_first_request_p95_ms"),
        g(v, "wake_first_request_p99_ms"),
        g(v, "wakes"),
        g(v, "wake_target_ms"),
        if g(v, "wake_target_met") == Value::Bool(true) {
            "met"
        } else {
            "MISSED"
        }
    );
    let _ = writeln!(
        out,
        "store                  {} sessions of this run",
        g(v, "store_sessions")
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_add_up_to_n() {
        for (n, k) in [(300, 3), (100_000, 3), (7, 3), (3, 3), (5, 1)] {
            let shares: Vec<usize> = (0..k).map(|i| share(n, k, i)).collect();
            assert_eq!(shares.iter().sum::<usize>(), n, "{n} over {k}");
            assert!(shares.iter().max().unwrap() - shares.iter().min().unwrap() <= 1);
        }
    }

    #[tokio::test]
    async fn tails_and_bounds() {
        let data: Vec<u8> = (0..50_000u32).map(|i| (i % 251) as u8).collect();
        let tail = read_tail(Some(&data[..]), 100).await;
        assert_eq!(tail, data[data.len() - 100..]);
        let head = read_bounded(Some(&data[..]), 100).await;
        assert_eq!(head, data[..100]);
    }
}
