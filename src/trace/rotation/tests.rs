use std::collections::HashSet;
use std::sync::Arc;

use ractor::Actor;

use super::*;
use crate::message::{OmniMessage, build};
use crate::trace::health::TraceHealth;
use crate::trace::reader::read_trace;
use crate::trace::writer::{TraceActor, TraceArgs, TraceMsg, TraceStats, record_line};

#[test]
fn next_file_counts_up_in_the_same_directory() {
    let p = Path::new("/h/traces/2026-01-01/s-1_001.jsonl");
    assert_eq!(
        next_file(p),
        Some(PathBuf::from("/h/traces/2026-01-01/s-1_002.jsonl"))
    );
    assert_eq!(
        next_file(Path::new("/x/a_b_009.jsonl")),
        Some(PathBuf::from("/x/a_b_010.jsonl"))
    );
    assert_eq!(next_file(Path::new("/x/nothing.jsonl")), None);
    assert_eq!(split_name("s_012.jsonl"), Some(("s", 12)));
    assert_eq!(split_name("_012.jsonl"), None);
    assert_eq!(split_name("s_01a.jsonl"), None);
}

fn texts(path: &Path) -> Vec<String> {
    read_trace(path)
        .unwrap()
        .records
        .iter()
        .map(|r| match r.as_model() {
            Some(crate::message::ModelPayload::Text { text, .. }) => text.clone(),
            _ => format!("event:{}", serde_json::to_value(r).unwrap()["type"]),
        })
        .collect()
}

/// Many writers cast records while the session rotates: every record lands exactly once, the
/// old file ends where the new one begins, and the new file starts with its header.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_record_is_lost_or_duplicated_across_a_rotation() {
    let dir = tempfile::tempdir().unwrap();
    let first = dir.path().join("traces/2026-01-01/s_001.jsonl");
    let mut file = TraceFile::open(&first).unwrap();
    file.lock().unwrap();
    let (trace, _) = Actor::spawn(
        None,
        TraceActor,
        TraceArgs {
            file,
            stats: Arc::new(TraceStats::default()),
            redactor: None,
            health: Arc::new(TraceHealth::default()),
        },
    )
    .await
    .unwrap();
    let header = vec![
        record_line(&build::user_text("header-meta", None)).unwrap(),
        record_line(&build::user_text("header-tools", None)).unwrap(),
    ];
    const WRITERS: usize = 16;
    const EACH: usize = 250;
    let mut tasks = Vec::new();
    for w in 0..WRITERS {
        let trace = trace.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..EACH {
                let msg = Arc::new(build::user_text(format!("r-{w}-{i}"), None));
                if i % 2 == 0 {
                    trace.cast(TraceMsg::Append(msg)).unwrap();
                } else {
                    let line = record_line(&msg).unwrap();
                    trace.cast(TraceMsg::AppendLine(line)).unwrap();
                }
                if i % 50 == 0 {
                    tokio::task::yield_now().await;
                }
            }
        }));
    }
    // The rotation races with the writers.
    tokio::task::yield_now().await;
    trace
        .cast(TraceMsg::Rotate(Rotation {
            header: header.clone(),
        }))
        .unwrap();
    for t in tasks {
        t.await.unwrap();
    }
    // One more record after every writer is done, so the rotation has surely happened.
    trace
        .cast(TraceMsg::Append(Arc::new(build::user_text("last", None))))
        .unwrap();
    ractor::call!(trace, TraceMsg::Shutdown).unwrap();

    let second = dir.path().join("traces/2026-01-01/s_002.jsonl");
    let old = texts(&first);
    let new = texts(&second);
    assert_eq!(&new[..2], ["header-meta", "header-tools"]);
    assert_eq!(new.last().map(String::as_str), Some("last"));
    let mut seen = HashSet::new();
    for t in old.iter().chain(&new[2..]) {
        assert!(seen.insert(t.clone()), "{t} written twice");
    }
    assert_eq!(seen.len(), WRITERS * EACH + 1, "a record was lost");
    assert!(!old.iter().any(|t| t.starts_with("header")));
    // The owner lock moved: the new file is locked, the old one is free.
    let f = std::fs::File::open(&first).unwrap();
    crate::trace::lock::lock_exclusive(&f).unwrap();
}

#[tokio::test]
async fn a_rotation_with_nothing_after_it_makes_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let first = dir.path().join("s_001.jsonl");
    let (trace, _) = Actor::spawn(
        None,
        TraceActor,
        TraceArgs {
            file: TraceFile::open(&first).unwrap(),
            stats: Arc::new(TraceStats::default()),
            redactor: None,
            health: Arc::new(TraceHealth::default()),
        },
    )
    .await
    .unwrap();
    let msg: Arc<OmniMessage> = Arc::new(build::user_text("before", None));
    trace.cast(TraceMsg::Append(msg)).unwrap();
    trace.cast(TraceMsg::Rotate(Rotation::default())).unwrap();
    ractor::call!(trace, TraceMsg::Shutdown).unwrap();
    assert!(!dir.path().join("s_002.jsonl").exists());
    assert_eq!(texts(&first), ["before"]);
}
