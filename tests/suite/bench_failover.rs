//! `rookery bench --failover N --store URL` through the real binary on a real Postgres the test
//! starts: two `rookery serve` node processes, N sessions on the first (some inside a long
//! command), the first killed with SIGKILL, every session's next task accepted and completed
//! through the other. The JSON report's figures agree with each other (all accepted, all
//! completed, each accepted before it completed, the in-flight ones' lost tasks ended
//! `node_lost`, the goal's verdict from the figures), and nothing is left behind: no node
//! process, no process working under the bench's temp dir, no session or node row in the store.
//! The flags' refusals too.

use serde_json::Value;

use super::cluster::gone;
use crate::common::postgres::TestPostgres;

/// Runs `rookery bench ARGS` with its temp dir under `tmp`; exit code, stdout, stderr.
fn bench(tmp: &std::path::Path, args: &[&str]) -> (i32, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_rookery"))
        .arg("bench")
        .args(args)
        .env("TMPDIR", tmp)
        .env_remove("ROOKERY_STORE")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Live processes whose working directory or command line is under `dir`.
fn working_under(dir: &std::path::Path) -> Vec<String> {
    let dir = dir.to_string_lossy().into_owned();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| !gone(*pid))
        .filter_map(|pid| {
            let cwd = std::fs::read_link(format!("/proc/{pid}/cwd")).ok()?;
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            (cwd.starts_with(&dir) || cmdline.contains(&dir)).then(|| format!("{pid}: {cmdline}"))
        })
        .collect()
}

#[test]
fn a_killed_node_s_sessions_answer_elsewhere_and_nothing_is_left() {
    let pg = TestPostgres::start();
    let url = pg.url();
    let tmp = tempfile::tempdir().unwrap();
    let (code, stdout, stderr) = bench(
        tmp.path(),
        &[
            "--failover",
            "5",
            "--lease-ttl",
            "2",
            "--store",
            &url,
            "--json",
        ],
    );
    assert_eq!(code, 0, "stdout: {stdout}\nstderr: {stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 1, "one JSON object expected: {stdout}");
    let v: Value = serde_json::from_str(lines[0]).unwrap();
    let f = |k: &str| v[k].as_f64().unwrap_or_else(|| panic!("{k}: {v}"));
    assert_eq!(v["failover"], 5, "{v}");
    assert_eq!(v["store"], "postgres", "{v}");
    assert_eq!(v["nodes"], 2, "{v}");
    assert_eq!(v["lease_ttl_s"], 2, "{v}");
    // Half of N (rounded down) were inside their long command at the kill.
    assert_eq!(v["in_flight"], 2, "{v}");
    assert_eq!(
        (v["accepted"].clone(), v["completed"].clone()),
        (5.into(), 5.into())
    );

    let sessions = v["per_session"].as_array().unwrap();
    assert_eq!(sessions.len(), 5, "{v}");
    let in_flight = sessions.iter().filter(|s| s["in_flight"] == true).count();
    assert_eq!(in_flight, 2, "{v}");
    // Every lost task of an in-flight session ended `node_lost`, and only those.
    assert_eq!(v["node_lost"], 2, "{v}");
    let procs = v["node_processes"].as_array().unwrap();
    assert_eq!(procs.len(), 2, "{v}");
    let killed = procs[0]["node_id"].as_str().unwrap();
    let survivor = procs[1]["node_id"].as_str().unwrap();
    assert_eq!(v["killed_node"], killed, "{v}");
    let mut accepted = Vec::new();
    let mut completed = Vec::new();
    for s in sessions {
        let a = s["accepted_ms"].as_f64().unwrap();
        let c = s["completed_ms"].as_f64().unwrap();
        assert!(a > 0.0 && a <= c, "accepted after it completed: {s}");
        assert!(s["attempts"].as_u64().unwrap() >= 1, "{s}");
        assert_eq!(s["node"], survivor, "taken over by the live node: {s}");
        accepted.push(a);
        completed.push(c);
    }
    assert_eq!(v["served_by"][survivor], 5, "{v}");
    let max = |xs: &[f64]| xs.iter().copied().fold(0.0, f64::max);
    assert_eq!(f("accepted_all_ms"), max(&accepted), "{v}");
    assert_eq!(f("completed_all_ms"), max(&completed), "{v}");
    assert!(f("accepted_p50_ms") <= f("accepted_p95_ms"), "{v}");
    assert!(f("accepted_p95_ms") <= f("accepted_all_ms"), "{v}");
    assert!(f("accepted_all_ms") <= f("completed_all_ms"), "{v}");
    assert!(f("completed_p50_ms") <= f("completed_p95_ms"), "{v}");
    // The verdict follows from the figures: TTL + 2 s.
    assert_eq!(f("goal_ms"), 4000.0, "{v}");
    assert_eq!(v["goal_met"], f("accepted_all_ms") <= 4000.0, "{v}");
    assert_eq!(v["deleted_sessions"], 5, "{v}");

    // Nothing is left: the node processes, their commands, the store's rows.
    for p in procs {
        let pid = p["pid"].as_i64().unwrap() as i32;
        assert!(gone(pid), "node {p} still runs");
    }
    assert_eq!(working_under(tmp.path()), Vec::<String>::new());
    let left = pg.query(
        "SELECT (SELECT count(*) FROM sessions), (SELECT count(*) FROM trace_records), \
         (SELECT count(*) FROM nodes)",
    );
    let zero = Some("0".to_string());
    assert_eq!(left, vec![vec![zero.clone(), zero.clone(), zero]]);
}

#[test]
fn failover_flags_are_checked() {
    let tmp = tempfile::tempdir().unwrap();
    let url = "postgres://rookery@127.0.0.1:1/postgres";
    for (args, want) in [
        (
            vec!["--failover", "3", "--nodes", "1", "--store", url],
            "--failover needs at least 2 nodes",
        ),
        (
            vec!["--failover", "3", "--in-flight", "4", "--store", url],
            "--in-flight 4: at most --failover (3) sessions can be in flight",
        ),
        (
            vec!["--failover", "0", "--store", url],
            "--failover must be at least 1",
        ),
        (
            vec!["--failover", "3"],
            "--failover runs serve nodes on a postgres store",
        ),
        (vec!["--in-flight", "2"], "--failover"),
        (vec!["--nodes", "2"], "--failover"),
    ] {
        let (code, stdout, stderr) = bench(tmp.path(), &args);
        assert_eq!(code, 2, "{args:?}: {stdout} {stderr}");
        assert!(stderr.contains(want), "{args:?}: {stderr}");
    }
}
