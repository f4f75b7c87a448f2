//! `rookery bench --trace-appends N --store URL` on a real Postgres the test starts: both
//! sides (the trace writer into the store, a bare client's one `INSERT`) write the same rows,
//! the JSON carries both times and their ratio, and the bench leaves no session behind.
//! `--store` with another scenario is a usage error.

use serde_json::Value;

use crate::common::postgres::TestPostgres;

fn bench(args: &[&str]) -> (i32, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_rookery"))
        .arg("bench")
        .args(args)
        .env("TMPDIR", dir.path())
        .env_remove("ROOKERY_STORE")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn store_appends_report_both_sides_on_the_same_rows() {
    let pg = TestPostgres::start();
    let url = pg.url();
    let (code, stdout, stderr) = bench(&["--trace-appends", "300", "--store", &url, "--json"]);
    assert_eq!(code, 0, "{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 1, "one JSON object expected: {stdout}");
    let v: Value = serde_json::from_str(lines[0]).unwrap();
    assert_eq!(v["trace_appends"], 300);
    assert_eq!(v["store"], "postgres");
    assert_eq!(v["rounds"], 5);
    // Every round, the writer stored the floor's 300 rows, byte for byte, at the same seq.
    assert_eq!(v["matching_rows"], 5 * 300, "{v}");
    assert!(v["record_bytes"].as_u64().unwrap() > 300 * 50, "{v}");
    for key in [
        "floor_burst_us",
        "store_burst_us",
        "floor_records_per_s",
        "store_records_per_s",
    ] {
        assert!(v[key].as_f64().is_some_and(|x| x > 0.0), "{key}: {v}");
    }
    let ratio = v["ratio_store_to_floor"].as_f64().unwrap();
    let expected = v["floor_burst_us"].as_f64().unwrap() / v["store_burst_us"].as_f64().unwrap();
    assert!((ratio - expected).abs() < 0.02, "{v}");
    // Nothing is left in the store.
    let left =
        pg.query("SELECT (SELECT count(*) FROM sessions), (SELECT count(*) FROM trace_records)");
    assert_eq!(
        left,
        vec![vec![Some("0".to_string()), Some("0".to_string())]]
    );

    let (code, _, stderr) = bench(&["--workload", "read", "--store", &url]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("only --trace-appends N and --forwarding N measure the postgres store"),
        "{stderr}"
    );
}
