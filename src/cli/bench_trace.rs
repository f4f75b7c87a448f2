//! `rookery bench --trace-appends N`: renders [`crate::bench::trace_appends`] (the trace writer
//! against a raw `write(2)` loop of the same records, medians of 3 interleaved rounds) as text
//! or one JSON object; with a postgres `--store` (or `$ROOKERY_STORE`),
//! [`crate::bench::store_appends`] (the trace writer into the store against a bare client's
//! inserts, medians of 5 rounds). It owns the rendering, never the measuring.

use std::process::ExitCode;

use serde_json::json;

use super::{BenchArgs, CliError};
use crate::bench::{TempDir, trace_appends};

/// Rounds of each side (the medians are reported).
const ROUNDS: usize = 3;

/// Rounds of each side against the store (a database's times vary more than a file's).
const STORE_ROUNDS: usize = 5;

fn us(d: std::time::Duration) -> f64 {
    (d.as_secs_f64() * 1e7).round() / 10.0
}

/// `rookery bench --trace-appends N`: times bursts of `n` trace appends, raw and through the
/// trace writer.
pub async fn trace_appends(args: &BenchArgs, n: usize) -> Result<ExitCode, CliError> {
    if n == 0 {
        return Err(CliError::usage("--trace-appends must be at least 1"));
    }
    let choice = crate::trace::store_choice::StoreChoice::resolve(args.store.store.as_deref())
        .map_err(|e| CliError::usage(e.to_string()))?;
    if let crate::trace::store_choice::StoreChoice::Postgres(url) = choice {
        return store_appends(args, n, &url).await;
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

/// `rookery bench --trace-appends N --store URL`: bursts of `n` appends into the store, through
/// the trace writer and by a bare client.
async fn store_appends(args: &BenchArgs, n: usize, url: &str) -> Result<ExitCode, CliError> {
    let Some(store) = args.store.connect().await? else {
        return Err(CliError::usage("--store: a postgres:// URL is needed here"));
    };
    let out = crate::bench::store_appends::run(url, &store, n, STORE_ROUNDS)
        .await
        .map_err(CliError::Failed)?;
    let ratio = (out.ratio() * 100.0).round() / 100.0;
    if args.json {
        let v = json!({
            "trace_appends": n,
            "store": "postgres",
            "rounds": out.rounds,
            "record_bytes": out.record_bytes,
            "floor_burst_us": us(out.floor),
            "floor_records_per_s": out.per_s(out.floor).round(),
            "store_burst_us": us(out.store),
            "store_records_per_s": out.per_s(out.store).round(),
            "ratio_store_to_floor": ratio,
            "matching_rows": out.matching_rows,
        });
        outln!("{v}");
    } else {
        outln!(
            "{n} trace appends into postgres ({} bytes), medians of {} interleaved rounds:",
            out.record_bytes,
            out.rounds
        );
        outln!(
            "bare client, one INSERT  {:>10.1} us  {:>12.0} records/s",
            us(out.floor),
            out.per_s(out.floor)
        );
        outln!(
            "trace writer -> store    {:>10.1} us  {:>12.0} records/s  (fenced append stream, committed)",
            us(out.store),
            out.per_s(out.store)
        );
        outln!("ratio store/floor        {ratio:.2}");
    }
    Ok(ExitCode::SUCCESS)
}
