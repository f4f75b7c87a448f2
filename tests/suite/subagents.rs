//! Subagents through whole sessions: the 8-child cap under parallel spawns, LRU eviction of idle
//! children, pointer events and child traces, origin tags, approvals through the parent,
//! follow-up prompts, kills and failing children.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use futures::future::BoxFuture;
use rookery::Host;
use rookery::approval::{ApprovalRequest, Approver, DenyAllApprover};
use rookery::message::{Decision, EventPayload, ModelPayload, Sender, StopReason};
use serde_json::{Value, json};

/// The parent's requests (children share the recording model; their first message is the
/// parent's prompt with `sender: parent_agent`).
fn parent_requests(model: &Recording) -> Vec<Vec<ModelPayload>> {
    model
        .requests()
        .into_iter()
        .filter(|h| {
            !matches!(
                h.first(),
                Some(ModelPayload::Text {
                    sender: Some(Sender::ParentAgent),
                    ..
                })
            )
        })
        .collect()
}

fn child_traces(home: &std::path::Path) -> Vec<Vec<rookery::OmniMessage>> {
    let mut out = Vec::new();
    for day in std::fs::read_dir(home.join("traces")).unwrap() {
        for f in std::fs::read_dir(day.unwrap().path()).unwrap() {
            let recs = trace_records(f.unwrap().path());
            let is_child = matches!(&recs.first().map(|r| r.payload.clone()),
                Some(rookery::message::Payload::SessionMeta(m)) if m.source.as_deref() == Some("subagent"));
            if is_child {
                out.push(recs);
            }
        }
    }
    out
}

fn spawn_call(prompt: &str, extra: Value) -> Value {
    let mut args = json!({"description": "delegate", "prompt": prompt});
    if let (Some(a), Some(e)) = (args.as_object_mut(), extra.as_object()) {
        a.extend(e.clone());
    }
    json!({"name": "run_subagent", "arguments": args})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nine_parallel_spawns_admit_exactly_eight_every_time() {
    let (_d, ws, home) = tempdirs();
    let host = Host::start(&home).await.unwrap();
    for round in 0..20 {
        let calls: Vec<Value> = (0..9)
            .map(|i| spawn_call(&format!("child {i}"), json!({"yield_time_ms": 250})))
            .collect();
        let model = Recording::new(scripted(json!({
            "turns": [{"tool_calls": calls}, {"text": "done"}],
            "children": [{"when_prompt_contains": "child", "turns": [{"text": "child answer", "delay_ms": 3000}]}]
        })));
        let s = host
            .create_session(options(&ws, model.clone()))
            .await
            .unwrap();
        assert_eq!(
            s.run_task("fan out").await.unwrap().status,
            StopReason::Completed
        );
        let outs = outputs(&parent_requests(&model)[1]);
        let refused: Vec<_> = outs
            .iter()
            .filter(|o| o.0 == "[run_subagent error: too many background subagents; poll or finish existing ones first]")
            .collect();
        let running = outs
            .iter()
            .filter(|o| o.0.contains("[subagent running with subagent_id subagent-"))
            .count();
        assert_eq!((running, refused.len()), (8, 1), "round {round}: {outs:#?}");
        assert_eq!(refused[0].1, StopReason::Failed);
        s.close().await.unwrap();
    }
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreground_child_answers_and_leaves_a_pointer_and_its_own_trace() {
    let (_d, ws, home) = tempdirs();
    let model = Recording::new(scripted(json!({
        "turns": [{"tool_calls": [spawn_call("child: say hi", json!({}))]}, {"text": "parent done"}],
        "children": [{"when_prompt_contains": "say hi", "turns": [{"text": "hi from child"}]}]
    })));
    let host = Host::start(&home).await.unwrap();
    let s = host
        .create_session(options(&ws, model.clone()))
        .await
        .unwrap();
    let mut rx = s.subscribe().await.unwrap();
    assert_eq!(
        s.run_task("go").await.unwrap().status,
        StopReason::Completed
    );
    assert_eq!(
        outputs(&parent_requests(&model)[1])[0],
        ("hi from child".to_string(), StopReason::Completed)
    );
    // Origin-tagged child messages reached the parent's stream, none of them its trace.
    let mut tagged = Vec::new();
    while let Ok(m) = rx.try_recv() {
        if let Some(o) = &m.origin {
            tagged.push((o.clone(), m.kind().to_string()));
        }
    }
    assert!(tagged.iter().any(|(_, k)| k == "session_meta"));
    assert!(tagged.len() > 3);
    let child_id = tagged[0].0[0].clone();
    assert!(tagged.iter().all(|(o, _)| o == &vec![child_id.clone()]));
    s.close().await.unwrap();
    let parent = trace_records(s.trace_path());
    assert!(parent.iter().all(|r| r.origin.is_none()));
    let pointers: Vec<_> = parent
        .iter()
        .filter_map(|r| match r.as_event() {
            Some(EventPayload::Subagent { session_id }) => Some(session_id.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(pointers, vec![child_id.clone()]);
    let children = child_traces(&home);
    assert_eq!(children.len(), 1);
    let child = &children[0];
    assert!(child.iter().any(|r| matches!(r.as_model(),
        Some(ModelPayload::Text { text, sender: Some(Sender::ParentAgent), .. }) if text == "child: say hi")));
    assert!(child.iter().any(|r| matches!(
        r.as_event(),
        Some(EventPayload::TaskEnd {
            status: StopReason::Completed,
            ..
        })
    )));
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_pointer_events_and_eight_child_traces() {
    let (_d, ws, home) = tempdirs();
    let calls: Vec<Value> = (0..8)
        .map(|i| spawn_call(&format!("child {i}"), json!({})))
        .collect();
    let model = scripted(json!({
        "turns": [{"tool_calls": calls}, {"text": "done"}],
        "children": [{"when_prompt_contains": "child", "turns": [{"text": "ok", "delay_ms": 100}]}]
    }));
    let host = Host::start(&home).await.unwrap();
    let s = host.create_session(options(&ws, model)).await.unwrap();
    s.run_task("go").await.unwrap();
    s.close().await.unwrap();
    let pointers = trace_records(s.trace_path())
        .iter()
        .filter(|r| matches!(r.as_event(), Some(EventPayload::Subagent { .. })))
        .count();
    assert_eq!(pointers, 8);
    assert_eq!(child_traces(&home).len(), 8);
    host.shutdown().await;
}

/// Waits until `n` child traces end a task.
async fn children_done(home: &std::path::Path, n: usize) {
    tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            let done = child_traces(home)
                .iter()
                .filter(|t| {
                    t.iter()
                        .any(|r| matches!(r.as_event(), Some(EventPayload::TaskEnd { .. })))
                })
                .count();
            if done >= n {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("children finished");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_child_is_evicted_lru_to_admit_a_ninth() {
    // Foreground spawns with a short window leave 8 registered children (no notices); once they
    // are idle, a ninth spawn evicts the least recently used one.
    let (_d, ws, home) = tempdirs();
    let calls: Vec<Value> = (0..8)
        .map(|i| spawn_call(&format!("child {i}"), json!({"yield_time_ms": 250})))
        .collect();
    let model = Recording::new(scripted(json!({
        "turns": [
            {"tool_calls": calls},
            {"text": "started"},
            {"tool_calls": [{"name": "list_subagents", "arguments": {}}]},
            {"tool_calls": [spawn_call("child 9", json!({"yield_time_ms": 250}))]},
            {"tool_calls": [{"name": "list_subagents", "arguments": {}}]},
            {"text": "done"}
        ],
        "children": [{"when_prompt_contains": "child", "turns": [{"text": "ok", "delay_ms": 600}]}]
    })));
    let host = Host::start(&home).await.unwrap();
    let s = host
        .create_session(options(&ws, model.clone()))
        .await
        .unwrap();
    s.run_task("spawn").await.unwrap();
    children_done(&home, 8).await;
    s.run_task("list, spawn, list").await.unwrap();
    let all = outputs(parent_requests(&model).last().unwrap());
    let lists: Vec<&String> = all
        .iter()
        .map(|o| &o.0)
        .filter(|o| o.contains("turns"))
        .collect();
    assert_eq!(lists.len(), 2, "{all:#?}");
    let before: Vec<&str> = lists[0].lines().collect();
    let after: Vec<&str> = lists[1].lines().collect();
    assert_eq!(before.len(), 8);
    assert_eq!(after.len(), 8);
    assert!(before.iter().all(|l| l.contains("  idle  ")), "{before:#?}");
    // The first-spawned (least recently used) child was evicted; child 9 took its place.
    let first = before[0].split_whitespace().next().unwrap_or("?");
    assert!(!lists[1].contains(first), "{after:#?}");
    assert!(after.iter().any(|l| l.ends_with("child 9")));
    s.close().await.unwrap();
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn child_calls_are_decided_by_the_parents_approver() {
    let (_d, ws, home) = tempdirs();
    let model = Recording::new(scripted(json!({
        "turns": [{"tool_calls": [spawn_call("child: write", json!({}))]}, {"text": "done"}],
        "children": [{"when_prompt_contains": "write", "turns": [
            {"tool_calls": [{"name": "write_file", "arguments": {"file_path": "child.txt", "content": "x"}}]},
            {"text": "tried"}]}]
    })));
    /// Allows the parent's own calls, denies the child's, and remembers origins.
    struct ParentOnly(std::sync::Mutex<Vec<Vec<String>>>);
    impl Approver for ParentOnly {
        fn approve(&self, r: ApprovalRequest) -> BoxFuture<'static, Decision> {
            let child = !r.origin.is_empty();
            self.0.lock().unwrap().push(r.origin);
            Box::pin(async move {
                if child {
                    Decision::Deny
                } else {
                    Decision::Allow
                }
            })
        }
    }
    let approver = Arc::new(ParentOnly(Default::default()));
    let mut o = options(&ws, model.clone());
    o.approver = approver.clone();
    let host = Host::start(&home).await.unwrap();
    let s = host.create_session(o).await.unwrap();
    s.run_task("go").await.unwrap();
    assert!(!ws.join("child.txt").exists());
    let origins = approver.0.lock().unwrap().clone();
    assert_eq!(origins.len(), 2);
    assert!(origins[0].is_empty());
    assert_eq!(origins[1].len(), 1);
    s.close().await.unwrap();
    let child = &child_traces(&home)[0];
    assert!(child.iter().any(|r| matches!(
        r.as_event(),
        Some(EventPayload::ApprovalDecision {
            decision: Decision::Deny,
            ..
        })
    )));
    assert!(child.iter().any(|r| matches!(r.as_model(),
        Some(ModelPayload::ToolCallOutput { output, .. }) if output == "Tool call denied by user.")));
    host.shutdown().await;

    // deny-all on the parent denies the child's calls too (the parent's own spawn is denied first).
    let (_d2, ws2, home2) = tempdirs();
    let model = Recording::new(scripted(json!({
        "turns": [{"tool_calls": [spawn_call("child: write", json!({}))]}, {"text": "done"}]
    })));
    let mut o = options(&ws2, model.clone());
    o.approver = Arc::new(DenyAllApprover);
    let host = Host::start(&home2).await.unwrap();
    let s = host.create_session(o).await.unwrap();
    s.run_task("go").await.unwrap();
    assert_eq!(
        outputs(&parent_requests(&model)[1])[0].0,
        "Tool call denied by user."
    );
    host.shutdown().await;
}

/// Allows the parent's calls; never answers a child's.
struct HangOnChildren;
impl Approver for HangOnChildren {
    fn approve(&self, r: ApprovalRequest) -> BoxFuture<'static, Decision> {
        Box::pin(async move {
            if r.origin.is_empty() {
                Decision::Allow
            } else {
                futures::future::pending::<Decision>().await
            }
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_denies_pending_approvals_and_ends_the_child() {
    let (_d, ws, home) = tempdirs();
    let model = Recording::new(scripted(json!({
        "turns": [
            {"tool_calls": [spawn_call("child: write", json!({"yield_time_ms": 500}))]},
            {"tool_calls": [{"name": "kill_subagent", "arguments": {"description": "stop", "subagent_id": "{{output:0:subagent_id (subagent-[0-9a-f]+)}}"}}]},
            {"tool_calls": [{"name": "list_subagents", "arguments": {}}]},
            {"text": "done"}
        ],
        "children": [{"when_prompt_contains": "write", "turns": [
            {"tool_calls": [{"name": "write_file", "arguments": {"file_path": "c.txt", "content": "x"}}]},
            {"text": "never"}]}]
    })));
    let mut o = options(&ws, model.clone());
    o.approver = Arc::new(HangOnChildren);
    let host = Host::start(&home).await.unwrap();
    let s = host.create_session(o).await.unwrap();
    let summary = tokio::time::timeout(Duration::from_secs(30), s.run_task("go"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(summary.status, StopReason::Completed);
    let outs = outputs(parent_requests(&model).last().unwrap());
    assert!(
        outs[0]
            .0
            .contains("[subagent running with subagent_id subagent-"),
        "{outs:#?}"
    );
    assert!(
        outs[0]
            .0
            .ends_with("[subagent is waiting for approval of 1 tool call(s); poll to review]"),
        "{}",
        outs[0].0
    );
    assert!(
        outs[1]
            .0
            .contains("aborted and removed; its own trace keeps the work done so far]"),
        "{}",
        outs[1].0
    );
    assert_eq!(outs[2].0, "[no subagents]");
    assert!(!ws.join("c.txt").exists());
    s.close().await.unwrap();
    let child = &child_traces(&home)[0];
    assert!(
        child
            .iter()
            .any(|r| matches!(r.as_event(), Some(EventPayload::Abort { .. })))
    );
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follow_up_prompt_runs_on_the_same_child_session() {
    let (_d, ws, home) = tempdirs();
    let id = "{{output:0:subagent_id (subagent-[0-9a-f]+)}}";
    let model = Recording::new(scripted(json!({
        "turns": [
            {"tool_calls": [spawn_call("child: first", json!({"yield_time_ms": 250}))]},
            {"tool_calls": [{"name": "input_subagent", "arguments": {"description": "poll", "subagent_id": id, "yield_time_ms": 10000}}]},
            {"tool_calls": [{"name": "input_subagent", "arguments": {"description": "again", "subagent_id": id, "prompt": "child: second"}}]},
            {"text": "done"}
        ],
        "children": [{"when_prompt_contains": "child", "turns": [{"text": "answer one", "delay_ms": 800}, {"text": "answer two"}]}]
    })));
    let host = Host::start(&home).await.unwrap();
    let s = host
        .create_session(options(&ws, model.clone()))
        .await
        .unwrap();
    s.run_task("go").await.unwrap();
    let outs = outputs(parent_requests(&model).last().unwrap());
    assert!(
        outs[0].0.contains("[subagent running with subagent_id"),
        "{outs:#?}"
    );
    assert!(outs[1].0.starts_with("answer one"), "{}", outs[1].0);
    assert!(
        outs[1]
            .0
            .contains("[subagent idle with subagent_id subagent-"),
        "{}",
        outs[1].0
    );
    assert!(outs[2].0.starts_with("answer two"), "{}", outs[2].0);
    s.close().await.unwrap();
    let children = child_traces(&home);
    assert_eq!(children.len(), 1, "one child session for both prompts");
    let prompts = children[0]
        .iter()
        .filter(|r| {
            matches!(
                r.as_model(),
                Some(ModelPayload::Text {
                    sender: Some(Sender::ParentAgent),
                    ..
                })
            )
        })
        .count();
    assert_eq!(prompts, 2);
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_child_is_a_failed_result_and_the_parent_goes_on() {
    let (_d, ws, home) = tempdirs();
    let model = Recording::new(scripted(json!({
        "turns": [{"tool_calls": [spawn_call("child: fail", json!({}))]}, {"text": "parent survived"}],
        "children": [{"when_prompt_contains": "fail", "turns": [{"error": "auth"}]}]
    })));
    let host = Host::start(&home).await.unwrap();
    let s = host
        .create_session(options(&ws, model.clone()))
        .await
        .unwrap();
    let summary = s.run_task("go").await.unwrap();
    assert_eq!(summary.final_text.as_deref(), Some("parent survived"));
    let out = &outputs(&parent_requests(&model)[1])[0];
    assert_eq!(out.1, StopReason::Failed);
    assert!(
        out.0.starts_with("[subagent aborted: llm request error:"),
        "{}",
        out.0
    );
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_child_reports_completion_as_a_notice() {
    let (_d, ws, home) = tempdirs();
    let model = Recording::new(scripted(json!({
        "turns": [
            {"tool_calls": [spawn_call("child: bg", json!({"run_in_background": true}))]},
            {"text": "waiting", "delay_ms": 1000},
            {"text": "got it", "repeat": 3}
        ],
        "children": [{"when_prompt_contains": "bg", "turns": [{"text": "background answer", "delay_ms": 200}]}]
    })));
    let host = Host::start(&home).await.unwrap();
    let s = host
        .create_session(options(&ws, model.clone()))
        .await
        .unwrap();
    s.run_task("go").await.unwrap();
    let reqs = model.requests();
    let notice = reqs.iter().flatten().find_map(|m| match m {
        ModelPayload::Text {
            text,
            sender: Some(Sender::Harness),
            ..
        } => Some(text.clone()),
        _ => None,
    });
    let notice = notice.expect("a completion notice reached the model");
    assert!(notice.contains("kind: subagent\nid: subagent-"), "{notice}");
    assert!(notice.contains("status: completed"));
    assert!(notice.ends_with("background answer"), "{notice}");
    host.shutdown().await;
}

/// Scripted for the parent; a child's session panics inside its actor on its first request.
struct PanicInChildren(Arc<dyn rookery::Model>);
struct Panicking;
impl rookery::model::ModelSession for Panicking {
    fn stream(
        &mut self,
        _r: rookery::model::ModelRequest,
    ) -> futures::stream::BoxStream<'static, rookery::model::ModelEvent> {
        panic!("child model exploded")
    }
}
impl rookery::Model for PanicInChildren {
    fn info(&self) -> rookery::model::ModelInfo {
        self.0.info()
    }
    fn open(
        &self,
        ctx: &rookery::model::ModelSessionContext,
    ) -> Box<dyn rookery::model::ModelSession> {
        if ctx.is_subagent {
            Box::new(Panicking)
        } else {
            self.0.open(ctx)
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_child_is_a_subagent_error_and_the_parent_goes_on() {
    let (_d, ws, home) = tempdirs();
    let inner = Recording::new(scripted(json!({
        "turns": [{"tool_calls": [spawn_call("child: boom", json!({}))]}, {"text": "parent survived"}]
    })));
    let model = Arc::new(PanicInChildren(inner.clone()));
    let host = Host::start(&home).await.unwrap();
    let s = host.create_session(options(&ws, model)).await.unwrap();
    let summary = tokio::time::timeout(Duration::from_secs(30), s.run_task("go"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(summary.final_text.as_deref(), Some("parent survived"));
    let out = &outputs(&inner.requests()[1])[0];
    assert_eq!(out.1, StopReason::Failed);
    assert!(out.0.starts_with("[subagent error: "), "{}", out.0);
    assert!(out.0.contains("child model exploded"), "{}", out.0);
    // The child's own trace is complete: its meta, its prompt, then the crash report.
    s.close().await.unwrap();
    let child = &child_traces(&home)[0];
    assert!(child.iter().any(|r| matches!(
        r.as_event(),
        Some(EventPayload::TaskEnd {
            status: StopReason::Failed,
            ..
        })
    )));
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_approval_mode_decides_a_childs_calls() {
    // `read-only` auto-allows the parent's spawn (made `r` by the config) and asks for the
    // child's write; with no terminal the CLI denies it, naming the call on stderr.
    let (dir, ws, home) = tempdirs();
    let script = dir.path().join("s.json");
    std::fs::write(
        &script,
        json!({
            "turns": [{"tool_calls": [spawn_call("child: write", json!({}))]}, {"text": "done"}],
            "children": [{"when_prompt_contains": "write", "turns": [
                {"tool_calls": [{"name": "write_file", "arguments": {"file_path": "child.txt", "content": "x"}}]},
                {"text": "tried"}]}]
        })
        .to_string(),
    )
    .unwrap();
    let cfg = dir.path().join("agent.yaml");
    std::fs::write(
        &cfg,
        "tools:\n  builtin:\n    - write_file\n    - name: run_subagent\n      permission: r\n",
    )
    .unwrap();
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_rookery"))
        .env("ROOKERY_NO_CONFIG", "1")
        .args(["run", "--approve", "read-only", "--script"])
        .arg(&script)
        .arg("--config")
        .arg(&cfg)
        .arg("--workspace")
        .arg(&ws)
        .arg("--home")
        .arg(&home)
        .arg("go")
        .env("HOME", dir.path())
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("denied write_file (call_0)"), "{stderr}");
    assert!(!ws.join("child.txt").exists());
    let child = &child_traces(&home)[0];
    assert!(child.iter().any(|r| matches!(
        r.as_event(),
        Some(EventPayload::ApprovalDecision {
            decision: Decision::Deny,
            ..
        })
    )));
}
