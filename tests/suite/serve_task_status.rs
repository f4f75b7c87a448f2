//! A served session shows how its last task ended (`last_task`), and `serve` logs each request
//! and each task end (a `warn` for a failed one), through the binary at `RUST_LOG=info`.

use crate::common::serve as harness;

use harness::{Server, WAIT, sandbox};
use serde_json::{Value, json};
use std::time::Instant;

/// The session's view once its `last_task` is set (polled until [`WAIT`]).
async fn ended(server: &Server, id: &str, status: &str) -> Value {
    let deadline = Instant::now() + WAIT;
    loop {
        let (_, v) = server
            .call("GET", &format!("/v1/sessions/{id}"), None)
            .await;
        if v["last_task"]["status"] == status {
            return v;
        }
        assert!(Instant::now() < deadline, "no {status} last_task: {v}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_task_shows_in_the_session_and_in_the_log() {
    let dir = sandbox(&json!({"turns": [{"error": "auth"}, {"text": "fine"}]}));
    let server = Server::start_env(dir, None, &[], None, &[("RUST_LOG", "info")]);
    let id = server.create(None).await;
    let (_, v) = server
        .call("GET", &format!("/v1/sessions/{id}"), None)
        .await;
    assert_eq!(v["last_task"], Value::Null, "{v}");

    let after = server.task(&id, "first").await;
    server.events_until_task_end(&id, after).await;
    let v = ended(&server, &id, "failed").await;
    assert_eq!(v["last_task"]["error"]["code"], "auth", "{v}");
    assert_eq!(
        v["last_task"]["error"]["message"], "llm request error: scripted auth error",
        "{v}"
    );
    let (_, list) = server.call("GET", "/v1/sessions", None).await;
    let listed = list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["session_id"] == id.as_str())
        .cloned()
        .unwrap();
    assert_eq!(listed["last_task"], v["last_task"], "{list}");

    let after = server.task(&id, "second").await;
    server.events_until_task_end(&id, after).await;
    let v = ended(&server, &id, "completed").await;
    assert_eq!(v["last_task"]["error"], Value::Null, "{v}");

    let log = server.stderr();
    let lines: Vec<&str> = log.lines().collect();
    let has = |level: &str, words: &[&str]| {
        lines
            .iter()
            .any(|l| l.contains(level) && words.iter().all(|w| l.contains(w)))
    };
    assert!(
        has(
            "INFO",
            &[
                "request",
                "method=POST",
                &format!("path=/v1/sessions/{id}/tasks"),
                "status=202",
                "duration_ms="
            ]
        ),
        "{log}"
    );
    assert!(
        has(
            "WARN",
            &[
                "task ended",
                &format!("session={id}"),
                "status=failed",
                "code=auth"
            ]
        ),
        "{log}"
    );
    assert!(
        has(
            "INFO",
            &["task ended", &format!("session={id}"), "status=completed"]
        ),
        "{log}"
    );
    // No token reaches the log.
    assert!(!log.contains(server.token.as_deref().unwrap()), "{log}");
}
