//! Steering through the session API: a steer joins the running round after its calls finish
//! and before the next request, is in the trace before that request, keeps a text-only turn
//! going, starts a task when idle, and survives a resume as input of the next task.

use crate::common;

use std::time::Duration;

use common::*;
use rookery::Host;
use rookery::SteerOutcome;
use rookery::message::{EventPayload, ModelPayload, OmniMessage, Role, StopReason};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(30);

/// A command that runs until `go` exists in the workspace.
fn blocked_call() -> serde_json::Value {
    json!({"name": "exec_command", "arguments": {
        "description": "wait", "yield_time_ms": 60000,
        "cmd": "while [ ! -f go ]; do sleep 0.05; done; echo released"}})
}

fn steer_text(text: &str) -> String {
    format!("[user_steering]\n{text}\n[/user_steering]")
}

fn user_texts(history: &[ModelPayload]) -> Vec<String> {
    history
        .iter()
        .filter_map(|m| match m {
            ModelPayload::Text {
                role: Role::User,
                text,
                ..
            } => Some(text.clone()),
            _ => None,
        })
        .collect()
}

/// Waits for the first message of `rx` that `pred` accepts.
async fn wait_for(
    rx: &mut rookery::MessageReceiver,
    pred: impl Fn(&OmniMessage) -> bool,
) -> OmniMessage {
    tokio::time::timeout(WAIT, async {
        loop {
            let m = rx.recv().await.expect("stream open");
            if pred(&m) {
                return m.as_ref().clone();
            }
        }
    })
    .await
    .expect("message in time")
}

fn is_tool_call(m: &OmniMessage) -> bool {
    !m.has_origin() && matches!(m.as_model(), Some(ModelPayload::ToolCall { .. }))
}

fn position(records: &[OmniMessage], pred: impl Fn(&OmniMessage) -> bool) -> Vec<usize> {
    records
        .iter()
        .enumerate()
        .filter(|(_, r)| pred(r))
        .map(|(i, _)| i)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_steer_joins_the_round_after_its_calls_and_is_traced_before_the_next_request() {
    let (_d, ws, home) = tempdirs();
    let model = Recording::new(scripted(json!({"turns": [
        {"tool_calls": [blocked_call()]}, {"text": "done"}]})));
    let host = Host::start(&home).await.unwrap();
    let s = host
        .create_session(options(&ws, model.clone()))
        .await
        .unwrap();
    let mut rx = s.subscribe().await.unwrap();
    s.start_task("work").await.unwrap();
    wait_for(&mut rx, is_tool_call).await;
    assert_eq!(s.steer("also list b").await.unwrap(), SteerOutcome::Queued);
    // The steer is streamed on receipt, while the call still runs.
    wait_for(&mut rx, |m| {
        matches!(m.as_model(), Some(ModelPayload::Text { text, .. }) if *text == steer_text("also list b"))
    })
    .await;
    std::fs::write(ws.join("go"), "").unwrap();
    let summary = tokio::time::timeout(WAIT, s.wait_idle())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(summary.status, StopReason::Completed);
    let requests = model.requests();
    assert_eq!(requests.len(), 2);
    let second = &requests[1];
    // The call's output, then the steer: the same round, one request.
    assert!(matches!(
        &second[second.len() - 2],
        ModelPayload::ToolCallOutput { output, .. } if output.contains("released")
    ));
    assert_eq!(
        user_texts(second).last().cloned(),
        Some(steer_text("also list b"))
    );
    s.close().await.unwrap();
    let records = trace_records(s.trace_path());
    let steer = position(
        &records,
        |r| matches!(r.as_model(), Some(ModelPayload::Text { text, .. }) if *text == steer_text("also list b")),
    );
    let begins = position(&records, |r| {
        matches!(r.as_event(), Some(EventPayload::RequestBegin {}))
    });
    let outputs = position(&records, |r| {
        matches!(r.as_model(), Some(ModelPayload::ToolCallOutput { .. }))
    });
    assert_eq!(steer.len(), 1, "traced once");
    assert!(begins[0] < steer[0] && steer[0] < begins[1]);
    // Received while the call ran: recorded before its output.
    assert!(steer[0] < outputs[0]);
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_steer_keeps_a_text_only_turn_going_and_idle_steer_starts_a_task() {
    let (_d, ws, home) = tempdirs();
    let model = Recording::new(scripted(json!({"turns": [
        {"text": "first answer", "delay_ms": 1500}, {"text": "steered answer"}, {"text": "third"}]})));
    let host = Host::start(&home).await.unwrap();
    let s = host
        .create_session(options(&ws, model.clone()))
        .await
        .unwrap();
    let mut rx = s.subscribe().await.unwrap();
    s.start_task("hello").await.unwrap();
    wait_for(&mut rx, |m| {
        !m.has_origin() && matches!(m.as_event(), Some(EventPayload::RequestBegin {}))
    })
    .await;
    assert_eq!(s.steer("say more").await.unwrap(), SteerOutcome::Queued);
    let summary = s.wait_idle().await.unwrap().unwrap();
    assert_eq!(summary.final_text.as_deref(), Some("steered answer"));
    let requests = model.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(
        user_texts(&requests[1]).last().cloned(),
        Some(steer_text("say more"))
    );
    // Idle: the steer is a new task.
    assert_eq!(s.steer("next one").await.unwrap(), SteerOutcome::Started);
    let summary = s.wait_idle().await.unwrap().unwrap();
    assert_eq!(summary.final_text.as_deref(), Some("third"));
    assert_eq!(
        user_texts(&model.requests()[2]).last().cloned(),
        Some("next one".to_string())
    );
    let e = s.steer("  ").await.unwrap_err();
    assert_eq!(e.to_string(), "steer text must not be empty");
    s.close().await.unwrap();
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unconsumed_steer_survives_resume_as_input_of_the_next_task() {
    let (_d, ws, home) = tempdirs();
    let script = json!({"turns": [{"tool_calls": [blocked_call()]}, {"text": "after resume"}]});
    let model = Recording::new(scripted(script.clone()));
    let host = Host::start(&home).await.unwrap();
    let s = host
        .create_session(options(&ws, model.clone()))
        .await
        .unwrap();
    let id = s.id().to_string();
    let mut rx = s.subscribe().await.unwrap();
    s.start_task("work").await.unwrap();
    wait_for(&mut rx, is_tool_call).await;
    assert_eq!(s.steer("remember me").await.unwrap(), SteerOutcome::Queued);
    // Closing aborts the task before the steer is consumed.
    s.close().await.unwrap();
    host.shutdown().await;

    let host = Host::start(&home).await.unwrap();
    let model = Recording::new(scripted(script));
    let s = host
        .resume_session(&id, options(&ws, model.clone()))
        .await
        .unwrap();
    let summary = s.run_task("carry on").await.unwrap();
    assert_eq!(summary.final_text.as_deref(), Some("after resume"));
    let first = &model.requests()[0];
    assert_paired(first);
    let texts = user_texts(first);
    let steer = texts.iter().position(|t| *t == steer_text("remember me"));
    let prompt = texts.iter().position(|t| t == "carry on");
    assert!(
        matches!((steer, prompt), (Some(a), Some(b)) if a < b),
        "{texts:#?}"
    );
    s.close().await.unwrap();
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_steer_left_by_an_abort_joins_the_next_task_live() {
    let (_d, ws, home) = tempdirs();
    let model = Recording::new(scripted(json!({"turns": [
        {"tool_calls": [blocked_call()]}, {"text": "next"}]})));
    let host = Host::start(&home).await.unwrap();
    let s = host
        .create_session(options(&ws, model.clone()))
        .await
        .unwrap();
    let mut rx = s.subscribe().await.unwrap();
    s.start_task("work").await.unwrap();
    wait_for(&mut rx, is_tool_call).await;
    s.steer("keep this").await.unwrap();
    s.abort().unwrap();
    assert_eq!(
        s.wait_idle().await.unwrap().unwrap().status,
        StopReason::Aborted
    );
    s.run_task("again").await.unwrap();
    let last = model.requests().pop().unwrap();
    assert_paired(&last);
    let texts = user_texts(&last);
    assert_eq!(
        texts
            .iter()
            .filter(|t| **t == steer_text("keep this"))
            .count(),
        1
    );
    assert_eq!(texts.last().map(String::as_str), Some("again"));
    s.close().await.unwrap();
    host.shutdown().await;
}
