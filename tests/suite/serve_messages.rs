//! A conversation over HTTP, through the built binary on 127.0.0.1: `GET …/messages` pages a
//! session's conversation from its trace (prompts included, a subagent's messages tagged with
//! its origin), `GET /v1/sessions` pages and lists every recorded session after a restart
//! without waking any, SSE events carry `event:` names and the prompt, stream tokens open one
//! session's event stream only, and a deny's reason reaches the model.
//!
//! Each server gets its own temporary home, workspace and `$HOME`. Every wait is bounded.

use crate::common::serve as harness;

use std::time::{Duration, Instant};

use eventsource_stream::Eventsource;
use futures::StreamExt;
use harness::*;
use reqwest::StatusCode;
use serde_json::{Value, json};

/// Every message of session `id`, read `limit` at a time; also the number of pages.
async fn all_messages(server: &Server, id: &str, limit: usize) -> (Vec<Value>, usize) {
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let mut path = format!("/v1/sessions/{id}/messages?limit={limit}");
        if let Some(c) = &cursor {
            path.push_str(&format!("&cursor={c}"));
        }
        let (s, v) = server.call("GET", &path, None).await;
        assert_eq!(s, StatusCode::OK, "{v}");
        let page = v["messages"].as_array().unwrap();
        assert!(page.len() <= limit, "{v}");
        out.extend(page.iter().cloned());
        pages += 1;
        assert!(pages < 100, "paging never ends");
        match v["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => {
                assert!(v["next_cursor"].is_null(), "{v}");
                return (out, pages);
            }
        }
    }
}

/// `role:text` (with `@origin` for a subagent's) of the text messages.
fn texts(messages: &[Value]) -> Vec<String> {
    messages
        .iter()
        .filter(|m| m["payload"]["type"] == "text")
        .map(|m| {
            let mut s = format!(
                "{}:{}",
                m["payload"]["role"].as_str().unwrap(),
                m["payload"]["text"].as_str().unwrap()
            );
            if let Some(o) = m["origin"].as_array() {
                s.push_str(&format!("@{}", o.len()));
            }
            s
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_page_the_conversation_with_prompts_and_subagents() {
    let server = Server::start(&json!({
        "turns": [
            {"tool_calls": [{"name": "run_subagent", "arguments": {
                "description": "Lint", "prompt": "lint the notes"}}]},
            {"text": "parent done"},
            {"text": "second answer"}
        ],
        "children": [{"when_prompt_contains": "lint", "turns": [
            {"tool_calls": [{"name": "read_file", "arguments": {"file_path": "a.txt"}}]},
            {"text": "child done"}
        ]}]
    }));
    let id = server.create(Some("allow-all")).await;
    let after = server.task(&id, "first prompt").await;
    let events = server.events_until_task_end(&id, after).await;
    // The prompt is an event of the stream.
    assert!(
        events.iter().any(|(_, v)| v.get("origin").is_none()
            && v["payload"]["type"] == "text"
            && v["payload"]["role"] == "user"
            && v["payload"]["text"] == "first prompt"),
        "{events:#?}"
    );
    let after = server.task(&id, "second prompt").await;
    server.events_until_task_end(&id, after).await;

    let (messages, pages) = all_messages(&server, &id, 2).await;
    assert!(pages >= 4, "{pages} pages of {}", messages.len());
    assert_eq!(
        texts(&messages),
        [
            "user:first prompt",
            "user:lint the notes@1",
            "assistant:child done@1",
            "assistant:parent done",
            "user:second prompt",
            "assistant:second answer",
        ]
    );
    let child = messages.iter().find(|m| m["origin"].is_array()).unwrap();
    let child_id = child["origin"][0].as_str().unwrap();
    assert!(child_id != id && !child_id.is_empty());
    // The child's tool call and its output come tagged too, in order.
    let kinds: Vec<String> = messages
        .iter()
        .map(|m| {
            format!(
                "{}{}",
                m["payload"]["type"].as_str().unwrap(),
                if m["origin"].is_array() { "@" } else { "" }
            )
        })
        .collect();
    let pos = |k: &str| kinds.iter().position(|x| x == k).unwrap();
    assert!(pos("tool_call") < pos("tool_call@"), "{kinds:?}");
    assert!(pos("tool_call@") < pos("tool_call_output@"), "{kinds:?}");
    assert!(
        pos("tool_call_output@") < pos("tool_call_output"),
        "{kinds:?}"
    );
    // One page of everything is the same conversation.
    let (whole, pages) = all_messages(&server, &id, 1000).await;
    assert_eq!((whole.len(), pages), (messages.len(), 1));
    assert_eq!(whole, messages);

    // Bad limits and cursors are 400s.
    for q in ["limit=0", "limit=1001", "limit=ten", "limit=-3"] {
        let (s, v) = server
            .call("GET", &format!("/v1/sessions/{id}/messages?{q}"), None)
            .await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{q}: {v}");
        assert_eq!(v["error"]["code"], "invalid_request", "{v}");
    }
    let (_, first) = server
        .call("GET", &format!("/v1/sessions/{id}/messages?limit=1"), None)
        .await;
    let good = first["next_cursor"].as_str().unwrap().to_string();
    let other = server.create(None).await;
    for (session, cursor) in [
        (id.as_str(), "not-a-cursor".to_string()),
        (id.as_str(), format!("{good}x")),
        // A cursor of one session does not work for another.
        (other.as_str(), good.clone()),
    ] {
        let (s, v) = server
            .call(
                "GET",
                &format!("/v1/sessions/{session}/messages?cursor={cursor}"),
                None,
            )
            .await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{cursor}: {v}");
        assert_eq!(v["error"]["code"], "invalid_cursor", "{v}");
    }
    let (s, v) = server
        .call("GET", "/v1/sessions/no-such-session/messages", None)
        .await;
    assert_eq!(s, StatusCode::NOT_FOUND, "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sse_events_are_named_and_replay_the_prompt() {
    let server = Server::start(&json!({"turns": [
        {"tool_calls": [{"name": "read_file", "arguments": {"file_path": "a.txt"}}]},
        {"text": "done"}
    ]}));
    let id = server.create(Some("allow-all")).await;
    let after = server.task(&id, "read it").await;
    server.events_until_task_end(&id, after).await;
    // A replay from the start: every event named by its payload type.
    let resp = server
        .req(reqwest::Method::GET, &format!("/v1/sessions/{id}/events"))
        .header("Last-Event-ID", "0")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let mut stream = resp.bytes_stream().eventsource();
    let mut names = Vec::new();
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let ev = tokio::time::timeout_at(deadline, stream.next())
            .await
            .expect("events in time")
            .expect("stream open")
            .expect("valid SSE");
        let v: Value = serde_json::from_str(&ev.data).unwrap();
        let expected = v["payload"]["type"]
            .as_str()
            .unwrap_or(v["type"].as_str().unwrap());
        assert_eq!(ev.event, expected, "{v}");
        assert!(ev.id.parse::<u64>().is_ok(), "{}", ev.id);
        if v["payload"]["type"] == "text" && v["payload"]["role"] == "user" {
            assert_eq!(v["payload"]["text"], "read it");
        }
        names.push(ev.event.clone());
        if v["payload"]["type"] == "task_end" {
            break;
        }
    }
    assert_eq!(names[0], "session_meta", "{names:?}");
    for want in [
        "text",
        "tool_call",
        "tool_call_output",
        "request_begin",
        "task_end",
    ] {
        assert!(names.iter().any(|n| n == want), "{want} in {names:?}");
    }
    // The prompt comes before the first request.
    let prompt = names.iter().position(|n| n == "text").unwrap();
    let begin = names.iter().position(|n| n == "request_begin").unwrap();
    assert!(prompt < begin, "{names:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_server_lists_and_reads_sessions_without_waking_them() {
    let server = Server::start(&json!({"turns": [{"text": "answer one"}]}));
    let mut ids = Vec::new();
    for _ in 0..3 {
        ids.push(server.create(Some("read-only")).await);
    }
    ids.sort();
    let after = server.task(&ids[1], "remember me").await;
    server.events_until_task_end(&ids[1], after).await;
    settled_trace(&server.trace(&ids[1])).await;
    let dir = server.kill9();
    let server = Server::start_in(dir, None);

    // Paged, by id, every session of the home, none woken.
    let (s, v) = server.call("GET", "/v1/sessions?limit=2", None).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let page = v["sessions"].as_array().unwrap();
    assert_eq!(page.len(), 2, "{v}");
    let cursor = v["next_cursor"].as_str().expect("a next page").to_string();
    let (s, v2) = server
        .call(
            "GET",
            &format!("/v1/sessions?limit=2&cursor={cursor}"),
            None,
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{v2}");
    assert!(v2["next_cursor"].is_null(), "{v2}");
    let mut listed: Vec<Value> = page.clone();
    listed.extend(v2["sessions"].as_array().unwrap().iter().cloned());
    let listed_ids: Vec<&str> = listed
        .iter()
        .map(|e| e["session_id"].as_str().unwrap())
        .collect();
    assert_eq!(
        listed_ids,
        ids.iter().map(String::as_str).collect::<Vec<_>>()
    );
    let ws = std::fs::canonicalize(server.ws()).unwrap();
    for e in &listed {
        assert_eq!(e["status"], "hibernated", "{e}");
        assert_eq!(e["approval_mode"], "read-only", "{e}");
        assert_eq!(e["workspace"], ws.display().to_string(), "{e}");
        assert!(e["created_at"].as_str().unwrap().ends_with('Z'), "{e}");
        assert!(std::path::Path::new(e["trace_path"].as_str().unwrap()).is_file());
    }
    let (s, v) = server.call("GET", "/v1/sessions?cursor=bogus", None).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
    assert_eq!(v["error"]["code"], "invalid_cursor");
    let (s, _) = server.call("GET", "/v1/sessions?limit=0", None).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);

    // Its messages are read from the trace; the session stays unloaded.
    let (messages, _) = all_messages(&server, &ids[1], 10).await;
    assert_eq!(
        texts(&messages),
        ["user:remember me", "assistant:answer one"]
    );
    assert_eq!(server.metric("rookery_sessions{status=\"idle\"}").await, 0);
    assert_eq!(
        server.metric("rookery_sessions{status=\"running\"}").await,
        0
    );
    let (_, v) = server.call("GET", "/v1/sessions", None).await;
    assert!(
        v["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["status"] == "hibernated"),
        "{v}"
    );
    // A request that needs the session wakes it as before.
    assert_eq!(server.status_of(&ids[1]).await, "idle");
    assert_eq!(server.metric("rookery_sessions{status=\"idle\"}").await, 1);
}

/// `GET` of `path` with no bearer token.
async fn anonymous(server: &Server, path: &str) -> StatusCode {
    tokio::time::timeout(
        WAIT,
        server.client.get(format!("{}{path}", server.base)).send(),
    )
    .await
    .expect("response in time")
    .expect("request")
    .status()
}

async fn stream_token(server: &Server, id: &str) -> String {
    let (s, v) = server
        .call("POST", &format!("/v1/sessions/{id}/stream_token"), None)
        .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert!(v["expires_in"].as_u64().unwrap() >= 1, "{v}");
    v["stream_token"].as_str().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_token_opens_its_sessions_events_only_until_it_expires() {
    const TTL_MS: u64 = 4000;
    let ttl = TTL_MS.to_string();
    // With the access log on: it must not print a token.
    let server = Server::start_env(
        sandbox(&json!({"turns": [{"text": "hi"}]})),
        None,
        &["--stream-token-ttl-ms", &ttl],
        None,
        &[("RUST_LOG", "info")],
    );
    let a = server.create(None).await;
    let b = server.create(None).await;
    // Issuing one needs the bearer token.
    let s = server
        .client
        .post(format!("{}/v1/sessions/{a}/stream_token", server.base))
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(s, StatusCode::UNAUTHORIZED);

    let token = stream_token(&server, &a).await;
    assert!(!token.contains(server.token.as_deref().unwrap()));
    // Its session's events, with no bearer token: a live stream that gets the next task's.
    let resp = server
        .client
        .get(format!(
            "{}/v1/sessions/{a}/events?stream_token={token}",
            server.base
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let mut stream = resp.bytes_stream().eventsource();
    server.task(&a, "hello").await;
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let ev = tokio::time::timeout_at(deadline, stream.next())
            .await
            .expect("events in time")
            .expect("stream open")
            .expect("valid SSE");
        if ev.event == "task_end" {
            break;
        }
    }
    // Another session, another route, a forged token, no token: 401.
    let token = stream_token(&server, &a).await;
    for path in [
        format!("/v1/sessions/{b}/events?stream_token={token}"),
        format!("/v1/sessions/{a}?stream_token={token}"),
        format!("/v1/sessions/{a}/messages?stream_token={token}"),
        format!("/v1/sessions?stream_token={token}"),
        format!("/v1/sessions/{a}/events?stream_token=st_{}", "0".repeat(64)),
        format!("/v1/sessions/{a}/events?stream_token={token}x"),
        format!("/v1/sessions/{a}/events"),
    ] {
        assert_eq!(
            anonymous(&server, &path).await,
            StatusCode::UNAUTHORIZED,
            "{path}"
        );
    }
    let (s, v) = server
        .send(
            server
                .client
                .post(format!(
                    "{}/v1/sessions/{a}/tasks?stream_token={token}",
                    server.base
                ))
                .json(&json!({"text": "no"})),
        )
        .await;
    assert_eq!(s, StatusCode::UNAUTHORIZED, "{v}");
    assert_eq!(v["error"]["code"], "unauthorized");
    // An unknown session gets no token.
    let (s, _) = server
        .call("POST", "/v1/sessions/no-such-session/stream_token", None)
        .await;
    assert_eq!(s, StatusCode::NOT_FOUND);

    // Once expired it opens nothing. Issued now, it works at first, then stops.
    let issued = Instant::now();
    let token = stream_token(&server, &b).await;
    let path = format!("/v1/sessions/{b}/events?stream_token={token}");
    let first = server
        .client
        .get(format!("{}{path}", server.base))
        .send()
        .await
        .unwrap()
        .status();
    assert!(
        first == StatusCode::OK || issued.elapsed() >= Duration::from_millis(TTL_MS),
        "{first}"
    );
    let deadline = Instant::now() + WAIT;
    loop {
        let s = anonymous(&server, &path).await;
        if s == StatusCode::UNAUTHORIZED {
            break;
        }
        assert_eq!(s, StatusCode::OK);
        assert!(Instant::now() < deadline, "the token never expired");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(issued.elapsed() >= Duration::from_millis(TTL_MS));
    // No token is ever logged, though every request is.
    let log = server.stderr();
    assert!(log.contains(&format!("/v1/sessions/{b}/events")), "{log}");
    assert!(!log.contains("stream_token="), "{log}");
    assert!(!log.contains(&token), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deny_reason_reaches_the_model() {
    let server = Server::start(&json!({"turns": [
        {"tool_calls": [{"name": "exec_command", "arguments": {
            "description": "Remove", "cmd": "rm a.txt"}}]},
        // The model's next request has the denied output: it quotes the reason back.
        {"tool_calls": [{"name": "read_file", "arguments": {
            "file_path": "{{output:-1:Reason: (.+)}}"}}]},
        {"text": "ok"}
    ]}));
    let id = server.create(Some("read-only")).await;
    let after = server.task(&id, "clean up").await;
    let pending = server.wait_pending(&id, 1).await;
    let key = pending[0]["approval_id"].as_str().unwrap().to_string();
    let path = format!("/v1/sessions/{id}/approvals/{key}");
    // Too long, or with an allow: refused, and the approval still waits.
    let (s, v) = server
        .call(
            "POST",
            &path,
            Some(json!({"decision": "deny", "reason": "x".repeat(2001)})),
        )
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("2000"),
        "{v}"
    );
    let (s, v) = server
        .call(
            "POST",
            &path,
            Some(json!({"decision": "allow", "reason": "fine"})),
        )
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
    assert_eq!(server.wait_pending(&id, 1).await.len(), 1);
    let (s, v) = server
        .call(
            "POST",
            &path,
            Some(json!({"decision": "deny", "reason": "keep-the-notes.txt"})),
        )
        .await;
    assert_eq!(s, StatusCode::NO_CONTENT, "{v}");
    let events = server.events_until_task_end(&id, after).await;
    let output = events
        .iter()
        .find(|(_, v)| {
            v["payload"]["type"] == "tool_call_output" && v["payload"]["tool_call_id"] == "call_0"
        })
        .expect("the denied call's output");
    assert_eq!(
        output.1["payload"]["output"],
        "Tool call denied by user. Reason: keep-the-notes.txt"
    );
    let decision = events
        .iter()
        .find(|(_, v)| {
            v["payload"]["type"] == "approval_decision" && v["payload"]["tool_call_id"] == "call_0"
        })
        .expect("the decision");
    assert_eq!(decision.1["payload"]["decision"], "deny");
    assert_eq!(decision.1["payload"]["reason"], "keep-the-notes.txt");
    // The next request saw it: the model quoted it back.
    let quoted = events
        .iter()
        .find(|(_, v)| {
            v["payload"]["type"] == "tool_call" && v["payload"]["tool_call_id"] == "call_1"
        })
        .expect("the second call");
    assert_eq!(
        quoted.1["payload"]["arguments"],
        "{\"file_path\":\"keep-the-notes.txt\"}"
    );
    assert!(server.ws().join("a.txt").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_trace_route_downloads_the_whole_trace_as_recorded() {
    let server = Server::start(&json!({
        "turns": [
            {"tool_calls": [{"name": "read_file", "arguments": {"file_path": "missing.txt"}}]},
            {"text": "first answer"},
            {"text": "second answer"}
        ]
    }));
    let id = server.create(Some("allow-all")).await;
    let after = server.task(&id, "first prompt").await;
    server.events_until_task_end(&id, after).await;
    let after = server.task(&id, "second prompt").await;
    server.events_until_task_end(&id, after).await;

    let resp = server
        .req(reqwest::Method::GET, &format!("/v1/sessions/{id}/trace"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let headers = resp.headers().clone();
    assert_eq!(headers["content-type"], "application/x-ndjson");
    assert_eq!(
        headers["content-disposition"],
        format!("attachment; filename=\"{id}.jsonl\"").as_str()
    );
    let body = resp.bytes().await.unwrap();
    // Byte for byte the file the session writes (flushed before the download).
    let on_disk = std::fs::read(server.trace(&id)).unwrap();
    assert_eq!(body.as_ref(), on_disk.as_slice());
    let records: Vec<Value> = body
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).expect("one JSON record a line"))
        .collect();
    assert_eq!(records[0]["type"], "session_meta");
    // Events are in it, not only the conversation: both tasks' ends.
    let ends = records
        .iter()
        .filter(|r| r["payload"]["type"] == "task_end")
        .count();
    assert_eq!(ends, 2, "{records:#?}");

    // An unknown session is the usual 404, with the usual JSON error.
    let (s, v) = server
        .call("GET", "/v1/sessions/no-such-session/trace", None)
        .await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    assert_eq!(v["error"]["code"], "unknown_session", "{v}");
}
