//! `rookery bench --trace-appends N --store URL` on a real Postgres the test starts: both
//! sides (the trace writer into the store, a bare client's one `INSERT`) write the same rows,
//! the JSON carries both times and their ratio, and the bench leaves no session behind.
//! `--store` with another scenario is a usage error. `--hibernation N --nodes K --store URL`:
//! K node processes on the store, each with its RSS and wake figures, every session stored.

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
        stderr.contains(
            "only --trace-appends N, --forwarding N, --failover N and --hibernation N measure the postgres store"
        ),
        "{stderr}"
    );
}

/// `--hibernation 300 --nodes 3 --store …`: three node processes, each its own RSS and wake
/// figures; every session in the store, the hibernated ones without a lease, and the woken
/// ones woken from the store (their lease taken again: epoch 2).
#[test]
fn hibernation_over_three_nodes_on_the_store() {
    let pg = TestPostgres::start();
    let url = pg.url();
    let (code, stdout, stderr) = bench(&[
        "--hibernation",
        "300",
        "--nodes",
        "3",
        "--resident",
        "20",
        "--trace-records",
        "100",
        "--wakes",
        "5",
        "--store",
        &url,
        "--json",
    ]);
    assert_eq!(code, 0, "stdout: {stdout}\nstderr: {stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 1, "one JSON object expected: {stdout}");
    let v: Value = serde_json::from_str(lines[0]).unwrap();
    assert_eq!(v["hibernation_sessions"], 300, "{v}");
    assert_eq!(v["nodes"], 3, "{v}");
    assert_eq!(v["store"], "postgres", "{v}");
    assert_eq!(v["ok"], true, "{v}");
    assert_eq!(v["store_sessions"], 300, "{v}");
    assert_eq!(v["wakes"], 15, "{v}");
    for key in [
        "wake_first_request_p50_ms",
        "wake_first_request_p95_ms",
        "wake_first_request_p99_ms",
    ] {
        assert!(v[key].as_f64().is_some_and(|x| x > 0.0), "{key}: {v}");
    }
    let nodes = v["per_node"].as_array().unwrap();
    assert_eq!(nodes.len(), 3, "{v}");
    let mut names: Vec<&str> = nodes.iter().map(|n| n["node"].as_str().unwrap()).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), 3, "each node its own name: {v}");
    for n in nodes {
        assert_eq!(n["hibernation_sessions"], 100, "{n}");
        assert_eq!(n["store"], "postgres", "{n}");
        assert_eq!(n["store_sessions"], 100, "{n}");
        assert_eq!(n["wakes"], 5, "{n}");
        assert!(n["rss_after_kb"].as_u64().is_some_and(|x| x > 0), "{n}");
        assert!(n["rss_per_hibernated_kb"].as_f64().is_some(), "{n}");
        let resident = n["resident_after"].as_u64().unwrap();
        assert!(resident <= 20, "{n}");
        assert_eq!(
            n["resident_after"].as_u64().unwrap() + n["hibernated_after"].as_u64().unwrap(),
            100,
            "{n}"
        );
        // The hibernated sessions gave their lease up; only the resident ones hold one.
        assert!(
            n["store_leases_held_before_wakes"].as_u64().unwrap() <= resident,
            "{n}"
        );
        assert!(n["trace_records_min"].as_u64().unwrap() >= 100, "{n}");
        for key in [
            "wake_first_request_p50_ms",
            "wake_first_request_p95_ms",
            "wake_first_request_p99_ms",
        ] {
            assert!(n[key].as_f64().is_some_and(|x| x > 0.0), "{key}: {n}");
        }
    }
    let one = |sql: &str| pg.query(sql)[0][0].clone().unwrap();
    assert_eq!(one("SELECT count(*) FROM sessions"), "300");
    assert_eq!(one("SELECT count(DISTINCT workspace) FROM sessions"), "3");
    // Each of the 15 woken sessions took its lease back from the store (epoch 1 → 2).
    assert_eq!(one("SELECT count(*) FROM sessions WHERE epoch = 2"), "15");
    assert_eq!(one("SELECT count(*) FROM sessions WHERE epoch > 2"), "0");
    // The nodes closed their sessions at the end: no lease is left held.
    assert_eq!(
        one("SELECT count(*) FROM sessions WHERE owner_node IS NOT NULL"),
        "0"
    );

    // The nodes need the store; and no more nodes than sessions.
    let (code, _, stderr) = bench(&["--hibernation", "10", "--nodes", "2"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("only with a postgres store"), "{stderr}");
    let (code, _, stderr) = bench(&["--hibernation", "2", "--nodes", "3", "--store", &url]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--nodes must be between 1 and"), "{stderr}");
}

/// The pids whose parent is `parent` (from `/proc/*/stat`), alive (not zombies).
fn live_children(parent: u32) -> Vec<u32> {
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if let Some((state, ppid)) = proc_state(pid)
            && ppid == parent
            && state != 'Z'
        {
            found.push(pid);
        }
    }
    found
}

/// `(state, ppid)` of `pid`, `None` once it is gone.
fn proc_state(pid: u32) -> Option<(char, u32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After the command's `)`: " S ppid ...".
    let rest = &stat[stat.rfind(')')? + 2..];
    let mut it = rest.split(' ');
    let state = it.next()?.chars().next()?;
    let ppid = it.next()?.parse().ok()?;
    Some((state, ppid))
}

/// kill -9 of the bench while its node processes run: they die with it (parent-death signal).
#[test]
fn the_nodes_die_with_the_bench() {
    let pg = TestPostgres::start();
    let dir = tempfile::tempdir().unwrap();
    let mut bench = std::process::Command::new(env!("CARGO_BIN_EXE_rookery"))
        .args(["bench", "--hibernation", "300000", "--nodes", "3"])
        .args(["--store", &pg.url(), "--json"])
        .env("TMPDIR", dir.path())
        .env_remove("ROOKERY_STORE")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let parent = bench.id();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let nodes = loop {
        let nodes = live_children(parent);
        if nodes.len() == 3 {
            break nodes;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the bench did not start 3 nodes: {nodes:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    bench.kill().unwrap();
    bench.wait().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    for pid in nodes {
        while proc_state(pid).is_some_and(|(state, _)| state != 'Z') {
            assert!(
                std::time::Instant::now() < deadline,
                "node {pid} outlived the bench"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}
