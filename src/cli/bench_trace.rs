//! `rookery bench --trace-appends N`: renders [`crate::bench::trace_appends`] (the trace writer
//! against a raw `write(2)` loop of the same records, medians of 3 interleaved rounds) as text
//! or one JSON object. It owns the rendering, never the measuring.

use std::process::ExitCode;

use serde_json::json;

use super::{BenchArgs, CliError};
use crate::bench::{TempDir, trace_appends};

/// Rounds of each side (the medians are reported).
const ROUNDS: usize = 3;

fn us(d: std::time::Duration) -> f64 {
    (d.as_secs_f64() * 1e7).round() / 10.0
}

/// `rookery bench --trace-appends N`: times bursts of `n` trace appends, raw and through the
/// trace writer.
pub async fn trace_appends(args: &BenchArgs, n: usize) -> Result<ExitCode, CliError> {
    if n == 0 {
        return Err(CliError::usage("--trace-appends must be at least 1"));
    }
    let scratch = TempDir::new("rookery-bench-trace")
        .map_err(|e| CliError::startup_io("cannot create a temp dir", e))?;
    let dir = args
        .home
        .clone()
        .unwrap_or_else(|| scratch.path().to_path_buf());
    std::fs::create_dir_all(&dir)
        .map_err(|e| CliError::startup_io(format!("cannot create {}", dir.display()), e))?;
    let out = trace_appends::run(n, ROUNDS, &dir)
        .await
        .map_err(CliError::Failed)?;
    let ratio = (out.ratio() * 100.0).round() / 100.0;
    let unheld_ratio = (out.unheld_ratio() * 100.0).round() / 100.0;
    if args.json {
        let v = json!({
            "trace_appends": n,
            "rounds": out.rounds,
            "record_bytes": out.record_bytes,
            "raw_burst_us": us(out.raw),
            "raw_records_per_s": out.per_s(out.raw).round(),
            "writer_burst_us": us(out.writer),
            "writer_records_per_s": out.per_s(out.writer).round(),
            "writer_writes": out.writer_writes,
            "ratio_writer_to_raw": ratio,
            "unheld_burst_us": us(out.unheld),
            "unheld_records_per_s": out.per_s(out.unheld).round(),
            "unheld_writes": out.unheld_writes,
            "ratio_unheld_to_raw": unheld_ratio,
        });
        outln!("{v}");
    } else {
        outln!(
            "{n} trace appends ({} bytes), medians of {} interleaved rounds:",
            out.record_bytes,
            out.rounds
        );
        outln!(
            "raw write(2) loop   {:>10.1} us  {:>12.0} records/s",
            us(out.raw),
            out.per_s(out.raw)
        );
        outln!(
            "trace writer        {:>10.1} us  {:>12.0} records/s  ({} write(2) calls in {} rounds; handle held, as a session holds it for one message)",
            us(out.writer),
            out.per_s(out.writer),
            out.writer_writes,
            out.rounds
        );
        outln!(
            "  not held          {:>10.1} us  {:>12.0} records/s  ({} write(2) calls in {} rounds)",
            us(out.unheld),
            out.per_s(out.unheld),
            out.unheld_writes,
            out.rounds
        );
        outln!("ratio writer/raw    {ratio:.2} (not held: {unheld_ratio:.2})");
    }
    Ok(ExitCode::SUCCESS)
}
