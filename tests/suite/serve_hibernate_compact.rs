//! A manual compaction asked of a hibernated session, through `rookery serve` on 127.0.0.1:
//! `POST /v1/sessions/{id}/compact` wakes it and compacts it (202 `compacting`), the trace
//! records `compaction_begin {reason: manual}` … `compaction_end {status: completed}` and rotates
//! to `_002`, which `GET /v1/sessions/{id}` names as its `trace_path`; the next task starts from
//! the summary.

use crate::common::serve as harness;

use std::time::{Duration, Instant};

use harness::*;
use reqwest::StatusCode;
use serde_json::{Value, json};

async fn status_of(server: &Server, id: &str) -> Option<String> {
    let (s, v) = server.call("GET", "/v1/sessions", None).await;
    assert_eq!(s, StatusCode::OK);
    v["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["session_id"] == id)
        .map(|e| e["status"].as_str().unwrap().to_string())
}

async fn wait_status(server: &Server, id: &str, want: &str) {
    let deadline = Instant::now() + WAIT;
    while status_of(server, id).await.as_deref() != Some(want) {
        assert!(Instant::now() < deadline, "{id} never became {want}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn compaction_events(path: &std::path::Path) -> Vec<Value> {
    rookery::trace::reader::read_trace(path)
        .unwrap()
        .records
        .iter()
        .filter_map(|r| r.as_event())
        .map(|e| serde_json::to_value(e).unwrap())
        .filter(|e| {
            e["type"]
                .as_str()
                .is_some_and(|t| t.starts_with("compaction_"))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compacting_a_hibernated_session_wakes_it_and_compacts_it() {
    let script = json!({"turns": [
        {"text": "hello"},
        {"text": "[summary]said hello[/summary]"},
        {"text": "after the summary"}
    ]});
    let server = Server::start_with(
        sandbox(&script),
        None,
        &["--idle-hibernate", "0", "--max-resident", "1"],
    );
    let a = server.create(None).await;
    let after = server.task(&a, "hi").await;
    server.events_until_task_end(&a, after).await;
    // A second session takes the only resident place: `a` hibernates.
    let b = server.create(None).await;
    wait_status(&server, &a, "hibernated").await;
    let (s, v) = server
        .call("POST", &format!("/v1/sessions/{a}/compact"), None)
        .await;
    assert_eq!(s, StatusCode::ACCEPTED, "{v}");
    assert_eq!(v["status"], "compacting");
    assert_eq!(v["session_id"], a.as_str());
    // The compaction ends, and the trace goes on in `_002`.
    let deadline = Instant::now() + WAIT;
    while !server.trace(&a).ends_with(format!("{a}_002.jsonl")) {
        assert!(Instant::now() < deadline, "no rotation to _002");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let first = server.trace(&a).with_file_name(format!("{a}_001.jsonl"));
    let ev = compaction_events(&first);
    assert_eq!(ev.len(), 2, "{ev:?}");
    assert_eq!(ev[0]["type"], "compaction_begin");
    assert_eq!(ev[0]["reason"], "manual");
    assert_eq!(ev[1]["type"], "compaction_end");
    assert_eq!(ev[1]["status"], "completed");
    // The woken session is resident again (and `b` made room for it).
    wait_status(&server, &b, "hibernated").await;
    let deadline = Instant::now() + WAIT;
    loop {
        let (s, v) = server.call("GET", &format!("/v1/sessions/{a}"), None).await;
        assert_eq!(s, StatusCode::OK, "{v}");
        let path = v["trace_path"].as_str().unwrap_or_default().to_string();
        if path.ends_with(&format!("{a}_002.jsonl")) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "trace_path never named _002: {v}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The next task starts from the summary.
    let after = server.task(&a, "go on").await;
    let events = server.events_until_task_end(&a, after).await;
    let texts: Vec<&Value> = events
        .iter()
        .map(|(_, v)| &v["payload"])
        .filter(|p| p["type"] == "text" && p["role"] == "assistant")
        .collect();
    assert_eq!(texts.last().unwrap()["text"], "after the summary");
}
