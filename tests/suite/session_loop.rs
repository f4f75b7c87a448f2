//! The turn loop through the library API: approvals, concurrency, call order, retries, auth,
//! max turns, abort carry-over, tool and session panics, and the trace after a normal close.

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use rookery::approval::DenyAllApprover;
use rookery::message::{EventPayload, ModelPayload, StopReason};
use rookery::{AgentConfig, Host};
use serde_json::json;

fn outputs_of(history: &[ModelPayload]) -> Vec<(String, String)> {
    history
        .iter()
        .filter_map(|m| match m {
            ModelPayload::ToolCallOutput {
                tool_call_id,
                output,
                ..
            } => Some((tool_call_id.clone(), output.clone())),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_loop_writes_every_record_in_order() {
    let (_d, ws, home) = tempdirs();
    let model = scripted(json!({"turns": [
        {"text": "writing", "tool_calls": [
            {"name": "write_file", "arguments": {"file_path": "a.txt", "content": "hello\n"}},
            {"name": "read_file", "arguments": {"file_path": "a.txt"}}]},
        {"text": "all done"}
    ]}));
    let host = Host::start(&home).await.unwrap();
    let s = host.create_session(options(&ws, model)).await.unwrap();
    let summary = s.run_task("go").await.unwrap();
    assert_eq!(summary.status, StopReason::Completed);
    assert_eq!(summary.final_text.as_deref(), Some("all done"));
    assert_eq!(summary.tool_calls, 2);
    s.close().await.unwrap();
    let records = trace_records(s.trace_path());
    let k = kinds(&records);
    assert_eq!(k[0], "session_meta");
    assert_eq!(k[1], "text"); // the user's input, before request_begin
    assert_eq!(k[2], "tool_list_ready");
    assert_eq!(k[3], "request_begin");
    assert_eq!(k.last().map(String::as_str), Some("task_end"));
    for id in ["call_0", "call_1"] {
        let pos = |f: &dyn Fn(&rookery::OmniMessage) -> bool| records.iter().position(f);
        let call = pos(
            &|r| matches!(r.as_model(), Some(ModelPayload::ToolCall { tool_call_id, .. }) if tool_call_id == id),
        );
        let dec = pos(
            &|r| matches!(r.as_event(), Some(EventPayload::ApprovalDecision { tool_call_id, .. }) if tool_call_id == id),
        );
        let out = pos(
            &|r| matches!(r.as_model(), Some(ModelPayload::ToolCallOutput { tool_call_id, .. }) if tool_call_id == id),
        );
        let (call, dec, out) = (call.unwrap(), dec.unwrap(), out.unwrap());
        assert!(
            call < dec && dec < out,
            "{id}: call {call} decision {dec} output {out}"
        );
        let decisions = records
            .iter()
            .filter(|r| matches!(r.as_event(), Some(EventPayload::ApprovalDecision { tool_call_id, .. }) if tool_call_id == id))
            .count();
        assert_eq!(decisions, 1);
    }
    assert_eq!(k.iter().filter(|x| *x == "request_end").count(), 2);
    assert_eq!(k.iter().filter(|x| *x == "token_usage").count(), 2);
    assert!(!k.iter().any(|x| x.starts_with("partial_")));
    assert_eq!(
        std::fs::read_to_string(ws.join("a.txt")).unwrap(),
        "hello\n"
    );
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approved_calls_overlap_and_outputs_return_in_call_order() {
    let (_d, ws, home) = tempdirs();
    let inner = scripted(json!({"turns": [
        {"tool_calls": [
            {"name": "slow", "arguments": {"ms": 600}},
            {"name": "slow", "arguments": {"ms": 50}}]},
        {"text": "done"}
    ]}));
    let model = Recording::new(inner);
    let spans = Arc::new(Mutex::new(Vec::new()));
    let mut o = options(&ws, model.clone());
    o.config.tools.register(
        slow_def("slow"),
        Arc::new(SlowTool {
            spans: spans.clone(),
        }),
    );
    let host = Host::start(&home).await.unwrap();
    let s = host.create_session(o).await.unwrap();
    let mut rx = s.subscribe().await.unwrap();
    assert_eq!(
        s.run_task("go").await.unwrap().status,
        StopReason::Completed
    );
    // Overlap: the short call started before the long one ended.
    let spans = spans.lock().unwrap().clone();
    let long = spans.iter().find(|s| s.0 == "call_0").unwrap();
    let short = spans.iter().find(|s| s.0 == "call_1").unwrap();
    assert!(short.1 < long.2, "calls did not overlap");
    // Stream order is completion order…
    let mut stream_order = Vec::new();
    while let Ok(m) = rx.try_recv() {
        if let Some(ModelPayload::ToolCallOutput { tool_call_id, .. }) = m.as_model() {
            stream_order.push(tool_call_id.clone());
        }
    }
    assert_eq!(stream_order, vec!["call_1", "call_0"]);
    // …but the next request sees call order.
    let reqs = model.requests();
    assert_eq!(reqs.len(), 2);
    let outs: Vec<String> = outputs_of(&reqs[1]).into_iter().map(|o| o.0).collect();
    assert_eq!(outs, vec!["call_0", "call_1"]);
    assert_paired(&reqs[1]);
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn denial_gives_the_exact_text_and_the_loop_goes_on() {
    let (_d, ws, home) = tempdirs();
    let model = Recording::new(scripted(json!({"turns": [
        {"tool_calls": [{"name": "write_file", "arguments": {"file_path": "x", "content": "y"}}]},
        {"text": "ok"}
    ]})));
    let mut o = options(&ws, model.clone());
    o.approver = Arc::new(DenyAllApprover);
    let host = Host::start(&home).await.unwrap();
    let s = host.create_session(o).await.unwrap();
    assert_eq!(
        s.run_task("go").await.unwrap().status,
        StopReason::Completed
    );
    let reqs = model.requests();
    match reqs[1].last() {
        Some(ModelPayload::ToolCallOutput {
            output,
            stop_reason,
            ..
        }) => {
            assert_eq!(output, "Tool call denied by user.");
            assert_eq!(*stop_reason, StopReason::Aborted);
        }
        other => panic!("unexpected {other:?}"),
    }
    assert!(!ws.join("x").exists());
    s.close().await.unwrap();
    let records = trace_records(s.trace_path());
    assert!(records.iter().any(|r| matches!(
        r.as_event(),
        Some(EventPayload::ApprovalDecision {
            decision: rookery::message::Decision::Deny,
            ..
        })
    )));
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_tool_becomes_a_failed_output_and_the_session_goes_on() {
    let (_d, ws, home) = tempdirs();
    let model = Recording::new(scripted(json!({"turns": [
        {"tool_calls": [{"name": "boom", "arguments": {}}, {"name": "nope", "arguments": {}}]},
        {"text": "survived"}
    ]})));
    let mut o = options(&ws, model.clone());
    o.config
        .tools
        .register(slow_def("boom"), Arc::new(PanicTool));
    let host = Host::start(&home).await.unwrap();
    let s = host.create_session(o).await.unwrap();
    let summary = s.run_task("go").await.unwrap();
    assert_eq!(summary.status, StopReason::Completed);
    assert_eq!(summary.final_text.as_deref(), Some("survived"));
    let outs = outputs_of(&model.requests()[1]);
    assert!(
        outs[0]
            .1
            .starts_with("[tool error] tool panicked: boom in tool"),
        "{:?}",
        outs[0]
    );
    assert_eq!(outs[1].1, "Unknown tool: nope");
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transient_model_errors_are_retried_with_attempt_numbers() {
    let (_d, ws, home) = tempdirs();
    let model = scripted(json!({"turns": [
        {"error": "failed"}, {"error": "timeout"}, {"error": "malformed"}, {"text": "ok"}
    ]}));
    let host = Host::start(&home).await.unwrap();
    let s = host.create_session(options(&ws, model)).await.unwrap();
    assert_eq!(
        s.run_task("go").await.unwrap().status,
        StopReason::Completed
    );
    s.close().await.unwrap();
    let ends: Vec<EventPayload> = trace_records(s.trace_path())
        .iter()
        .filter_map(|r| r.as_event().cloned())
        .filter(|e| matches!(e, EventPayload::RequestEnd { .. }))
        .collect();
    let expect = [
        (StopReason::Failed, Some(1), Some(0)),
        (StopReason::Timeout, Some(2), Some(0)),
        (StopReason::Malformed, Some(3), Some(0)),
        (StopReason::Completed, Some(4), None),
    ];
    assert_eq!(ends.len(), 4);
    for (e, (st, at, retry)) in ends.iter().zip(expect) {
        match e {
            EventPayload::RequestEnd {
                status,
                attempt,
                retry_in_ms,
                error_message,
            } => {
                assert_eq!((*status, *attempt, *retry_in_ms), (st, at, retry));
                assert_eq!(error_message.is_some(), st != StopReason::Completed);
            }
            _ => unreachable!(),
        }
    }
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exhausted_retries_and_auth_end_the_task() {
    let (_d, ws, home) = tempdirs();
    let host = Host::start(&home).await.unwrap();
    let mut o = options(
        &ws,
        scripted(json!({"turns": [{"error": "failed", "repeat": 3}, {"text": "never"}]})),
    );
    o.config.retry = fast_retry(2);
    let s = host.create_session(o).await.unwrap();
    let summary = s.run_task("go").await.unwrap();
    assert_eq!(summary.status, StopReason::Failed);
    assert_eq!(
        summary.abort_reason.as_deref(),
        Some("llm request failed after 2 retries: scripted failed error")
    );

    let model = Recording::new(scripted(
        json!({"turns": [{"error": "auth"}, {"text": "never"}]}),
    ));
    let s2 = host
        .create_session(options(&ws, model.clone()))
        .await
        .unwrap();
    let summary = s2.run_task("go").await.unwrap();
    assert_eq!(summary.status, StopReason::Failed);
    assert_eq!(model.requests().len(), 1, "auth must not be retried");
    assert!(
        summary
            .abort_reason
            .unwrap_or_default()
            .starts_with("llm request error:")
    );
    s2.close().await.unwrap();
    let recs = trace_records(s2.trace_path());
    assert!(recs.iter().any(|r| matches!(
        r.as_event(),
        Some(EventPayload::RequestEnd {
            status: StopReason::Auth,
            retry_in_ms: None,
            ..
        })
    )));
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_turns_stops_with_the_failed_text_and_keeps_pairing() {
    let (_d, ws, home) = tempdirs();
    std::fs::write(ws.join("f.txt"), "x\n").unwrap();
    let model = Recording::new(scripted(json!({"turns": [
        {"tool_calls": [{"name": "read_file", "arguments": {"file_path": "f.txt"}}]},
        {"text": "after"}
    ]})));
    let mut o = options(&ws, model.clone());
    o.config.max_turns = 1;
    let host = Host::start(&home).await.unwrap();
    let s = host.create_session(o).await.unwrap();
    let mut rx = s.subscribe().await.unwrap();
    let summary = s.run_task("go").await.unwrap();
    assert_eq!(summary.status, StopReason::Failed);
    let mut saw = false;
    while let Ok(m) = rx.try_recv() {
        if let Some(ModelPayload::Text {
            text, stop_reason, ..
        }) = m.as_model()
            && text == "[reached max turns (1); stopping]"
        {
            assert_eq!(*stop_reason, StopReason::Failed);
            saw = true;
        }
        assert!(
            !matches!(m.as_event(), Some(EventPayload::Abort { .. })),
            "max turns is not an abort"
        );
    }
    assert!(saw);
    assert_eq!(model.requests().len(), 1);
    // The call made before the limit still has exactly one output in the trace.
    s.close().await.unwrap();
    let outputs = trace_records(s.trace_path())
        .iter()
        .filter(|r| matches!(r.as_model(), Some(ModelPayload::ToolCallOutput { tool_call_id, .. }) if tool_call_id == "call_0"))
        .count();
    assert_eq!(outputs, 1);
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abort_mid_tool_keeps_every_call_paired() {
    let (_d, ws, home) = tempdirs();
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
    // Wait until the short call finished (the long one is running).
    tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(m) = rx.recv().await {
            if matches!(m.as_model(), Some(ModelPayload::ToolCallOutput { tool_call_id, .. }) if tool_call_id == "call_1") {
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
    assert_eq!(summary.abort_reason.as_deref(), Some("aborted by user"));
    // The next task's first request carries both outputs, in call order, one each.
    assert_eq!(
        s.run_task("continue").await.unwrap().status,
        StopReason::Completed
    );
    let reqs = model.requests();
    let last = reqs.last().unwrap();
    assert_paired(last);
    let outs = outputs_of(last);
    assert_eq!(
        outs.iter().map(|o| o.0.as_str()).collect::<Vec<_>>(),
        vec!["call_0", "call_1"]
    );
    assert!(
        outs[0].1.ends_with("[interrupted: tool aborted by user]"),
        "{}",
        outs[0].1
    );
    s.close().await.unwrap();
    let recs = trace_records(s.trace_path());
    assert!(recs.iter().any(|r| matches!(r.as_event(), Some(EventPayload::Abort { reason: Some(r) }) if r == "aborted by user")));
    assert!(recs.iter().any(|r| matches!(
        r.as_event(),
        Some(EventPayload::TaskEnd {
            status: StopReason::Aborted,
            ..
        })
    )));
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_task_while_running_is_refused() {
    let (_d, ws, home) = tempdirs();
    let model = scripted(json!({"turns": [{"text": "slow", "delay_ms": 5000}]}));
    let host = Host::start(&home).await.unwrap();
    let s = host.create_session(options(&ws, model)).await.unwrap();
    s.start_task("one").await.unwrap();
    let err = s.start_task("two").await.unwrap_err();
    assert!(
        matches!(err, rookery::RookeryError::SessionBusy(_)),
        "{err}"
    );
    s.abort().unwrap();
    let summary = s.wait_idle().await.unwrap().unwrap();
    assert_eq!(summary.status, StopReason::Aborted);
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_actor_panic_leaves_other_sessions_and_the_host_working() {
    let (_d, ws, home) = tempdirs();
    let script = json!({"turns": [{"text": "hello", "repeat": 5}]});
    let host = Host::start(&home).await.unwrap();
    let a = host
        .create_session(options(&ws, scripted(script.clone())))
        .await
        .unwrap();
    let b = host
        .create_session(options(&ws, scripted(script.clone())))
        .await
        .unwrap();
    let mut rx = a.subscribe().await.unwrap();
    a.inject_panic_for_tests();
    // The crashed session's stream ends with abort + task_end.
    let mut tail = Vec::new();
    while let Some(m) = tokio::time::timeout(Duration::from_secs(10), rx.recv())
        .await
        .unwrap()
    {
        tail.push(m);
    }
    assert!(
        matches!(tail.first().and_then(|m| m.as_event()), Some(EventPayload::Abort { reason: Some(r) }) if r.starts_with("session actor failed"))
    );
    assert!(a.start_task("x").await.is_err());
    assert_eq!(
        b.run_task("still there?")
            .await
            .unwrap()
            .final_text
            .as_deref(),
        Some("hello")
    );
    let c = host
        .create_session(options(&ws, scripted(script)))
        .await
        .unwrap();
    assert_eq!(
        c.run_task("new").await.unwrap().status,
        StopReason::Completed
    );
    // The crashed session's trace is complete and ends with the abort record.
    let path = a.trace_path().to_path_buf();
    let recs = tokio::time::timeout(Duration::from_secs(10), async {
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
    assert_eq!(kinds(&recs)[0], "session_meta");
    assert!(
        recs.iter()
            .any(|r| matches!(r.as_event(), Some(EventPayload::Abort { .. })))
    );
    assert_eq!(host.sessions().await.unwrap().len(), 2);
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_torn_trace_is_read_and_appended_to() {
    let (_d, _ws, home) = tempdirs();
    let path = home.join("t.jsonl");
    std::fs::create_dir_all(&home).unwrap();
    let good = rookery::message::build::user_text("first", None).to_json();
    std::fs::write(
        &path,
        format!("{good}\n{{\"timestamp\":\"t\",\"type\":\"model_m"),
    )
    .unwrap();
    let read = rookery::trace::reader::read_trace(&path).unwrap();
    assert_eq!(read.records.len(), 1);
    assert!(read.torn_tail);
    let mut f = rookery::trace::file::TraceFile::open(&path).unwrap();
    f.append(
        rookery::message::build::user_text("second", None)
            .to_json()
            .as_bytes(),
    )
    .unwrap();
    let read = rookery::trace::reader::read_trace(&path).unwrap();
    let texts: Vec<String> = read
        .records
        .iter()
        .filter_map(|r| match r.as_model() {
            Some(ModelPayload::Text { text, .. }) => Some(text.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(texts, vec!["first", "second"]);
    assert_eq!(read.skipped_lines, vec![2]);
    assert!(!read.torn_tail);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_tools_builtin_limits_what_the_model_sees() {
    let (_d, ws, home) = tempdirs();
    let cfg = AgentConfig::from_yaml("tools:\n  builtin: [read_file]\n").unwrap();
    let model = Recording::new(scripted(json!({"turns": [
        {"tool_calls": [{"name": "write_file", "arguments": {"file_path": "x", "content": "y"}}]},
        {"text": "ok"}
    ]})));
    let mut o = options(&ws, model.clone());
    o.config = cfg;
    let host = Host::start(&home).await.unwrap();
    let s = host.create_session(o).await.unwrap();
    s.run_task("go").await.unwrap();
    let outs = outputs_of(&model.requests()[1]);
    assert_eq!(outs[0].1, "Unknown tool: write_file");
    assert!(!ws.join("x").exists());
    host.shutdown().await;
}
