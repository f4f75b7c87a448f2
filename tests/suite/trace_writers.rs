//! The host's shared trace writers, through the real binary: many concurrent sessions of one
//! process write their records through the same few writers, and each trace still holds only
//! its own session's records, whole and in order; `bench --trace-appends` runs both sides. Through
//! the library: a task's start is one write, and a session created for its task writes its meta
//! with it.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use rookery::Host;
use rookery::message::{EventPayload, ModelPayload, Payload};
use rookery::model::{
    Model, ModelEvent, ModelInfo, ModelRequest, ModelSession, ModelSessionContext,
};
use serde_json::{Value, json};

use crate::common::paired::assert_trace_paired;
use crate::common::{kinds, options, scripted, tempdirs, trace_records};

fn rookery_bench(args: &[&str], tmp: &Path) -> (i32, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_rookery"))
        .arg("bench")
        .args(args)
        .env("TMPDIR", tmp)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn trace_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for day in std::fs::read_dir(dir.join("traces")).unwrap() {
        for f in std::fs::read_dir(day.unwrap().path()).unwrap() {
            out.push(f.unwrap().path());
        }
    }
    out.sort();
    out
}

/// 24 sessions run at once in one host (6 files per writer): every trace starts with its own
/// session's meta, holds its 5 reads each paired with one output after its call, and ends
/// with the task's end; no record of another session is in it.
#[test]
fn concurrent_sessions_sharing_the_writers_keep_their_own_traces() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let (code, stdout, stderr) = rookery_bench(
        &[
            "--workload",
            "read",
            "--sessions",
            "24",
            "--turns",
            "5",
            "--home",
            home.to_str().unwrap(),
            "--json",
        ],
        tmp.path(),
    );
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let files = trace_files(&home);
    assert_eq!(files.len(), 24);
    for path in files {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let id = name.strip_suffix("_001.jsonl").unwrap();
        let recs = trace_records(&path);
        match &recs[0].payload {
            Payload::SessionMeta(m) => assert_eq!(m.session_id, id, "{name}"),
            other => panic!("{name} starts with {other:?}"),
        }
        // Only this session's meta: no record of another session slipped in.
        let metas = recs
            .iter()
            .filter(|r| matches!(r.payload, Payload::SessionMeta(_)))
            .count();
        assert_eq!(metas, 1, "{name}");
        let outputs = assert_trace_paired(&recs);
        assert_eq!(outputs.len(), 5, "{name}");
        let calls: Vec<&str> = recs
            .iter()
            .filter_map(|r| match r.as_model() {
                Some(ModelPayload::ToolCall { tool_call_id, .. }) => Some(tool_call_id.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(calls.len(), 5, "{name}");
        let k = kinds(&recs);
        assert_eq!(
            k.last().map(String::as_str),
            Some("task_end"),
            "{name}: {k:?}"
        );
    }
}

/// `--trace-appends` prints both sides and their ratio; the writer's burst is far fewer
/// `write(2)` calls than records.
#[test]
fn trace_appends_bench_reports_both_sides() {
    let tmp = tempfile::tempdir().unwrap();
    let (code, stdout, stderr) = rookery_bench(&["--trace-appends", "500", "--json"], tmp.path());
    assert_eq!(code, 0, "{stderr}");
    let v: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(v["trace_appends"], 500);
    assert_eq!(v["rounds"], 3);
    for k in [
        "raw_burst_us",
        "writer_burst_us",
        "raw_records_per_s",
        "writer_records_per_s",
        "ratio_writer_to_raw",
        "unheld_burst_us",
        "unheld_records_per_s",
        "ratio_unheld_to_raw",
    ] {
        assert!(v[k].as_f64().is_some_and(|x| x > 0.0), "{k} in {v}");
    }
    // Held (as a session holds it for one message), each burst is one write(2).
    assert_eq!(v["writer_writes"], 3, "{v}");
    let writes = v["unheld_writes"].as_u64().unwrap();
    assert!((3..1500).contains(&writes), "{v}");
    assert!(v["record_bytes"].as_u64().unwrap() > 500 * 100);

    let (code, _, stderr) = rookery_bench(&["--trace-appends", "0"], tmp.path());
    assert_eq!(code, 2);
    assert!(
        stderr.contains("--trace-appends must be at least 1"),
        "{stderr}"
    );
    let (code, _, stderr) = rookery_bench(
        &["--trace-appends", "10", "--idle-sessions", "5"],
        tmp.path(),
    );
    assert_eq!(code, 2, "{stderr}");
}

/// Answers nothing: a request's stream stays open, so nothing is traced after its start.
struct Silent(Arc<dyn Model>);

struct SilentSession;

impl ModelSession for SilentSession {
    fn stream(&mut self, _request: ModelRequest) -> BoxStream<'static, ModelEvent> {
        futures::stream::pending().boxed()
    }
}

impl Model for Silent {
    fn info(&self) -> ModelInfo {
        self.0.info()
    }
    fn open(&self, _ctx: &ModelSessionContext) -> Box<dyn ModelSession> {
        Box::new(SilentSession)
    }
}

/// The start of a task is one write: its prompt, the tool list and the first `request_begin`
/// go out together, after the header's own write (the writer is not woken for the prompt
/// alone). Twenty sessions start at once, so a writer busy with one is quick to take another's
/// first record if the session did not hold it back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tasks_start_is_one_write_after_the_header() {
    const SESSIONS: u64 = 20;
    let (_d, ws, home) = tempdirs();
    let host = Host::start(&home).await.unwrap();
    let mut sessions = subscribed_sessions(&host, &ws, SESSIONS, false).await;
    assert_eq!(host.trace_writes(), SESSIONS, "one header each");
    for (s, _) in &sessions {
        s.start_task("go").await.unwrap();
    }
    await_task_starts(&mut sessions).await;
    assert_eq!(
        host.trace_writes(),
        2 * SESSIONS,
        "each: the header, then the task's start"
    );
    host.shutdown().await;
}

/// `n` sessions on a silent model, each subscribed: made with `create_session` (each trace then
/// flushed, so its header is written) or, `for_task`, with `create_session_for_task`.
async fn subscribed_sessions(
    host: &Host,
    ws: &Path,
    n: u64,
    for_task: bool,
) -> Vec<(rookery::SessionHandle, rookery::MessageReceiver)> {
    let model = Arc::new(Silent(scripted(json!({"turns": [{"text": "unused"}]}))));
    let mut sessions = Vec::new();
    for _ in 0..n {
        let o = options(ws, model.clone());
        let s = if for_task {
            host.create_session_for_task(o).await.unwrap()
        } else {
            let s = host.create_session(o).await.unwrap();
            s.flush_trace().await.unwrap();
            s
        };
        let rx = s.subscribe().await.unwrap();
        sessions.push((s, rx));
    }
    sessions
}

/// Waits until each session's request has started (the last of its task's first records),
/// flushes its trace, and checks the trace holds exactly the meta and that start.
async fn await_task_starts(sessions: &mut [(rookery::SessionHandle, rookery::MessageReceiver)]) {
    for (s, rx) in sessions.iter_mut() {
        tokio::time::timeout(Duration::from_secs(30), async {
            while let Some(msg) = rx.recv().await {
                if matches!(msg.as_event(), Some(EventPayload::RequestBegin {})) {
                    break;
                }
            }
        })
        .await
        .unwrap();
        s.flush_trace().await.unwrap();
    }
    for (s, _) in sessions.iter() {
        let kinds = kinds(&trace_records(s.trace_path()));
        assert_eq!(
            kinds,
            ["session_meta", "text", "tool_list_ready", "request_begin"],
            "{kinds:?}"
        );
    }
}

/// A session created for its task writes its meta with the task's start: one write per trace,
/// none before the task starts (subscribing does not count).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_created_for_a_task_writes_its_meta_with_the_tasks_start() {
    const SESSIONS: u64 = 20;
    let (_d, ws, home) = tempdirs();
    let host = Host::start(&home).await.unwrap();
    let mut sessions = subscribed_sessions(&host, &ws, SESSIONS, true).await;
    assert_eq!(host.trace_writes(), 0, "every meta waits for its task");
    for (s, _) in &sessions {
        s.start_task("go").await.unwrap();
    }
    await_task_starts(&mut sessions).await;
    assert_eq!(
        host.trace_writes(),
        SESSIONS,
        "each: the meta with the task's start"
    );
    host.shutdown().await;
}

/// A session created for a task that does not come still gets its meta written: by a flush,
/// by its first other message (here an abort) and by its close.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_created_for_a_task_that_does_not_come_writes_its_meta() {
    let (_d, ws, home) = tempdirs();
    let host = Host::start(&home).await.unwrap();
    let model = Arc::new(Silent(scripted(json!({"turns": [{"text": "unused"}]}))));
    let flushed = host
        .create_session_for_task(options(&ws, model.clone()))
        .await
        .unwrap();
    let aborted = host
        .create_session_for_task(options(&ws, model.clone()))
        .await
        .unwrap();
    let closed = host
        .create_session_for_task(options(&ws, model.clone()))
        .await
        .unwrap();
    assert_eq!(host.trace_writes(), 0);

    flushed.flush_trace().await.unwrap();
    assert_eq!(
        kinds(&trace_records(flushed.trace_path())),
        ["session_meta"]
    );

    aborted.abort().unwrap();
    tokio::time::timeout(Duration::from_secs(30), async {
        while host.trace_writes() < 2 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the abort released the meta");
    assert_eq!(
        kinds(&trace_records(aborted.trace_path())),
        ["session_meta"]
    );

    let path = closed.trace_path();
    closed.close().await.unwrap();
    host.shutdown().await;
    assert_eq!(kinds(&trace_records(path))[0], "session_meta");
}
