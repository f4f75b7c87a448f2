//! Edges of the `rookery serve` API, through the built binary on 127.0.0.1: requests racing a
//! `DELETE` get documented answers (never 500), `created_at` survives hibernation, a wake and a
//! restart, hibernated sessions are listed with the fields of resident ones and their SSE
//! clients are counted, malformed path parameters get the JSON error shape, `unknown_session`
//! repeats at most 100 characters of the id, any inline `model` section is refused as such, and
//! a task sent while a create hibernates its session is never accepted and then aborted.

use crate::common::serve as harness;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use eventsource_stream::Eventsource;
use futures::StreamExt;
use harness::*;
use reqwest::StatusCode;
use serde_json::{Value, json};

/// Turns enough for every task and steer of the race, each slow enough to be running when the
/// `DELETE` comes.
fn slow_script() -> Value {
    let turns: Vec<Value> = (0..2000)
        .map(|i| json!({"text": format!("turn {i}"), "delay_ms": 30}))
        .collect();
    json!({ "turns": turns })
}

/// One request of the race on session `id`, chosen by `i`: `(what, status, body)`.
async fn racing_call(server: Arc<Server>, id: String, i: usize) -> (String, StatusCode, Value) {
    let (method, route, body) = match i % 6 {
        0 => ("POST", "/tasks", Some(json!({"text": "more"}))),
        1 => ("POST", "/steer", Some(json!({"text": "also"}))),
        2 => ("POST", "/abort", None),
        3 => ("GET", "", None),
        4 => ("GET", "/approvals", None),
        _ => ("POST", "/compact", None),
    };
    let path = format!("/v1/sessions/{id}{route}");
    let (status, v) = server.call(method, &path, body).await;
    (format!("{method} {path}"), status, v)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn requests_racing_a_delete_get_documented_answers_never_500() {
    let server = Arc::new(Server::start(&slow_script()));
    let mut seen = BTreeSet::new();
    for _ in 0..30 {
        let id = server.create(None).await;
        server.task(&id, "first").await;
        let mut calls = Vec::new();
        for i in 0..24 {
            calls.push(tokio::spawn(racing_call(server.clone(), id.clone(), i)));
        }
        // Requests keep coming while the DELETE is in flight, and a little after.
        let delete = {
            let (srv, path) = (server.clone(), format!("/v1/sessions/{id}"));
            tokio::spawn(async move { srv.call("DELETE", &path, None).await })
        };
        let mut i = 0;
        let mut after_delete = 0;
        while after_delete < 3 {
            if delete.is_finished() {
                after_delete += 1;
            }
            let wave: Vec<_> = (0..12)
                .map(|k| tokio::spawn(racing_call(server.clone(), id.clone(), i + k)))
                .collect();
            i += 12;
            for call in futures::future::join_all(wave).await {
                calls.push(tokio::spawn(async move { call.unwrap() }));
            }
        }
        let (status, v) = delete.await.unwrap();
        assert_eq!(status, StatusCode::NO_CONTENT, "{v}");
        for call in futures::future::join_all(calls).await {
            let (what, status, v) = call.unwrap();
            let code = v["error"]["code"].as_str().unwrap_or("").to_string();
            assert_ne!(status, StatusCode::INTERNAL_SERVER_ERROR, "{what}: {v}");
            let documented = status.is_success()
                || [
                    "session_closed",
                    "session_busy",
                    "compacting",
                    "nothing_to_compact",
                ]
                .contains(&code.as_str());
            assert!(documented, "{what}: {status} {v}");
            if code == "session_closed" {
                let m = v["error"]["message"].as_str().unwrap();
                assert!(m.contains("/resume reopens it"), "{m}");
            }
            seen.insert((status.as_u16(), code));
        }
        let (status, v) = server
            .call(
                "POST",
                &format!("/v1/sessions/{id}/tasks"),
                Some(json!({"text": "after"})),
            )
            .await;
        assert_eq!(
            (status, v["error"]["code"].as_str()),
            (StatusCode::NOT_FOUND, Some("session_closed")),
            "{v}"
        );
    }
    assert!(
        seen.contains(&(404, "session_closed".to_string())),
        "{seen:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn created_at_survives_hibernation_wake_and_restart_and_the_list_has_one_shape() {
    let flags = ["--idle-hibernate", "0", "--max-resident", "1"];
    let server = Server::start_with(sandbox(&slow_script()), None, &flags);
    let a = server.create(None).await;
    let resident = server.wait_listed(&a, "idle").await;
    let created = resident["created_at"].as_str().unwrap().to_string();
    assert!(created.ends_with('Z'), "{created}");
    // The time the trace's session_meta records.
    let trace = server.trace(&a);
    let first = std::fs::read_to_string(&trace).unwrap();
    let meta: Value = serde_json::from_str(first.lines().next().unwrap()).unwrap();
    assert_eq!(meta["timestamp"], created.as_str());
    // A second session over --max-resident 1 hibernates the first.
    let b = server.create(None).await;
    let hibernated = server.wait_listed(&a, "hibernated").await;
    let keys = |v: &Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
    assert_eq!(keys(&hibernated), keys(&resident), "{hibernated}");
    for field in [
        "created_at",
        "trace_path",
        "workspace",
        "approval_mode",
        "error",
    ] {
        assert_eq!(hibernated[field], resident[field], "{field}");
    }
    // Woken by a request: the same creation time.
    let (s, woken) = server.call("GET", &format!("/v1/sessions/{a}"), None).await;
    assert_eq!(s, StatusCode::OK, "{woken}");
    assert_eq!(woken["status"], "idle");
    assert_eq!(woken["created_at"], created.as_str());
    server.wait_listed(&b, "hibernated").await;
    // A restarted server resumes it from its trace, with the time its first file records.
    let dir = server.kill9();
    let server = Server::start_with(dir, None, &flags);
    let (s, resumed) = server.call("GET", &format!("/v1/sessions/{a}"), None).await;
    assert_eq!(s, StatusCode::OK, "{resumed}");
    assert_eq!(resumed["created_at"], created.as_str());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sse_clients_of_a_hibernated_session_are_counted() {
    let flags = ["--idle-hibernate", "0", "--max-resident", "1"];
    let server = Server::start_with(sandbox(&slow_script()), None, &flags);
    let a = server.create(None).await;
    let resp = server
        .req(reqwest::Method::GET, &format!("/v1/sessions/{a}/events"))
        .header("Last-Event-ID", "0")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let mut stream = resp.bytes_stream().eventsource();
    // Connected once the replay (its session_meta) arrives.
    tokio::time::timeout(WAIT, stream.next())
        .await
        .expect("replay in time")
        .expect("stream open")
        .expect("valid SSE");
    assert_eq!(server.metric("rookery_sse_clients").await, 1);
    server.create(None).await;
    server.wait_listed(&a, "hibernated").await;
    assert_eq!(server.metric("rookery_sse_clients").await, 1);
    drop(stream);
    let deadline = Instant::now() + WAIT;
    while server.metric("rookery_sse_clients").await != 0 {
        assert!(Instant::now() < deadline, "the client never left the count");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn path_parameters_that_are_not_utf8_get_the_json_error_shape() {
    let server = Server::start(&slow_script());
    let id = server.create(None).await;
    for (method, path, body) in [
        ("GET", "/v1/sessions/%ff".to_string(), None),
        ("DELETE", "/v1/sessions/%ff".to_string(), None),
        (
            "POST",
            "/v1/sessions/%ff/tasks".to_string(),
            Some(json!({"text": "x"})),
        ),
        ("POST", "/v1/sessions/%ff/compact".to_string(), None),
        (
            "POST",
            format!("/v1/sessions/{id}/approvals/%C3%28"),
            Some(json!({"decision": "allow"})),
        ),
    ] {
        let (status, v) = server.call(method, &path, body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{method} {path}: {v}");
        assert_eq!(
            v["error"]["code"], "invalid_request",
            "{method} {path}: {v}"
        );
        let m = v["error"]["message"].as_str().unwrap();
        assert!(m.contains("not valid UTF-8"), "{m}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_session_repeats_at_most_100_characters_of_the_id() {
    let server = Server::start(&slow_script());
    let long = "a".repeat(60_000);
    let (status, v) = server
        .call("GET", &format!("/v1/sessions/{long}"), None)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{v}");
    assert_eq!(v["error"]["code"], "unknown_session");
    let m = v["error"]["message"].as_str().unwrap();
    assert_eq!(m, format!("unknown session {}…", "a".repeat(100)));
    let (_, v) = server.call("GET", "/v1/sessions/nope", None).await;
    assert_eq!(v["error"]["message"], "unknown session nope");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn any_inline_model_section_is_refused_as_such() {
    let server = Server::start(&slow_script());
    for model in [json!({}), json!({"provider": "openai"}), json!(null)] {
        let body = json!({"workspace": server.ws(), "config": {"model": model}});
        let (status, v) = server.call("POST", "/v1/sessions", Some(body)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{v}");
        assert_eq!(v["error"]["code"], "invalid_config");
        let m = v["error"]["message"].as_str().unwrap();
        assert!(m.contains("the model section is not accepted here"), "{m}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_accepted_while_a_create_hibernates_its_session_runs_to_its_end() {
    let flags = ["--idle-hibernate", "0", "--max-resident", "1"];
    let server = Arc::new(Server::start_with(sandbox(&slow_script()), None, &flags));
    let mut accepted = 0;
    for round in 0..60u64 {
        // At the cap, each create hibernates the least recently used quiet session: here `a`,
        // unless the task sent at the same moment has started on it.
        let a = server.create(None).await;
        let (s, t) = (server.clone(), server.clone());
        let route = format!("/v1/sessions/{a}/tasks");
        let create = tokio::spawn(async move { t.create(None).await });
        // The task comes 0 to 700 µs after the create, to meet the hibernation at every step.
        let lag = Duration::from_micros(100 * (round % 8));
        let task = tokio::spawn(async move {
            let until = Instant::now() + lag;
            while Instant::now() < until {
                std::hint::spin_loop();
            }
            s.call("POST", &route, Some(json!({"text": "go"}))).await
        });
        let (status, v) = task.await.unwrap();
        create.await.unwrap();
        if status != StatusCode::ACCEPTED {
            continue;
        }
        accepted += 1;
        // The accepted task ends on its own: never an `abort` in the trace.
        let trace = server.trace(&a);
        let deadline = Instant::now() + WAIT;
        let text = loop {
            let text = std::fs::read_to_string(&trace).unwrap_or_default();
            if text.contains("\"type\":\"task_end\"") {
                break text;
            }
            assert!(
                Instant::now() < deadline,
                "round {round}: no task_end in {text}"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        let types: Vec<String> = text
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .map(|r| r["type"].as_str().unwrap_or("").to_string())
            .collect();
        assert!(
            !types.iter().any(|t| t == "abort"),
            "round {round}: the task accepted with {v} was aborted: {types:?}"
        );
    }
    assert!(accepted > 0, "no task was accepted");
}
