//! `rookery bench --forwarding N`: renders [`crate::bench::forwarding`] (a session's `GET`
//! sent N times to its owner and N times through another node of a two-node cluster on the
//! postgres store of `--store` or `$ROOKERY_STORE`) as text or one JSON object, with the p95 a forward adds
//! beside its target (1 ms on loopback). It owns the rendering, never the measuring.

use std::process::ExitCode;

use serde_json::json;

use super::{BenchArgs, CliError};
use crate::bench::TempDir;
use crate::bench::forwarding::{self, ForwardingSpec, TARGET_ADDED_P95_MS};
use crate::trace::store_choice::{STORE_ENV, StoreChoice};

fn r3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// `rookery bench --forwarding N`.
pub(super) async fn bench(args: &BenchArgs, n: usize) -> Result<ExitCode, CliError> {
    if n == 0 {
        return Err(CliError::usage("--forwarding must be at least 1"));
    }
    let choice = StoreChoice::resolve(args.store.store.as_deref())
        .map_err(|e| CliError::usage(e.to_string()))?;
    let store_url = match choice {
        StoreChoice::Postgres(url) => url,
        StoreChoice::Files => {
            return Err(CliError::usage(format!(
                "--forwarding runs two cluster nodes on a postgres store: pass --store postgres://USER@HOST:PORT/DB (or set ${STORE_ENV})"
            )));
        }
    };
    let scratch = TempDir::new("rookery-bench-forwarding")
        .map_err(|e| CliError::startup_io("cannot create a temp dir", e))?;
    let spec = ForwardingSpec {
        store_url,
        requests: n,
        scratch: args
            .home
            .clone()
            .unwrap_or_else(|| scratch.path().to_path_buf()),
    };
    let out = forwarding::run(&spec).await.map_err(|e| CliError::Io {
        what: "forwarding bench".to_string(),
        source: std::io::Error::other(e.to_string()),
        code: 1,
    })?;
    let added = out.added_p95_ms();
    if args.json {
        let v = json!({
            "forwarding": n,
            "direct_p50_ms": r3(out.direct_ms(50.0)),
            "direct_p95_ms": r3(out.direct_ms(95.0)),
            "forwarded_p50_ms": r3(out.forwarded_ms(50.0)),
            "forwarded_p95_ms": r3(out.forwarded_ms(95.0)),
            "added_p95_ms": r3(added),
            "target_added_p95_ms": TARGET_ADDED_P95_MS,
        });
        outln!("{v}");
    } else {
        outln!("{n} GET /v1/sessions/{{id}} at the owner and through another node, interleaved:");
        outln!(
            "at the owner        p50 {:>7.3} ms  p95 {:>7.3} ms",
            out.direct_ms(50.0),
            out.direct_ms(95.0)
        );
        outln!(
            "through another     p50 {:>7.3} ms  p95 {:>7.3} ms",
            out.forwarded_ms(50.0),
            out.forwarded_ms(95.0)
        );
        let verdict = if added <= TARGET_ADDED_P95_MS {
            "met"
        } else {
            "missed"
        };
        outln!("added p95           {added:.3} ms (target <= {TARGET_ADDED_P95_MS} ms: {verdict})");
    }
    Ok(ExitCode::SUCCESS)
}
