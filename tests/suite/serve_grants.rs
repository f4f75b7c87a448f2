//! Grants for the session in `rookery serve`, through the built binary on 127.0.0.1: an
//! approval answered `allow_for_session` to `git status` grants `Bash(git status:*)`, so a later
//! `git status --short` runs without asking while `git push` and the compound
//! `git status && rm x` are asked; the grant is listed, kept across a restarted server (read
//! back from the trace), and once revoked (`DELETE`, recorded) the next call is asked again.

use crate::common::serve as harness;

use std::time::{Duration, Instant};

use harness::*;
use reqwest::StatusCode;
use serde_json::{Value, json};

fn exec(cmd: &str) -> Value {
    json!({"tool_calls": [{"name": "exec_command", "arguments": {
        "description": "Run it", "cmd": cmd}}]})
}

/// Waits for a pending approval of `call`; returns it.
async fn pending_call(server: &Server, id: &str, call: &str) -> Value {
    let deadline = Instant::now() + WAIT;
    loop {
        let (_, v) = server
            .call("GET", &format!("/v1/sessions/{id}/approvals"), None)
            .await;
        let list = v["approvals"].as_array().unwrap().clone();
        if let Some(a) = list.iter().find(|a| a["tool_call_id"] == call) {
            assert_eq!(list.len(), 1, "{list:?}");
            return a.clone();
        }
        assert!(
            !list.iter().any(|a| a["tool_call_id"] != call),
            "another call was asked: {list:?}"
        );
        assert!(Instant::now() < deadline, "{call} never asked: {list:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn answer(server: &Server, id: &str, call: &str, decision: &str) {
    let (s, v) = server
        .call(
            "POST",
            &format!("/v1/sessions/{id}/approvals/{call}"),
            Some(json!({ "decision": decision })),
        )
        .await;
    assert_eq!(s, StatusCode::NO_CONTENT, "{v}");
}

async fn grants(server: &Server, id: &str) -> Vec<Value> {
    let (s, v) = server
        .call("GET", &format!("/v1/sessions/{id}/grants"), None)
        .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    v["grants"].as_array().unwrap().clone()
}

/// The event payloads of the session's trace, once it ends with a `task_end`.
async fn events(server: &Server, id: &str) -> Vec<Value> {
    settled_trace(&server.trace(id))
        .await
        .iter()
        .map(|r| serde_json::to_value(r).unwrap()["payload"].clone())
        .collect()
}

fn decision_of<'a>(events: &'a [Value], call: &str) -> &'a Value {
    events
        .iter()
        .find(|p| p["type"] == "approval_decision" && p["tool_call_id"] == call)
        .unwrap_or_else(|| panic!("no decision for {call}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_allows_its_rule_only_survives_a_restart_and_is_revocable() {
    let server = Server::start(&json!({"turns": [
        exec("git status"),
        exec("git status --short"),
        exec("git push"),
        exec("git status && rm x"),
        {"text": "one"},
        exec("git status -s"),
        {"text": "two"},
        exec("git status"),
        {"text": "three"}
    ]}));
    std::fs::write(server.ws().join("x"), "keep").unwrap();
    let id = server.create(Some("always-ask")).await;
    server.task(&id, "one").await;
    let first = pending_call(&server, &id, "call_0").await;
    assert!(first["arguments"].as_str().unwrap().contains("git status"));
    answer(&server, &id, "call_0", "allow_for_session").await;
    // `git status --short` (call_1) is not asked; `git push` is.
    let push = pending_call(&server, &id, "call_2").await;
    assert!(push["arguments"].as_str().unwrap().contains("git push"));
    answer(&server, &id, "call_2", "deny").await;
    pending_call(&server, &id, "call_3").await;
    answer(&server, &id, "call_3", "deny").await;
    let ev = events(&server, &id).await;
    assert!(server.ws().join("x").exists());
    assert_eq!(decision_of(&ev, "call_0")["decision"], "allow");
    let granted: Vec<&Value> = ev
        .iter()
        .filter(|p| p["type"] == "approval_grant")
        .collect();
    assert_eq!(granted.len(), 1, "{granted:?}");
    assert_eq!(granted[0]["rule"], "Bash(git status:*)");
    assert_eq!(granted[0]["tool_call_id"], "call_0");
    let by_grant = decision_of(&ev, "call_1");
    assert_eq!(
        (
            &by_grant["decision"],
            &by_grant["source"],
            &by_grant["reason"]
        ),
        (
            &json!("allow"),
            &json!("grant"),
            &json!("Bash(git status:*)")
        )
    );
    assert_eq!(decision_of(&ev, "call_3")["decision"], "deny");
    let listed = grants(&server, &id).await;
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["rule"], "Bash(git status:*)");
    assert_eq!(listed[0]["grant_id"], granted[0]["grant_id"]);
    assert!(!listed[0]["created_at"].as_str().unwrap().is_empty());

    // A restarted server on the same home resumes the session with its grant.
    let server = Server::start_in(server.kill9(), None);
    assert_eq!(grants(&server, &id).await, listed);
    let after = server.task(&id, "two").await;
    server.events_until_task_end(&id, after).await;
    let ev = events(&server, &id).await;
    assert_eq!(decision_of(&ev, "call_4")["source"], "grant");

    // Revoked: recorded, gone from the list, and the next call is asked again.
    let grant_id = listed[0]["grant_id"].as_str().unwrap();
    let path = format!("/v1/sessions/{id}/grants/{grant_id}");
    assert_eq!(
        server.call("DELETE", &path, None).await.0,
        StatusCode::NO_CONTENT
    );
    let (s, v) = server.call("DELETE", &path, None).await;
    assert_eq!(
        (s, &v["error"]["code"]),
        (StatusCode::NOT_FOUND, &json!("unknown_grant"))
    );
    assert!(grants(&server, &id).await.is_empty());
    let after = server.task(&id, "three").await;
    pending_call(&server, &id, "call_5").await;
    answer(&server, &id, "call_5", "deny").await;
    server.events_until_task_end(&id, after).await;
    let ev = events(&server, &id).await;
    assert!(
        ev.iter()
            .any(|p| p["type"] == "approval_grant_revoked" && p["grant_id"] == grant_id),
        "revocation not recorded"
    );
    assert_eq!(decision_of(&ev, "call_5")["decision"], "deny");
}
