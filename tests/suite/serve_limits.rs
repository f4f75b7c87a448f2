//! End-to-end tests of the limits of `rookery serve`, driving the built binary on 127.0.0.1:
//! `--max-sessions` (503 `too_many_sessions`, create and resume alike), the deadline of a
//! request body (408, the connection closed), and a server short of file descriptors (a warning
//! at start, 503 `session_start_failed` with the reason and no panic text, then recovery).
//!
//! Each server gets its own temporary home, workspace and `$HOME`. Every wait is bounded.

use crate::common::serve as harness;

use std::io::{Read, Write};

use harness::*;
use reqwest::StatusCode;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_session_cap_is_answered_with_503() {
    let server = Server::start_with(sandbox(&tool_then_text()), None, &["--max-sessions", "2"]);
    let a = server.create(None).await;
    let b = server.create(None).await;
    let body = json!({"workspace": server.ws()});
    let (s, v) = server
        .call("POST", "/v1/sessions", Some(body.clone()))
        .await;
    assert_eq!(s, StatusCode::SERVICE_UNAVAILABLE, "{v}");
    assert_eq!(v["error"]["code"], "too_many_sessions");
    let message = v["error"]["message"].as_str().unwrap();
    assert!(message.contains("limit of 2 sessions"), "{message}");
    // Closing one frees its place; a resume needs a place too.
    let (s, _) = server
        .call("DELETE", &format!("/v1/sessions/{a}"), None)
        .await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    let c = server.create(None).await;
    let (s, v) = server
        .call("POST", &format!("/v1/sessions/{a}/resume"), None)
        .await;
    assert_eq!(
        (s, v["error"]["code"].clone()),
        (StatusCode::SERVICE_UNAVAILABLE, json!("too_many_sessions"))
    );
    server
        .call("DELETE", &format!("/v1/sessions/{c}"), None)
        .await;
    let (s, v) = server
        .call("POST", &format!("/v1/sessions/{a}/resume"), None)
        .await;
    assert_eq!((s, v["resumed"].clone()), (StatusCode::OK, json!(true)));
    assert_eq!(server.status_of(&b).await, "idle");
}

#[test]
fn a_body_that_does_not_arrive_in_time_gets_408() {
    let server = Server::start_with(
        sandbox(&tool_then_text()),
        None,
        &["--body-timeout-ms", "300"],
    );
    let addr = server.base.strip_prefix("http://").unwrap().to_string();
    let token = server.token.clone().unwrap();
    let mut conn = std::net::TcpStream::connect(&addr).unwrap();
    conn.set_read_timeout(Some(WAIT)).unwrap();
    let head = format!(
        "POST /v1/sessions HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"workspace\": "
    );
    conn.write_all(head.as_bytes()).unwrap();
    // The rest of the body never comes: the server answers 408 and closes the connection.
    let mut answer = Vec::new();
    conn.read_to_end(&mut answer)
        .expect("the server closes in time");
    let text = String::from_utf8_lossy(&answer);
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    assert!(text.contains("\"code\":\"request_timeout\""), "{text}");
    // Nothing was created.
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (s, v) = rt.block_on(server.call("GET", "/v1/sessions", None));
    assert_eq!(
        (s, v),
        (StatusCode::OK, json!({"sessions": [], "next_cursor": null}))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_short_of_descriptors_warns_and_answers_503() {
    let server = Server::start_limited(sandbox(&tool_then_text()), None, &[], Some(64));
    let stderr = server.stderr();
    assert!(
        stderr.contains("the descriptor limit (64) cannot hold --max-sessions 1000"),
        "{stderr}"
    );
    // One keep-alive connection (a new one could not be accepted once descriptors run out).
    let body = json!({"workspace": server.ws()});
    let mut created = Vec::new();
    let failure = loop {
        let (s, v) = server
            .call("POST", "/v1/sessions", Some(body.clone()))
            .await;
        if s != StatusCode::CREATED {
            break (s, v);
        }
        created.push(v["session_id"].as_str().unwrap().to_string());
        assert!(created.len() < 64, "the limit never bit");
    };
    let (s, v) = failure;
    assert_eq!(s, StatusCode::SERVICE_UNAVAILABLE, "{v}");
    assert_eq!(v["error"]["code"], "session_start_failed");
    let message = v["error"]["message"].as_str().unwrap();
    assert!(message.contains("Too many open files"), "{message}");
    assert!(!message.to_lowercase().contains("panic"), "{message}");
    // Closing sessions gives the descriptors back; the server goes on.
    for id in created.iter().take(4) {
        let (s, _) = server
            .call("DELETE", &format!("/v1/sessions/{id}"), None)
            .await;
        assert_eq!(s, StatusCode::NO_CONTENT);
    }
    let id = server.create(None).await;
    let after = server.task(&id, "go").await;
    let events = server.events_until_task_end(&id, after).await;
    assert_eq!(events.last().unwrap().1["payload"]["status"], "completed");
    assert!(!server.stderr().contains("panicked"), "{}", server.stderr());
}

#[test]
fn a_huge_content_length_is_refused_with_413_at_once() {
    let server = Server::start(&tool_then_text());
    let addr = server.base.strip_prefix("http://").unwrap().to_string();
    let token = server.token.clone().unwrap();
    let ask = |auth: &str| {
        let mut conn = std::net::TcpStream::connect(&addr).unwrap();
        conn.set_read_timeout(Some(WAIT)).unwrap();
        let head = format!(
            "POST /v1/sessions HTTP/1.1\r\nHost: {addr}\r\n{auth}\
             Content-Type: application/json\r\nContent-Length: 99999999999\r\n\r\n{{"
        );
        conn.write_all(head.as_bytes()).unwrap();
        // Only the headers and one byte were sent: the answer must not wait for the rest.
        let started = std::time::Instant::now();
        let mut answer = [0u8; 4096];
        let n = conn.read(&mut answer).expect("an answer before the body");
        (
            started.elapsed(),
            String::from_utf8_lossy(&answer[..n]).into_owned(),
        )
    };
    // The auth check comes first.
    let (_, text) = ask("");
    assert!(text.starts_with("HTTP/1.1 401"), "{text}");
    let (took, text) = ask(&format!("Authorization: Bearer {token}\r\n"));
    assert!(text.starts_with("HTTP/1.1 413"), "{text}");
    assert!(text.contains("\"code\":\"payload_too_large\""), "{text}");
    assert!(
        took < std::time::Duration::from_secs(1),
        "answered after {took:?}"
    );
}

/// Events `(id, message)` after `after` up to and including id `until`.
async fn events_through(server: &Server, id: &str, after: u64, until: u64) -> Vec<(u64, String)> {
    use eventsource_stream::Eventsource;
    use futures::StreamExt;
    let resp = server
        .req(reqwest::Method::GET, &format!("/v1/sessions/{id}/events"))
        .header("Last-Event-ID", after.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let mut stream = resp.bytes_stream().eventsource();
    let mut out = Vec::new();
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let ev = tokio::time::timeout_at(deadline, stream.next())
            .await
            .expect("the replay in time")
            .expect("stream open")
            .expect("valid SSE");
        let seq: u64 = ev.id.parse().unwrap();
        out.push((seq, ev.data));
        if seq >= until {
            return out;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_replay_ring_is_bounded_by_bytes_and_older_events_come_from_the_trace() {
    let a = "A".repeat(6000);
    let b = "B".repeat(6000);
    let script = json!({"turns": [{"text": a}, {"text": b}]});
    let server = Server::start_with(sandbox(&script), None, &["--sse-ring-bytes", "16384"]);
    let id = server.create(None).await;
    let mut live = Vec::new();
    for text in ["one", "two"] {
        let after = server.task(&id, text).await;
        live.extend(server.events_until_task_end(&id, after).await);
    }
    let last = live.last().unwrap().0;
    // Everything from the start, long after the first task's messages left the 16 KiB ring.
    let replay = events_through(&server, &id, 0, last).await;
    let ids: Vec<u64> = replay.iter().map(|(s, _)| *s).collect();
    assert!(
        ids.windows(2).all(|w| w[0] < w[1]),
        "in order, once: {ids:?}"
    );
    assert_eq!(ids[0], 1, "the session_meta, from the trace");
    let replayed: std::collections::HashMap<u64, &String> =
        replay.iter().map(|(s, j)| (*s, j)).collect();
    let records = settled_trace(&server.trace(&id)).await;
    let recorded: std::collections::HashSet<String> = records.iter().map(|r| r.to_json()).collect();
    let mut found_old_text = false;
    for (seq, v) in &live {
        let json = v.to_string();
        let partial = payload_type(v).starts_with("partial_");
        match replayed.get(seq) {
            // Whatever is replayed is what was streamed under that id.
            Some(j) => assert_eq!(
                serde_json::from_str::<serde_json::Value>(j).unwrap(),
                *v,
                "event {seq}"
            ),
            // Only what was never recorded may be missing: the first task's partials.
            None => assert!(partial, "event {seq} is missing from the replay: {json}"),
        }
        if v["payload"]["type"] == "text" && v["payload"]["text"] == a.as_str() {
            assert!(replayed.contains_key(seq), "the first answer, under its id");
            assert!(recorded.iter().any(|r| r.contains(&a)));
            found_old_text = true;
        }
    }
    assert!(found_old_text, "the first answer was streamed");
    // The ring kept at most 16 KiB: the first task's 6 kB delta is gone from it.
    let first_delta = live
        .iter()
        .find(|(_, v)| {
            // The scrubber may hold back the last few bytes (when a known secret, such as
            // the bearer token, begins with "A") and send them as a second delta.
            v["payload"]["type"] == "partial_text"
                && v["payload"]["text"]
                    .as_str()
                    .is_some_and(|t| t.len() > 5000 && t.bytes().all(|c| c == b'A'))
        })
        .map(|(s, _)| *s)
        .expect("the first answer was streamed in a delta");
    assert!(
        !replayed.contains_key(&first_delta),
        "a partial is never replayed once gone"
    );
}
