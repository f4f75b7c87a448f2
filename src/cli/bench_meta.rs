//! What makes a `rookery bench --json` result comparable with another: the run's context
//! (version, commit, host, CPUs, load average, timestamp, what each floor is), and
//! `rookery bench compare A.json B.json`, the ratio B/A of every figure both results carry.
//!
//! Reads the machine's state and JSON files; it never measures.

use std::path::Path;
use std::process::ExitCode;

use serde_json::{Map, Value, json};

use super::CliError;

/// What each floor measures, as the JSON carries it (`floors`).
const FLOORS: [(&str, &str); 3] = [
    (
        "concurrent_floor",
        "floor_spawns spawns of `bash -lc true` by floor_workers concurrent workers, wall time",
    ),
    (
        "seq_floor",
        "200 sequential spawns of `bash -lc true`, wall time per spawn",
    ),
    (
        "http_floor",
        "the run's own request bodies resent to the same endpoint by a bare hyper client",
    ),
];

/// Adds the run's context to a report object.
pub(super) fn add_context(report: &mut Value) {
    let Some(obj) = report.as_object_mut() else {
        return;
    };
    obj.insert("version".into(), json!(env!("CARGO_PKG_VERSION")));
    obj.insert("commit".into(), json!(env!("ROOKERY_COMMIT")));
    obj.insert("host".into(), json!(hostname()));
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    obj.insert("cpus".into(), json!(cpus));
    obj.insert("load_average".into(), load_average());
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    obj.insert("timestamp".into(), json!(now));
    let floors: Map<String, Value> = FLOORS
        .iter()
        .map(|(k, v)| ((*k).to_string(), json!(v)))
        .collect();
    obj.insert("floors".into(), Value::Object(floors));
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown".to_string())
}

/// The 1, 5 and 15 minute load averages of `/proc/loadavg`; `null` where it cannot be read.
fn load_average() -> Value {
    let Ok(text) = std::fs::read_to_string("/proc/loadavg") else {
        return Value::Null;
    };
    let loads: Option<Vec<f64>> = text
        .split_whitespace()
        .take(3)
        .map(|s| s.parse().ok())
        .collect();
    match loads {
        Some(l) if l.len() == 3 => json!(l),
        _ => Value::Null,
    }
}

fn read_result(path: &Path) -> Result<Map<String, Value>, CliError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| CliError::startup_io(format!("cannot read {}", path.display()), e))?;
    match serde_json::from_str(&text) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(CliError::usage(format!(
            "{}: not a `rookery bench --json` result (a JSON object)",
            path.display()
        ))),
        Err(e) => Err(CliError::usage(format!(
            "{}: invalid JSON: {e}",
            path.display()
        ))),
    }
}

/// `rookery bench compare A B`: one line per figure both carry, `name A B B/A`.
pub(super) fn compare(a: &Path, b: &Path) -> Result<ExitCode, CliError> {
    let (ra, rb) = (read_result(a)?, read_result(b)?);
    let mut lines = Vec::new();
    for (key, va) in &ra {
        let (Some(x), Some(y)) = (va.as_f64(), rb.get(key).and_then(Value::as_f64)) else {
            continue;
        };
        if va.is_boolean() {
            continue;
        }
        let ratio = if x == 0.0 {
            "-".to_string()
        } else {
            format!("{:.3}", y / x)
        };
        lines.push(format!("{key:<40} {x:>14} {y:>14} {ratio:>10}"));
    }
    if lines.is_empty() {
        return Err(CliError::usage(format!(
            "{} and {} have no figure in common",
            a.display(),
            b.display()
        )));
    }
    outln!("{:<40} {:>14} {:>14} {:>10}", "figure", "A", "B", "B/A");
    for l in lines {
        outln!("{l}");
    }
    for (name, r) in [("A", &ra), ("B", &rb)] {
        if let (Some(v), Some(c), Some(h)) = (r.get("version"), r.get("commit"), r.get("host")) {
            outln!(
                "{name}: rookery {} ({}) on {}",
                v.as_str().unwrap_or("?"),
                c.as_str().unwrap_or("?"),
                h.as_str().unwrap_or("?")
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
