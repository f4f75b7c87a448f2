//! Resume over traces written by real sessions: the rebuilt history is exactly what the live loop
//! sent to the model, carry-over keeps every tool call paired, and every cut of a real trace
//! (crash after any record, or mid-line) still resumes with the pairing intact.

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use rookery::Host;
use rookery::message::{EventPayload, ModelPayload, OmniMessage, StopReason};
use rookery::trace::resume::{
    EXITED_PLACEHOLDER, ResumeState, resume_from_file, resume_from_records,
};
use serde_json::json;

/// `history + carry_over`: each tool_call has exactly one output, after it, in call order.
fn assert_pairing(all: &[ModelPayload]) {
    assert_paired(all);
    let calls: Vec<&String> = all
        .iter()
        .filter_map(|m| match m {
            ModelPayload::ToolCall { tool_call_id, .. } => Some(tool_call_id),
            _ => None,
        })
        .collect();
    let outputs: Vec<&String> = all
        .iter()
        .filter_map(|m| match m {
            ModelPayload::ToolCallOutput { tool_call_id, .. } => Some(tool_call_id),
            _ => None,
        })
        .collect();
    assert_eq!(calls, outputs, "{all:#?}");
}

fn everything(state: &ResumeState) -> Vec<ModelPayload> {
    let mut all = state.history.clone();
    all.extend(state.carry_over.iter().cloned());
    all
}

fn assistant_text(text: &str) -> ModelPayload {
    ModelPayload::Text {
        role: rookery::message::Role::Assistant,
        text: text.into(),
        sender: None,
        stop_reason: StopReason::Completed,
        fidelity: None,
    }
}

fn last_session_usage(records: &[OmniMessage]) -> rookery::message::Usage {
    records
        .iter()
        .rev()
        .find_map(|r| match r.as_event() {
            Some(EventPayload::TokenUsage { session, .. }) => Some(*session),
            _ => None,
        })
        .unwrap()
}

/// Resumes every prefix of `records` (a crash after each record) and every record cut in half
/// on disk; none may fail or break the pairing.
fn resume_every_cut(dir: &std::path::Path, records: &[OmniMessage]) {
    for n in 1..=records.len() {
        let state = resume_from_records(&records[..n]).unwrap();
        assert_pairing(&everything(&state));
    }
    let path = dir.join("cut.jsonl");
    let mut text = String::new();
    for r in records {
        let line = r.to_json();
        std::fs::write(&path, format!("{text}{}", &line[..line.len() / 2])).unwrap();
        if text.is_empty() {
            // Only a torn session_meta: nothing to resume.
            let err = resume_from_file(&path).unwrap_err();
            assert_eq!(
                err.to_string(),
                "trace error: trace has no session_meta; cannot resume"
            );
            text.push_str(&line);
            text.push('\n');
            continue;
        }
        let torn = resume_from_file(&path).unwrap();
        let whole =
            resume_from_records(&rookery::trace::reader::read_trace(&path).unwrap().records);
        assert_eq!(torn, whole.unwrap());
        assert_pairing(&everything(&torn));
        text.push_str(&line);
        text.push('\n');
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_task_session_resumes_to_what_the_model_was_sent() {
    let (dir, ws, home) = tempdirs();
    let inner = scripted(json!({"turns": [
        {"thinking": "plan", "text": "writing", "tool_calls": [
            {"name": "write_file", "arguments": {"file_path": "a.txt", "content": "hello\n"}},
            {"name": "read_file", "arguments": {"file_path": "a.txt"}}]},
        {"text": "all done"},
        {"tool_calls": [{"name": "read_file", "arguments": {"file_path": "missing.txt"}}]},
        {"text": "second done"}
    ]}));
    let model = Recording::new(inner);
    let host = Host::start(&home).await.unwrap();
    let s = host
        .create_session(options(&ws, model.clone()))
        .await
        .unwrap();
    assert_eq!(
        s.run_task("go").await.unwrap().status,
        StopReason::Completed
    );
    assert_eq!(
        s.run_task("again").await.unwrap().status,
        StopReason::Completed
    );
    s.close().await.unwrap();
    let records = trace_records(s.trace_path());
    let state = resume_from_file(s.trace_path()).unwrap();

    let reqs = model.requests();
    assert_eq!(reqs.len(), 4);
    let mut expected = reqs[3].clone();
    expected.push(assistant_text("second done"));
    assert_eq!(state.history, expected);
    assert!(state.carry_over.is_empty());
    assert_eq!(state.turns, 4);
    assert_eq!(state.meta.session_id, s.id());
    assert!(state.tools_announced);
    assert_eq!(state.next_call_index, 3);
    assert_eq!(state.session_usage, last_session_usage(&records));
    assert_pairing(&state.history);

    // Every crash point of this real trace resumes with the calls paired; a crash just after a
    // request's begin gives back exactly what that request was sent, minus the history.
    resume_every_cut(dir.path(), &records);
    let begins: Vec<usize> = records
        .iter()
        .enumerate()
        .filter(|(_, r)| matches!(r.as_event(), Some(EventPayload::RequestBegin {})))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(begins.len(), 4);
    for (req, &at) in reqs.iter().zip(&begins) {
        let cut = resume_from_records(&records[..=at]).unwrap();
        assert_eq!(everything(&cut), *req);
    }
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_outputs_in_completion_order_resume_in_call_order() {
    let (dir, ws, home) = tempdirs();
    let inner = scripted(json!({"turns": [
        {"tool_calls": [
            {"name": "slow", "arguments": {"ms": 400}},
            {"name": "slow", "arguments": {"ms": 10}}]},
        {"text": "done"}
    ]}));
    let model = Recording::new(inner);
    let mut o = options(&ws, model.clone());
    let spans = Arc::new(Mutex::new(Vec::new()));
    o.config
        .tools
        .register(slow_def("slow"), Arc::new(SlowTool { spans }));
    let host = Host::start(&home).await.unwrap();
    let s = host.create_session(o).await.unwrap();
    assert_eq!(
        s.run_task("go").await.unwrap().status,
        StopReason::Completed
    );
    s.close().await.unwrap();
    let records = trace_records(s.trace_path());
    let traced: Vec<String> = records
        .iter()
        .filter_map(|r| match r.as_model() {
            Some(ModelPayload::ToolCallOutput { tool_call_id, .. }) => Some(tool_call_id.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        traced,
        ["call_1", "call_0"],
        "the trace holds completion order"
    );
    let state = resume_from_file(s.trace_path()).unwrap();
    let mut expected = model.requests()[1].clone();
    expected.push(assistant_text("done"));
    assert_eq!(state.history, expected);
    assert_eq!(state.turns, 2);
    resume_every_cut(dir.path(), &records);
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aborted_task_resumes_with_carry_over_and_then_matches_the_live_loop() {
    let (dir, ws, home) = tempdirs();
    let model = Recording::new(scripted(json!({"turns": [
        {"tool_calls": [{"name": "slow", "arguments": {"ms": 30000}}, {"name": "slow", "arguments": {"ms": 1}}]},
        {"text": "resumed"}
    ]})));
    let mut o = options(&ws, model.clone());
    let spans = Arc::new(Mutex::new(Vec::new()));
    o.config
        .tools
        .register(slow_def("slow"), Arc::new(SlowTool { spans }));
    let host = Host::start(&home).await.unwrap();
    let s = host.create_session(o).await.unwrap();
    let mut rx = s.subscribe().await.unwrap();
    s.start_task("go").await.unwrap();
    tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(m) = rx.recv().await {
            if matches!(m.as_model(), Some(ModelPayload::ToolCallOutput { tool_call_id, .. }) if tool_call_id == "call_1")
            {
                break;
            }
        }
    })
    .await
    .unwrap();
    s.abort().unwrap();
    let summary = tokio::time::timeout(Duration::from_secs(20), s.wait_idle())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(summary.status, StopReason::Aborted);

    // The trace actor writes asynchronously: wait for the task_end record.
    let path = s.trace_path().to_path_buf();
    let records = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let recs = trace_records(&path);
            if recs
                .iter()
                .any(|r| matches!(r.as_event(), Some(EventPayload::TaskEnd { .. })))
            {
                return recs;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .unwrap();
    let state = resume_from_records(&records).unwrap();
    assert_eq!(state.turns, 1);
    let carried: Vec<(String, String)> = state
        .carry_over
        .iter()
        .filter_map(|m| match m {
            ModelPayload::ToolCallOutput {
                tool_call_id,
                output,
                ..
            } => Some((tool_call_id.clone(), output.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(carried.len(), 2, "{carried:?}");
    assert_eq!(carried[0].0, "call_0");
    assert!(
        carried[0]
            .1
            .ends_with("[interrupted: tool aborted by user]"),
        "the cancelled tool's real output was traced: {}",
        carried[0].1
    );
    assert_eq!(carried[1].0, "call_1");
    assert_pairing(&everything(&state));
    resume_every_cut(dir.path(), &records);

    // The live loop continues with that carry-over; resuming afterwards gives what it sent.
    assert_eq!(
        s.run_task("continue").await.unwrap().status,
        StopReason::Completed
    );
    s.close().await.unwrap();
    let state = resume_from_file(s.trace_path()).unwrap();
    let reqs = model.requests();
    let mut expected = reqs.last().unwrap().clone();
    expected.push(assistant_text("resumed"));
    assert_eq!(state.history, expected);
    assert!(state.carry_over.is_empty());
    assert_eq!(state.turns, 2);
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retried_requests_and_a_crash_before_the_output() {
    let (dir, ws, home) = tempdirs();
    std::fs::write(ws.join("f.txt"), "x\n").unwrap();
    let model = Recording::new(scripted(json!({"turns": [
        {"error": "failed"},
        {"tool_calls": [{"name": "read_file", "arguments": {"file_path": "f.txt"}}]},
        {"error": "timeout"},
        {"text": "read it"}
    ]})));
    let host = Host::start(&home).await.unwrap();
    let s = host
        .create_session(options(&ws, model.clone()))
        .await
        .unwrap();
    assert_eq!(
        s.run_task("go").await.unwrap().status,
        StopReason::Completed
    );
    s.close().await.unwrap();
    let records = trace_records(s.trace_path());
    let state = resume_from_file(s.trace_path()).unwrap();
    let reqs = model.requests();
    assert_eq!(reqs.len(), 4);
    let mut expected = reqs[3].clone();
    expected.push(assistant_text("read it"));
    assert_eq!(state.history, expected);
    assert_eq!(state.turns, 2, "failed attempts are not turns");
    assert_eq!(state.next_call_index, 1);
    resume_every_cut(dir.path(), &records);

    // A crash right after the call's request_end (its output never written).
    let end = records
        .iter()
        .position(|r| {
            matches!(
                r.as_event(),
                Some(EventPayload::RequestEnd {
                    status: StopReason::Completed,
                    ..
                })
            )
        })
        .unwrap();
    let state = resume_from_records(&records[..=end]).unwrap();
    assert_eq!(state.turns, 1);
    assert_eq!(
        state.carry_over,
        vec![ModelPayload::ToolCallOutput {
            role: rookery::message::Role::User,
            output: EXITED_PLACEHOLDER.into(),
            images: vec![],
            tool_call_id: "call_0".into(),
            stop_reason: StopReason::Aborted,
        }]
    );
    assert_eq!(
        EXITED_PLACEHOLDER,
        "[interrupted: process exited before the tool finished]"
    );
    host.shutdown().await;
}
