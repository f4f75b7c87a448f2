//! The idle reaper of a session's commands (`commands.idle_reap`): a registered command left
//! untouched is stopped, removed and reported as `command_evicted` with `status: reaped`; one
//! that keeps producing output counts as touched and stays.

use crate::common;

use std::time::{Duration, Instant};

use common::*;
use rookery::message::{EventPayload, ModelPayload};
use rookery::{AgentConfig, Host};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untouched_command_is_reaped_and_a_chatty_one_is_not() {
    let (_d, ws, home) = tempdirs();
    let script = json!({"turns": [
        {"tool_calls": [
            {"name": "exec_command", "arguments": {"cmd": "exec sleep 60", "yield_time_ms": 250}},
            {"name": "exec_command", "arguments": {
                "cmd": "while true; do echo tick; sleep 0.1; done", "yield_time_ms": 250}}
        ]},
        {"text": "started"}
    ]});
    let host = Host::start(&home).await.unwrap();
    let mut o = options(&ws, scripted(script));
    o.command_env = vec![("HOME".into(), ws.display().to_string())];
    let mut config = AgentConfig::from_yaml("commands:\n  idle_reap: 2s\n").unwrap();
    config.retry = fast_retry(5);
    o.config = config;
    let s = host.create_session(o).await.unwrap();
    let mut rx = s.subscribe().await.unwrap();
    let summary = s.run_task("start two").await.unwrap();
    assert_eq!(summary.final_text.as_deref(), Some("started"));

    // The ids of the two commands, from their outputs.
    let mut ids = Vec::new();
    let mut reaped = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while reaped.is_empty() {
        let left = deadline.saturating_duration_since(Instant::now());
        let msg = tokio::time::timeout(left, rx.recv())
            .await
            .expect("no command was reaped within 30 s")
            .expect("stream open");
        // call_0 is the silent command, call_1 the chatty one (outputs come in any order).
        if let Some(ModelPayload::ToolCallOutput {
            output,
            tool_call_id,
            ..
        }) = msg.as_model()
            && let Some(at) = output.find("proc-")
        {
            ids.push((tool_call_id.clone(), output[at..at + 13].to_string()));
            ids.sort();
        }
        if let Some(EventPayload::CommandEvicted { process_id, status }) = msg.as_event() {
            assert_eq!(status, "reaped");
            reaped.push(process_id.clone());
        }
    }
    assert_eq!(ids.len(), 2, "{ids:?}");
    // The silent one goes first; the one printing every 100 ms is still registered.
    assert_eq!(ids[0].0, "call_0");
    let ids: Vec<String> = ids.into_iter().map(|(_, id)| id).collect();
    assert_eq!(reaped, [ids[0].clone()]);
    let services = s.live_counts().await.unwrap();
    assert_eq!(services.0, 1, "the chatty command is still registered");
    s.close().await.unwrap();
    let records = trace_records(s.trace_path());
    let traced = records.iter().any(|r| {
        matches!(r.as_event(), Some(EventPayload::CommandEvicted { process_id, status })
            if *process_id == ids[0] && status == "reaped")
    });
    assert!(traced, "command_evicted reaped is in the trace");
}
