//! Schedules in a cluster (`docs/guide/schedules.md`, "In a cluster"): on one real Postgres
//! (`tests/common/postgres.rs`), the store's claim lets exactly one node fire each minute of a
//! schedule, through the library (three stores racing for the same minutes; a session held by
//! a live node is claimable by that node alone, by any once its lease and heartbeat ran out);
//! and through three real `rookery serve` nodes on a short schedule minute: a schedule added
//! through A for a session B holds fires once a minute from B, from another node once B is
//! killed with SIGKILL, survives every node restarting (in new processes that hibernate the
//! session between runs, so each minute's run is a race of all three), and, removed through
//! C, fires nowhere again; a files home's schedule, brought over by `rookery store import`,
//! fires from the store. Each minute is counted in the store's trace: its `schedule_fired`
//! records, exactly one per minute.
//!
//! Waits are on the store or on the schedule clock (Unix time in minutes of
//! `--schedule-minute-ms`), never on a sleep standing for the nodes' progress.

use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use super::cluster::{answer, node_in, query, runtime};
use crate::common::postgres::TestPostgres;
use crate::common::serve::{Server, sandbox};

/// The schedule minute of the nodes, in milliseconds.
const MINUTE_MS: u64 = 3000;
/// How long one wait may take on a loaded 2-core machine.
const LONG: Duration = Duration::from_secs(120);

fn now_minute() -> u64 {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    ms / MINUTE_MS
}

/// Waits until the schedule clock reaches `minute`.
async fn clock_at(minute: u64) {
    while now_minute() < minute {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The minutes of schedule `sch`'s `schedule_fired` records in session `id`'s stored trace,
/// in the trace's order.
fn fired(pg: &TestPostgres, id: &str, sch: &str) -> Vec<u64> {
    query(
        pg,
        &format!(
            "SELECT convert_from(record, 'UTF8') FROM trace_records
              WHERE session_id = '{id}'
                AND position('schedule_fired' in convert_from(record, 'UTF8')) > 0
              ORDER BY seq"
        ),
    )
    .into_iter()
    .filter_map(|r| r.into_iter().next().flatten())
    .map(|line| serde_json::from_str::<Value>(&line).unwrap())
    .filter(|v| v["payload"]["type"] == "schedule_fired" && v["payload"]["schedule_id"] == sch)
    .map(|v| v["payload"]["minute"].as_u64().unwrap())
    .collect()
}

/// Every minute fired once at most: the minutes go strictly up in the trace.
fn once_each(minutes: &[u64]) {
    for w in minutes.windows(2) {
        assert!(
            w[0] < w[1],
            "minute {} fired again (or out of order): {minutes:?}",
            w[1]
        );
    }
}

/// Waits until schedule `sch` has fired in `n` minutes after `after`; every minute it fired
/// in, each once.
async fn fired_after(
    pg: &TestPostgres,
    id: &str,
    sch: &str,
    after: u64,
    n: usize,
    nodes: &[&Server],
) -> Vec<u64> {
    let deadline = Instant::now() + LONG;
    loop {
        let minutes = fired(pg, id, sch);
        once_each(&minutes);
        if minutes.iter().filter(|m| **m > after).count() >= n {
            return minutes;
        }
        if Instant::now() > deadline {
            let logs: Vec<String> = nodes.iter().map(|s| s.stderr()).collect();
            panic!(
                "schedule {sch} never fired in {n} minutes after {after}: {minutes:?}\n{:?}\n{}",
                query(
                    pg,
                    "SELECT schedule_id, last_minute, next_minute, last_node FROM schedules"
                ),
                logs.join("\n----\n")
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The one text value of `sql`.
fn one(pg: &TestPostgres, sql: &str) -> Option<String> {
    query(pg, sql)
        .into_iter()
        .next()
        .and_then(|r| r.into_iter().next().flatten())
}

/// Stops `server` with SIGTERM (a clean stop: its leases given up, its node row removed) and
/// hands back its directory.
fn stop(mut server: Server) -> tempfile::TempDir {
    nix::sys::signal::kill(server.pid(), nix::sys::signal::Signal::SIGTERM).unwrap();
    let status = server.child.wait().unwrap();
    assert!(
        status.success(),
        "serve exited {status:?}: {}",
        server.stderr()
    );
    std::mem::replace(&mut server.dir, tempfile::tempdir().unwrap())
}

#[test]
fn one_node_fires_each_minute_through_kills_restarts_and_removal() {
    let pg = TestPostgres::start();
    runtime().block_on(cluster_schedule(&pg));
}

async fn cluster_schedule(pg: &TestPostgres) {
    let turns: Vec<Value> = (0..400)
        .map(|i| json!({"text": format!("ran {i}")}))
        .collect();
    let script = json!({ "turns": turns });
    let minute = MINUTE_MS.to_string();
    let flags = ["--schedule-minute-ms", minute.as_str()];
    let url = pg.url();
    let a = node_in(sandbox(&script), &url, "a", &flags);
    let b = node_in(sandbox(&script), &url, "b", &flags);
    let c = node_in(sandbox(&script), &url, "c", &flags);

    // A session B holds, its schedule added through A (which forwards the request to B).
    let id = b.create(None).await;
    let (status, node, v) = answer(
        a.req(Method::POST, &format!("/v1/sessions/{id}/schedules"))
            .json(&json!({"cron": "* * * * *", "text": "tick"})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{v}");
    assert_eq!(node, "b");
    let sch = v["schedule_id"].as_str().unwrap().to_string();
    assert_eq!(
        one(pg, "SELECT count(*) FROM schedules").as_deref(),
        Some("1"),
        "the schedule is in the store"
    );
    // Every node lists it (through B, which holds the session).
    for n in [&a, &b, &c] {
        let (status, _, v) =
            answer(n.req(Method::GET, &format!("/v1/sessions/{id}/schedules"))).await;
        assert_eq!(status, StatusCode::OK, "{v}");
        assert_eq!(v["schedules"][0]["schedule_id"], sch.as_str(), "{v}");
    }

    // B fires it, once a minute, and nobody else does.
    let start = now_minute();
    fired_after(pg, &id, &sch, start, 3, &[&a, &b, &c]).await;
    assert_eq!(
        one(pg, "SELECT last_node FROM schedules").as_deref(),
        Some("b")
    );

    // B dies: once its lease ran out, another node fires it (waking the session there).
    let b_dir = b.kill9();
    let killed = now_minute();
    let minutes = fired_after(pg, &id, &sch, killed, 3, &[&a, &c]).await;
    let by = one(pg, "SELECT last_node FROM schedules").unwrap();
    assert!(by == "a" || by == "c", "fired by {by} after b died");
    assert!(minutes.len() >= 6, "{minutes:?}");

    // Every node restarts, now hibernating the session a second after each run: each minute
    // the session is nobody's, and the three nodes race for it.
    let (a_dir, c_dir) = (stop(a), stop(c));
    let epoch_before: u64 = one(pg, &format!("SELECT epoch FROM sessions WHERE id = '{id}'"))
        .unwrap()
        .parse()
        .unwrap();
    let flags = [
        "--schedule-minute-ms",
        minute.as_str(),
        "--idle-hibernate",
        "1",
    ];
    let a = node_in(a_dir, &url, "a", &flags);
    let b = node_in(b_dir, &url, "b", &flags);
    let c = node_in(c_dir, &url, "c", &flags);
    let restarted = now_minute();
    fired_after(pg, &id, &sch, restarted, 4, &[&a, &b, &c]).await;
    let epoch_after: u64 = one(pg, &format!("SELECT epoch FROM sessions WHERE id = '{id}'"))
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        epoch_after >= epoch_before + 2,
        "the session was not woken again between runs (epoch {epoch_before} → {epoch_after})"
    );

    // Removed through C: no node fires it again.
    let (status, _, v) = answer(c.req(
        Method::DELETE,
        &format!("/v1/sessions/{id}/schedules/{sch}"),
    ))
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{v}");
    let removed = now_minute();
    assert_eq!(
        one(pg, "SELECT count(*) FROM schedules").as_deref(),
        Some("0")
    );
    for n in [&a, &b, &c] {
        let (status, _, v) =
            answer(n.req(Method::GET, &format!("/v1/sessions/{id}/schedules"))).await;
        assert_eq!(status, StatusCode::OK, "{v}");
        assert_eq!(v["schedules"], json!([]), "{v}");
    }
    clock_at(removed + 3).await;
    let minutes = fired(pg, &id, &sch);
    once_each(&minutes);
    assert!(
        minutes.iter().all(|m| *m <= removed),
        "fired after its removal in minute {removed}: {minutes:?}"
    );
    // The store was the only copy: no node wrote a schedule index in its home.
    for n in [&a, &b, &c] {
        assert!(!n.dir.path().join("home/schedules.json").exists());
    }
}

/// The claim through the library: three stores (nodes x, y, z) racing for the same minutes of
/// one schedule each win a minute once between them; a session held by live node x is due
/// for x alone until x's lease and heartbeat have run out; a minute given back is due again.
#[test]
fn the_store_lets_one_node_claim_each_minute() {
    use rookery::store::lease::{SessionRow, release, take_existing, take_new};
    use rookery::store::nodes::register;
    use rookery::store::schedules::{Claim, ScheduleRow, claim, due, insert, unclaim};
    use rookery::store::{PgStore, StoreOptions};

    let pg = TestPostgres::start();
    let url = pg.url();
    runtime().block_on(async move {
        let ttl = Duration::from_secs(3);
        let mut stores = Vec::new();
        for name in ["x", "y", "z"] {
            let options = StoreOptions {
                node: name.to_string(),
                lease_ttl: ttl,
            };
            stores.push(PgStore::connect(&url, options).await.unwrap());
        }
        let session = SessionRow {
            id: "session-2026-01-01-00-00-00-0000beef".into(),
            ..SessionRow::default()
        };
        let taken = take_new(&stores[0], &session).await.unwrap();
        release(&stores[0], &taken.lease).await.unwrap();
        let row = ScheduleRow {
            session_id: session.id.clone(),
            schedule_id: "sch-claimed".into(),
            cron: "* * * * *".into(),
            text: "t".into(),
            timezone: "UTC".into(),
            if_busy: "reject".into(),
            created_minute: 100,
            last_minute: 100,
            next_minute: Some(101),
        };
        insert(&stores[0], &row, 1000, 32, 100_000).await.unwrap();

        // Minutes 101..=120, each raced by the three: one winner a minute.
        for now in 101..=120i64 {
            let races = stores.iter().map(|store| async move {
                let seen = due(store, 1000, now, 10).await.unwrap();
                let claims: Vec<Claim> = seen
                    .iter()
                    .map(|r| Claim {
                        schedule_id: r.schedule_id.clone(),
                        read_last: r.last_minute,
                        next: Some(now + 1),
                    })
                    .collect();
                claim(store, now, &claims).await.unwrap().len()
            });
            let won = futures::future::join_all(races).await;
            assert_eq!(won.iter().sum::<usize>(), 1, "minute {now}: {won:?}");
        }
        // Not due before its next minute.
        assert!(due(&stores[1], 1000, 120, 10).await.unwrap().is_empty());

        // A minute given back is due again, and only its claimer can give it back.
        let claims = [Claim {
            schedule_id: "sch-claimed".into(),
            read_last: 120,
            next: Some(122),
        }];
        assert_eq!(claim(&stores[1], 121, &claims).await.unwrap().len(), 1);
        assert!(
            !unclaim(&stores[2], "sch-claimed", 121, 120, Some(121))
                .await
                .unwrap()
        );
        assert!(
            unclaim(&stores[1], "sch-claimed", 121, 120, Some(121))
                .await
                .unwrap()
        );
        assert_eq!(due(&stores[2], 1000, 121, 10).await.unwrap().len(), 1);

        // Held by live node x: due for x only, and no other node's claim moves it.
        register(&stores[0], "http://127.0.0.1:9").await.unwrap();
        let held = take_existing(&stores[0], &session.id).await.unwrap();
        assert_eq!(due(&stores[0], 1000, 121, 10).await.unwrap().len(), 1);
        assert!(due(&stores[1], 1000, 121, 10).await.unwrap().is_empty());
        assert!(claim(&stores[1], 121, &claims).await.unwrap().is_empty());
        // x stops renewing and heartbeating (it died): once both ran out, y may claim it.
        let deadline = Instant::now() + LONG;
        while due(&stores[1], 1000, 121, 10).await.unwrap().is_empty() {
            assert!(Instant::now() < deadline, "x's lease never ran out");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(claim(&stores[1], 121, &claims).await.unwrap().len(), 1);
        drop(held);
    });
}

/// `rookery store import HOME` of a `files` home whose session has a schedule, run twice.
fn import(dir: &std::path::Path, url: &str) -> String {
    let home = dir.join("home");
    let out = crate::common::serve::command(
        dir,
        &["store", "import", "--store", url, home.to_str().unwrap()],
    )
    .output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "store import: {stderr}");
    stderr
}

#[test]
fn an_imported_homes_schedules_fire_from_the_store() {
    let pg = TestPostgres::start();
    runtime().block_on(imported_schedules(&pg));
}

async fn imported_schedules(pg: &TestPostgres) {
    let turns: Vec<Value> = (0..50)
        .map(|i| json!({"text": format!("ran {i}")}))
        .collect();
    let script = json!({ "turns": turns });
    let minute = MINUTE_MS.to_string();
    let flags = ["--schedule-minute-ms", minute.as_str()];

    // A files-backed server, its session given a schedule, then stopped.
    let files = Server::start_with(sandbox(&script), None, &flags);
    let id = files.create(None).await;
    let (status, v) = files
        .call(
            "POST",
            &format!("/v1/sessions/{id}/schedules"),
            Some(json!({"cron": "* * * * *", "text": "tick"})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{v}");
    let sch = v["schedule_id"].as_str().unwrap().to_string();
    let dir = stop(files);

    let url = pg.url();
    let first = import(dir.path(), &url);
    assert!(
        first.contains("schedules: 1 new, 0 already stored"),
        "{first}"
    );
    let second = import(dir.path(), &url);
    assert!(
        second.contains("0 new sessions, 0 new records")
            && second.contains("schedules: 0 new, 1 already stored"),
        "{second}"
    );
    assert_eq!(
        one(
            pg,
            &format!("SELECT session_id FROM schedules WHERE schedule_id = '{sch}'")
        )
        .as_deref(),
        Some(id.as_str())
    );

    // A node on the store lists it and fires it, in the same workspace.
    let a = node_in(dir, &url, "a", &flags);
    let (status, _, v) = answer(a.req(Method::GET, &format!("/v1/sessions/{id}/schedules"))).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(v["schedules"][0]["schedule_id"], sch.as_str(), "{v}");
    let start = now_minute();
    fired_after(pg, &id, &sch, start, 2, &[&a]).await;
}
