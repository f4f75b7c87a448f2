//! The tool-call budget through the library: calls beyond `max_parallel` start in call order
//! once a slot frees, and a call aborted while it waits for a slot still gets exactly one
//! output (the interrupted placeholder), so the trace pairs every call.

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use rookery::Host;
use rookery::message::{EventPayload, ModelPayload, StopReason};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_calls_start_in_call_order() {
    let (_d, ws, home) = tempdirs();
    let calls: Vec<_> = (0..6)
        .map(|_| json!({"name": "slow", "arguments": {"ms": 50}}))
        .collect();
    let model = scripted(json!({"turns": [{"tool_calls": calls}, {"text": "done"}]}));
    let mut o = options(&ws, model);
    o.config.max_parallel = 1;
    let spans = Arc::new(Mutex::new(Vec::new()));
    o.config.tools.register(
        slow_def("slow"),
        Arc::new(SlowTool {
            spans: spans.clone(),
        }),
    );
    let host = Host::start(&home).await.unwrap();
    let s = host.create_session(o).await.unwrap();
    let summary = tokio::time::timeout(Duration::from_secs(60), s.run_task("go"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(summary.status, StopReason::Completed);
    let spans = spans.lock().unwrap().clone();
    let order: Vec<&str> = spans.iter().map(|(id, _, _)| id.as_str()).collect();
    assert_eq!(
        order,
        ["call_0", "call_1", "call_2", "call_3", "call_4", "call_5"]
    );
    // One at a time: each started after the previous one ended.
    for w in spans.windows(2) {
        assert!(w[1].1 >= w[0].2, "{} overlapped {}", w[1].0, w[0].0);
    }
    s.close().await.unwrap();
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_aborted_while_waiting_for_a_slot_is_paired() {
    let (_d, ws, home) = tempdirs();
    let model = Recording::new(scripted(json!({"turns": [
        {"tool_calls": [{"name": "slow", "arguments": {"ms": 30000}},
                        {"name": "slow", "arguments": {"ms": 1}}]},
        {"text": "after the abort"}
    ]})));
    let mut o = options(&ws, model.clone());
    o.config.max_parallel = 1;
    let spans = Arc::new(Mutex::new(Vec::new()));
    o.config.tools.register(
        slow_def("slow"),
        Arc::new(SlowTool {
            spans: spans.clone(),
        }),
    );
    let host = Host::start(&home).await.unwrap();
    let s = host.create_session(o).await.unwrap();
    let mut rx = s.subscribe().await.unwrap();
    s.start_task("go").await.unwrap();
    // The first call runs (its first text streamed); the second was approved and waits for its
    // slot.
    tokio::time::timeout(Duration::from_secs(20), async {
        let (mut running, mut approved) = (false, false);
        while let Some(m) = rx.recv().await {
            if matches!(m.as_model(), Some(ModelPayload::PartialToolCallOutput { tool_call_id, output, .. })
                if tool_call_id == "call_0" && output.contains("slept start"))
            {
                running = true;
            }
            if matches!(m.as_event(), Some(EventPayload::ApprovalDecision { tool_call_id, .. })
                if tool_call_id == "call_1")
            {
                approved = true;
            }
            if running && approved {
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
        .unwrap();
    assert_eq!(summary.map(|x| x.status), Some(StopReason::Aborted));
    // The waiting call never ran.
    let ran: Vec<String> = spans
        .lock()
        .unwrap()
        .iter()
        .map(|(id, _, _)| id.clone())
        .collect();
    assert_eq!(ran, ["call_0"]);
    s.close().await.unwrap();
    let recs = trace_records(s.trace_path());
    let outs: Vec<(String, String, StopReason)> = recs
        .iter()
        .filter_map(|r| match r.as_model() {
            Some(ModelPayload::ToolCallOutput {
                tool_call_id,
                output,
                stop_reason,
                ..
            }) => Some((tool_call_id.clone(), output.clone(), *stop_reason)),
            _ => None,
        })
        .collect();
    assert_eq!(outs.len(), 2, "{outs:?}");
    let second = outs
        .iter()
        .find(|o| o.0 == "call_1")
        .expect("call_1 output");
    assert_eq!(second.1, "[interrupted: tool aborted by user]");
    assert_eq!(second.2, StopReason::Aborted);
    host.shutdown().await;
}
