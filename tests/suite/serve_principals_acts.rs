//! Many users on one `rookery serve`, continued: the trace records who decided each approval and
//! who started, steered, aborted or deleted a session; `max_running_tasks` refuses one more
//! running task; a recorded workspace outside the roots is never resumed. The auth file and the
//! callers are `serve_principals.rs`'s.

use crate::common::serve as harness;

use harness::*;
use reqwest::StatusCode;
use serde_json::{Value, json};

use super::serve_principals::{
    ALICE, BOB, ROOT, auth_file, call_as, create_as, start, wait_status,
};

fn exec_script() -> Value {
    json!({"turns": [
        {"tool_calls": [{"name": "exec_command",
                         "arguments": {"cmd": "echo ran > ran.txt", "description": "Mark it"}}]},
        {"text": "done"}
    ]})
}

/// Polls the pending approvals of `id` as `token` until there is one; returns its id.
async fn wait_approval(s: &Server, token: &str, id: &str) -> String {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let (_, v) = call_as(
            s,
            token,
            "GET",
            &format!("/v1/sessions/{id}/approvals"),
            None,
        )
        .await;
        if let Some(a) = v["approvals"].as_array().and_then(|l| l.first()) {
            return a["approval_id"].as_str().unwrap().to_string();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no approval for {id}: {v}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_trace_records_who_decided_and_who_acted() {
    let dir = sandbox(&exec_script());
    let auth = auth_file(dir.path(), "", "", "");
    let s = start(dir, &auth);
    let ws = s.ws();
    let a = create_as(&s, ALICE, &ws).await;
    let (status, v) = call_as(
        &s,
        ALICE,
        "POST",
        &format!("/v1/sessions/{a}/tasks"),
        Some(json!({"text": "mark it"})),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{v}");
    let approval = wait_approval(&s, ALICE, &a).await;
    let (status, _) = call_as(
        &s,
        ALICE,
        "POST",
        &format!("/v1/sessions/{a}/approvals/{approval}"),
        Some(json!({"decision": "allow"})),
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    wait_status(&s, ALICE, &a, "idle").await;
    assert!(ws.join("ran.txt").exists(), "the allowed call ran");
    let metrics = s
        .client
        .get(format!("{}/metrics", s.base))
        .bearer_auth(ROOT)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for series in [
        "rookery_principal_tasks_started_total{principal=\"alice\"} 1\n",
        "rookery_principal_sessions{principal=\"alice\",status=\"resident\"} 1\n",
    ] {
        assert!(metrics.contains(series), "no {series} in\n{metrics}");
    }
    let (status, _) = call_as(
        &s,
        ROOT,
        "PUT",
        &format!("/v1/sessions/{a}/approval_mode"),
        Some(json!({"mode": "read-only"})),
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _) = call_as(&s, ALICE, "POST", &format!("/v1/sessions/{a}/abort"), None).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let (status, _) = call_as(&s, ALICE, "DELETE", &format!("/v1/sessions/{a}"), None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);

    // The trace once its last record, the delete's, is written.
    let deadline = std::time::Instant::now() + WAIT;
    let events: Vec<Value> = loop {
        let read = rookery::trace::reader::read_trace(&s.trace(&a)).unwrap();
        let events: Vec<Value> = read
            .records
            .iter()
            .filter_map(|r| r.as_event())
            .map(|e| serde_json::to_value(e).unwrap())
            .collect();
        if !read.torn_tail && events.last().is_some_and(|e| e["action"] == "delete") {
            break events;
        }
        assert!(std::time::Instant::now() < deadline, "{events:?}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    let decided: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "approval_decision")
        .collect();
    assert_eq!(decided.len(), 1, "{events:?}");
    assert_eq!(
        (
            decided[0]["decided_by"].as_str(),
            decided[0]["source"].as_str()
        ),
        (Some("alice"), Some("api"))
    );
    let actions: Vec<(String, String)> = events
        .iter()
        .filter(|e| e["type"] == "api_action")
        .map(|e| {
            (
                e["action"].as_str().unwrap().into(),
                e["by"].as_str().unwrap().into(),
            )
        })
        .collect();
    let want: Vec<(String, String)> = [
        ("task_start", "alice"),
        ("approval_mode", "root"),
        ("abort", "alice"),
        ("delete", "alice"),
    ]
    .iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    assert_eq!(actions, want, "{events:?}");

    // `rookery sessions show` prints the owner and who decided; `list --owner` filters.
    let home = s.dir.path().join("home");
    let out = command(
        s.dir.path(),
        &["sessions", "--home", home.to_str().unwrap(), "show", &a],
    )
    .output()
    .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    for line in [
        "owner alice",
        "decided by alice",
        "· approval_mode read-only by root",
        "· delete by alice",
    ] {
        assert!(text.contains(line), "no {line:?} in\n{text}");
    }
    for (owner, n) in [("alice", 1), ("bob", 0)] {
        let out = command(
            s.dir.path(),
            &[
                "sessions",
                "--home",
                home.to_str().unwrap(),
                "list",
                "--json",
                "--owner",
                owner,
            ],
        )
        .output()
        .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).lines().count(),
            n,
            "{owner}: {out:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_running_tasks_refuses_one_more_running_task() {
    let dir = sandbox(&exec_script());
    let auth = auth_file(dir.path(), "", "    max_running_tasks: 1", "");
    let s = start(dir, &auth);
    let ws = s.ws();
    let a1 = create_as(&s, ALICE, &ws).await;
    let a2 = create_as(&s, ALICE, &ws).await;
    let task = json!({"text": "mark it"});
    let (status, _) = call_as(
        &s,
        ALICE,
        "POST",
        &format!("/v1/sessions/{a1}/tasks"),
        Some(task.clone()),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    wait_approval(&s, ALICE, &a1).await;
    let (status, v) = call_as(
        &s,
        ALICE,
        "POST",
        &format!("/v1/sessions/{a2}/tasks"),
        Some(task.clone()),
    )
    .await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{v}");
    assert_eq!(
        (v["error"]["limit"].as_str(), v["error"]["current"].as_u64()),
        (Some("max_running_tasks"), Some(1))
    );
    let (status, v) = call_as(
        &s,
        ALICE,
        "POST",
        &format!("/v1/sessions/{a2}/steer"),
        Some(task.clone()),
    )
    .await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{v}");
    // Bob is not limited by alice's tasks; alice's next task starts once hers ended.
    let b = create_as(&s, BOB, &ws).await;
    let (status, _) = call_as(
        &s,
        BOB,
        "POST",
        &format!("/v1/sessions/{b}/tasks"),
        Some(task.clone()),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let (status, _) = call_as(&s, ALICE, "POST", &format!("/v1/sessions/{a1}/abort"), None).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    wait_status(&s, ALICE, &a1, "idle").await;
    let (status, v) = call_as(
        &s,
        ALICE,
        "POST",
        &format!("/v1/sessions/{a2}/tasks"),
        Some(task),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recorded_workspace_outside_the_roots_is_never_resumed() {
    let dir = sandbox(&json!({"turns": [{"text": "done"}]}));
    let root = dir.path().join("roots");
    std::fs::create_dir_all(root.join("alice")).unwrap();
    let auth = auth_file(dir.path(), "", "", "");
    let s = start(dir, &auth);
    let outside = create_as(&s, ALICE, &s.ws()).await;
    let dir = s.kill9();

    // Restarted with roots for alice: her old session's workspace is outside them.
    let alice_roots = format!(
        "    workspace_roots: [\"{}\"]",
        root.join("alice").display()
    );
    let auth = auth_file(dir.path(), "", &alice_roots, "");
    let s = start(dir, &auth);
    for (method, path, body) in [
        ("GET", format!("/v1/sessions/{outside}"), None),
        (
            "POST",
            format!("/v1/sessions/{outside}/tasks"),
            Some(json!({"text": "hi"})),
        ),
        ("GET", format!("/v1/sessions/{outside}/events"), None),
        ("POST", format!("/v1/sessions/{outside}/resume"), None),
    ] {
        let (status, v) = call_as(&s, ALICE, method, &path, body).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{method} {path}: {v}");
        assert_eq!(v["error"]["code"], "workspace_not_allowed");
    }
    // Still nobody else's: bob gets 404; the admin (no roots) resumes it.
    let (status, _) = call_as(&s, BOB, "GET", &format!("/v1/sessions/{outside}"), None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, v) = call_as(&s, ROOT, "GET", &format!("/v1/sessions/{outside}"), None).await;
    assert_eq!(
        (status, v["owner"].as_str()),
        (StatusCode::OK, Some("alice")),
        "{v}"
    );

    // A session inside her roots resumes, but not into a workspace outside them.
    let inside = create_as(&s, ALICE, &root.join("alice")).await;
    let (status, _) = call_as(&s, ALICE, "DELETE", &format!("/v1/sessions/{inside}"), None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let escape = root.join("alice/../../ws");
    let (status, v) = call_as(
        &s,
        ALICE,
        "POST",
        &format!("/v1/sessions/{inside}/resume"),
        Some(json!({"workspace": escape})),
    )
    .await;
    assert_eq!(
        (status, v["error"]["code"].as_str()),
        (StatusCode::FORBIDDEN, Some("workspace_not_allowed")),
        "{v}"
    );
    let (status, v) = call_as(
        &s,
        ALICE,
        "POST",
        &format!("/v1/sessions/{inside}/resume"),
        None,
    )
    .await;
    assert_eq!(
        (status, v["resumed"].as_bool()),
        (StatusCode::OK, Some(true)),
        "{v}"
    );
}
