//! `rookery bench --trace-appends N`: the trace writer against its floor, in one run. The same N
//! serialized records (`tool_call_output` lines of a read workload) are appended (a) by a raw
//! loop of one `write(2)` per record on an `O_APPEND` file (the floor), and (b) by the host's
//! trace writer (`trace::hub`): N `AppendLine` casts to one session's handle, then `Written`,
//! with the handle held as a session holds it while it handles one message (the burst is
//! written when released), and (c) the same without the hold (each cast may wake the writer,
//! which then races the producer). Each side runs `rounds` times, interleaved, on a fresh
//! file; the medians are compared.
//!
//! It measures only; it prints nothing (the CLI renders the report) and changes no writer.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::error::RookeryError;
use crate::message::{StopReason, build};
use crate::trace::file::TraceFile;
use crate::trace::hub::{POOL_SIZE, TraceWriters};
use crate::trace::writer::{TraceMsg, TraceStats, record_line};

/// What one run measured (medians over the rounds).
#[derive(Debug, Clone, Copy, Default)]
pub struct AppendsOutcome {
    /// Records per burst.
    pub records: usize,
    /// Bytes of one record, newline included.
    pub record_bytes: usize,
    /// Rounds measured.
    pub rounds: usize,
    /// The raw loop's median burst time.
    pub raw: Duration,
    /// The trace writer's median burst time (first cast to the `Written` ack), handle held.
    pub writer: Duration,
    /// The same without the hold.
    pub unheld: Duration,
    /// `write(2)` calls of the trace writer's held bursts, summed over the rounds.
    pub writer_writes: u64,
    /// `write(2)` calls of the unheld bursts, summed over the rounds.
    pub unheld_writes: u64,
}

impl AppendsOutcome {
    /// Records per second of a burst time.
    pub fn per_s(&self, d: Duration) -> f64 {
        self.records as f64 / d.as_secs_f64().max(1e-9)
    }

    /// The trace writer's records/s over the raw loop's (handle held).
    pub fn ratio(&self) -> f64 {
        self.raw.as_secs_f64() / self.writer.as_secs_f64().max(1e-9)
    }

    /// The same without the hold.
    pub fn unheld_ratio(&self) -> f64 {
        self.raw.as_secs_f64() / self.unheld.as_secs_f64().max(1e-9)
    }
}

/// The burst's records: `n` distinct `tool_call_output` lines with a line of file text each.
pub fn records(n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .filter_map(|i| {
            let text = format!("line {i}: the quick brown fox jumps over the lazy dog\n");
            let msg =
                build::tool_call_output(format!("call_{i}"), text, vec![], StopReason::Completed);
            record_line(&msg)
        })
        .collect()
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v.get(v.len() / 2).copied().unwrap_or_default()
}

/// One `write(2)` per record on an `O_APPEND` file (short writes retried by `write_all`).
fn raw_burst(path: &Path, lines: &[Vec<u8>]) -> std::io::Result<Duration> {
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o644)
        .open(path)?;
    let t = Instant::now();
    for line in lines {
        file.write_all(line)?;
    }
    Ok(t.elapsed())
}

/// The burst through the host's trace writer: casts (within a hold when `held`), then the
/// `Written` ack.
async fn writer_burst(
    traces: &TraceWriters,
    path: &Path,
    lines: Vec<Vec<u8>>,
    held: bool,
) -> Result<Duration, RookeryError> {
    let file = TraceFile::open(path)?;
    let trace = traces
        .open(file, None, Arc::default())
        .map_err(|e| RookeryError::Trace(std::io::Error::other(e)))?;
    let t = Instant::now();
    if held {
        trace.hold();
    }
    for line in lines {
        trace.cast(TraceMsg::AppendLine(line))?;
    }
    if held {
        trace.release()?;
    }
    ractor::call!(trace, TraceMsg::Written)?;
    let took = t.elapsed();
    trace.shutdown().await?;
    Ok(took)
}

/// Runs `rounds` interleaved rounds of both sides with `n` records under `dir`.
pub async fn run(n: usize, rounds: usize, dir: &Path) -> Result<AppendsOutcome, RookeryError> {
    let lines = records(n);
    let stats = Arc::new(TraceStats::default());
    let traces = TraceWriters::start(None, POOL_SIZE, stats.clone()).await?;
    let (mut raw, mut writer, mut unheld) = (Vec::new(), Vec::new(), Vec::new());
    let (mut writer_writes, mut unheld_writes) = (0, 0);
    let measured = async {
        for round in 0..rounds.max(1) {
            raw.push(raw_burst(&dir.join(format!("raw-{round}.jsonl")), &lines)?);
            let before = stats.batches.load(Ordering::Relaxed);
            let path = dir.join(format!("writer-{round}_001.jsonl"));
            writer.push(writer_burst(&traces, &path, lines.clone(), true).await?);
            let between = stats.batches.load(Ordering::Relaxed);
            writer_writes += between - before;
            let path = dir.join(format!("unheld-{round}_001.jsonl"));
            unheld.push(writer_burst(&traces, &path, lines.clone(), false).await?);
            unheld_writes += stats.batches.load(Ordering::Relaxed) - between;
        }
        Ok::<(), RookeryError>(())
    }
    .await;
    // Stopped whether the rounds ran to their end or not.
    traces.stop();
    measured?;
    Ok(AppendsOutcome {
        records: n,
        record_bytes: lines.iter().map(Vec::len).sum(),
        rounds: rounds.max(1),
        raw: median(raw),
        writer: median(writer),
        unheld: median(unheld),
        writer_writes,
        unheld_writes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both sides write exactly the same bytes, every round.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn both_sides_write_the_same_records() {
        let dir = tempfile::tempdir().unwrap();
        let out = run(200, 3, dir.path()).await.unwrap();
        let first = std::fs::read(dir.path().join("raw-0.jsonl")).unwrap();
        assert_eq!(out.record_bytes, first.len());
        assert_eq!(first.iter().filter(|&&b| b == b'\n').count(), 200);
        for round in 0..3 {
            let raw = std::fs::read(dir.path().join(format!("raw-{round}.jsonl"))).unwrap();
            let writer =
                std::fs::read(dir.path().join(format!("writer-{round}_001.jsonl"))).unwrap();
            assert!(
                raw == first,
                "round {round}: the raw loop wrote other bytes"
            );
            assert!(
                writer == first,
                "round {round}: the writer wrote other bytes"
            );
            let unheld =
                std::fs::read(dir.path().join(format!("unheld-{round}_001.jsonl"))).unwrap();
            assert!(
                unheld == first,
                "round {round}: the unheld writer wrote other bytes"
            );
        }
        // Held, each burst of 200 records (46 KB, below the writer's batch cap) is one write.
        assert_eq!(out.writer_writes, 3, "one write(2) per held burst");
        assert!(
            (3..=600).contains(&out.unheld_writes),
            "{}",
            out.unheld_writes
        );
        assert!(out.ratio() > 0.0);
    }
}
