//! End-to-end tests of the `rookery serve` HTTP API, driving the built binary: 100 concurrent
//! sessions with complete, ordered event streams and metrics; 409; approvals through the API and
//! a mode change mid-task; abort; auth (401, refusal to start); 404, 413, 400; close; SSE replay
//! with `Last-Event-ID`. Shutdown, resume and `rookery chat` are in `serve_lifecycle.rs`.
//!
//! Each server gets its own temporary home, workspace and `$HOME`, listens on 127.0.0.1:0 and
//! has its stderr in a file of its temporary directory. Every wait is bounded.

use crate::common::serve as harness;

use eventsource_stream::Eventsource;
use futures::StreamExt;
use harness::*;
use reqwest::StatusCode;
use rookery::message::{EventPayload, Payload};
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn hundred_concurrent_sessions_stream_complete_ordered_events() {
    let server = std::sync::Arc::new(Server::start(&tool_then_text()));
    let runs = (0..100).map(|i| {
        let server = server.clone();
        tokio::spawn(async move {
            let id = server.create(None).await;
            let after = server.task(&id, &format!("task {i}")).await;
            let events = server.events_until_task_end(&id, after).await;
            (id, after, events)
        })
    });
    let results = futures::future::join_all(runs).await;
    for r in results {
        let (id, after, events) = r.unwrap();
        // Every message, numbered without gaps.
        let ids: Vec<u64> = events.iter().map(|(i, _)| *i).collect();
        let expected: Vec<u64> = (after + 1..after + 1 + ids.len() as u64).collect();
        assert_eq!(ids, expected, "{id}");
        let kinds: Vec<String> = events
            .iter()
            .map(|(_, v)| payload_type(v))
            .filter(|k| !k.starts_with("partial_"))
            .collect();
        assert_eq!(
            kinds,
            [
                // The task's prompt.
                "text",
                "tool_list_ready",
                "request_begin",
                "text",
                "tool_call",
                "token_usage",
                "request_end",
                "approval_decision",
                "tool_call_output",
                "request_begin",
                "text",
                "token_usage",
                "request_end",
                "task_end"
            ],
            "{id}"
        );
        assert!(
            events
                .iter()
                .any(|(_, v)| payload_type(v) == "partial_text")
        );
        assert_eq!(events.last().unwrap().1["payload"]["status"], "completed");
        // The complete messages are exactly the trace's (less session_meta and the user input).
        let trace: Vec<Value> = settled_trace(&server.trace(&id))
            .await
            .iter()
            // The stream has the prompt too (`serve` streams it).
            .filter(|m| !matches!(m.payload, Payload::SessionMeta(_)))
            .map(|m| serde_json::from_str(&m.to_json()).unwrap())
            .collect();
        let streamed: Vec<Value> = events
            .iter()
            .map(|(_, v)| v.clone())
            .filter(|v| !payload_type(v).starts_with("partial_"))
            .collect();
        assert_eq!(streamed, trace, "{id}");
    }
    let (_, list) = server.call("GET", "/v1/sessions", None).await;
    let list = list["sessions"].as_array().unwrap();
    assert_eq!(list.len(), 100);
    assert!(list.iter().all(|s| s["status"] == "idle"
        && s["workspace"] == server.ws().canonicalize().unwrap().to_str().unwrap()
        && s["created_at"].as_str().unwrap().ends_with('Z')));
    let metrics = server.metrics_text().await;
    for line in [
        "rookery_sessions{status=\"idle\"} 100",
        "rookery_sessions{status=\"running\"} 0",
        "rookery_tasks_started_total 100",
        "rookery_tasks_finished_total{status=\"completed\"} 100",
        "rookery_tool_calls_total{tool=\"read_file\",stop_reason=\"completed\"} 100",
        "rookery_approvals_pending 0",
        "rookery_model_request_duration_seconds_count 200",
    ] {
        assert!(metrics.lines().any(|l| l == line), "{line} in\n{metrics}");
    }
    let bytes: u64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("rookery_trace_bytes_written_total "))
        .unwrap()
        .parse()
        .unwrap();
    assert!(bytes > 100 * 1000, "{bytes}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_session_refuses_a_second_task_and_aborts() {
    let server = Server::start(&json!({"turns": [{"text": "slow", "delay_ms": 30000}]}));
    let id = server.create(None).await;
    let after = server.task(&id, "first").await;
    let (status, v) = server
        .call(
            "POST",
            &format!("/v1/sessions/{id}/tasks"),
            Some(json!({"text": "second"})),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(v["error"]["code"], "session_busy");
    assert_eq!(
        v["error"]["message"],
        format!("session {id} is busy: a task is already running")
    );
    assert_eq!(server.status_of(&id).await, "running");
    let (status, _) = server
        .call("POST", &format!("/v1/sessions/{id}/abort"), None)
        .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let events = server.events_until_task_end(&id, after).await;
    let n = events.len();
    assert_eq!(payload_type(&events[n - 2].1), "abort");
    assert_eq!(events[n - 1].1["payload"]["status"], "aborted");
    assert_eq!(server.status_of(&id).await, "idle");
    let records = settled_trace(&server.trace(&id)).await;
    assert!(matches!(
        records[records.len() - 2].as_event(),
        Some(EventPayload::Abort { .. })
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approvals_through_the_api_with_a_mode_change_mid_task() {
    let server = Server::start(&json!({"turns": [
        {"tool_calls": [
            {"name": "read_file", "arguments": {"file_path": "a.txt"}},
            {"name": "read_file", "arguments": {"file_path": "b.txt"}}]},
        {"text": "done"},
        {"tool_calls": [{"name": "read_file", "arguments": {"file_path": "a.txt"}}]}
    ]}));
    let id = server.create(Some("always-ask")).await;
    let after = server.task(&id, "read both").await;
    let pending = server.wait_pending(&id, 1).await;
    assert_eq!(
        pending,
        [
            json!({"approval_id": "appr-1", "tool_call_id": "call_0", "name": "read_file",
                "arguments": "{\"file_path\":\"a.txt\"}", "origin": []})
        ]
    );
    let path = format!("/v1/sessions/{id}/approvals");
    let (s, v) = server
        .call(
            "POST",
            &format!("{path}/call_7"),
            Some(json!({"decision": "allow"})),
        )
        .await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    assert_eq!(v["error"]["code"], "unknown_approval");
    let (s, v) = server
        .call(
            "POST",
            &format!("{path}/call_0"),
            Some(json!({"decision": "maybe"})),
        )
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert_eq!(
        v["error"]["message"],
        "unknown decision \"maybe\" (use allow, allow_for_session or deny)"
    );
    let mode_path = format!("/v1/sessions/{id}/approval_mode");
    let (s, v) = server
        .call("PUT", &mode_path, Some(json!({"mode": "sometimes"})))
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert_eq!(
        v["error"]["message"],
        "unknown approval mode \"sometimes\" (use allow-all, deny-all, read-only or always-ask)"
    );
    // The mode changes for the next decision; call_0 stays pending.
    let (s, _) = server
        .call("PUT", &mode_path, Some(json!({"mode": "allow-all"})))
        .await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    assert_eq!(server.wait_pending(&id, 1).await.len(), 1);
    let (s, _) = server
        .call(
            "POST",
            &format!("{path}/call_0"),
            Some(json!({"decision": "deny"})),
        )
        .await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    let events = server.events_until_task_end(&id, after).await;
    let outputs: Vec<(String, String)> = events
        .iter()
        .filter(|(_, v)| payload_type(v) == "tool_call_output")
        .map(|(_, v)| {
            (
                v["payload"]["output"].as_str().unwrap().to_string(),
                v["payload"]["stop_reason"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        outputs[0],
        ("Tool call denied by user.".into(), "aborted".into())
    );
    assert_eq!(outputs[1].1, "completed");
    assert!(outputs[1].0.contains("beta"), "{outputs:?}");
    let decisions: Vec<(Value, Value)> = events
        .iter()
        .filter(|(_, v)| payload_type(v) == "approval_decision")
        .map(|(_, v)| {
            (
                v["payload"]["tool_call_id"].clone(),
                v["payload"]["decision"].clone(),
            )
        })
        .collect();
    assert_eq!(
        decisions,
        [
            (json!("call_0"), json!("deny")),
            (json!("call_1"), json!("allow"))
        ]
    );
    // Back to always-ask: a pending approval is denied when the task is aborted.
    server
        .call("PUT", &mode_path, Some(json!({"mode": "always-ask"})))
        .await;
    let after = server.task(&id, "again").await;
    server.wait_pending(&id, 1).await;
    server
        .call("POST", &format!("/v1/sessions/{id}/abort"), None)
        .await;
    let events = server.events_until_task_end(&id, after).await;
    assert_eq!(events.last().unwrap().1["payload"]["status"], "aborted");
    assert!(server.wait_pending(&id, 0).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_guards_every_route_but_healthz() {
    let dir = sandbox(&tool_then_text());
    let server = Server::start_in(dir, Some("s3cret"));
    let bare = reqwest::Client::new();
    let health = bare
        .get(format!("{}/healthz", server.base))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), StatusCode::OK);
    for auth in [
        None,
        Some("Bearer wrong"),
        Some("Bearer s3cre"),
        Some("s3cret"),
    ] {
        let mut r = bare.get(format!("{}/v1/sessions", server.base));
        if let Some(a) = auth {
            r = r.header("Authorization", a);
        }
        let (s, v) = server.send(r).await;
        assert_eq!(s, StatusCode::UNAUTHORIZED, "{auth:?}");
        assert_eq!(v["error"]["code"], "unauthorized");
        assert!(v["error"]["message"].is_string());
    }
    let (s, v) = server.call("GET", "/v1/sessions", None).await;
    assert_eq!(
        (s, v),
        (StatusCode::OK, json!({"sessions": [], "next_cursor": null}))
    );
    let (s, _) = server
        .send(bare.get(format!("{}/metrics", server.base)))
        .await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);

    // Without a token, only loopback addresses; a token variable must be set.
    let dir = sandbox(&tool_then_text());
    let script = dir.path().join("script.json");
    for (args, msg) in [
        (
            vec!["--listen", "0.0.0.0:0", "--no-auth"],
            "rookery: refusing --no-auth on 0.0.0.0:0: without a token the server listens on loopback addresses only\n",
        ),
        (
            vec![
                "--listen",
                "127.0.0.1:0",
                "--token-env",
                "ROOKERY_TEST_UNSET_VAR",
            ],
            "rookery: --token-env ROOKERY_TEST_UNSET_VAR: the environment variable ROOKERY_TEST_UNSET_VAR is not set or empty\n",
        ),
    ] {
        let mut all = vec!["serve", "--script", script.to_str().unwrap()];
        all.extend(args);
        let out = command(dir.path(), &all).output().unwrap();
        assert_eq!(out.status.code(), Some(2));
        assert_eq!(String::from_utf8_lossy(&out.stderr), msg);
        assert!(out.stdout.is_empty());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_json_errors() {
    let server = Server::start(&tool_then_text());
    let unknown = "session-2020-01-01-00-00-00-deadbeef";
    for (method, path) in [
        ("GET", format!("/v1/sessions/{unknown}")),
        ("DELETE", format!("/v1/sessions/{unknown}")),
        ("GET", format!("/v1/sessions/{unknown}/events")),
        ("POST", format!("/v1/sessions/{unknown}/abort")),
        ("GET", "/v1/sessions/..%2Fetc".to_string()),
    ] {
        let (s, v) = server.call(method, &path, None).await;
        assert_eq!(s, StatusCode::NOT_FOUND, "{method} {path}");
        assert_eq!(v["error"]["code"], "unknown_session", "{method} {path}");
    }
    let (s, v) = server
        .call(
            "POST",
            &format!("/v1/sessions/{unknown}/tasks"),
            Some(json!({"text": "x"})),
        )
        .await;
    assert_eq!(
        (s, v["error"]["message"].clone()),
        (
            StatusCode::NOT_FOUND,
            json!(format!("unknown session {unknown}"))
        )
    );
    let (s, v) = server.call("GET", "/v2/nothing", None).await;
    assert_eq!(
        (s, v["error"]["code"].clone()),
        (StatusCode::NOT_FOUND, json!("not_found"))
    );
    // A body over the limit is refused from its declared length, before it is read. Only the
    // head is sent: a client still writing a body the server will never read may see the
    // connection reset before it reads the 413.
    let (s, v) = oversized_create(&server).await;
    assert_eq!(s, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(v["error"]["code"], "payload_too_large");
    let (s, v) = server
        .send(
            server
                .req(reqwest::Method::POST, "/v1/sessions")
                .header("Content-Type", "application/json")
                .body("{\"workspace\": "),
        )
        .await;
    assert_eq!(
        (s, v["error"]["code"].clone()),
        (StatusCode::BAD_REQUEST, json!("bad_json"))
    );
    let (s, v) = server
        .call(
            "POST",
            "/v1/sessions",
            Some(json!({"workspace": "/no/such/dir"})),
        )
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert_eq!(
        v["error"],
        json!({"code": "invalid_workspace", "message": "workspace /no/such/dir does not exist or is not a directory"})
    );
    let (s, v) = server
        .call(
            "POST",
            "/v1/sessions",
            Some(json!({"workspace": server.ws(), "approval_mode": "yes"})),
        )
        .await;
    assert_eq!(
        (s, v["error"]["code"].clone()),
        (StatusCode::BAD_REQUEST, json!("invalid_request"))
    );
    let missing = server.dir.path().join("missing.yaml");
    let (s, v) = server
        .call(
            "POST",
            "/v1/sessions",
            Some(json!({"workspace": server.ws(), "config": missing})),
        )
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert_eq!(v["error"]["code"], "invalid_config");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("paths are not accepted"),
        "{v}"
    );
    // Close keeps the trace; the closed session is no longer served.
    let id = server.create(None).await;
    let (s, _) = server
        .call("DELETE", &format!("/v1/sessions/{id}"), None)
        .await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    let (s, v) = server
        .call("GET", &format!("/v1/sessions/{id}"), None)
        .await;
    assert_eq!(
        (s, v["error"]["code"].clone()),
        (StatusCode::NOT_FOUND, json!("session_closed"))
    );
    let records = rookery::trace::reader::read_trace(&server.trace(&id))
        .unwrap()
        .records;
    assert!(matches!(records[0].payload, Payload::SessionMeta(_)));
    let (_, list) = server.call("GET", "/v1/sessions", None).await;
    assert_eq!(list, json!({"sessions": [], "next_cursor": null}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sse_replays_from_last_event_id() {
    let server = Server::start(&tool_then_text());
    let id = server.create(None).await;
    let after = server.task(&id, "go").await;
    assert_eq!(after, 1);
    let all = server.events_until_task_end(&id, 0).await;
    assert_eq!(all[0].0, 1);
    assert_eq!(all[0].1["type"], "session_meta");
    assert_eq!(all[0].1["payload"]["session_id"], id.as_str());
    // Reconnect after event 7: 8.. again, identical.
    let again = server.events_until_task_end(&id, 7).await;
    assert_eq!(again.as_slice(), &all[7..]);
    // ?last_event_id= works for clients that cannot set headers.
    let resp = server
        .req(
            reqwest::Method::GET,
            &format!("/v1/sessions/{id}/events?last_event_id=9"),
        )
        .send()
        .await
        .unwrap();
    let mut stream = resp.bytes_stream().eventsource();
    let first = tokio::time::timeout(WAIT, stream.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(first.id, "10");
    assert_eq!(
        serde_json::from_str::<Value>(&first.data).unwrap(),
        all[9].1
    );
}

/// `POST /v1/sessions` declaring a 1 MiB + 10 byte body and sending none of it, on a raw
/// connection: the status and JSON body of the answer.
async fn oversized_create(server: &Server) -> (StatusCode, serde_json::Value) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let host = server.base.strip_prefix("http://").unwrap().to_string();
    let mut conn = tokio::net::TcpStream::connect(&host).await.unwrap();
    let auth = server
        .token
        .as_ref()
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    let head = format!(
        "POST /v1/sessions HTTP/1.1\r\nHost: {host}\r\n{auth}Content-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        1024 * 1024 + 10
    );
    conn.write_all(head.as_bytes()).await.unwrap();
    let mut got = Vec::new();
    tokio::time::timeout(
        std::time::Duration::from_secs(30),
        conn.read_to_end(&mut got),
    )
    .await
    .expect("the server answers an oversized body without waiting for it")
    .unwrap();
    let text = String::from_utf8_lossy(&got);
    let status: u16 = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("an HTTP status line: {text}"));
    let (_, body) = text.split_once("\r\n\r\n").expect("a head and a body");
    let json = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"));
    (StatusCode::from_u16(status).unwrap(), json)
}
