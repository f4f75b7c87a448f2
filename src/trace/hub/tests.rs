use std::path::Path;

use super::*;
use crate::message::build;
use crate::trace::file::TraceFile;
use crate::trace::health::TraceHealth;
use crate::trace::lock::{LockError, lock_exclusive};
use crate::trace::reader::read_trace;
use crate::trace::rotation::Rotation;
use crate::trace::writer::record_line;

fn line(tag: &str, i: usize) -> Vec<u8> {
    format!("{{\"{tag}\":{i}}}\n").into_bytes()
}

fn lines(tag: &str, n: usize) -> Vec<u8> {
    (0..n).flat_map(|i| line(tag, i)).collect()
}

async fn pool(n: usize) -> (TraceWriters, Arc<TraceStats>) {
    let stats = Arc::new(TraceStats::default());
    (
        TraceWriters::start(None, n, stats.clone()).await.unwrap(),
        stats,
    )
}

fn open(traces: &TraceWriters, path: &Path, lock: bool) -> (TraceHandle, Arc<TraceHealth>) {
    let mut file = TraceFile::open(path).unwrap();
    if lock {
        file.lock().unwrap();
    }
    let health = Arc::new(TraceHealth::default());
    (traces.open(file, None, health.clone()).unwrap(), health)
}

/// On a current-thread runtime nothing runs between the casts: two files' interleaved bursts
/// are each one `write(2)`, each file gets only its own records, in order.
#[tokio::test(flavor = "current_thread")]
async fn interleaved_bursts_are_one_write_per_file() {
    let dir = tempfile::tempdir().unwrap();
    let (traces, stats) = pool(1).await;
    let (a, _) = open(&traces, &dir.path().join("a_001.jsonl"), false);
    let (b, _) = open(&traces, &dir.path().join("b_001.jsonl"), false);
    for i in 0..1000 {
        a.cast(TraceMsg::AppendLine(line("a", i))).unwrap();
        b.cast(TraceMsg::AppendLine(line("b", i))).unwrap();
    }
    ractor::call!(a, TraceMsg::Written).unwrap();
    ractor::call!(b, TraceMsg::Written).unwrap();
    assert_eq!(
        std::fs::read(dir.path().join("a_001.jsonl")).unwrap(),
        lines("a", 1000)
    );
    assert_eq!(
        std::fs::read(dir.path().join("b_001.jsonl")).unwrap(),
        lines("b", 1000)
    );
    assert_eq!(stats.records.load(Ordering::Relaxed), 2000);
    assert_eq!(stats.batches.load(Ordering::Relaxed), 2);
    a.shutdown().await.unwrap();
    b.shutdown().await.unwrap();
}

/// Two sessions' records sent concurrently from two threads to one writer stay each in its
/// own file, whole and in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_sessions_sharing_a_writer_keep_their_files_and_order() {
    let dir = tempfile::tempdir().unwrap();
    let (traces, stats) = pool(1).await;
    let mut tasks = Vec::new();
    for tag in ["a", "b"] {
        let (h, health) = open(&traces, &dir.path().join(format!("{tag}_001.jsonl")), true);
        tasks.push(tokio::spawn(async move {
            for i in 0..5000 {
                h.cast(TraceMsg::AppendLine(line(tag, i))).unwrap();
                if i % 89 == 0 {
                    tokio::task::yield_now().await;
                }
            }
            h.shutdown().await.unwrap();
            assert_eq!(health.failure(), None);
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    for tag in ["a", "b"] {
        let path = dir.path().join(format!("{tag}_001.jsonl"));
        assert_eq!(std::fs::read(&path).unwrap(), lines(tag, 5000), "{tag}");
        // Shut down: the owner lock is released.
        lock_exclusive(&std::fs::File::open(&path).unwrap()).unwrap();
    }
    assert_eq!(stats.records.load(Ordering::Relaxed), 10_000);
}

/// One session's `Shutdown` writes and releases only its own file: the other session's
/// gathered records are neither lost nor closed, and it goes on writing after.
#[tokio::test(flavor = "current_thread")]
async fn one_shutdown_leaves_the_other_file_open_and_whole() {
    let dir = tempfile::tempdir().unwrap();
    let (traces, _) = pool(1).await;
    let (pa, pb) = (
        dir.path().join("a_001.jsonl"),
        dir.path().join("b_001.jsonl"),
    );
    let (a, _) = open(&traces, &pa, true);
    let (b, _) = open(&traces, &pb, true);
    for i in 0..300 {
        b.cast(TraceMsg::AppendLine(line("b", i))).unwrap();
        a.cast(TraceMsg::AppendLine(line("a", i))).unwrap();
    }
    a.shutdown().await.unwrap();
    assert_eq!(std::fs::read(&pa).unwrap(), lines("a", 300));
    lock_exclusive(&std::fs::File::open(&pa).unwrap()).unwrap();
    // B is still owned by its writer.
    assert!(matches!(
        lock_exclusive(&std::fs::File::open(&pb).unwrap()),
        Err(LockError::Held { .. })
    ));
    for i in 300..600 {
        b.cast(TraceMsg::AppendLine(line("b", i))).unwrap();
    }
    ractor::call!(b, TraceMsg::Flush).unwrap();
    assert_eq!(std::fs::read(&pb).unwrap(), lines("b", 600));
    // A closed file takes no more records, and its acks fail instead of hanging.
    a.cast(TraceMsg::AppendLine(line("a", 300))).unwrap();
    assert!(ractor::call!(a, TraceMsg::Written).is_err());
    assert_eq!(std::fs::read(&pa).unwrap(), lines("a", 300));
    b.shutdown().await.unwrap();
}

/// A file whose disk fails (`/dev/full`: every write is `ENOSPC`) reports to its own health;
/// the other session on the same writer loses nothing.
#[tokio::test(flavor = "current_thread")]
async fn a_failing_disk_for_one_session_loses_nothing_of_another() {
    if !Path::new("/dev/full").exists() {
        return; // not Linux
    }
    let dir = tempfile::tempdir().unwrap();
    let (traces, stats) = pool(1).await;
    let (full, full_health) = open(&traces, Path::new("/dev/full"), false);
    let path = dir.path().join("ok_001.jsonl");
    let (ok, ok_health) = open(&traces, &path, true);
    for i in 0..200 {
        full.cast(TraceMsg::AppendLine(line("x", i))).unwrap();
        ok.cast(TraceMsg::AppendLine(line("ok", i))).unwrap();
    }
    ractor::call!(full, TraceMsg::Written).unwrap();
    ok.shutdown().await.unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), lines("ok", 200));
    assert_eq!(ok_health.failure(), None);
    let failure = full_health.failure().unwrap_or_default();
    assert!(
        failure.starts_with("trace write failed: No space left on device (/dev/full)"),
        "{failure}"
    );
    assert_eq!(stats.failed_writes.load(Ordering::Relaxed), 200);
    assert_eq!(stats.records.load(Ordering::Relaxed), 200);
    full.shutdown().await.unwrap();
}

fn texts(path: &Path) -> Vec<String> {
    read_trace(path)
        .unwrap()
        .records
        .iter()
        .map(|r| match r.as_model() {
            Some(crate::message::ModelPayload::Text { text, .. }) => text.clone(),
            _ => String::new(),
        })
        .collect()
}

/// A rotation through a shared writer: every record of the rotating file lands exactly once,
/// in order, across the two files; the neighbour's file is untouched by it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotation_in_a_shared_writer_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (traces, _) = pool(1).await;
    let first = dir.path().join("s_001.jsonl");
    let (s, _) = open(&traces, &first, true);
    let other = dir.path().join("o_001.jsonl");
    let (o, _) = open(&traces, &other, true);
    let neighbour = tokio::spawn(async move {
        for i in 0..2000 {
            o.cast(TraceMsg::AppendLine(line("o", i))).unwrap();
            if i % 61 == 0 {
                tokio::task::yield_now().await;
            }
        }
        o.shutdown().await.unwrap();
    });
    let header = vec![record_line(&build::user_text("header", None)).unwrap()];
    for i in 0..1000 {
        let msg = Arc::new(build::user_text(format!("r-{i}"), None));
        s.cast(TraceMsg::Append(msg)).unwrap();
        if i == 400 {
            s.cast(TraceMsg::Rotate(Rotation {
                header: header.clone(),
            }))
            .unwrap();
        }
        if i % 50 == 0 {
            tokio::task::yield_now().await;
        }
    }
    s.shutdown().await.unwrap();
    neighbour.await.unwrap();
    let old = texts(&first);
    let new = texts(&dir.path().join("s_002.jsonl"));
    assert_eq!(new[0], "header");
    let all: Vec<String> = old.iter().chain(&new[1..]).cloned().collect();
    let want: Vec<String> = (0..1000).map(|i| format!("r-{i}")).collect();
    assert_eq!(all, want);
    assert_eq!(old.len(), 401);
    assert_eq!(std::fs::read(&other).unwrap(), lines("o", 2000));
}

/// Files are spread over the pool; a stopped pool refuses new files with a clear error.
#[tokio::test]
async fn files_spread_over_the_pool_and_a_stopped_pool_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let (traces, _) = pool(POOL_SIZE).await;
    let handles: Vec<_> = (0..8)
        .map(|i| open(&traces, &dir.path().join(format!("s{i}_001.jsonl")), false).0)
        .collect();
    let writers: std::collections::HashSet<_> = handles.iter().map(|h| h.writer.get_id()).collect();
    assert_eq!(writers.len(), POOL_SIZE);
    for h in &handles {
        h.shutdown().await.unwrap();
    }
    traces.stop();
    for w in traces.writers.iter() {
        w.clone().get_cell().wait(None).await.ok();
    }
    let file = TraceFile::open(&dir.path().join("late_001.jsonl")).unwrap();
    let err = traces.open(file, None, Arc::default()).unwrap_err();
    assert_eq!(err.to_string(), "the trace writer has stopped");
}

/// While the producer holds the handle, records queue without waking the writer: acks of
/// another file of the same writer, which come after them in its mailbox, leave them unwritten.
/// The release wakes the writer once for all of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_made_while_held_are_one_write() {
    let dir = tempfile::tempdir().unwrap();
    let (traces, stats) = pool(1).await;
    let path = dir.path().join("h_001.jsonl");
    let (h, _) = open(&traces, &path, false);
    let (other, _) = open(&traces, &dir.path().join("o_001.jsonl"), false);
    h.hold();
    for i in 0..200 {
        h.cast(TraceMsg::AppendLine(line("h", i))).unwrap();
    }
    // Two round trips through the writer: anything it had been sent for `h` is done by now.
    ractor::call!(other, TraceMsg::Written).unwrap();
    ractor::call!(other, TraceMsg::Written).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"", "written while held");
    assert_eq!(stats.batches.load(Ordering::Relaxed), 0);
    h.release().unwrap();
    ractor::call!(h, TraceMsg::Written).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), lines("h", 200));
    assert_eq!(stats.batches.load(Ordering::Relaxed), 1);
    // Acks are not held back: a `Written` while held writes what is queued.
    h.hold();
    h.cast(TraceMsg::AppendLine(line("h", 200))).unwrap();
    ractor::call!(h, TraceMsg::Written).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), lines("h", 201));
    h.release().unwrap();
    h.shutdown().await.unwrap();
    other.shutdown().await.unwrap();
    traces.stop();
}

/// What a remote store was asked, in order.
#[derive(Debug, PartialEq, Eq)]
enum Asked {
    Append(Vec<Vec<u8>>, u32),
    Barrier,
    Close,
}

/// A remote store that records its calls and answers acks at once.
struct FakeRemote {
    asked: Arc<std::sync::Mutex<Vec<Asked>>>,
    place: std::path::PathBuf,
}

impl crate::trace::sink::RemoteTrace for FakeRemote {
    fn append(&self, records: Vec<Vec<u8>>, part: u32) {
        self.asked
            .lock()
            .unwrap()
            .push(Asked::Append(records, part));
    }
    fn barrier(&self, done: RpcReplyPort<()>) {
        self.asked.lock().unwrap().push(Asked::Barrier);
        let _ = done.send(());
    }
    fn close(&self, done: RpcReplyPort<()>) {
        self.asked.lock().unwrap().push(Asked::Close);
        let _ = done.send(());
    }
    fn part(&self) -> u32 {
        3
    }
    fn place(&self) -> &Path {
        &self.place
    }
}

/// A remote sink keeps group commit (a burst is one append, one statement), the acks wait for
/// the store, and a rotation opens the next part with its header.
#[tokio::test(flavor = "current_thread")]
async fn a_remote_sink_gets_one_append_per_batch_and_parts_by_rotation() {
    let (traces, stats) = pool(1).await;
    let asked = Arc::new(std::sync::Mutex::new(Vec::new()));
    let remote = FakeRemote {
        asked: asked.clone(),
        place: "postgres:/s".into(),
    };
    let sink = crate::trace::sink::Sink::remote(Box::new(remote));
    let handle = traces.open(sink, None, Arc::default()).unwrap();
    for i in 0..1000 {
        handle.cast(TraceMsg::AppendLine(line("a", i))).unwrap();
    }
    ractor::call!(handle, TraceMsg::Written).unwrap();
    handle
        .cast(TraceMsg::Rotate(Rotation {
            header: vec![line("meta", 0)],
        }))
        .unwrap();
    handle.cast(TraceMsg::AppendLine(line("b", 0))).unwrap();
    handle.shutdown().await.unwrap();
    let asked = std::mem::take(&mut *asked.lock().unwrap());
    let burst: Vec<Vec<u8>> = (0..1000).map(|i| line("a", i)).collect();
    assert_eq!(
        asked,
        vec![
            Asked::Append(burst, 3),
            Asked::Barrier,
            Asked::Append(vec![line("meta", 0)], 4),
            Asked::Append(vec![line("b", 0)], 4),
            Asked::Close,
        ]
    );
    assert_eq!(stats.records.load(Ordering::Relaxed), 1002);
}
