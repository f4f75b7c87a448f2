//! `rookery bench --floor --provider openai` end to end over loopback HTTP: the real binary
//! serves the mock (`--serve-mock`, one worker thread), a second real binary runs the read
//! workload against it and then replays the very bodies it sent with the bare client; the
//! report carries both and their ratios; with `--rounds` each round replays its own bodies. Also the usage error for `--floor` with a provider
//! it cannot replay.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use serde_json::Value;

/// The mock server process, killed when dropped.
struct Mock(Child);

impl Drop for Mock {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn mock(turns: &str) -> (Mock, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_rookery"))
        .args([
            "bench",
            "--serve-mock",
            "--workload",
            "read",
            "--turns",
            turns,
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut line = String::new();
    // Blocks until the server has bound and printed its URL (or exited).
    BufReader::new(stdout).read_line(&mut line).unwrap();
    let url = line.trim().to_string();
    assert!(url.starts_with("http://127.0.0.1:"), "{url:?}");
    (Mock(child), url)
}

fn bench(args: &[&str]) -> (i32, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_rookery"))
        .arg("bench")
        .args(args)
        .env("TMPDIR", dir.path())
        .env_remove("OPENAI_API_KEY")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_http_floor_replays_the_runs_bodies() {
    let (_mock, url) = mock("3");
    let (code, stdout, stderr) = bench(&[
        "--workload",
        "read",
        "--sessions",
        "2",
        "--turns",
        "3",
        "--provider",
        "openai",
        "--base-url",
        &url,
        "--model",
        "bench",
        "--floor",
        "--json",
    ]);
    assert_eq!(code, 0, "{stderr}");
    let v: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(v["ok"], true, "{v}");
    assert_eq!(v["model"], "http");
    // Every request of the run, resent: 2 sessions x (3 tool turns + the final answer).
    assert_eq!(v["http_floor_requests"], 8, "{v}");
    // The mock answered the replayed bodies as it answered the run: the same tool calls.
    assert_eq!(v["http_floor_tool_calls"], 6, "{v}");
    for key in [
        "http_floor_wall_ms",
        "http_floor_calls_per_s",
        "cpu_per_request_us",
        "http_floor_cpu_per_request_us",
        "ratio_calls_per_s_to_http_floor",
        "ratio_cpu_per_request_to_http_floor",
    ] {
        assert!(v[key].as_f64().is_some_and(|x| x > 0.0), "{key} in {v}");
    }
    // Over HTTP a read workload is not compared with the spawn floors.
    assert!(v.get("floor_concurrent_ms").is_none(), "{v}");

    // The text report names the floor too.
    let (code, stdout, stderr) = bench(&[
        "--workload",
        "read",
        "--sessions",
        "1",
        "--turns",
        "3",
        "--provider",
        "openai",
        "--base-url",
        &url,
        "--model",
        "bench",
        "--floor",
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("HTTP floor           4 requests"),
        "{stdout}"
    );
}

#[test]
fn each_round_replays_its_own_bodies_and_the_report_takes_medians() {
    let (_mock, url) = mock("3");
    let (code, stdout, stderr) = bench(&[
        "--workload",
        "read",
        "--sessions",
        "2",
        "--turns",
        "3",
        "--provider",
        "openai",
        "--base-url",
        &url,
        "--model",
        "bench",
        "--floor",
        "--rounds",
        "3",
        "--json",
    ]);
    assert_eq!(code, 0, "{stderr}");
    let v: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(v["ok"], true, "{v}");
    assert_eq!(v["rounds"], 3, "{v}");
    let rounds = v["per_round"].as_array().unwrap();
    assert_eq!(rounds.len(), 3, "{v}");
    for r in rounds {
        // Each round's floor resends that round's 8 requests, not the ones before it.
        assert_eq!(r["http_floor_requests"], 8, "{r}");
        assert_eq!(r["http_floor_tool_calls"], 6, "{r}");
        assert_eq!(r["trace_files"], 2, "{r}");
    }
    for key in ["ratio_calls_per_s_to_http_floor", "wall_ms", "calls_per_s"] {
        let mut each: Vec<f64> = rounds.iter().map(|r| r[key].as_f64().unwrap()).collect();
        each.sort_by(f64::total_cmp);
        assert_eq!(v[key].as_f64().unwrap(), each[1], "{key} in {v}");
    }
}

#[test]
fn the_http_floor_is_for_openai_compatible_endpoints() {
    let (code, stdout, stderr) = bench(&[
        "--provider",
        "anthropic",
        "--base-url",
        "http://127.0.0.1:9/v1",
        "--model",
        "m",
        "--floor",
    ]);
    assert_eq!(code, 2, "{stdout}");
    assert!(
        stderr.contains("--floor over HTTP measures OpenAI-compatible endpoints only"),
        "{stderr}"
    );
}
