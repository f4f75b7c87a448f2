//! `rookery bench`: runs the standard workload (see [`crate::bench`]) and prints its figures as
//! text or one JSON object; `--idle-sessions N` measures the idle footprint; `--hibernation N`
//! runs the hibernation scenario (`bench_hibernation.rs`); `--floor` measures
//! the `bash -lc true` spawn floors in the same run; `--serve-mock` serves the workload's model
//! over loopback HTTP for the `--provider openai --base-url …` measurement.
//!
//! Exit codes: 0 when every session passed its check, 1 when one did not (each named on stderr,
//! and no figures table), 2 for usage or configuration errors. It owns the rendering, never the measuring.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use serde_json::{Value, json};

use super::{BenchArgs, CliError};
use crate::bench::{self, IdleOutcome, Outcome, Spec, TempDir, http_floor, measure};
use crate::config::AgentConfig;
use crate::model::openai::{BodyLog, OpenAiModel};

/// Sequential spawns for the N = 1 floor.
const SEQ_FLOOR_SPAWNS: usize = 200;

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Rounds to 3 decimals for the JSON output.
fn r3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// `rookery bench`: runs the chosen scenario and prints its figures (text, or JSON with `--json`).
pub async fn bench(args: BenchArgs) -> Result<ExitCode, CliError> {
    if let Some(super::BenchAction::Compare { a, b }) = &args.action {
        if args.report.is_some() {
            return Err(CliError::usage(
                "--report draws a run's figures; `bench compare` runs nothing",
            ));
        }
        return super::bench_meta::compare(a, b);
    }
    if args.trace_appends.is_none()
        && args.forwarding.is_none()
        && args.failover.is_none()
        && args.hibernation.is_none()
        && args.store.store.as_deref().is_some_and(|s| s != "files")
    {
        return Err(CliError::usage(
            "--store: only --trace-appends N, --forwarding N, --failover N and --hibernation N measure the postgres store; the other scenarios run on files",
        ));
    }
    if args.serve_mock {
        return serve_mock(&args).await;
    }
    if let Some(n) = args.forwarding {
        return super::bench_forwarding::bench(&args, n).await;
    }
    if let Some(n) = args.failover {
        return super::bench_failover::bench(&args, n).await;
    }
    if let Some(n) = args.hibernation {
        return super::bench_hibernation::bench(&args, n).await;
    }
    if let Some(mode) = args.sandbox {
        return super::bench_sandbox::bench(&args, mode).await;
    }
    if let Some(n) = args.trace_appends {
        return super::bench_trace::trace_appends(&args, n).await;
    }
    if args.sessions == 0 && args.idle_sessions.is_none() {
        return Err(CliError::usage("--sessions must be at least 1"));
    }
    if let Some(path) = &args.report {
        super::bench_report::check_path(path)?;
    }
    measure::raise_open_files_limit();
    let scratch = TempDir::new("rookery-bench")
        .map_err(|e| CliError::startup_io("cannot create a temp dir", e))?;
    let shell_home = scratch.path().join("shell-home");
    let default_home = scratch.path().join("home");
    let home = args.home.clone().unwrap_or(default_home);
    std::fs::create_dir_all(&shell_home)
        .map_err(|e| CliError::startup_io(format!("cannot create {}", shell_home.display()), e))?;
    let mut config = AgentConfig::default();
    let mut model = if args.model.provider.is_some() || args.model.base_url.is_some() {
        Some(super::model_args::resolve_model(
            &args.model.model_args(),
            &mut config,
        )?)
    } else {
        None
    };
    // Over HTTP the floor replays the bodies of the run: the model keeps them.
    let http_floor = match (&model, args.floor, args.idle_sessions) {
        (Some(_), true, None) => {
            let (m, log, url) = http_floor_model(&config)?;
            model = Some(Arc::new(m));
            Some((log, url))
        }
        _ => None,
    };

    if let Some(n) = args.idle_sessions {
        return idle(&args, n, &home, &shell_home, config).await;
    }

    let rounds = args.rounds.max(1) as usize;
    let calls = (args.sessions * args.turns * rounds) as u64;
    let bar = std::io::stderr().is_terminal().then(|| {
        let bar = ProgressBar::new(calls);
        if let Ok(style) =
            ProgressStyle::with_template("{bar:40} {pos}/{len} tool calls {elapsed_precise}")
        {
            bar.set_style(style);
        }
        bar
    });
    let on_call = bar.clone().map(|b| {
        let f: Arc<dyn Fn() + Send + Sync> = Arc::new(move || b.inc(1));
        f
    });
    let spec = Spec {
        workload: args.workload,
        sessions: args.sessions,
        turns: args.turns,
        model: model.clone(),
        latency: Duration::from_millis(args.model_latency_ms),
        config,
        home: home.clone(),
        scratch: scratch.path().join("workspaces"),
        shell_home,
        on_call,
    };
    let mut reports = Vec::with_capacity(rounds);
    let mut failures = Vec::new();
    for round in 1..=rounds {
        // Each round's traces in a directory of their own, so its trace figures are its own.
        let mut spec = spec.clone();
        if rounds > 1 {
            spec.home = home.join(format!("round-{round}"));
        }
        let measured = one_round(&args, &spec, http_floor.as_ref(), model.is_some()).await;
        let (report, round_failures) = match measured {
            Ok(r) => r,
            Err(e) => {
                if let Some(b) = &bar {
                    b.abandon();
                }
                return Err(e);
            }
        };
        reports.push(report);
        failures.extend(round_failures.into_iter().map(|f| {
            if rounds > 1 {
                format!("round {round}: {f}")
            } else {
                f
            }
        }));
    }
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    let mut report = if rounds > 1 {
        super::bench_rounds::combine(reports)
    } else {
        reports.pop().unwrap_or(Value::Null)
    };
    // One context for both, so the page shows the same figures as the JSON.
    if args.json || args.report.is_some() {
        super::bench_meta::add_context(&mut report);
    }
    // A failed run's figures measure something else than the workload: no table for them
    // (the JSON and the page keep them, with `ok: false`).
    if args.json || failures.is_empty() {
        print_report(&args, &report);
    }
    for f in &failures {
        errln!("rookery: bench check failed: {f}");
    }
    // A failed run's page too (it says FAILED): the figures of a failure are worth a look.
    if let Some(path) = &args.report {
        super::bench_report::write(path, &report)?;
    }
    Ok(ExitCode::from(if failures.is_empty() { 0 } else { 1 }))
}

/// One round: the spawn floors (with `--floor`, when they matter), the workload, then the HTTP
/// floor on the round's own bodies; its report and the sessions that failed their check.
async fn one_round(
    args: &BenchArgs,
    spec: &Spec,
    http_floor: Option<&(BodyLog, String)>,
    http: bool,
) -> Result<(Value, Vec<String>), CliError> {
    // Over HTTP the spawn floors matter only when the tool spawns (exec).
    let spawn_floors = http_floor.is_none() || args.workload == bench::Workload::Exec;
    let floor = if args.floor && spawn_floors {
        Some(
            floors(args, &spec.shell_home)
                .await
                .map_err(|e| CliError::Io {
                    what: "spawn floor".to_string(),
                    source: std::io::Error::other(e),
                    code: 1,
                })?,
        )
    } else {
        None
    };
    let outcome = bench::run(spec).await.map_err(CliError::Failed)?;
    // The floor runs right after, in the same process, on the same endpoint.
    let http_outcome =
        match http_floor {
            Some((log, url)) => Some(http_floor::run(url, log.take_bodies()).await.map_err(
                |e| CliError::Io {
                    what: "HTTP floor".to_string(),
                    source: std::io::Error::other(e.to_string()),
                    code: 1,
                },
            )?),
            None => None,
        };
    let (trace_files, trace_bytes) = measure::dir_totals(&spec.home.join("traces"));
    let mut report = report(args, &outcome, http, trace_files, trace_bytes, floor);
    if let Some(f) = http_outcome {
        add_http_floor(&mut report, args, &outcome, &f);
    }
    Ok((report, outcome.failures))
}

/// The OpenAI-compatible model of `config` keeping its bodies, the log and the URL it posts to.
fn http_floor_model(config: &AgentConfig) -> Result<(OpenAiModel, BodyLog, String), CliError> {
    let cfg = config
        .model
        .clone()
        .ok_or_else(|| CliError::usage("--floor over HTTP needs --provider openai"))?;
    if cfg.provider == crate::model::anthropic::PROVIDER {
        return Err(CliError::usage(
            "--floor over HTTP measures OpenAI-compatible endpoints only (--provider openai)",
        ));
    }
    let model = OpenAiModel::new(cfg)?;
    let log = BodyLog::default();
    let url = model.url().to_string();
    Ok((model.with_body_log(log.clone()), log, url))
}

/// Adds the HTTP floor's figures and the ratios to it.
fn add_http_floor(v: &mut Value, args: &BenchArgs, o: &Outcome, f: &http_floor::FloorOutcome) {
    let calls = (args.sessions * args.turns) as f64;
    let per_s = |wall: Duration| {
        if wall.is_zero() {
            0.0
        } else {
            calls / wall.as_secs_f64()
        }
    };
    let requests = f.requests.max(1) as f64;
    let rookery_cpu_us = o.cpu_s * 1e6 / requests;
    let floor_cpu_us = f.cpu_s * 1e6 / requests;
    let (ours, theirs) = (per_s(o.wall), per_s(f.wall));
    let Some(obj) = v.as_object_mut() else {
        return;
    };
    obj.insert("http_floor_requests".into(), json!(f.requests));
    obj.insert("http_floor_tool_calls".into(), json!(f.tool_calls));
    obj.insert("http_floor_wall_ms".into(), json!(r3(ms(f.wall))));
    obj.insert("http_floor_calls_per_s".into(), json!(theirs.round()));
    obj.insert("cpu_per_request_us".into(), json!(r3(rookery_cpu_us)));
    obj.insert(
        "http_floor_cpu_per_request_us".into(),
        json!(r3(floor_cpu_us)),
    );
    let ratio = |a: f64, b: f64| if b > 0.0 { r3(a / b) } else { 0.0 };
    obj.insert(
        "ratio_calls_per_s_to_http_floor".into(),
        json!(ratio(ours, theirs)),
    );
    obj.insert(
        "ratio_cpu_per_request_to_http_floor".into(),
        json!(ratio(rookery_cpu_us, floor_cpu_us)),
    );
}

/// The two spawn floors: (concurrent wall, sequential per-spawn).
#[derive(Debug, Clone, Copy)]
struct Floors {
    concurrent: Duration,
    sequential_per_spawn: Duration,
}

async fn floors(
    args: &BenchArgs,
    shell_home: &std::path::Path,
) -> Result<Floors, measure::FloorError> {
    let cwd = shell_home;
    let concurrent =
        measure::spawn_floor(args.floor_spawns, args.floor_workers, shell_home, cwd).await?;
    let seq = measure::spawn_floor(SEQ_FLOOR_SPAWNS, 1, shell_home, cwd).await?;
    Ok(Floors {
        concurrent,
        sequential_per_spawn: seq / SEQ_FLOOR_SPAWNS as u32,
    })
}

fn report(
    args: &BenchArgs,
    o: &Outcome,
    http: bool,
    trace_files: u64,
    trace_bytes: u64,
    floor: Option<Floors>,
) -> Value {
    let calls = (args.sessions * args.turns) as f64;
    let wall_ms = ms(o.wall);
    let per_call_ms = if calls > 0.0 { wall_ms / calls } else { 0.0 };
    let calls_per_s = if o.wall.is_zero() {
        0.0
    } else {
        calls / o.wall.as_secs_f64()
    };
    let mut v = json!({
        "workload": args.workload.as_str(),
        "sessions": args.sessions,
        "turns": args.turns,
        "model": if http { "http" } else { "builtin" },
        "model_latency_ms": args.model_latency_ms,
        "ok": o.failures.is_empty(),
        "failed_sessions": o.failures.len(),
        "wall_ms": r3(wall_ms),
        "session_create_ms": r3(ms(o.session_create)),
        "per_call_ms": r3(per_call_ms),
        "calls_per_s": calls_per_s.round(),
        "overhead_p50_us": measure::percentile(&o.overheads_us, 50.0),
        "overhead_p99_us": measure::percentile(&o.overheads_us, 99.0),
        "cpu_s": r3(o.cpu_s),
        "children_cpu_s": r3(o.children_cpu_s),
        "run_user_s": r3(o.run_user_s),
        "run_sys_s": r3(o.run_sys_s),
        "peak_rss_kb": measure::self_usage().max_rss_kb,
        "trace_files": trace_files,
        "trace_bytes": trace_bytes,
        "trace_writes": o.trace_writes,
    });
    if let Some(obj) = v.as_object_mut() {
        obj.extend(bench::latency::figures(&o.tool_call_us));
        obj.insert("series".into(), o.series.to_json());
    }
    if let (Some(f), Some(obj)) = (floor, v.as_object_mut()) {
        let fc = ms(f.concurrent);
        let fs = ms(f.sequential_per_spawn);
        obj.insert("floor_spawns".into(), json!(args.floor_spawns));
        obj.insert("floor_workers".into(), json!(args.floor_workers));
        obj.insert("floor_concurrent_ms".into(), json!(r3(fc)));
        obj.insert("floor_seq_per_spawn_ms".into(), json!(r3(fs)));
        obj.insert(
            "ratio_wall_to_concurrent_floor".into(),
            json!(r3(wall_ms / fc)),
        );
        obj.insert(
            "ratio_per_call_to_seq_floor".into(),
            json!(r3(per_call_ms / fs)),
        );
    }
    v
}

fn print_report(args: &BenchArgs, v: &Value) {
    let mut out = std::io::stdout().lock();
    if args.json {
        let _ = writeln!(out, "{v}");
        return;
    }
    let g = |k: &str| v.get(k).cloned().unwrap_or(Value::Null);
    let _ = writeln!(
        out,
        "workload {}: {} sessions x {} tool calls, {} model ({} ms latency): {}",
        args.workload.as_str(),
        args.sessions,
        args.turns,
        g("model").as_str().unwrap_or(""),
        args.model_latency_ms,
        if g("ok") == Value::Bool(true) {
            "ok"
        } else {
            "FAILED"
        }
    );
    let lines = [
        format!("wall                 {} ms", g("wall_ms")),
        format!("session creation     {} ms", g("session_create_ms")),
        format!("per tool call        {} ms (wall / N·K)", g("per_call_ms")),
        format!("tool calls/s         {}", g("calls_per_s")),
        format!(
            "tool call latency    p50 {} µs, p90 {} µs, p99 {} µs, max {} µs",
            g("tool_call_p50_us"),
            g("tool_call_p90_us"),
            g("tool_call_p99_us"),
            g("tool_call_p100_us")
        ),
        format!(
            "harness overhead     p50 {} µs, p99 {} µs per turn",
            g("overhead_p50_us"),
            g("overhead_p99_us")
        ),
        format!(
            "cpu user+sys         {} s (children {} s)",
            g("cpu_s"),
            g("children_cpu_s")
        ),
        format!(
            "cpu in the run       user {} s, sys {} s (timed window only)",
            g("run_user_s"),
            g("run_sys_s")
        ),
        format!("peak rss             {} kB", g("peak_rss_kb")),
        format!(
            "traces               {} files, {} bytes, {} writes",
            g("trace_files"),
            g("trace_bytes"),
            g("trace_writes")
        ),
    ];
    for l in lines {
        let _ = writeln!(out, "{l}");
    }
    if v.get("http_floor_wall_ms").is_some() {
        let _ = writeln!(
            out,
            "HTTP floor           {} requests, same bodies, bare hyper client: {} ms, {} tool calls/s (ratio {})",
            g("http_floor_requests"),
            g("http_floor_wall_ms"),
            g("http_floor_calls_per_s"),
            g("ratio_calls_per_s_to_http_floor")
        );
        let _ = writeln!(
            out,
            "cpu per request      {} µs vs the floor's {} µs (ratio {})",
            g("cpu_per_request_us"),
            g("http_floor_cpu_per_request_us"),
            g("ratio_cpu_per_request_to_http_floor")
        );
    }
    if v.get("floor_concurrent_ms").is_some() {
        let _ = writeln!(
            out,
            "spawn floor          {} x bash -lc true by {} workers: {} ms (wall ratio {})",
            g("floor_spawns"),
            g("floor_workers"),
            g("floor_concurrent_ms"),
            g("ratio_wall_to_concurrent_floor")
        );
        let _ = writeln!(
            out,
            "sequential floor     {} ms per spawn (per-call ratio {})",
            g("floor_seq_per_spawn_ms"),
            g("ratio_per_call_to_seq_floor")
        );
    }
    if let Some(line) = super::bench_rounds::summary_line(v) {
        let _ = writeln!(out, "{line}");
    }
}

async fn idle(
    args: &BenchArgs,
    n: usize,
    home: &std::path::Path,
    workspace: &std::path::Path,
    config: AgentConfig,
) -> Result<ExitCode, CliError> {
    let out: IdleOutcome = bench::idle(n, home, workspace, config)
        .await
        .map_err(CliError::Failed)?;
    let (trace_files, trace_bytes) = measure::dir_totals(&home.join("traces"));
    let added = out.rss_after_kb.saturating_sub(out.rss_before_kb);
    let per_session_kb = if n > 0 { added as f64 / n as f64 } else { 0.0 };
    let ok = trace_files == n as u64;
    let v = json!({
        "idle_sessions": n,
        "ok": ok,
        "session_create_ms": r3(ms(out.create)),
        "rss_before_kb": out.rss_before_kb,
        "rss_after_kb": out.rss_after_kb,
        "rss_per_session_kb": r3(per_session_kb),
        "actor_floor_kb": r3(out.actor_floor_kb),
        "ratio_to_actor_floor": r3(if out.actor_floor_kb > 0.0 { per_session_kb / out.actor_floor_kb } else { 0.0 }),
        "peak_rss_kb": measure::self_usage().max_rss_kb,
        "trace_files": trace_files,
        "trace_bytes": trace_bytes,
    });
    if args.json {
        outln!("{v}");
    } else {
        outln!(
            "{n} idle sessions: created in {:.1} ms; rss {} kB -> {} kB ({per_session_kb:.1} kB per session; an empty supervised actor: {:.1} kB); peak rss {} kB; {trace_files} trace files, {trace_bytes} bytes",
            ms(out.create),
            out.rss_before_kb,
            out.rss_after_kb,
            out.actor_floor_kb,
            measure::self_usage().max_rss_kb,
        );
    }
    if ok {
        Ok(ExitCode::SUCCESS)
    } else {
        errln!("rookery: expected {n} trace files, found {trace_files}");
        Ok(ExitCode::from(1))
    }
}

/// Serves the mock on its own runtime with `--mock-threads` workers (one by default, like a
/// reference mock: it must not take the cores the measured client runs on).
async fn serve_mock(args: &BenchArgs) -> Result<ExitCode, CliError> {
    let (listen, workload, turns) = (args.listen.clone(), args.workload, args.turns);
    let threads = args.mock_threads.max(1);
    let (tx, rx) = tokio::sync::oneshot::channel::<Result<String, CliError>>();
    let server = std::thread::spawn(move || {
        let runtime = match tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .enable_all()
            .build()
        {
            Ok(rt) => rt,
            Err(e) => {
                let _ = tx.send(Err(CliError::startup_io(
                    "cannot start the mock's runtime",
                    e,
                )));
                return 1;
            }
        };
        runtime.block_on(async move {
            let (url, server) = match bench::mock::bind(&listen, workload, turns).await {
                Ok(s) => s,
                Err(e) => {
                    let what = format!("cannot listen on {listen}");
                    let _ = tx.send(Err(CliError::startup_io(what, e)));
                    return 2;
                }
            };
            let _ = tx.send(Ok(url));
            match server.await {
                Ok(()) => 0,
                Err(e) => {
                    errln!("rookery: mock server: {e}");
                    1
                }
            }
        })
    });
    match rx.await {
        Ok(Ok(url)) => {
            outln!("{url}");
            let _ = std::io::stdout().flush();
        }
        Ok(Err(e)) => return Err(e),
        Err(_) => return Ok(ExitCode::from(1)),
    }
    let code = tokio::task::spawn_blocking(move || server.join().unwrap_or(1))
        .await
        .unwrap_or(1);
    Ok(ExitCode::from(code))
}
