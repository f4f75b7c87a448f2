//! The time series of a workload run: a thread that, every [`INTERVAL`] from the tasks' start
//! to the last session idle, reads this process's CPU time (`getrusage`: microseconds, where
//! `/proc/self/stat` counts 10 ms ticks), its resident set (`/proc/self/statm`) and how many tool
//! calls have finished, into a bounded buffer: at
//! [`MAX_SAMPLES`] it keeps every other sample and doubles its interval, so a long run keeps its
//! whole span in a fixed memory.
//!
//! It only reads the OS and a counter it is given; it never touches a session, and what the series mean
//! (rates, JSON) is computed here from the raw readings, not rendered.

use std::sync::Arc;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::measure;

/// The first interval between two samples.
pub const INTERVAL: Duration = Duration::from_millis(100);
/// The most samples kept (the final one included).
pub const MAX_SAMPLES: usize = 512;

/// One reading.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Sample {
    /// Since the sampler started, ms.
    pub t_ms: u64,
    /// Tool calls finished so far.
    pub tool_calls: u64,
    /// This process's user + system CPU seconds so far.
    pub cpu_s: f64,
    /// This process's resident set, kB (0 where `/proc` is missing).
    pub rss_kb: u64,
}

/// The readings of one run, oldest first, and the interval they ended with.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Series {
    /// The interval between samples at the end (doubled each time the buffer filled), ms.
    pub interval_ms: u64,
    samples: Vec<Sample>,
}

impl Series {
    /// Adds a reading, halving the buffer and doubling `interval` when it is full; the next
    /// reading is due at the returned offset from the start.
    fn push(&mut self, sample: Sample, interval: &mut Duration) -> Duration {
        self.samples.push(sample);
        if self.samples.len() >= MAX_SAMPLES {
            // Readings are taken on the start's grid: the even ones are the coarser grid's.
            let mut i = 0;
            self.samples.retain(|_| {
                i += 1;
                i % 2 == 1
            });
            *interval *= 2;
        }
        self.interval_ms = u64::try_from(interval.as_millis()).unwrap_or(u64::MAX);
        *interval * u32::try_from(self.samples.len()).unwrap_or(u32::MAX)
    }

    /// Adds the last reading. A last interval shorter than half the current one would make
    /// noisy rates (a few ms holding one call or none): the reading before it gives way, so the
    /// last interval spans between a half and one and a half intervals.
    fn finish(&mut self, sample: Sample, interval: Duration) {
        let half = u64::try_from(interval.as_millis() / 2).unwrap_or(u64::MAX);
        if self.samples.len() >= 2
            && let Some(last) = self.samples.last()
            && sample.t_ms.saturating_sub(last.t_ms) < half
        {
            self.samples.pop();
        }
        self.samples.push(sample);
        self.interval_ms = u64::try_from(interval.as_millis()).unwrap_or(u64::MAX);
    }

    /// The readings kept.
    pub fn samples(&self) -> &[Sample] {
        &self.samples
    }

    /// The series as the `--json` report carries it: one point per interval between two
    /// readings (`t_ms` at its end): tool calls finished so far, tool calls per second and CPU
    /// percent of one core in the interval, and the resident set at its end.
    pub fn to_json(&self) -> Value {
        let mut t_ms = Vec::new();
        let mut tool_calls = Vec::new();
        let mut calls_per_s = Vec::new();
        let mut cpu_percent = Vec::new();
        let mut rss_kb = Vec::new();
        for pair in self.samples.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            let dt = b.t_ms.saturating_sub(a.t_ms) as f64 / 1000.0;
            let rate = |d: f64| if dt > 0.0 { d / dt } else { 0.0 };
            t_ms.push(b.t_ms);
            tool_calls.push(b.tool_calls);
            calls_per_s.push(r1(rate(b.tool_calls.saturating_sub(a.tool_calls) as f64)));
            cpu_percent.push(r1(rate((b.cpu_s - a.cpu_s).max(0.0)) * 100.0));
            rss_kb.push(b.rss_kb);
        }
        json!({
            "interval_ms": self.interval_ms,
            "t_ms": t_ms,
            "tool_calls": tool_calls,
            "calls_per_s": calls_per_s,
            "cpu_percent": cpu_percent,
            "rss_kb": rss_kb,
        })
    }
}

fn r1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

/// Counts the tool calls finished so far.
pub(crate) type Counter = Arc<dyn Fn() -> u64 + Send + Sync>;

fn read(start: Instant, calls: &Counter) -> Sample {
    Sample {
        t_ms: u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX),
        tool_calls: calls(),
        cpu_s: measure::self_usage().cpu_s(),
        rss_kb: measure::current_rss_kb().unwrap_or(0),
    }
}

/// A running sampler; [`Sampler::finish`] takes the last reading and returns the series.
pub(crate) struct Sampler {
    stop: mpsc::Sender<()>,
    thread: Option<JoinHandle<Series>>,
}

impl Sampler {
    /// Takes the first reading now and one every [`INTERVAL`] on a thread of its own (a busy
    /// runtime does not delay it). `None` when the thread cannot be started (the run goes on
    /// without a series).
    pub(crate) fn start(calls: Counter) -> Option<Sampler> {
        let (stop, stopped) = mpsc::channel::<()>();
        let start = Instant::now();
        let first = read(start, &calls);
        let thread = std::thread::Builder::new()
            .name("bench-sampler".to_string())
            .spawn(move || {
                let mut series = Series::default();
                let mut interval = INTERVAL;
                let mut due = series.push(first, &mut interval);
                loop {
                    let wait = (start + due).saturating_duration_since(Instant::now());
                    match stopped.recv_timeout(wait) {
                        Err(RecvTimeoutError::Timeout) => {
                            due = series.push(read(start, &calls), &mut interval);
                        }
                        // Stopped (or the run dropped its handle): the last reading.
                        Ok(()) | Err(RecvTimeoutError::Disconnected) => {
                            series.finish(read(start, &calls), interval);
                            return series;
                        }
                    }
                }
            });
        match thread {
            Ok(t) => Some(Sampler {
                stop,
                thread: Some(t),
            }),
            Err(e) => {
                tracing::warn!("bench: cannot start the sampler thread: {e}");
                None
            }
        }
    }

    /// Takes the last reading and returns the series.
    pub(crate) fn finish(mut self) -> Series {
        let _ = self.stop.send(());
        self.thread
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default()
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        let _ = self.stop.send(());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(t_ms: u64, tool_calls: u64, cpu_s: f64, rss_kb: u64) -> Sample {
        Sample {
            t_ms,
            tool_calls,
            cpu_s,
            rss_kb,
        }
    }

    #[test]
    fn points_are_the_rates_of_each_interval() {
        let mut s = Series::default();
        let mut interval = INTERVAL;
        s.push(at(0, 0, 1.0, 100), &mut interval);
        s.push(at(100, 10, 1.05, 120), &mut interval);
        s.push(at(300, 30, 1.45, 130), &mut interval);
        let v = s.to_json();
        assert_eq!(v["interval_ms"], json!(100));
        assert_eq!(v["t_ms"], json!([100, 300]));
        assert_eq!(v["tool_calls"], json!([10, 30]));
        assert_eq!(v["calls_per_s"], json!([100.0, 100.0]));
        assert_eq!(v["cpu_percent"], json!([50.0, 200.0]));
        assert_eq!(v["rss_kb"], json!([120, 130]));
    }

    #[test]
    fn a_full_buffer_keeps_every_other_reading_and_doubles_the_interval() {
        let mut s = Series::default();
        let mut interval = INTERVAL;
        let mut due = Duration::ZERO;
        for k in 0..MAX_SAMPLES as u64 * 3 {
            let t = u64::try_from(due.as_millis()).unwrap();
            due = s.push(at(t, k, 0.0, 1), &mut interval);
            assert!(s.samples().len() < MAX_SAMPLES);
        }
        assert!(interval > INTERVAL * 2, "{interval:?}");
        assert_eq!(s.samples()[0].t_ms, 0);
        // Still on a regular grid of the current interval.
        let step = s.samples()[1].t_ms - s.samples()[0].t_ms;
        assert_eq!(step, s.interval_ms);
        assert!(
            s.samples()
                .windows(2)
                .all(|w| w[1].t_ms - w[0].t_ms == step)
        );
    }

    #[test]
    fn a_short_last_interval_merges_with_the_one_before() {
        let mut s = Series::default();
        let mut interval = INTERVAL;
        s.push(at(0, 0, 0.0, 1), &mut interval);
        s.push(at(100, 10, 0.0, 1), &mut interval);
        s.push(at(200, 20, 0.0, 1), &mut interval);
        s.finish(at(210, 20, 0.0, 1), interval);
        assert_eq!(s.to_json()["t_ms"], json!([100, 210]));
        assert_eq!(s.to_json()["calls_per_s"], json!([100.0, 90.9]));
        // A long enough one stays, and so does the first reading.
        s.finish(at(280, 27, 0.0, 1), interval);
        assert_eq!(s.to_json()["t_ms"], json!([100, 210, 280]));
        let mut one = Series::default();
        one.push(at(0, 0, 0.0, 1), &mut interval);
        one.finish(at(3, 1, 0.0, 1), interval);
        assert_eq!(one.to_json()["t_ms"], json!([3]));
    }

    #[test]
    fn a_sampler_reads_until_finished() {
        use std::sync::atomic::{AtomicU64, Ordering};
        let calls = Arc::new(AtomicU64::new(0));
        let counted = calls.clone();
        let sampler = Sampler::start(Arc::new(move || counted.load(Ordering::Relaxed))).unwrap();
        calls.store(7, Ordering::Relaxed);
        let series = sampler.finish();
        let last = series.samples().last().copied().unwrap();
        assert_eq!(last.tool_calls, 7);
        assert!(series.samples().len() >= 2);
        assert!(last.rss_kb > 0);
    }
}
