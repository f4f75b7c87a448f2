//! `rookery bench` end to end: the read and exec workloads with `--json` (keys, `ok`, counts,
//! trace files), `--rounds` (medians and each round), the idle-session footprint, a usage error,
//! and `--sandbox` (sandboxed exec spawns against unsandboxed ones and the floor).

use serde_json::Value;

const KEYS: [&str; 17] = [
    "workload",
    "sessions",
    "turns",
    "ok",
    "wall_ms",
    "session_create_ms",
    "per_call_ms",
    "calls_per_s",
    "overhead_p50_us",
    "overhead_p99_us",
    "cpu_s",
    "run_user_s",
    "run_sys_s",
    "peak_rss_kb",
    "trace_files",
    "trace_bytes",
    "trace_writes",
];

fn bench(args: &[&str]) -> (i32, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_rookery"))
        .arg("bench")
        .args(args)
        .env("TMPDIR", dir.path())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn json_of(stdout: &str) -> Value {
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 1, "one JSON object expected: {stdout}");
    serde_json::from_str(lines[0]).unwrap()
}

#[test]
fn read_workload_reports_every_key() {
    let (code, stdout, stderr) = bench(&[
        "--workload",
        "read",
        "--sessions",
        "3",
        "--turns",
        "4",
        "--json",
    ]);
    assert_eq!(code, 0, "{stderr}");
    let v = json_of(&stdout);
    for k in KEYS {
        assert!(v.get(k).is_some(), "missing {k} in {v}");
    }
    assert_eq!(v["workload"], "read");
    assert_eq!(v["sessions"], 3);
    assert_eq!(v["turns"], 4);
    assert_eq!(v["ok"], true);
    assert_eq!(v["trace_files"], 3);
    assert!(v["trace_bytes"].as_u64().unwrap() > 0);
    assert!(v["wall_ms"].as_f64().unwrap() > 0.0);
    assert!(v["peak_rss_kb"].as_u64().unwrap() > 0);
    // The timed window's CPU is part of the whole run's (each rounded to 1 ms).
    let run = v["run_user_s"].as_f64().unwrap() + v["run_sys_s"].as_f64().unwrap();
    assert!(run <= v["cpu_s"].as_f64().unwrap() + 0.002, "{v}");
    // Every session's trace took at least one write.
    assert!(v["trace_writes"].as_u64().unwrap() >= 3, "{v}");
}

#[test]
fn rounds_report_the_median_of_each_figure_and_every_round() {
    let (code, stdout, stderr) = bench(&[
        "--workload",
        "read",
        "--sessions",
        "2",
        "--turns",
        "2",
        "--rounds",
        "3",
        "--json",
    ]);
    assert_eq!(code, 0, "{stderr}");
    let v = json_of(&stdout);
    assert_eq!(v["rounds"], 3, "{v}");
    assert_eq!(v["ok"], true, "{v}");
    let rounds = v["per_round"].as_array().unwrap();
    assert_eq!(rounds.len(), 3);
    for r in rounds {
        for k in KEYS {
            assert!(r.get(k).is_some(), "missing {k} in {r}");
        }
        // Each round's traces are counted apart.
        assert_eq!(r["trace_files"], 2, "{r}");
    }
    assert_eq!(v["trace_files"], 2, "{v}");
    let mut walls: Vec<f64> = rounds
        .iter()
        .map(|r| r["wall_ms"].as_f64().unwrap())
        .collect();
    walls.sort_by(f64::total_cmp);
    assert_eq!(v["wall_ms"].as_f64().unwrap(), walls[1], "{v}");

    // The text report ends with the rounds' line.
    let (code, stdout, stderr) = bench(&["--workload", "read", "--rounds", "2"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout
            .contains("rounds               2 interleaved, medians above; per round: calls_per_s"),
        "{stdout}"
    );
    // A round count out of range is a usage error.
    let (code, _, stderr) = bench(&["--workload", "read", "--rounds", "0"]);
    assert_eq!(code, 2, "{stderr}");
}

#[test]
fn exec_workload_runs_real_commands() {
    let (code, stdout, stderr) = bench(&[
        "--workload",
        "exec",
        "--sessions",
        "2",
        "--turns",
        "2",
        "--json",
    ]);
    assert_eq!(code, 0, "{stderr}");
    let v = json_of(&stdout);
    assert_eq!(v["workload"], "exec");
    assert_eq!(v["ok"], true);
    assert_eq!(v["trace_files"], 2);
    assert!(v["children_cpu_s"].as_f64().is_some());
}

#[test]
fn idle_sessions_report_their_footprint() {
    let (code, stdout, stderr) = bench(&["--idle-sessions", "50", "--json"]);
    assert_eq!(code, 0, "{stderr}");
    let v = json_of(&stdout);
    assert_eq!(v["idle_sessions"], 50);
    assert_eq!(v["ok"], true);
    assert_eq!(v["trace_files"], 50);
    assert!(v["rss_per_session_kb"].as_f64().is_some());
    // The floor beside it: one empty supervised actor, measured in the same run.
    assert!(v["actor_floor_kb"].as_f64().is_some(), "{v}");
    assert!(v["ratio_to_actor_floor"].as_f64().is_some(), "{v}");
}

#[test]
fn a_script_is_a_usage_error() {
    // bench has its own model: --script is not one of its flags (nor in its help).
    let (code, stdout, stderr) = bench(&["--script", "x.json"]);
    assert_eq!(code, 2);
    assert!(stdout.is_empty());
    assert_eq!(
        stderr.trim(),
        "rookery: unexpected argument '--script' found (see rookery bench --help)"
    );
}

#[test]
fn sandboxed_exec_reports_its_ratios_to_the_floor_and_to_unsandboxed() {
    let (code, stdout, stderr) = bench(&[
        "--workload",
        "exec",
        "--sandbox",
        "workspace-write",
        "--floor",
        "--sessions",
        "2",
        "--turns",
        "2",
        "--json",
    ]);
    assert_eq!(code, 0, "{stderr}");
    let v = json_of(&stdout);
    assert_eq!(v["sandbox"], "workspace-write");
    assert_eq!(v["sandbox_network"], "off");
    assert_eq!(v["rounds"], 3);
    for k in [
        "floor_wall_ms",
        "plain_wall_ms",
        "sandboxed_wall_ms",
        "plain_cpu_per_command_us",
        "sandboxed_cpu_per_command_us",
        "ratio_wall_sandboxed_to_floor",
        "ratio_cpu_per_command_sandboxed_to_plain",
    ] {
        assert!(v[k].as_f64().is_some_and(|x| x > 0.0), "{k}: {v}");
    }
    let (code, _, stderr) = bench(&["--workload", "read", "--sandbox", "read-only"]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("--sandbox measures --workload exec only"),
        "{stderr}"
    );
}
