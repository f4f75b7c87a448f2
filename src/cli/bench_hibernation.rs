//! `rookery bench --hibernation N [--resident R] [--trace-records T] [--wakes W]`: runs the
//! hibernation scenario (see [`crate::bench::hibernation`]) and prints its figures beside the
//! targets (RSS under 100 MiB, under 1,100 open descriptors, a hibernated session's next task
//! at its first model request within 50 ms), as text or one JSON object.
//!
//! With a postgres `--store` (or `$ROOKERY_STORE`) the scenario's server state runs on the store
//! (its figures gain the store's totals, wake p99 and the 20 ms wake target, and the node's
//! name); `--nodes K` spreads N over K processes (`bench_nodes.rs`). Without a store the output
//! is the files variant's, unchanged.
//!
//! Exit codes: 0 when every check held (the cap, every session accounted for, every woken task
//! answered), whether or not a target was met (the figures say so); 1 when a check failed (each
//! named on stderr); 2 for usage errors. It owns the rendering, never the measuring.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::sync::Arc;

use indicatif::{ProgressBar, ProgressStyle};
use serde_json::{Value, json};

use super::{BenchArgs, CliError};
use crate::bench::hibernation::{
    self, HibernationOutcome, HibernationSpec, TARGET_FDS, TARGET_RSS_KB, TARGET_STORE_WAKE_MS,
    TARGET_WAKE_MS, percentile_ms,
};
use crate::bench::{TempDir, measure};
use crate::store::{PgStore, StoreOptions};
use crate::trace::store_choice::StoreChoice;

/// Rounds to 3 decimals for the JSON output.
fn r3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

pub(super) async fn bench(args: &BenchArgs, n: usize) -> Result<ExitCode, CliError> {
    if n == 0 {
        return Err(CliError::usage("--hibernation must be at least 1"));
    }
    if args.resident == 0 {
        return Err(CliError::usage("--resident must be at least 1"));
    }
    let url = match StoreChoice::resolve(args.store.store.as_deref())
        .map_err(|e| CliError::usage(e.to_string()))?
    {
        StoreChoice::Postgres(url) => Some(url),
        StoreChoice::Files => None,
    };
    if url.is_none() && (args.nodes.is_some_and(|k| k != 1) || args.node_id.is_some()) {
        return Err(CliError::usage(
            "--nodes and --node-id: only with a postgres store (--store postgres://…)",
        ));
    }
    let nodes = args.nodes.unwrap_or(1);
    if nodes == 0 || nodes > n {
        return Err(CliError::usage(format!(
            "--nodes must be between 1 and --hibernation ({n}): each node creates at least one session"
        )));
    }
    let store = match &url {
        Some(url) => Some(connect(args, url).await?),
        None => None,
    };
    if let Some(url) = &url
        && nodes > 1
    {
        return super::bench_nodes::bench(args, n, url).await;
    }
    measure::raise_open_files_limit();
    let scratch = TempDir::new("rookery-bench-hibernation")
        .map_err(|e| CliError::startup_io("cannot create a temp dir", e))?;
    let home = args
        .home
        .clone()
        .unwrap_or_else(|| scratch.path().join("home"));
    let bar = std::io::stderr().is_terminal().then(|| {
        let bar = ProgressBar::new(n as u64);
        if let Ok(style) =
            ProgressStyle::with_template("{bar:40} {pos}/{len} sessions {elapsed_precise}")
        {
            bar.set_style(style);
        }
        bar
    });
    let on_create = bar.clone().map(|b| {
        let f: Arc<dyn Fn() + Send + Sync> = Arc::new(move || b.inc(1));
        f
    });
    let spec = HibernationSpec {
        sessions: n,
        resident: args.resident,
        trace_records: args.trace_records,
        wakes: args.wakes,
        home: home.clone(),
        scratch: scratch.path().to_path_buf(),
        on_create,
        store: store.clone(),
    };
    let result = hibernation::run(&spec).await;
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    let out = result.map_err(|e| CliError::Io {
        what: "hibernation bench".to_string(),
        source: std::io::Error::other(e.to_string()),
        code: 1,
    })?;
    let v = match &store {
        Some(store) => store_report(&spec, &out, store),
        None => {
            let (trace_files, trace_bytes) = measure::dir_totals(&home.join("traces"));
            report(&spec, &out, trace_files, trace_bytes)
        }
    };
    print(args.json, &v);
    for f in &out.failures {
        errln!("rookery: bench check failed: {f}");
    }
    // The temp dir (100,000 traces) goes before the exit.
    drop(scratch);
    Ok(ExitCode::from(if out.failures.is_empty() { 0 } else { 1 }))
}

/// The store at `url`, connected and migrated, this process's sessions owned by `--node-id`.
async fn connect(args: &BenchArgs, url: &str) -> Result<PgStore, CliError> {
    let mut options = StoreOptions::default();
    if let Some(node) = &args.node_id {
        if node.trim().is_empty() {
            return Err(CliError::usage(
                "--node-id: the node name must not be empty",
            ));
        }
        options.node = node.clone();
    }
    if let Some(secs) = args.store.lease_ttl {
        options.lease_ttl = std::time::Duration::from_secs(secs);
    }
    PgStore::connect(url, options)
        .await
        .map_err(|e| CliError::Start(e.into()))
}

/// The files variant's figures, then what the store variant adds: the node, the store's
/// totals (instead of the trace files), the wakes' p99 and samples, and its own wake target.
fn store_report(spec: &HibernationSpec, o: &HibernationOutcome, store: &PgStore) -> Value {
    let mut v = report(spec, o, 0, 0);
    let first_p95 = percentile_ms(&o.first_request_ms, 95.0);
    let figures = o.store.unwrap_or_default();
    if let Value::Object(m) = &mut v {
        m.remove("trace_files");
        m.remove("trace_bytes");
        let extra = json!({
            "store": "postgres",
            "node": store.options().node,
            "wake_first_request_p99_ms": r3(percentile_ms(&o.first_request_ms, 99.0)),
            "wake_task_end_p99_ms": r3(percentile_ms(&o.task_end_ms, 99.0)),
            "wake_target_ms": TARGET_STORE_WAKE_MS,
            "wake_target_met": !o.first_request_ms.is_empty() && first_p95 <= TARGET_STORE_WAKE_MS,
            "wake_first_request_samples_ms": o.first_request_ms.iter().map(|x| r3(*x)).collect::<Vec<_>>(),
            "store_sessions": figures.end.sessions,
            "store_leases_held_before_wakes": figures.created.leases_held,
            "store_records": figures.end.records,
            "store_bytes": figures.end.bytes,
        });
        if let Value::Object(extra) = extra {
            m.extend(extra);
        }
    }
    v
}

fn report(spec: &HibernationSpec, o: &HibernationOutcome, files: u64, bytes: u64) -> Value {
    let added = o.rss_after_kb.saturating_sub(o.rss_at_cap_kb) as f64;
    let per_entry = if o.hibernated_after > 0 {
        added / o.hibernated_after as f64
    } else {
        0.0
    };
    let first_p50 = percentile_ms(&o.first_request_ms, 50.0);
    let first_p95 = percentile_ms(&o.first_request_ms, 95.0);
    json!({
        "hibernation_sessions": spec.sessions,
        "resident_cap": spec.resident,
        "wakes": o.first_request_ms.len(),
        "trace_records": spec.trace_records,
        "trace_records_min": o.records_min,
        "turns_per_woken_session": o.turns,
        "ok": o.failures.is_empty(),
        "failed_checks": o.failures.len(),
        "session_create_ms": r3(o.create.as_secs_f64() * 1000.0),
        "resident_after": o.resident_after,
        "hibernated_after": o.hibernated_after,
        "resident_peak": o.resident_peak,
        "rss_start_kb": o.rss_start_kb,
        "rss_at_cap_kb": o.rss_at_cap_kb,
        "rss_after_kb": o.rss_after_kb,
        "rss_per_hibernated_kb": r3(per_entry),
        "rss_target_kb": TARGET_RSS_KB,
        "rss_target_met": o.rss_after_kb < TARGET_RSS_KB,
        "open_fds_start": o.fds_start,
        "open_fds": o.fds_after,
        "open_fds_target": TARGET_FDS,
        "open_fds_target_met": o.fds_after < TARGET_FDS,
        "wake_first_request_p50_ms": r3(first_p50),
        "wake_first_request_p95_ms": r3(first_p95),
        "wake_task_end_p50_ms": r3(percentile_ms(&o.task_end_ms, 50.0)),
        "wake_task_end_p95_ms": r3(percentile_ms(&o.task_end_ms, 95.0)),
        "wake_target_ms": TARGET_WAKE_MS,
        "wake_target_met": !o.first_request_ms.is_empty() && first_p95 < TARGET_WAKE_MS,
        "peak_rss_kb": measure::self_usage().max_rss_kb,
        "trace_files": files,
        "trace_bytes": bytes,
    })
}

fn met(v: &Value, key: &str) -> &'static str {
    if v.get(key) == Some(&Value::Bool(true)) {
        "met"
    } else {
        "MISSED"
    }
}

/// Prints the figures: one JSON object, or the text table.
pub(super) fn print(json: bool, v: &Value) {
    let mut out = std::io::stdout().lock();
    if json {
        let _ = writeln!(out, "{v}");
        return;
    }
    let g = |k: &str| v.get(k).cloned().unwrap_or(Value::Null);
    let _ = writeln!(
        out,
        "hibernation: {} sessions, at most {} resident, {} wakes of a trace of {} records: {}",
        g("hibernation_sessions"),
        g("resident_cap"),
        g("wakes"),
        g("trace_records_min"),
        if g("ok") == Value::Bool(true) {
            "ok"
        } else {
            "FAILED"
        }
    );
    let stored = v.get("store").is_some();
    if stored {
        let _ = writeln!(
            out,
            "node                    {} (postgres store)",
            g("node").as_str().unwrap_or("?")
        );
    }
    let mut lines = vec![
        format!(
            "resident / hibernated   {} / {} (peak {} resident)",
            g("resident_after"),
            g("hibernated_after"),
            g("resident_peak")
        ),
        format!("session creation        {} ms", g("session_create_ms")),
        format!(
            "rss                     {} kB (target < {} kB: {}); {} kB per hibernated entry",
            g("rss_after_kb"),
            g("rss_target_kb"),
            met(v, "rss_target_met"),
            g("rss_per_hibernated_kb")
        ),
        format!(
            "open descriptors        {} (target < {}: {})",
            g("open_fds"),
            g("open_fds_target"),
            met(v, "open_fds_target_met")
        ),
        format!(
            "wake -> first request   p50 {} ms, p95 {} ms (target {} {} ms: {})",
            g("wake_first_request_p50_ms"),
            g("wake_first_request_p95_ms"),
            if stored { "<=" } else { "<" },
            g("wake_target_ms"),
            met(v, "wake_target_met")
        ),
        format!(
            "wake -> task end        p50 {} ms, p95 {} ms",
            g("wake_task_end_p50_ms"),
            g("wake_task_end_p95_ms")
        ),
    ];
    if stored {
        lines.push(format!(
            "wake p99                first request {} ms, task end {} ms",
            g("wake_first_request_p99_ms"),
            g("wake_task_end_p99_ms")
        ));
        lines.push(format!(
            "store                   {} sessions, {} records, {} bytes; {} leases held before the wakes",
            g("store_sessions"),
            g("store_records"),
            g("store_bytes"),
            g("store_leases_held_before_wakes")
        ));
    } else {
        lines.push(format!(
            "traces                  {} files, {} bytes",
            g("trace_files"),
            g("trace_bytes")
        ));
    }
    for l in lines {
        let _ = writeln!(out, "{l}");
    }
}
