//! `rookery bench --hibernation N` end to end with tiny numbers: the JSON report's fields, the
//! resident cap held while every other session hibernated, the woken traces' size, the temp dir
//! removed, and the flags it refuses. No figure is judged here (it is a benchmark).

use serde_json::Value;

fn bench(args: &[&str]) -> (i32, String, String, tempfile::TempDir) {
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
        dir,
    )
}

const KEYS: [&str; 20] = [
    "hibernation_sessions",
    "resident_cap",
    "wakes",
    "trace_records_min",
    "ok",
    "session_create_ms",
    "resident_after",
    "hibernated_after",
    "resident_peak",
    "rss_after_kb",
    "rss_per_hibernated_kb",
    "rss_target_kb",
    "open_fds",
    "open_fds_target",
    "wake_first_request_p50_ms",
    "wake_first_request_p95_ms",
    "wake_task_end_p50_ms",
    "wake_task_end_p95_ms",
    "wake_target_ms",
    "trace_files",
];

#[test]
fn fifty_sessions_five_resident_three_wakes() {
    let (code, stdout, stderr, tmp) = bench(&[
        "--hibernation",
        "50",
        "--resident",
        "5",
        "--trace-records",
        "60",
        "--wakes",
        "3",
        "--json",
    ]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 1, "one JSON object expected: {stdout}");
    let v: Value = serde_json::from_str(lines[0]).unwrap();
    for k in KEYS {
        assert!(v.get(k).is_some(), "missing {k} in {v}");
    }
    assert_eq!(v["ok"], true, "{v}");
    assert_eq!(v["hibernation_sessions"], 50);
    assert_eq!(v["resident_cap"], 5);
    // The cap held after every create, and every other session is hibernated.
    assert!(v["resident_peak"].as_u64().unwrap() <= 5, "{v}");
    assert!(v["resident_after"].as_u64().unwrap() <= 5, "{v}");
    assert_eq!(
        v["resident_after"].as_u64().unwrap() + v["hibernated_after"].as_u64().unwrap(),
        50,
        "{v}"
    );
    assert_eq!(v["wakes"], 3);
    assert!(v["trace_records_min"].as_u64().unwrap() >= 60, "{v}");
    assert!(v["open_fds"].as_u64().unwrap() > 0, "{v}");
    assert!(v["rss_after_kb"].as_u64().unwrap() > 0, "{v}");
    // One trace per session, the calibration's own traces elsewhere.
    assert_eq!(v["trace_files"], 50, "{v}");
    let p50 = v["wake_first_request_p50_ms"].as_f64().unwrap();
    let p95 = v["wake_first_request_p95_ms"].as_f64().unwrap();
    assert!(p50 > 0.0 && p50 <= p95, "{v}");
    assert!(v["wake_task_end_p50_ms"].as_f64().unwrap() >= p50, "{v}");
    // Its temp dir (every trace) is gone.
    let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn hibernation_refuses_the_workload_flags_and_its_own_flags_need_it() {
    let (code, _, stderr, _tmp) = bench(&["--hibernation", "10", "--workload", "read"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--workload"), "{stderr}");
    let (code, _, stderr, _tmp) = bench(&["--resident", "5"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--hibernation"), "{stderr}");
    let (code, _, stderr, _tmp) = bench(&["--hibernation", "0"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("--hibernation must be at least 1"),
        "{stderr}"
    );
}
