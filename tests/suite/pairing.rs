//! The pairing guarantee through the library: every `tool_call` of a trace gets exactly one
//! `tool_call_output`, written before the task's `abort` and `task_end`, on every ending path —
//! abort with approvals pending, close of a busy session, host shutdown of many busy sessions,
//! a panicking session actor — and a subagent's prompt reaches the parent's subscribers.

use crate::common;
use crate::common::paired;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use futures::future::BoxFuture;
use paired::assert_trace_paired;
use rookery::approval::{ApprovalRequest, Approver};
use rookery::message::{Decision, EventPayload, ModelPayload, OmniMessage, Sender, StopReason};
use rookery::{Host, SessionHandle};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(30);

/// Allows `slow` calls and never answers any other (they stay pending).
struct AllowSlowOnly;

impl Approver for AllowSlowOnly {
    fn approve(&self, request: ApprovalRequest) -> BoxFuture<'static, Decision> {
        if request.name == "slow" {
            Box::pin(async { Decision::Allow })
        } else {
            Box::pin(futures::future::pending())
        }
    }
}

/// Three calls in one turn: a slow tool that runs for a minute, then two calls whose
/// approvals never come (the second is queued behind the first).
fn busy_script() -> Value {
    json!({"turns": [
        {"tool_calls": [
            {"name": "slow", "arguments": {"ms": 60000}},
            {"name": "read_file", "arguments": {"file_path": "a.txt"}},
            {"name": "read_file", "arguments": {"file_path": "b.txt"}}]},
        {"text": "never reached"}]})
}

async fn busy_session(host: &Host, ws: &std::path::Path) -> SessionHandle {
    let mut o = options(ws, scripted(busy_script()));
    o.approver = Arc::new(AllowSlowOnly);
    o.config.tools.register(
        slow_def("slow"),
        Arc::new(SlowTool {
            spans: Arc::default(),
        }),
    );
    host.create_session(o).await.unwrap()
}

/// Waits until the session's slow tool runs (its first partial) and the second call waits for
/// its approval.
async fn until_busy(rx: &mut rookery::MessageReceiver) {
    let deadline = tokio::time::Instant::now() + WAIT;
    let mut started = false;
    let mut calls = 0;
    while !(started && calls == 3) {
        let m = tokio::time::timeout_at(deadline, rx.recv())
            .await
            .expect("session busy in time")
            .expect("stream open");
        if let Some(p) = m.as_model() {
            match p {
                ModelPayload::ToolCall { .. } => calls += 1,
                ModelPayload::ToolCallOutput { .. } => panic!("no call may end yet: {p:?}"),
                _ if p.is_partial() && m.to_json().contains("slept start") => started = true,
                _ => {}
            }
        }
    }
}

/// The trace's records once its last record is `task_end`.
async fn ended_trace(path: impl AsRef<std::path::Path>) -> Vec<OmniMessage> {
    let path = path.as_ref();
    let deadline = Instant::now() + WAIT;
    loop {
        let recs = trace_records(path);
        if matches!(
            recs.last().and_then(|r| r.as_event()),
            Some(EventPayload::TaskEnd { .. })
        ) {
            return recs;
        }
        assert!(Instant::now() < deadline, "trace never ended: {path:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn decisions(recs: &[OmniMessage]) -> Vec<(String, Decision)> {
    recs.iter()
        .filter_map(|r| match r.as_event() {
            Some(EventPayload::ApprovalDecision {
                decision,
                tool_call_id,
                ..
            }) => Some((tool_call_id.clone(), *decision)),
            _ => None,
        })
        .collect()
}

const INTERRUPTED: &str = "[interrupted: tool aborted by user]";
const DENIED: &str = "Tool call denied by user.";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abort_with_approvals_pending_denies_them_and_pairs_every_call() {
    let (_d, ws, home) = tempdirs();
    std::fs::write(ws.join("a.txt"), "a\n").unwrap();
    let host = Host::start(&home).await.unwrap();
    let s = busy_session(&host, &ws).await;
    let mut rx = s.subscribe().await.unwrap();
    s.start_task("go").await.unwrap();
    until_busy(&mut rx).await;
    s.abort().unwrap();
    let summary = tokio::time::timeout(WAIT, s.wait_idle())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(summary.status, StopReason::Aborted);
    let recs = ended_trace(s.trace_path()).await;
    let outs = assert_trace_paired(&recs);
    // The running tool reports its own (cancelled) output; the two pending calls are denied.
    assert!(outs[0].0.ends_with(INTERRUPTED), "{outs:?}");
    assert_eq!(
        outs.iter().map(|o| o.1).collect::<Vec<_>>(),
        [StopReason::Aborted; 3]
    );
    assert_eq!([outs[1].0.as_str(), outs[2].0.as_str()], [DENIED, DENIED]);
    // Each never-answered call has its `deny` decision before its output.
    assert_eq!(
        decisions(&recs),
        vec![
            ("call_0".to_string(), Decision::Allow),
            ("call_1".to_string(), Decision::Deny),
            ("call_2".to_string(), Decision::Deny),
        ]
    );
    let k = kinds(&recs);
    assert_eq!(&k[k.len() - 2..], ["abort", "task_end"], "{k:?}");
    // The next task sees the same outputs the trace has.
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_a_busy_session_pairs_every_call() {
    let (_d, ws, home) = tempdirs();
    let host = Host::start(&home).await.unwrap();
    let s = busy_session(&host, &ws).await;
    let mut rx = s.subscribe().await.unwrap();
    s.start_task("go").await.unwrap();
    until_busy(&mut rx).await;
    tokio::time::timeout(WAIT, s.close())
        .await
        .unwrap()
        .unwrap();
    let recs = trace_records(s.trace_path());
    let outs = assert_trace_paired(&recs);
    assert_eq!(outs.len(), 3);
    assert!(outs.iter().all(|o| o.1 == StopReason::Aborted), "{outs:?}");
    let k = kinds(&recs);
    assert_eq!(&k[k.len() - 2..], ["abort", "task_end"], "{k:?}");
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_shutdown_with_twenty_busy_sessions_pairs_every_trace() {
    let (_d, ws, home) = tempdirs();
    let host = Host::start(&home).await.unwrap();
    let mut sessions = Vec::new();
    for _ in 0..20 {
        let s = busy_session(&host, &ws).await;
        let rx = s.subscribe().await.unwrap();
        s.start_task("go").await.unwrap();
        sessions.push((s, rx));
    }
    for (_, rx) in sessions.iter_mut() {
        until_busy(rx).await;
    }
    tokio::time::timeout(WAIT, host.shutdown()).await.unwrap();
    for (s, _) in &sessions {
        let recs = ended_trace(s.trace_path()).await;
        assert_eq!(assert_trace_paired(&recs).len(), 3, "{:?}", s.trace_path());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_session_pairs_its_open_calls_before_the_crash_report() {
    let (_d, ws, home) = tempdirs();
    let host = Host::start(&home).await.unwrap();
    let s = busy_session(&host, &ws).await;
    let mut rx = s.subscribe().await.unwrap();
    s.start_task("go").await.unwrap();
    until_busy(&mut rx).await;
    s.inject_panic_for_tests();
    let recs = ended_trace(s.trace_path()).await;
    let outs = assert_trace_paired(&recs);
    assert_eq!(
        outs.iter().map(|o| o.0.as_str()).collect::<Vec<_>>(),
        [INTERRUPTED, DENIED, DENIED]
    );
    let abort = recs.iter().rev().find_map(|r| match r.as_event() {
        Some(EventPayload::Abort { reason }) => reason.clone(),
        _ => None,
    });
    assert!(
        abort
            .as_deref()
            .is_some_and(|r| r.starts_with("session actor failed: injected session actor panic")),
        "{abort:?}"
    );
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subagents_prompt_reaches_the_parent_subscribers_with_its_origin() {
    let (_d, ws, home) = tempdirs();
    let script = json!({
        "turns": [
            {"tool_calls": [{"name": "run_subagent",
                "arguments": {"description": "delegate", "prompt": "lint the notes"}}]},
            {"text": "parent done"}],
        "children": [{"when_prompt_contains": "lint", "turns": [{"text": "No problems found."}]}]
    });
    let host = Host::start(&home).await.unwrap();
    let s = host
        .create_session(options(&ws, scripted(script)))
        .await
        .unwrap();
    let mut rx = s.subscribe().await.unwrap();
    let summary = tokio::time::timeout(WAIT, s.run_task("go"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(summary.final_text.as_deref(), Some("parent done"));
    let mut prompt = None;
    let mut child_meta = None;
    while let Ok(m) = rx.try_recv() {
        if let rookery::message::Payload::SessionMeta(meta) = &m.payload {
            child_meta = Some(meta.session_id.clone());
        }
        if let Some(ModelPayload::Text {
            text,
            sender: Some(Sender::ParentAgent),
            ..
        }) = m.as_model()
        {
            prompt = Some((text.clone(), m.origin.clone()));
        }
    }
    let child = child_meta.expect("the child's meta was forwarded");
    let (text, origin) = prompt.expect("the child's prompt was forwarded");
    assert_eq!(text, "lint the notes");
    assert_eq!(origin, Some(vec![child]));
    // Still never written to the parent's trace.
    let recs = trace_records(s.trace_path());
    assert!(!recs.iter().any(|r| r.has_origin()));
    host.shutdown().await;
}

/// First request: a slow call (allowed, running) and a read_file call (its approval never
/// comes), then the request fails; every later request answers with a text.
struct FailsAfterCalls(Arc<dyn rookery::Model>);

struct FailsAfterCallsSession {
    requests: usize,
}

impl rookery::model::ModelSession for FailsAfterCallsSession {
    fn stream(
        &mut self,
        _r: rookery::model::ModelRequest,
    ) -> futures::stream::BoxStream<'static, rookery::model::ModelEvent> {
        use rookery::message::build;
        use rookery::model::{ModelEvent, ModelOutcome};
        self.requests += 1;
        let model = |m: OmniMessage| ModelEvent::Complete(m.as_model().cloned().unwrap());
        let events = if self.requests == 1 {
            vec![
                model(build::tool_call("slow", r#"{"ms":60000}"#, "call_r0")),
                model(build::tool_call(
                    "read_file",
                    r#"{"file_path":"a.txt"}"#,
                    "call_r1",
                )),
                ModelEvent::End(ModelOutcome::error(StopReason::Failed, "connection reset")),
            ]
        } else {
            vec![
                model(build::assistant_text("recovered", StopReason::Completed)),
                ModelEvent::End(ModelOutcome::completed()),
            ]
        };
        Box::pin(futures::stream::iter(events))
    }
}

impl rookery::Model for FailsAfterCalls {
    fn info(&self) -> rookery::model::ModelInfo {
        self.0.info()
    }
    fn open(
        &self,
        _ctx: &rookery::model::ModelSessionContext,
    ) -> Box<dyn rookery::model::ModelSession> {
        Box::new(FailsAfterCallsSession { requests: 0 })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_request_settles_the_calls_of_its_failed_attempt() {
    let (_d, ws, home) = tempdirs();
    let host = Host::start(&home).await.unwrap();
    let model = Arc::new(FailsAfterCalls(scripted(json!({"turns": []}))));
    let mut o = options(&ws, model);
    o.approver = Arc::new(AllowSlowOnly);
    o.config.tools.register(
        slow_def("slow"),
        Arc::new(SlowTool {
            spans: Arc::default(),
        }),
    );
    let s = host.create_session(o).await.unwrap();
    let summary = tokio::time::timeout(WAIT, s.run_task("go"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(summary.status, StopReason::Completed);
    assert_eq!(summary.final_text.as_deref(), Some("recovered"));
    s.close().await.unwrap();
    let recs = trace_records(s.trace_path());
    let outs = assert_trace_paired(&recs);
    assert_eq!(outs.len(), 2, "{:?}", kinds(&recs));
    assert_eq!(outs[1], (DENIED.to_string(), StopReason::Aborted));
    host.shutdown().await;
}
