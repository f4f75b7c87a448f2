//! `rookery bench` results made for comparing runtimes, through the binary: `--json` carries
//! the run's context (version, commit, host, CPUs, load average, timestamp, the floors'
//! definitions), a run whose sessions fail their check exits non-zero without a figures table,
//! and `bench compare A.json B.json` prints the ratio B/A of each figure.

use crate::common::openai_mock::{Mock, Reply};
use serde_json::Value;

const TEXT_ONLY: &str = concat!(
    "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"no tool\"},\"finish_reason\":null}]}\n\n",
    "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
    "data: [DONE]\n\n",
);

fn bench(dir: &std::path::Path, args: &[&str]) -> (i32, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_rookery"))
        .arg("bench")
        .args(args)
        .env("TMPDIR", dir)
        .env("HOME", dir)
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn json_carries_the_context_and_compare_prints_the_ratios() {
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "--workload",
        "read",
        "--sessions",
        "2",
        "--turns",
        "2",
        "--json",
    ];
    let (code, stdout, stderr) = bench(dir.path(), &args);
    assert_eq!(code, 0, "{stderr}");
    let v: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(v["version"], env!("CARGO_PKG_VERSION"), "{v}");
    assert!(!v["commit"].as_str().unwrap().is_empty(), "{v}");
    assert!(!v["host"].as_str().unwrap().is_empty(), "{v}");
    assert!(v["cpus"].as_u64().unwrap() >= 1, "{v}");
    let loads = v["load_average"].as_array().unwrap();
    assert_eq!(loads.len(), 3, "{v}");
    assert!(loads.iter().all(|l| l.as_f64().unwrap() >= 0.0), "{v}");
    let ts = v["timestamp"].as_str().unwrap();
    assert!(
        chrono::DateTime::parse_from_rfc3339(ts).is_ok() && ts.ends_with('Z'),
        "{v}"
    );
    for floor in ["concurrent_floor", "seq_floor", "http_floor"] {
        assert!(!v["floors"][floor].as_str().unwrap().is_empty(), "{v}");
    }

    // B: the same result with twice the throughput.
    let mut b = v.clone();
    let calls = v["calls_per_s"].as_f64().unwrap();
    b["calls_per_s"] = serde_json::json!(calls * 2.0);
    let (pa, pb) = (dir.path().join("a.json"), dir.path().join("b.json"));
    std::fs::write(&pa, v.to_string()).unwrap();
    std::fs::write(&pb, b.to_string()).unwrap();
    let (code, out, err) = bench(
        dir.path(),
        &["compare", pa.to_str().unwrap(), pb.to_str().unwrap()],
    );
    assert_eq!(code, 0, "{err}");
    let ratio = |name: &str| -> String {
        let line = out
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("no {name} in\n{out}"));
        line.split_whitespace().last().unwrap().to_string()
    };
    assert_eq!(ratio("calls_per_s"), "2.000", "{out}");
    assert_eq!(ratio("trace_files"), "1.000", "{out}");
    // Not figures: text and booleans.
    assert!(
        !out.lines()
            .any(|l| l.starts_with("ok ") || l.starts_with("workload ")),
        "{out}"
    );

    // Not a result: a usage error.
    std::fs::write(&pb, "[1]").unwrap();
    let (code, _, err) = bench(
        dir.path(),
        &["compare", pa.to_str().unwrap(), pb.to_str().unwrap()],
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("not a `rookery bench --json` result"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_run_exits_non_zero_without_a_figures_table() {
    // The model answers text without the workload's tool call: the session fails its check.
    let replies = vec![Reply::Sse(vec![TEXT_ONLY.to_string()]); 4];
    let mock = Mock::start(replies, None).await;
    let dir = tempfile::tempdir().unwrap();
    let base = mock.base_url.clone();
    let path = dir.path().to_path_buf();
    let (code, stdout, stderr) = tokio::task::spawn_blocking(move || {
        bench(
            &path,
            &[
                "--workload",
                "read",
                "--sessions",
                "1",
                "--turns",
                "2",
                "--provider",
                "openai",
                "--base-url",
                &base,
                "--model",
                "m",
            ],
        )
    })
    .await
    .unwrap();
    assert_eq!(code, 1, "{stdout}\n{stderr}");
    assert!(stderr.contains("bench check failed"), "{stderr}");
    assert_eq!(stdout, "", "{stderr}");
}
