//! Context compaction through the library API: by usage, by turns and on demand; summarize and
//! discard; a failed summary attempt retried and `auth` stopping at once; the summary's place in
//! the next request; and the trace rotating to `_002` / `_003` with a resume from each file.

use crate::common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::*;
use rookery::actors::session::CompactStart;
use rookery::message::{EventPayload, ModelPayload, OmniMessage, Role, StopReason};
use rookery::{AgentConfig, Host, RookeryError};
use serde_json::{Value, json};

fn config(yaml: &str) -> AgentConfig {
    let mut c = AgentConfig::from_yaml(yaml).unwrap();
    c.retry = fast_retry(5);
    c
}

fn text_of(m: &ModelPayload) -> Option<&str> {
    match m {
        ModelPayload::Text { text, .. } => Some(text),
        _ => None,
    }
}

fn file(home: &Path, id: &str, n: u32) -> PathBuf {
    let first = rookery::trace::paths::trace_path(home, id);
    first.with_file_name(format!("{id}_{n:03}.jsonl"))
}

fn events(records: &[OmniMessage]) -> Vec<Value> {
    records
        .iter()
        .filter_map(|r| r.as_event())
        .filter(|e| {
            matches!(
                e,
                EventPayload::CompactionBegin { .. } | EventPayload::CompactionEnd { .. }
            )
        })
        .map(|e| serde_json::to_value(e).unwrap())
        .collect()
}

/// A session whose model is wrapped in a recorder.
async fn session(
    home: &Path,
    ws: &Path,
    script: Value,
    yaml: &str,
) -> (Host, rookery::SessionHandle, Arc<Recording>) {
    let model = Recording::new(scripted(script));
    let host = Host::start(home).await.unwrap();
    let mut o = options(ws, model.clone());
    o.config = config(yaml);
    let s = host.create_session(o).await.unwrap();
    (host, s, model)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_over_the_threshold_compacts_before_the_next_request_and_rotates() {
    let (_d, ws, home) = tempdirs();
    std::fs::write(ws.join("a.txt"), "alpha\n").unwrap();
    let script = json!({"turns": [
        {"tool_calls": [{"name": "read_file", "arguments": {"file_path": "a.txt"}}],
         "usage": {"input": 1500, "output": 20}},
        {"text": "[summary]\nread a.txt: alpha\n[/summary]"},
        {"text": "done"}
    ]});
    let (_host, s, model) = session(&home, &ws, script, "compaction:\n  max_context: 1000\n").await;
    let summary = s.run_task("read it").await.unwrap();
    assert_eq!(summary.status, StopReason::Completed);
    assert_eq!(summary.final_text.as_deref(), Some("done"));
    let requests = model.requests();
    assert_eq!(requests.len(), 3);
    // The summary request: the current context, the call's output, then the prompt.
    let compaction = &requests[1];
    assert!(matches!(
        compaction[compaction.len() - 2],
        ModelPayload::ToolCallOutput { .. }
    ));
    let prompt = text_of(compaction.last().unwrap()).unwrap();
    assert!(
        prompt.contains("[summary]") && prompt.contains("[/summary]"),
        "{prompt}"
    );
    assert_eq!(text_of(&compaction[0]), Some("read it"));
    // The next request starts the new context with the summary, and nothing else.
    assert_eq!(
        requests[2]
            .iter()
            .map(|m| text_of(m).unwrap_or("?"))
            .collect::<Vec<_>>(),
        ["[context_summary]\nread a.txt: alpha\n[/context_summary]"]
    );
    s.close().await.unwrap();

    let old = trace_records(file(&home, s.id(), 1));
    let ev = events(&old);
    assert_eq!(ev[0]["type"], "compaction_begin");
    assert_eq!(ev[0]["reason"], "context");
    assert_eq!(ev[0]["mode"], "summarize");
    assert_eq!(ev[0]["context"], 1520);
    assert_eq!(ev[0]["turns"], 1);
    assert_eq!(ev[1]["type"], "compaction_end");
    assert_eq!(ev[1]["status"], "completed");
    assert!(ev[1].get("attempt").is_none());
    assert_eq!(
        kinds(&old).last().map(String::as_str),
        Some("compaction_end")
    );
    let new = trace_records(file(&home, s.id(), 2));
    let k = kinds(&new);
    assert_eq!(
        &k[..4],
        ["session_meta", "tool_list_ready", "text", "request_begin"]
    );
    assert_eq!(k.last().map(String::as_str), Some("task_end"));
    assert!(!file(&home, s.id(), 3).exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_turns_triggers_a_compaction_with_reason_turns() {
    let (_d, ws, home) = tempdirs();
    let script = json!({"turns": [
        {"tool_calls": [{"name": "list_commands"}], "repeat": 2},
        {"text": "[summary]two turns[/summary]"},
        {"text": "done"}
    ]});
    let (_host, s, model) = session(&home, &ws, script, "compaction:\n  max_turns: 2\n").await;
    let summary = s.run_task("go").await.unwrap();
    assert_eq!(summary.status, StopReason::Completed);
    assert_eq!(model.requests().len(), 4);
    s.close().await.unwrap();
    let ev = events(&trace_records(file(&home, s.id(), 1)));
    assert_eq!(ev.len(), 2);
    assert_eq!(ev[0]["reason"], "turns");
    assert_eq!(ev[0]["turns"], 2);
    assert_eq!(ev[1]["status"], "completed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manual_compaction_of_an_idle_session_and_the_summary_before_the_next_prompt() {
    let (_d, ws, home) = tempdirs();
    let script = json!({"turns": [
        {"text": "hello"},
        {"text": "[summary]said hello[/summary]"},
        {"text": "again"}
    ]});
    let (_host, s, model) = session(&home, &ws, script, "").await;
    let host2 = Host::start(&home).await.unwrap();
    let fresh = host2
        .create_session(options(&ws, scripted(json!({"turns": []}))))
        .await
        .unwrap();
    assert!(matches!(
        fresh.compact().await,
        Err(RookeryError::NothingToCompact(_))
    ));
    s.run_task("hi").await.unwrap();
    assert_eq!(s.compact().await.unwrap(), CompactStart::Started);
    s.wait_idle().await.unwrap();
    let summary = s.run_task("next").await.unwrap();
    assert_eq!(summary.final_text.as_deref(), Some("again"));
    let requests = model.requests();
    assert_eq!(requests.len(), 3);
    let texts: Vec<&str> = requests[2].iter().filter_map(text_of).collect();
    assert_eq!(
        texts,
        ["[context_summary]\nsaid hello\n[/context_summary]", "next"]
    );
    s.close().await.unwrap();
    let ev = events(&trace_records(file(&home, s.id(), 1)));
    assert_eq!(ev[0]["reason"], "manual");
    assert_eq!(ev[1]["status"], "completed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manual_compaction_during_a_task_runs_before_its_next_request() {
    let (_d, ws, home) = tempdirs();
    let script = json!({"turns": [
        {"tool_calls": [{"name": "exec_command", "arguments": {"cmd": "sleep 1; echo slept"}}]},
        {"text": "[summary]slept[/summary]"},
        {"text": "done"}
    ]});
    let (_host, s, model) = session(&home, &ws, script, "").await;
    s.start_task("go").await.unwrap();
    let scheduled = s.compact().await.unwrap();
    let summary = s.wait_idle().await.unwrap().unwrap();
    assert_eq!(summary.status, StopReason::Completed);
    // Either the compaction was scheduled while the command ran, or the task was already
    // over; both are legitimate, only the first compacts inside the task.
    if scheduled == CompactStart::Scheduled {
        let requests = model.requests();
        assert_eq!(requests.len(), 3);
        assert!(
            text_of(requests[1].last().unwrap())
                .unwrap()
                .contains("[/summary]")
        );
        assert!(
            text_of(&requests[2][0])
                .unwrap()
                .starts_with("[context_summary]")
        );
    }
    s.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_summary_attempts_are_retried_with_a_note_and_calls_get_failed_outputs() {
    let (_d, ws, home) = tempdirs();
    let script = json!({"turns": [
        {"text": "hello"},
        {"tool_calls": [{"name": "list_commands"}]},
        {"text": "no markers here"},
        {"error": "timeout"},
        {"text": "[summary]third time[/summary]"},
        {"text": "after"}
    ]});
    let (_host, s, model) = session(&home, &ws, script, "").await;
    s.run_task("hi").await.unwrap();
    s.compact().await.unwrap();
    s.wait_idle().await.unwrap();
    s.run_task("go on").await.unwrap();
    let requests = model.requests();
    assert_eq!(requests.len(), 6);
    assert!(
        !text_of(requests[1].last().unwrap())
            .unwrap()
            .contains("[compaction_retry]")
    );
    for r in &requests[2..5] {
        assert!(
            text_of(r.last().unwrap())
                .unwrap()
                .contains("[compaction_retry]")
        );
        // A failed attempt's calls never reach the next attempt unpaired.
        assert_paired(r);
    }
    let texts: Vec<&str> = requests[5].iter().filter_map(text_of).collect();
    assert_eq!(
        texts[0],
        "[context_summary]\nthird time\n[/context_summary]"
    );
    s.close().await.unwrap();
    let old = trace_records(file(&home, s.id(), 1));
    let failed_output = old.iter().any(|r| {
        matches!(r.as_model(), Some(ModelPayload::ToolCallOutput { stop_reason: StopReason::Failed, output, .. })
            if output.contains("not run while the context is summarized"))
    });
    assert!(failed_output);
    let ev = events(&old);
    assert_eq!(ev[1]["status"], "completed");
    assert_eq!(ev[1]["attempt"], 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_stops_a_compaction_at_once_and_keeps_the_context() {
    let (_d, ws, home) = tempdirs();
    let script = json!({"turns": [
        {"text": "hello", "usage": {"input": 5000, "output": 1}},
        {"error": "auth"},
        {"text": "still here"}
    ]});
    let (_host, s, model) = session(&home, &ws, script, "compaction:\n  max_context: 100\n").await;
    s.run_task("hi").await.unwrap();
    // Due by usage: the next task compacts first, fails, and keeps the old context.
    let summary = s.run_task("next").await.unwrap();
    assert_eq!(summary.status, StopReason::Failed);
    assert_eq!(summary.abort_reason.as_deref(), Some("compaction failed"));
    let summary = s.run_task("third").await.unwrap();
    assert_eq!(summary.final_text.as_deref(), Some("still here"));
    let requests = model.requests();
    assert_eq!(requests.len(), 3);
    let texts: Vec<&str> = requests[2].iter().filter_map(text_of).collect();
    assert_eq!(texts, ["hi", "hello", "next", "third"]);
    s.close().await.unwrap();
    let ev = events(&trace_records(file(&home, s.id(), 1)));
    assert_eq!(ev[1]["status"], "failed");
    assert_eq!(ev[1]["attempt"], 1);
    assert!(ev[1]["error_message"].as_str().unwrap().contains("auth"));
    assert!(!file(&home, s.id(), 2).exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discard_drops_the_context_and_keeps_the_pending_input() {
    let (_d, ws, home) = tempdirs();
    let script = json!({"turns": [
        {"tool_calls": [{"name": "list_commands"}], "usage": {"input": 900, "output": 1}},
        {"text": "done"}
    ]});
    let (_host, s, model) = session(
        &home,
        &ws,
        script,
        "compaction:\n  max_context: 500\n  mode: discard\n",
    )
    .await;
    let summary = s.run_task("go").await.unwrap();
    assert_eq!(summary.final_text.as_deref(), Some("done"));
    let requests = model.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[1].len(), 1);
    let kept = text_of(&requests[1][0]).unwrap();
    assert!(
        kept.starts_with("[tool_call_output id=\"call_0\""),
        "{kept}"
    );
    assert!(requests[1].iter().all(|m| m.role() == Role::User));
    s.close().await.unwrap();
    let ev = events(&trace_records(file(&home, s.id(), 1)));
    assert_eq!(ev[0]["mode"], "discard");
    assert_eq!(ev[1]["status"], "completed");
    assert!(file(&home, s.id(), 2).exists());
}

/// Two compactions, each followed by a resume in a new host: `_002` and `_003` are written,
/// and each resume continues from the latest file's summary with fresh call ids.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotation_to_002_and_003_with_a_resume_from_each() {
    let (_d, ws, home) = tempdirs();
    let script = json!({"turns": [
        {"text": "one", "tool_calls": [{"name": "list_commands"}]},
        {"text": "one done"},
        {"text": "[summary]first[/summary]"},
        {"text": "two", "tool_calls": [{"name": "list_commands"}]},
        {"text": "two done"},
        {"text": "[summary]second[/summary]"},
        {"text": "three", "tool_calls": [{"name": "list_commands"}]},
        {"text": "three done"}
    ]});
    let model = Recording::new(scripted(script));
    let id;
    {
        let host = Host::start(&home).await.unwrap();
        let s = host
            .create_session(options(&ws, model.clone()))
            .await
            .unwrap();
        id = s.id().to_string();
        s.run_task("task one").await.unwrap();
        s.compact().await.unwrap();
        s.wait_idle().await.unwrap();
        s.close().await.unwrap();
    }
    assert!(file(&home, &id, 2).exists());
    for (n, prompt, summary) in [(2, "task two", "first"), (3, "task three", "second")] {
        let host = Host::start(&home).await.unwrap();
        let s = host
            .resume_session(&id, options(&ws, model.clone()))
            .await
            .unwrap();
        let before = model.requests().len();
        let done = s.run_task(prompt).await.unwrap();
        assert_eq!(done.status, StopReason::Completed);
        let first = &model.requests()[before];
        let texts: Vec<&str> = first.iter().filter_map(text_of).collect();
        assert_eq!(
            texts,
            [
                format!("[context_summary]\n{summary}\n[/context_summary]").as_str(),
                prompt
            ]
        );
        if n == 2 {
            s.compact().await.unwrap();
            s.wait_idle().await.unwrap();
        }
        s.close().await.unwrap();
    }
    assert!(file(&home, &id, 3).exists());
    assert!(!file(&home, &id, 4).exists());
    // Call ids never repeat across the files of one history.
    let mut ids = Vec::new();
    for n in 1..=3 {
        for r in trace_records(file(&home, &id, n)) {
            if let Some(ModelPayload::ToolCall { tool_call_id, .. }) = r.as_model() {
                ids.push(tool_call_id.clone());
            }
        }
    }
    assert_eq!(ids, ["call_0", "call_1", "call_2"]);
    // The catalog reads the three files as one history.
    let catalog = rookery::trace::catalog::Catalog::scan(&home).unwrap();
    let files = catalog.get(&id).unwrap();
    assert_eq!(files.files.len(), 3);
    let history = rookery::trace::catalog::read_history(files).unwrap();
    let summary = history.summary();
    assert_eq!(summary.tasks, 3);
    assert_eq!(summary.first_prompt.as_deref(), Some("task one"));
}
