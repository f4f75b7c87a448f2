//! `if_busy` through the real binary: `enqueue` keeps the order of the queue under 20
//! concurrent posts (shown in `GET …/sessions/{id}`, cancellable, 429 `queue_full` beyond its
//! capacity, `task_queued` / `task_dequeued` on the stream), `interrupt` aborts the running task
//! with every call paired and then starts, `steer` joins the running task, and an unknown
//! `if_busy` is 400.

use crate::common::serve as harness;

use std::time::Duration;

use eventsource_stream::Eventsource;
use futures::StreamExt;
use harness::*;
use reqwest::StatusCode;
use serde_json::{Value, json};

const QUEUE: usize = 32;

fn blocking_then_texts(n: usize) -> Value {
    let mut turns = vec![
        json!({"tool_calls": [{"name": "exec_command", "arguments": {
            "description": "wait", "yield_time_ms": 60000,
            "cmd": "while [ ! -f go ]; do sleep 0.05; done; echo released"}}]}),
        json!({"text": "released"}),
    ];
    turns.extend((0..n).map(|i| json!({"text": format!("answer {i}")})));
    json!({ "turns": turns })
}

async fn post_task(server: &Server, id: &str, body: Value) -> (StatusCode, Value) {
    server
        .call("POST", &format!("/v1/sessions/{id}/tasks"), Some(body))
        .await
}

/// Waits until the trace holds `n` `task_end` records; the records.
async fn trace_with_ends(server: &Server, id: &str, n: usize) -> Vec<Value> {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let recs: Vec<Value> = rookery::trace::reader::read_trace(&server.trace(id))
            .unwrap()
            .records
            .iter()
            .map(|r| serde_json::to_value(r).unwrap())
            .collect();
        if recs
            .iter()
            .filter(|r| r["payload"]["type"] == "task_end")
            .count()
            >= n
        {
            return recs;
        }
        assert!(std::time::Instant::now() < deadline, "never {n} task_ends");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The user texts of the trace, in order.
fn prompts(recs: &[Value]) -> Vec<String> {
    recs.iter()
        .filter(|r| r["payload"]["type"] == "text" && r["payload"]["role"] == "user")
        .map(|r| r["payload"]["text"].as_str().unwrap().to_string())
        .collect()
}

/// Stream events of `kind` from the start of the session's log, until `n` of them arrived.
async fn stream_events(server: &Server, id: &str, kind: &str, n: usize) -> Vec<Value> {
    let resp = server
        .req(reqwest::Method::GET, &format!("/v1/sessions/{id}/events"))
        .header("Last-Event-ID", "0")
        .send()
        .await
        .unwrap();
    let mut stream = resp.bytes_stream().eventsource();
    let mut out = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while out.len() < n {
        let ev = tokio::time::timeout_at(deadline, stream.next())
            .await
            .unwrap_or_else(|_| panic!("only {} {kind} events: {out:?}", out.len()))
            .expect("stream open")
            .expect("valid SSE");
        let v: Value = serde_json::from_str(&ev.data).unwrap();
        if v["payload"]["type"] == kind {
            out.push(v["payload"].clone());
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enqueue_keeps_queue_order_under_20_concurrent_posts() {
    let server = Server::start(&blocking_then_texts(40));
    let id = server.create(Some("allow-all")).await;
    let (status, v) = post_task(&server, &id, json!({"text": "blocker"})).await;
    assert_eq!(
        (status, v["status"].clone()),
        (StatusCode::ACCEPTED, json!("started")),
        "{v}"
    );
    // Busy: the default is still today's 409, and an unknown policy is 400.
    let (status, v) = post_task(&server, &id, json!({"text": "x", "if_busy": "reject"})).await;
    assert_eq!(status, StatusCode::CONFLICT, "{v}");
    let (status, v) = post_task(&server, &id, json!({"text": "x", "if_busy": "later"})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("unknown if_busy \"later\""),
        "{v}"
    );

    let posts = (0..20).map(|i| {
        let server = &server;
        let id = &id;
        async move {
            post_task(
                server,
                id,
                json!({"text": format!("queued {i}"), "if_busy": "enqueue"}),
            )
            .await
        }
    });
    let answers = futures::future::join_all(posts).await;
    for (status, v) in &answers {
        assert_eq!(
            (*status, v["status"].clone()),
            (StatusCode::ACCEPTED, json!("queued")),
            "{v}"
        );
    }
    // Fill the queue to its capacity; one more is 429.
    for i in 20..QUEUE {
        let (status, v) = post_task(
            &server,
            &id,
            json!({"text": format!("queued {i}"), "if_busy": "enqueue"}),
        )
        .await;
        assert_eq!(status, StatusCode::ACCEPTED, "{v}");
    }
    let (status, v) = post_task(
        &server,
        &id,
        json!({"text": "one too many", "if_busy": "enqueue"}),
    )
    .await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{v}");
    assert_eq!(v["error"]["code"], "queue_full", "{v}");

    let (_, view) = server
        .call("GET", &format!("/v1/sessions/{id}"), None)
        .await;
    let queue = view["queue"].as_array().unwrap().clone();
    assert_eq!(queue.len(), QUEUE, "{view}");
    // Each post's entry is in the queue once.
    for (_, v) in &answers {
        assert_eq!(
            queue
                .iter()
                .filter(|q| q["entry_id"] == v["entry_id"])
                .count(),
            1
        );
    }
    // Cancel one: 204, then 404.
    let cancelled = queue[3]["entry_id"].as_str().unwrap().to_string();
    let path = format!("/v1/sessions/{id}/queue/{cancelled}");
    let (status, v) = server.call("DELETE", &path, None).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{v}");
    let (status, v) = server.call("DELETE", &path, None).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{v}");
    assert_eq!(v["error"]["code"], "unknown_queue_entry", "{v}");

    std::fs::write(server.ws().join("go"), "").unwrap();
    let recs = trace_with_ends(&server, &id, QUEUE).await;
    let expected: Vec<String> = std::iter::once("blocker".to_string())
        .chain(
            queue
                .iter()
                .filter(|q| q["entry_id"] != cancelled.as_str())
                .map(|q| q["text"].as_str().unwrap().to_string()),
        )
        .collect();
    assert_eq!(prompts(&recs), expected, "tasks run in queue order");
    // Each task ran alone: its prompt follows the previous task's end.
    let kinds: Vec<&str> = recs
        .iter()
        .filter_map(|r| match r["payload"]["type"].as_str() {
            Some("task_end") => Some("end"),
            Some("text") if r["payload"]["role"] == "user" => Some("prompt"),
            _ => None,
        })
        .collect();
    assert_eq!(kinds, ["prompt", "end"].repeat(QUEUE), "{kinds:?}");

    let queued = stream_events(&server, &id, "task_queued", QUEUE).await;
    assert_eq!(queued.len(), QUEUE);
    let dequeued = stream_events(&server, &id, "task_dequeued", QUEUE).await;
    assert_eq!(
        dequeued.iter().filter(|d| d["reason"] == "started").count(),
        QUEUE - 1
    );
    let c: Vec<&Value> = dequeued
        .iter()
        .filter(|d| d["reason"] == "cancelled")
        .collect();
    assert_eq!(c.len(), 1);
    assert_eq!(c[0]["entry_id"], cancelled.as_str());
    let (_, view) = server
        .call("GET", &format!("/v1/sessions/{id}"), None)
        .await;
    assert_eq!(view["queue"], json!([]), "{view}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupt_aborts_with_every_call_paired_then_starts_and_steer_joins() {
    let server = Server::start(&blocking_then_texts(4));
    let id = server.create(Some("allow-all")).await;
    post_task(&server, &id, json!({"text": "blocker"})).await;
    // The call is running (its decision is recorded) before the interrupt.
    let deadline = std::time::Instant::now() + WAIT;
    while !std::fs::read_to_string(server.trace(&id))
        .unwrap()
        .contains("approval_decision")
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the call never started"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (status, v) = post_task(
        &server,
        &id,
        json!({"text": "instead", "if_busy": "interrupt"}),
    )
    .await;
    assert_eq!(
        (status, v["status"].clone()),
        (StatusCode::ACCEPTED, json!("started")),
        "{v}"
    );
    let recs = trace_with_ends(&server, &id, 2).await;
    crate::common::cli::check_pairing(&recs, true);
    let ends: Vec<&Value> = recs
        .iter()
        .filter(|r| r["payload"]["type"] == "task_end")
        .map(|r| &r["payload"]["status"])
        .collect();
    assert_eq!(ends, [&json!("aborted"), &json!("completed")], "{recs:#?}");
    assert_eq!(prompts(&recs), ["blocker", "instead"]);
    let (_, out) = recs
        .iter()
        .enumerate()
        .find(|(_, r)| r["payload"]["type"] == "tool_call_output")
        .unwrap();
    assert_eq!(out["payload"]["stop_reason"], "aborted", "{out}");

    // Idle: `steer` starts a task; `interrupt` on an idle session just starts.
    let (status, v) = post_task(&server, &id, json!({"text": "steered", "if_busy": "steer"})).await;
    assert_eq!(
        (status, v["status"].clone()),
        (StatusCode::ACCEPTED, json!("started")),
        "{v}"
    );
    trace_with_ends(&server, &id, 3).await;
    let (status, v) = post_task(
        &server,
        &id,
        json!({"text": "calm", "if_busy": "interrupt"}),
    )
    .await;
    assert_eq!(
        (status, v["status"].clone()),
        (StatusCode::ACCEPTED, json!("started")),
        "{v}"
    );
    let recs = trace_with_ends(&server, &id, 4).await;
    assert_eq!(prompts(&recs), ["blocker", "instead", "steered", "calm"]);
}
