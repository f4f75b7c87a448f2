//! `SessionHandle::trace_path()` follows the trace's rotation: it names `_001`, then, once a
//! compaction has rotated the trace, `_002`, `_003`, …, the file the records go to; a session
//! resumed from a rotated trace names its latest file.

use crate::common;

use std::path::Path;

use common::*;
use rookery::Host;
use rookery::message::{ModelPayload, StopReason};
use serde_json::json;

fn file_name(p: &Path) -> String {
    p.file_name().unwrap().to_string_lossy().into_owned()
}

fn last_text(path: &Path) -> Option<String> {
    trace_records(path)
        .iter()
        .rev()
        .find_map(|r| match r.as_model() {
            Some(ModelPayload::Text { text, .. }) => Some(text.clone()),
            _ => None,
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trace_path_names_the_current_file_after_each_rotation() {
    let (_d, ws, home) = tempdirs();
    let script = json!({"turns": [
        {"text": "one"},
        {"text": "[summary]first[/summary]"},
        {"text": "two"},
        {"text": "[summary]second[/summary]"},
        {"text": "three"},
        {"text": "four"}
    ]});
    let model = scripted(script);
    let host = Host::start(&home).await.unwrap();
    let s = host
        .create_session(options(&ws, model.clone()))
        .await
        .unwrap();
    let id = s.id().to_string();
    assert_eq!(file_name(&s.trace_path()), format!("{id}_001.jsonl"));
    s.run_task("task one").await.unwrap();
    for (n, prompt, answer) in [(2, "task two", "two"), (3, "task three", "three")] {
        s.compact().await.unwrap();
        s.wait_idle().await.unwrap();
        s.flush_trace().await.unwrap();
        // The new file starts with the summary, so the rotation is done with the compaction.
        let current = s.trace_path();
        assert_eq!(file_name(&current), format!("{id}_{n:03}.jsonl"));
        let first = trace_records(&current);
        assert!(
            matches!(first[0].payload, rookery::message::Payload::SessionMeta(_)),
            "{} does not start with session_meta",
            current.display()
        );
        let done = s.run_task(prompt).await.unwrap();
        assert_eq!(done.status, StopReason::Completed);
        s.flush_trace().await.unwrap();
        let current = s.trace_path();
        assert_eq!(file_name(&current), format!("{id}_{n:03}.jsonl"));
        assert!(current.exists(), "{} missing", current.display());
        // The records of the task after the rotation are in the file it names.
        assert_eq!(last_text(&current).as_deref(), Some(answer));
    }
    s.close().await.unwrap();
    // A resume continues in the latest file, and says so.
    let host2 = Host::start(&home).await.unwrap();
    let r = host2
        .resume_session(&id, options(&ws, model))
        .await
        .unwrap();
    assert_eq!(file_name(&r.trace_path()), format!("{id}_003.jsonl"));
    r.run_task("task four").await.unwrap();
    r.flush_trace().await.unwrap();
    assert_eq!(last_text(&r.trace_path()).as_deref(), Some("four"));
    r.close().await.unwrap();
}
