//! Hibernation in `rookery serve`, through the built binary on 127.0.0.1: a session idle for
//! `--idle-hibernate` is hibernated (listed `hibernated`, its SSE stream sees
//! `session_hibernated`), and the next request resumes it transparently with its approval mode
//! (`session_resumed` on the same stream); `--max-resident` hibernates the least recently used
//! idle session. Also `POST /v1/sessions/{id}/compact`.

use crate::common::serve as harness;

use std::time::Instant;

use eventsource_stream::Eventsource;
use futures::StreamExt;
use harness::*;
use reqwest::StatusCode;
use serde_json::{Value, json};

async fn listed_status(server: &Server, id: &str) -> Option<String> {
    let (s, v) = server.call("GET", "/v1/sessions", None).await;
    assert_eq!(s, StatusCode::OK);
    v["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["session_id"] == id)
        .map(|e| e["status"].as_str().unwrap().to_string())
}

fn script() -> Value {
    json!({"turns": [
        {"text": "first"},
        {"text": "second"},
        {"text": "third"}
    ]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_session_hibernates_and_the_next_task_resumes_it_with_its_mode() {
    let server = Server::start_with(sandbox(&script()), None, &["--idle-hibernate", "1"]);
    let id = server.create(Some("read-only")).await;
    let after = server.task(&id, "one").await;
    server.events_until_task_end(&id, after).await;
    // A stream opened before the hibernation sees both events.
    let resp = server
        .req(reqwest::Method::GET, &format!("/v1/sessions/{id}/events"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let mut stream = resp.bytes_stream().eventsource();
    let entry = server.wait_listed(&id, "hibernated").await;
    assert_eq!(entry["approval_mode"], "read-only");
    let after = server.task(&id, "two").await;
    let events = server.events_until_task_end(&id, after).await;
    let texts: Vec<&Value> = events
        .iter()
        .map(|(_, v)| &v["payload"])
        .filter(|p| p["type"] == "text" && p["role"] == "assistant")
        .collect();
    assert_eq!(texts.last().unwrap()["text"], "second");
    let (_, v) = server
        .call("GET", &format!("/v1/sessions/{id}"), None)
        .await;
    assert_eq!(v["approval_mode"], "read-only");
    assert_eq!(listed_status(&server, &id).await.as_deref(), Some("idle"));
    let mut seen = Vec::new();
    let deadline = tokio::time::Instant::now() + WAIT;
    while !seen.contains(&"session_resumed".to_string()) {
        let ev = tokio::time::timeout_at(deadline, stream.next())
            .await
            .expect("events in time")
            .expect("stream open")
            .expect("valid SSE");
        let v: Value = serde_json::from_str(&ev.data).unwrap();
        let t = v["payload"]["type"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if t.starts_with("session_") {
            seen.push(t);
        }
    }
    assert_eq!(seen, ["session_hibernated", "session_resumed"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_resident_cap_hibernates_the_least_recently_used_idle_session() {
    let server = Server::start_with(
        sandbox(&script()),
        None,
        &["--idle-hibernate", "0", "--max-resident", "1"],
    );
    let a = server.create(None).await;
    let b = server.create(None).await;
    server.wait_listed(&a, "hibernated").await;
    assert_eq!(listed_status(&server, &b).await.as_deref(), Some("idle"));
    // The approvals list is a use too: it brings `a` back (and `b` goes).
    let (s, v) = server
        .call("GET", &format!("/v1/sessions/{a}/approvals"), None)
        .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    server.wait_listed(&b, "hibernated").await;
    let after = server.task(&a, "go").await;
    server.events_until_task_end(&a, after).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compact_route_compacts_an_idle_session_and_refuses_an_empty_one() {
    let script = json!({"turns": [
        {"text": "hello"},
        {"text": "[summary]said hello[/summary]"}
    ]});
    let server = Server::start(&script);
    let id = server.create(None).await;
    let (s, v) = server
        .call("POST", &format!("/v1/sessions/{id}/compact"), None)
        .await;
    assert_eq!(s, StatusCode::CONFLICT, "{v}");
    assert_eq!(v["error"]["code"], "nothing_to_compact");
    let after = server.task(&id, "hi").await;
    server.events_until_task_end(&id, after).await;
    let (s, v) = server
        .call("POST", &format!("/v1/sessions/{id}/compact"), None)
        .await;
    assert_eq!(s, StatusCode::ACCEPTED, "{v}");
    assert_eq!(v["status"], "compacting");
    // The compaction ends and the summary opens the trace's second file.
    let deadline = Instant::now() + WAIT;
    while !server.trace(&id).ends_with(format!("{id}_002.jsonl")) {
        assert!(Instant::now() < deadline, "no rotation to _002");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let first = server.trace(&id).with_file_name(format!("{id}_001.jsonl"));
    let records = rookery::trace::reader::read_trace(&first).unwrap().records;
    let end = records
        .iter()
        .filter_map(|r| r.as_event())
        .map(|e| serde_json::to_value(e).unwrap())
        .find(|e| e["type"] == "compaction_end")
        .expect("compaction_end in _001");
    assert_eq!(end["status"], "completed");
    assert_eq!(end["reason"], "manual");
}
