//! `rookery bench --workload exec --sandbox MODE [--floor]`: renders
//! [`crate::bench::sandboxed`] (the workload's N x K commands spawned sandboxed and not, and the
//! spawn floor, in interleaved rounds) as text or one JSON object: the medians of each round's
//! wall time and CPU per command, and the ratios of the sandboxed run to the floor and to the
//! unsandboxed run. It owns the rendering, never the measuring.

use std::process::ExitCode;

use serde_json::json;

use super::{BenchArgs, CliError};
use crate::bench::sandboxed::{self, Phase, Round, SandboxBenchError};
use crate::bench::{TempDir, Workload};
use crate::sandbox::SandboxMode;

/// Rounds when `--rounds` does not ask for more (the medians are reported).
const MIN_ROUNDS: usize = 3;

fn failed(e: SandboxBenchError) -> CliError {
    match e {
        SandboxBenchError::Sandbox(e) => CliError::Usage(format!("sandbox_unavailable: {e}")),
        other => CliError::Io {
            what: "bench --sandbox".to_string(),
            source: std::io::Error::other(other.to_string()),
            code: 1,
        },
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

fn r3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 { r3(a / b) } else { 0.0 }
}

/// Medians over the rounds of one phase: (wall ms, CPU per command µs).
fn phase(rounds: &[Round], pick: impl Fn(&Round) -> Phase) -> (f64, f64) {
    let wall = median(
        rounds
            .iter()
            .map(|r| pick(r).wall.as_secs_f64() * 1000.0)
            .collect(),
    );
    let cpu = median(
        rounds
            .iter()
            .map(|r| pick(r).cpu_per_command_us())
            .collect(),
    );
    (r3(wall), r3(cpu))
}

pub(super) async fn bench(args: &BenchArgs, mode: SandboxMode) -> Result<ExitCode, CliError> {
    if args.workload != Workload::Exec {
        return Err(CliError::usage("--sandbox measures --workload exec only"));
    }
    if mode == SandboxMode::Off {
        return Err(CliError::usage(
            "--sandbox off has nothing to measure (read-only or workspace-write)",
        ));
    }
    if args.sessions == 0 || args.turns == 0 {
        return Err(CliError::usage("--sessions and --turns must be at least 1"));
    }
    super::super::bench::measure::raise_open_files_limit();
    let scratch = TempDir::new("rookery-bench-sandbox")
        .map_err(|e| CliError::startup_io("cannot create a temp dir", e))?;
    let paths = sandboxed::paths(scratch.path()).map_err(failed)?;
    let conf = sandboxed::confinement(&paths, mode, args.sandbox_network).map_err(failed)?;
    let rounds_n = (args.rounds as usize).max(MIN_ROUNDS);
    let rounds = sandboxed::run(&paths, &conf, args.sessions, args.turns, rounds_n)
        .await
        .map_err(failed)?;
    let (floor_ms, floor_cpu) = phase(&rounds, |r| r.floor);
    let (plain_ms, plain_cpu) = phase(&rounds, |r| r.plain);
    let (sbx_ms, sbx_cpu) = phase(&rounds, |r| r.sandboxed);
    let per_round: Vec<serde_json::Value> = rounds
        .iter()
        .map(|r| {
            let ms = |p: Phase| r3(p.wall.as_secs_f64() * 1000.0);
            json!({
                "ratio_wall_sandboxed_to_floor": ratio(ms(r.sandboxed), ms(r.floor)),
                "ratio_cpu_per_command_sandboxed_to_plain":
                    ratio(r.sandboxed.cpu_per_command_us(), r.plain.cpu_per_command_us()),
            })
        })
        .collect();
    let v = json!({
        "workload": "exec",
        "sandbox": mode.as_str(),
        "sandbox_network": args.sandbox_network.as_str(),
        "sessions": args.sessions,
        "turns": args.turns,
        "rounds": rounds.len(),
        "floor_wall_ms": floor_ms,
        "floor_cpu_per_command_us": floor_cpu,
        "plain_wall_ms": plain_ms,
        "plain_cpu_per_command_us": plain_cpu,
        "sandboxed_wall_ms": sbx_ms,
        "sandboxed_cpu_per_command_us": sbx_cpu,
        "ratio_wall_sandboxed_to_floor": ratio(sbx_ms, floor_ms),
        "ratio_wall_sandboxed_to_plain": ratio(sbx_ms, plain_ms),
        "ratio_cpu_per_command_sandboxed_to_plain": ratio(sbx_cpu, plain_cpu),
        "ratio_cpu_per_command_sandboxed_to_floor": ratio(sbx_cpu, floor_cpu),
        "per_round": per_round,
    });
    if args.json {
        outln!("{v}");
        return Ok(ExitCode::SUCCESS);
    }
    let g = |k: &str| v.get(k).cloned().unwrap_or_default();
    outln!(
        "exec spawns, {} workers x {} commands, sandbox {} (network {}), medians of {} interleaved rounds:",
        args.sessions,
        args.turns,
        mode,
        args.sandbox_network.as_str(),
        rounds.len()
    );
    outln!(
        "spawn floor          {} ms, cpu {} us per command",
        g("floor_wall_ms"),
        g("floor_cpu_per_command_us")
    );
    outln!(
        "unsandboxed          {} ms, cpu {} us per command",
        g("plain_wall_ms"),
        g("plain_cpu_per_command_us")
    );
    outln!(
        "sandboxed            {} ms, cpu {} us per command",
        g("sandboxed_wall_ms"),
        g("sandboxed_cpu_per_command_us")
    );
    outln!(
        "ratios               wall to floor {}, wall to unsandboxed {}, cpu per command to unsandboxed {}",
        g("ratio_wall_sandboxed_to_floor"),
        g("ratio_wall_sandboxed_to_plain"),
        g("ratio_cpu_per_command_sandboxed_to_plain")
    );
    let each = |key: &str| {
        per_round
            .iter()
            .map(|r| r.get(key).cloned().unwrap_or_default().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    outln!(
        "per round            wall to floor {}; cpu per command to unsandboxed {}",
        each("ratio_wall_sandboxed_to_floor"),
        each("ratio_cpu_per_command_sandboxed_to_plain")
    );
    Ok(ExitCode::SUCCESS)
}
