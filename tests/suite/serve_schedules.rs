//! Schedules through the real binary (`POST/GET/DELETE /v1/sessions/{id}/schedules`), on a
//! short schedule minute (`--schedule-minute-ms`): a schedule every minute runs tasks (each
//! recorded as `schedule_fired`), is listed and deleted, and bad patterns, zones and policies
//! are 400; a session's schedules are bounded and go with the session; runs missed while the
//! server was down run once at the next start, also when the index was lost and rebuilt from
//! the traces; a due schedule wakes a hibernated session.
//!
//! Waits are on the trace, the event stream or the clock the schedules count (the same Unix
//! time the test reads), never on a sleep standing for the server's progress.

use crate::common::serve as harness;

use std::time::{Duration, Instant};

use eventsource_stream::Eventsource;
use futures::StreamExt;
use harness::*;
use reqwest::StatusCode;
use serde_json::{Value, json};

/// How long any one wait here may take on a loaded machine.
const LONG: Duration = Duration::from_secs(90);

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

fn script(n: usize) -> Value {
    let turns: Vec<Value> = (0..n)
        .map(|i| json!({"text": format!("ran {i}")}))
        .collect();
    json!({ "turns": turns })
}

fn start(dir: tempfile::TempDir, minute_ms: &str, extra: &[&str]) -> Server {
    let mut args = vec!["--schedule-minute-ms", minute_ms];
    args.extend(extra);
    Server::start_with(dir, None, &args)
}

/// Stops the server with SIGTERM, waits for it to exit, and hands back its directory.
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

async fn add(server: &Server, id: &str, body: Value) -> (StatusCode, Value) {
    server
        .call("POST", &format!("/v1/sessions/{id}/schedules"), Some(body))
        .await
}

async fn listed(server: &Server, id: &str) -> Vec<Value> {
    let (s, v) = server
        .call("GET", &format!("/v1/sessions/{id}/schedules"), None)
        .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    v["schedules"].as_array().unwrap().clone()
}

/// Every record of session `id`'s trace files, as JSON payloads.
fn payloads(server: &Server, id: &str) -> Vec<Value> {
    let latest = server.trace(id);
    let dir = latest.parent().unwrap();
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&format!("{id}_")))
        })
        .collect();
    files.sort();
    files
        .iter()
        .flat_map(|f| rookery::trace::reader::read_trace(f).unwrap().records)
        .map(|r| serde_json::to_value(&r).unwrap()["payload"].clone())
        .collect()
}

fn of_type(payloads: &[Value], kind: &str) -> Vec<Value> {
    payloads
        .iter()
        .filter(|p| p["type"] == kind)
        .cloned()
        .collect()
}

/// The user prompts `text` in the payloads.
fn prompts(payloads: &[Value], text: &str) -> usize {
    payloads
        .iter()
        .filter(|p| p["type"] == "text" && p["role"] == "user" && p["text"] == text)
        .count()
}

/// Polls the trace until `check` holds of its payloads; the payloads.
async fn trace_until(
    server: &Server,
    id: &str,
    what: &str,
    check: impl Fn(&[Value]) -> bool,
) -> Vec<Value> {
    let deadline = Instant::now() + LONG;
    loop {
        let p = payloads(server, id);
        if check(&p) {
            return p;
        }
        assert!(
            Instant::now() < deadline,
            "never {what}: {:?}\n{}",
            of_type(&p, "schedule_fired"),
            server.stderr()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until the schedule clock (Unix time in minutes of `minute_ms`) reaches `minute`.
async fn clock_at(minute_ms: u64, minute: u64) {
    while now_ms() / minute_ms < minute {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A pattern that matches only the schedule minutes `m` and `m + 1` of each (schedule) year,
/// with `m` at least `ahead` minutes from now: `(pattern, m)`.
fn two_slots(minute_ms: u64, ahead: u64) -> (String, u64) {
    let mut m = now_ms() / minute_ms + ahead;
    if m % 60 == 59 {
        m += 1;
    }
    let at = chrono::DateTime::from_timestamp(m as i64 * 60, 0).unwrap();
    use chrono::{Datelike, Timelike};
    let cron = format!(
        "{},{} {} {} {} *",
        at.minute(),
        at.minute() + 1,
        at.hour(),
        at.day(),
        at.month()
    );
    (cron, m)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schedule_every_minute_runs_tasks_until_deleted_and_bad_ones_are_400() {
    let server = start(sandbox(&script(400)), "500", &[]);
    let id = server.create(Some("allow-all")).await;

    for (body, code, says) in [
        (
            json!({"cron": "* * * *", "text": "x"}),
            "invalid_cron",
            "4 fields",
        ),
        (
            json!({"cron": "61 * * * *", "text": "x"}),
            "invalid_cron",
            "61",
        ),
        (
            json!({"cron": "0 0 30 2 *", "text": "x"}),
            "invalid_cron",
            "never matches",
        ),
        (
            json!({"cron": "* * * * *", "text": "x", "timezone": "Mars/Base"}),
            "unknown_timezone",
            "Mars/Base",
        ),
        (
            json!({"cron": "* * * * *", "text": "x", "if_busy": "later"}),
            "invalid_request",
            "unknown if_busy \"later\"",
        ),
        (
            json!({"cron": "* * * * *", "text": " "}),
            "invalid_request",
            "text",
        ),
    ] {
        let (s, v) = add(&server, &id, body.clone()).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{body}: {v}");
        assert_eq!(v["error"]["code"], code, "{body}: {v}");
        let message = v["error"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{body}: {message}");
    }
    let (s, v) = add(
        &server,
        "session-2020-01-01-00-00-00-0000dead",
        json!({"cron": "* * * * *", "text": "x"}),
    )
    .await;
    assert_eq!(
        (s, v["error"]["code"].clone()),
        (StatusCode::NOT_FOUND, json!("unknown_session"))
    );

    let (s, v) = add(
        &server,
        &id,
        json!({"cron": "* * * * *", "text": "tick", "timezone": "Europe/Paris", "if_busy": "enqueue"}),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    let sid = v["schedule_id"].as_str().unwrap().to_string();
    assert!(sid.starts_with("sch-"), "{v}");

    // Three runs, in three different minutes, each a task of its own.
    let p = trace_until(&server, &id, "3 runs ended", |p| {
        of_type(p, "schedule_fired").len() >= 3 && of_type(p, "task_end").len() >= 3
    })
    .await;
    let fired = of_type(&p, "schedule_fired");
    let minutes: Vec<u64> = fired
        .iter()
        .map(|f| f["minute"].as_u64().unwrap())
        .collect();
    assert!(minutes.windows(2).all(|w| w[0] < w[1]), "{fired:?}");
    for f in &fired {
        assert_eq!(f["schedule_id"], sid.as_str());
        assert!(
            ["started", "queued"].contains(&f["outcome"].as_str().unwrap()),
            "{f}"
        );
    }
    assert!(prompts(&p, "tick") >= 3);
    let added = of_type(&p, "schedule_added");
    assert_eq!(added.len(), 1);
    assert_eq!(
        (
            &added[0]["schedule_id"],
            &added[0]["cron"],
            &added[0]["timezone"],
            &added[0]["if_busy"]
        ),
        (
            &json!(sid),
            &json!("* * * * *"),
            &json!("Europe/Paris"),
            &json!("enqueue")
        )
    );

    let list = listed(&server, &id).await;
    assert_eq!(list.len(), 1, "{list:?}");
    assert_eq!(list[0]["schedule_id"], sid.as_str());
    assert_eq!(list[0]["text"], "tick");
    assert!(
        list[0]["next_minute"].as_u64() > list[0]["last_minute"].as_u64(),
        "{list:?}"
    );

    let path = format!("/v1/sessions/{id}/schedules/{sid}");
    let (s, v) = server.call("DELETE", &path, None).await;
    assert_eq!(s, StatusCode::NO_CONTENT, "{v}");
    let (s, v) = server.call("DELETE", &path, None).await;
    assert_eq!(
        (s, v["error"]["code"].clone()),
        (StatusCode::NOT_FOUND, json!("unknown_schedule")),
        "{v}"
    );
    assert!(listed(&server, &id).await.is_empty());
    // A run already under way when it was deleted may still record itself; none after that.
    let deleted_at = now_ms() / 500;
    clock_at(500, deleted_at + 2).await;
    let before = of_type(&payloads(&server, &id), "schedule_fired").len();
    clock_at(500, deleted_at + 6).await;
    let p = payloads(&server, &id);
    assert_eq!(
        of_type(&p, "schedule_fired").len(),
        before,
        "ran after its deletion"
    );
    let removed = of_type(&p, "schedule_removed");
    assert_eq!(
        removed,
        vec![json!({"type": "schedule_removed", "schedule_id": sid, "reason": "deleted"})]
    );

    // At most 32 per session; they go with their session.
    let other = server.create(None).await;
    for _ in 0..32 {
        let (s, v) = add(
            &server,
            &other,
            json!({"cron": "0 0 1 1 *", "text": "new year"}),
        )
        .await;
        assert_eq!(s, StatusCode::CREATED, "{v}");
    }
    let (s, v) = add(
        &server,
        &other,
        json!({"cron": "0 0 1 1 *", "text": "one more"}),
    )
    .await;
    assert_eq!(s, StatusCode::TOO_MANY_REQUESTS, "{v}");
    assert_eq!(v["error"]["code"], "too_many_schedules");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("32"),
        "{v}"
    );
    assert_eq!(listed(&server, &other).await.len(), 32);
    let (s, v) = server
        .call("DELETE", &format!("/v1/sessions/{other}"), None)
        .await;
    assert_eq!(s, StatusCode::NO_CONTENT, "{v}");
    let index = std::fs::read_to_string(server.dir.path().join("home/schedules.json")).unwrap();
    assert!(!index.contains(&other), "{index}");
    let p = trace_until(&server, &other, "32 removals", |p| {
        of_type(p, "schedule_removed").len() == 32
    })
    .await;
    assert!(
        of_type(&p, "schedule_removed")
            .iter()
            .all(|r| r["reason"] == "session_deleted")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_missed_while_down_run_once_at_start_even_from_a_rebuilt_index() {
    const MS: u64 = 1000;
    let server = start(sandbox(&script(20)), "1000", &[]);
    let id = server.create(Some("allow-all")).await;
    let (cron, first) = two_slots(MS, 12);
    let (s, v) = add(&server, &id, json!({"cron": cron, "text": "catch up"})).await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    let trace = server.trace(&id);
    let dir = stop(server);
    let before: Vec<_> = rookery::trace::reader::read_trace(&trace)
        .unwrap()
        .records
        .iter()
        .map(|r| serde_json::to_value(r).unwrap()["payload"].clone())
        .collect();
    assert_eq!(of_type(&before, "schedule_added").len(), 1);
    assert!(
        of_type(&before, "schedule_fired").is_empty(),
        "the machine took more than 12 s to stop the server: {before:?}"
    );
    let home = dir.path().join("home");
    assert!(home.join("schedules.json").is_file());

    // Both minutes go by while the server is down.
    clock_at(MS, first + 2).await;
    let server = start(dir, "1000", &[]);
    let restarted = now_ms() / MS;
    let p = trace_until(&server, &id, "the catch-up ended", |p| {
        !of_type(p, "schedule_fired").is_empty() && !of_type(p, "task_end").is_empty()
    })
    .await;
    let fired = of_type(&p, "schedule_fired");
    assert_eq!(fired[0]["outcome"], "started", "{fired:?}");
    let ran_in = fired[0]["minute"].as_u64().unwrap();
    assert!(ran_in >= first + 2, "{ran_in} < {}", first + 2);
    // Several ticks later it still ran once: its next minute is a (schedule) year away.
    clock_at(MS, restarted + 4).await;
    let p = payloads(&server, &id);
    assert_eq!(
        of_type(&p, "schedule_fired").len(),
        1,
        "{:?}",
        of_type(&p, "schedule_fired")
    );
    assert_eq!(prompts(&p, "catch up"), 1);
    let list = listed(&server, &id).await;
    assert_eq!(list[0]["last_minute"], ran_in, "{list:?}");
    assert!(
        list[0]["next_minute"].as_u64().unwrap() > first + 500_000,
        "{list:?}"
    );

    // The index lost: the next start rebuilds it from the traces, the run already recorded.
    let dir = stop(server);
    std::fs::remove_file(dir.path().join("home/schedules.json")).unwrap();
    let server = start(dir, "1000", &[]);
    let list = listed(&server, &id).await;
    assert_eq!(list.len(), 1, "{list:?}");
    assert_eq!(
        (&list[0]["cron"], &list[0]["last_minute"]),
        (&json!(cron), &json!(ran_in))
    );
    assert!(server.dir.path().join("home/schedules.json").is_file());
    let restarted = now_ms() / MS;
    clock_at(MS, restarted + 3).await;
    assert_eq!(of_type(&payloads(&server, &id), "schedule_fired").len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_due_schedule_wakes_a_hibernated_session() {
    const MS: u64 = 1000;
    let server = start(
        sandbox(&script(20)),
        "1000",
        &["--idle-hibernate", "0", "--max-resident", "1"],
    );
    let a = server.create(Some("allow-all")).await;
    let resp = server
        .req(reqwest::Method::GET, &format!("/v1/sessions/{a}/events"))
        .header("Last-Event-ID", "0")
        .send()
        .await
        .unwrap();
    let mut stream = resp.bytes_stream().eventsource();
    let (cron, first) = two_slots(MS, 12);
    let (s, v) = add(&server, &a, json!({"cron": cron, "text": "wake up"})).await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    // A second session under --max-resident 1 hibernates the first.
    let _b = server.create(None).await;
    server.wait_listed(&a, "hibernated").await;

    let mut kinds = Vec::new();
    let deadline = tokio::time::Instant::now() + LONG;
    loop {
        let ev = tokio::time::timeout_at(deadline, stream.next())
            .await
            .unwrap_or_else(|_| panic!("no run: {kinds:?}\n{}", server.stderr()))
            .expect("stream open")
            .expect("valid SSE");
        let v: Value = serde_json::from_str(&ev.data).unwrap();
        let kind = payload_type(&v);
        if kind == "schedule_fired" {
            assert_eq!(v["payload"]["outcome"], "started", "{v}");
            assert!(v["payload"]["minute"].as_u64().unwrap() >= first, "{v}");
        }
        kinds.push(kind);
        if kinds.iter().any(|k| k == "schedule_fired") && kinds.iter().any(|k| k == "task_end") {
            break;
        }
    }
    let at = |k: &str| kinds.iter().position(|x| x == k).unwrap_or(usize::MAX);
    assert!(
        at("session_hibernated") < at("session_resumed"),
        "{kinds:?}"
    );
    assert!(at("session_resumed") < at("schedule_fired"), "{kinds:?}");
    assert!(at("schedule_fired") < usize::MAX, "{kinds:?}");
    assert_eq!(prompts(&payloads(&server, &a), "wake up"), 1);
}
