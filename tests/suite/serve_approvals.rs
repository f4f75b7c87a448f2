//! End-to-end test of unambiguous approvals in `rookery serve`, driving the built binary: a
//! parent session and its background subagent both wait for approval of a `call_1`; the bare
//! tool call id is refused with 409 `ambiguous_approval` listing both, and each `approval_id`
//! decides exactly its own call (the child's read runs, the parent's command does not).
//!
//! The server gets its own temporary home, workspace and `$HOME`. Every wait is bounded.

use crate::common::serve as harness;

use std::time::{Duration, Instant};

use harness::*;
use reqwest::StatusCode;
use rookery::message::{EventPayload, ModelPayload};
use serde_json::{Value, json};

/// Waits until the pending approvals satisfy `ok`; returns them.
async fn pending_until(server: &Server, id: &str, ok: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let deadline = Instant::now() + WAIT;
    loop {
        let (_, v) = server
            .call("GET", &format!("/v1/sessions/{id}/approvals"), None)
            .await;
        let list = v["approvals"].as_array().unwrap().clone();
        if ok(&list) {
            return list;
        }
        assert!(
            Instant::now() < deadline,
            "approvals never settled: {list:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn with_call(list: &[Value], call: &str) -> Vec<Value> {
    list.iter()
        .filter(|a| a["tool_call_id"] == call)
        .cloned()
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn colliding_call_ids_of_parent_and_child_are_decided_by_approval_id() {
    let server = Server::start(&json!({
        "turns": [
            {"tool_calls": [{"name": "run_subagent", "arguments": {
                "description": "Lint in the background", "prompt": "lint the notes",
                "run_in_background": true}}]},
            {"tool_calls": [{"name": "exec_command", "arguments": {
                "description": "Write a marker", "cmd": "echo parent > parent.txt"}}]},
            {"text": "parent done"}
        ],
        "children": [{"when_prompt_contains": "lint", "turns": [
            {"tool_calls": [{"name": "read_file", "arguments": {"file_path": "a.txt"}}]},
            {"tool_calls": [{"name": "read_file", "arguments": {"file_path": "b.txt"}}]},
            {"text": "child done"}
        ]}]
    }));
    let id = server.create(Some("always-ask")).await;
    let after = server.task(&id, "start").await;
    let decide = |key: String, decision: &'static str| {
        let path = format!("/v1/sessions/{id}/approvals/{key}");
        let server = &server;
        async move {
            server
                .call("POST", &path, Some(json!({"decision": decision})))
                .await
        }
    };
    // The parent's run_subagent: the only call_0, so the bare id still works.
    pending_until(&server, &id, |l| l.len() == 1).await;
    assert_eq!(
        decide("call_0".into(), "allow").await.0,
        StatusCode::NO_CONTENT
    );
    // The child's call_0 and the parent's call_1 wait; the child's call_0 is unique.
    let list = pending_until(&server, &id, |l| l.len() == 2).await;
    let child_first = with_call(&list, "call_0");
    assert_eq!(child_first.len(), 1, "{list:?}");
    let child_id = child_first[0]["origin"][0].as_str().unwrap().to_string();
    assert_eq!(
        decide("call_0".into(), "allow").await.0,
        StatusCode::NO_CONTENT
    );
    // Now both wait on a call_1.
    let list = pending_until(&server, &id, |l| with_call(l, "call_1").len() == 2).await;
    let ones = with_call(&list, "call_1");
    let parent = ones
        .iter()
        .find(|a| a["origin"] == json!([]))
        .unwrap()
        .clone();
    let child = ones
        .iter()
        .find(|a| a["origin"] == json!([child_id]))
        .unwrap()
        .clone();
    assert_eq!(parent["name"], "exec_command");
    assert_eq!(child["name"], "read_file");
    assert_eq!(child["arguments"], "{\"file_path\":\"b.txt\"}");
    let (p_id, c_id) = (
        parent["approval_id"].as_str().unwrap().to_string(),
        child["approval_id"].as_str().unwrap().to_string(),
    );
    assert!(p_id.starts_with("appr-") && c_id.starts_with("appr-") && p_id != c_id);
    let (s, v) = decide("call_1".into(), "allow").await;
    assert_eq!(s, StatusCode::CONFLICT, "{v}");
    assert_eq!(v["error"]["code"], "ambiguous_approval");
    let mut listed: Vec<Value> = v["error"]["approvals"].as_array().unwrap().clone();
    listed.sort_by_key(|a| a["approval_id"].as_str().unwrap().to_string());
    let mut expected = vec![parent.clone(), child.clone()];
    expected.sort_by_key(|a| a["approval_id"].as_str().unwrap().to_string());
    assert_eq!(listed, expected);
    let message = v["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(&p_id) && message.contains(&c_id),
        "{message}"
    );
    // Nothing was decided by the ambiguous call.
    assert_eq!(
        with_call(&server.wait_pending(&id, 2).await, "call_1").len(),
        2
    );
    // The child's approval id allows exactly the child's read.
    assert_eq!(
        decide(c_id.clone(), "allow").await.0,
        StatusCode::NO_CONTENT
    );
    let left = pending_until(&server, &id, |l| with_call(l, "call_1").len() == 1).await;
    assert_eq!(with_call(&left, "call_1")[0]["approval_id"], p_id.as_str());
    assert!(!server.ws().join("parent.txt").exists());
    // An approval id decides once; then the parent's is denied by its own id.
    let (s, _) = decide(c_id.clone(), "allow").await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    assert_eq!(decide(p_id.clone(), "deny").await.0, StatusCode::NO_CONTENT);
    let events = server.events_until_task_end(&id, after).await;
    assert_eq!(events.last().unwrap().1["payload"]["status"], "completed");
    let parent_output = events
        .iter()
        .find(|(_, v)| {
            payload_type(v) == "tool_call_output"
                && v.get("origin").is_none()
                && v["payload"]["tool_call_id"] == "call_1"
        })
        .expect("the parent's call_1 output");
    assert_eq!(
        parent_output.1["payload"]["output"],
        "Tool call denied by user."
    );
    assert!(!server.ws().join("parent.txt").exists());
    // The child's trace: call_0 and call_1 allowed, call_1 read b.txt.
    let child_trace = settled_trace(&server.trace(&child_id)).await;
    let decisions: Vec<(String, String)> = child_trace
        .iter()
        .filter_map(|r| match r.as_event() {
            Some(EventPayload::ApprovalDecision {
                tool_call_id,
                decision,
                ..
            }) => Some((tool_call_id.clone(), format!("{decision:?}"))),
            _ => None,
        })
        .collect();
    assert_eq!(
        decisions,
        [
            ("call_0".to_string(), "Allow".to_string()),
            ("call_1".to_string(), "Allow".to_string())
        ]
    );
    let read_b = child_trace.iter().any(|r| {
        matches!(r.as_model(), Some(ModelPayload::ToolCallOutput { tool_call_id, output, .. })
            if tool_call_id == "call_1" && output.contains("beta"))
    });
    assert!(read_b, "the child's call_1 read b.txt");
}
