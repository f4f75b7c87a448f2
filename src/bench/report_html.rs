//! `rookery bench --report FILE.html`: the run's `--json` report as one self-contained page to
//! look at: its parameters, each ratio beside its floor, the tool calls' latency (percentiles and
//! a histogram), throughput, CPU and resident set over time, every figure (each round's beside
//! the medians of a `--rounds` run) and the raw samples. The charts are inline SVG
//! (`report_charts.rs`); the page loads nothing (no script, stylesheet, font or image) and is
//! well-formed XHTML, so an XML parser reads it as well as a browser.
//!
//! It renders the JSON it is given and nothing else: every number and text of the report appears
//! on the page, every text escaped (a parameter may hold user text). It never measures.

use std::fmt::Write as _;

use serde_json::{Map, Value};

use super::report_charts::{self, ChartError, Line};

/// The report's keys that say what ran (the rest are figures).
const PARAMETERS: [&str; 14] = [
    "workload",
    "sessions",
    "turns",
    "model",
    "model_latency_ms",
    "rounds",
    "floor_spawns",
    "floor_workers",
    "version",
    "commit",
    "host",
    "cpus",
    "load_average",
    "timestamp",
];

/// Each ratio with the figure it divides and its floor: (ratio, measured, floor, what).
const RATIOS: [(&str, &str, &str, &str); 4] = [
    (
        "ratio_wall_to_concurrent_floor",
        "wall_ms",
        "floor_concurrent_ms",
        "wall time, ms, vs the same number of `bash -lc true` spawns by as many workers",
    ),
    (
        "ratio_per_call_to_seq_floor",
        "per_call_ms",
        "floor_seq_per_spawn_ms",
        "time per tool call, ms, vs one sequential `bash -lc true` spawn",
    ),
    (
        "ratio_calls_per_s_to_http_floor",
        "calls_per_s",
        "http_floor_calls_per_s",
        "tool calls per second vs the run's bodies resent by a bare HTTP client",
    ),
    (
        "ratio_cpu_per_request_to_http_floor",
        "cpu_per_request_us",
        "http_floor_cpu_per_request_us",
        "CPU per model request, µs, vs the bare HTTP client's",
    ),
];

/// The latency percentiles, as (key, label).
const PERCENTILES: [(&str, &str); 4] = [
    ("tool_call_p50_us", "p50"),
    ("tool_call_p90_us", "p90"),
    ("tool_call_p99_us", "p99"),
    ("tool_call_p100_us", "max"),
];

/// The columns of a series (`series` in the JSON), as (key, header).
const SERIES_COLUMNS: [(&str, &str); 5] = [
    ("t_ms", "t, ms"),
    ("tool_calls", "tool calls done"),
    ("calls_per_s", "tool calls/s"),
    ("cpu_percent", "CPU % of one core"),
    ("rss_kb", "RSS, kB"),
];

const STYLE: &str = "body{font-family:sans-serif;margin:2em auto;max-width:60em;color:#222;padding:0 1em}\
table{border-collapse:collapse;margin:.5em 0 1em}\
th,td{border:1px solid #ccc;padding:.2em .6em;text-align:left}\
td.n{text-align:right;font-variant-numeric:tabular-nums}\
th{background:#f2f2f2}\
.ok{color:#1a7f37;font-weight:bold}.failed{color:#c62828;font-weight:bold}\
svg{display:block;max-width:100%;height:auto;margin:.5em 0}\
summary{cursor:pointer;margin:.5em 0}\
code{background:#f4f4f4;padding:0 .2em}";

/// `&`, `<`, `>`, `"` and `'` as entities: safe in text and in quoted attributes.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A value as the page shows it: numbers exactly as the JSON writes them, texts escaped, a list
/// of plain values joined by commas, anything else as escaped JSON.
fn shown(v: &Value) -> String {
    match v {
        Value::String(s) => escape(s),
        Value::Null => "–".to_string(),
        Value::Array(items) if items.iter().all(|i| !i.is_array() && !i.is_object()) => {
            items.iter().map(shown).collect::<Vec<_>>().join(", ")
        }
        Value::Array(_) | Value::Object(_) => escape(&v.to_string()),
        Value::Bool(_) | Value::Number(_) => v.to_string(),
    }
}

/// A table cell: numbers right-aligned.
fn td(v: Option<&Value>) -> String {
    match v {
        Some(v @ Value::Number(_)) => format!("<td class=\"n\">{}</td>", shown(v)),
        Some(v) => format!("<td>{}</td>", shown(v)),
        None => "<td>–</td>".to_string(),
    }
}

/// A value drawn by its own section rather than listed as a figure.
fn is_scalar(v: &Value) -> bool {
    !v.is_array() && !v.is_object()
}

/// The report as the page reads it: the combined (or only) report and its rounds.
struct Report<'a> {
    top: &'a Map<String, Value>,
    /// One entry per round (the report itself for a single run).
    rounds: Vec<&'a Map<String, Value>>,
}

impl<'a> Report<'a> {
    fn new(top: &'a Map<String, Value>) -> Self {
        let rounds: Vec<&Map<String, Value>> = top
            .get("per_round")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_object).collect())
            .unwrap_or_default();
        let rounds = if rounds.is_empty() { vec![top] } else { rounds };
        Report { top, rounds }
    }

    fn several(&self) -> bool {
        self.rounds.len() > 1
    }

    /// The name of round `i` in legends and headers.
    fn round_name(&self, i: usize) -> String {
        if self.several() {
            format!("round {}", i + 1)
        } else {
            "run".to_string()
        }
    }

    /// The header cells of the rounds' columns (none for a single run).
    fn round_headers(&self) -> String {
        if !self.several() {
            return String::new();
        }
        (0..self.rounds.len())
            .map(|i| format!("<th>round {}</th>", i + 1))
            .collect()
    }

    /// The cells of `key` in each round (none for a single run).
    fn round_cells(&self, key: &str) -> String {
        if !self.several() {
            return String::new();
        }
        self.rounds.iter().map(|r| td(r.get(key))).collect()
    }
}

/// The page of `report` (an object, as `rookery bench --json` prints it).
pub fn render(report: &Value) -> Result<String, ChartError> {
    let empty = Map::new();
    let top = report.as_object().unwrap_or(&empty);
    let r = Report::new(top);
    let mut page = String::with_capacity(64 * 1024);
    head(&mut page, &r);
    parameters(&mut page, &r);
    ratios(&mut page, &r);
    latency(&mut page, &r)?;
    over_time(&mut page, &r)?;
    figures(&mut page, &r);
    samples(&mut page, &r);
    page.push_str("</body>\n</html>\n");
    Ok(page)
}

fn text_of(top: &Map<String, Value>, key: &str) -> String {
    top.get(key).map(shown).unwrap_or_else(|| "?".to_string())
}

fn head(page: &mut String, r: &Report<'_>) {
    let title = format!(
        "rookery bench: {} workload, {} sessions × {} tool calls",
        text_of(r.top, "workload"),
        text_of(r.top, "sessions"),
        text_of(r.top, "turns")
    );
    let _ = write!(
        page,
        "<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\" lang=\"en\">\n<head>\n\
         <meta charset=\"utf-8\"/>\n<meta name=\"viewport\" content=\"width=device-width\"/>\n\
         <title>{title}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<h1>{title}</h1>\n"
    );
    let ok = r.top.get("ok").and_then(Value::as_bool);
    let failed = text_of(r.top, "failed_sessions");
    let _ = match ok {
        Some(true) => writeln!(page, "<p class=\"ok\">Every session passed its check.</p>"),
        _ => writeln!(
            page,
            "<p class=\"failed\">FAILED: {failed} sessions did not pass their check; the figures measure something else than the workload.</p>"
        ),
    };
    if r.several() {
        let _ = writeln!(
            page,
            "<p>{} interleaved rounds: each figure is the median of the rounds; each round's follows it.</p>",
            r.rounds.len()
        );
    }
}

fn parameters(page: &mut String, r: &Report<'_>) {
    page.push_str("<h2>Parameters</h2>\n<table>\n");
    for key in PARAMETERS {
        if let Some(v) = r.top.get(key) {
            let _ = writeln!(page, "<tr><th>{key}</th>{}</tr>", td(Some(v)));
        }
    }
    page.push_str("</table>\n");
    if let Some(floors) = r.top.get("floors").and_then(Value::as_object) {
        page.push_str("<h3>What each floor measures</h3>\n<table>\n");
        for (name, what) in floors {
            let _ = writeln!(page, "<tr><th>{}</th>{}</tr>", escape(name), td(Some(what)));
        }
        page.push_str("</table>\n");
    }
}

fn ratios(page: &mut String, r: &Report<'_>) {
    page.push_str("<h2>Ratios to their floors</h2>\n");
    let present: Vec<_> = RATIOS
        .iter()
        .filter(|(ratio, ..)| r.top.contains_key(*ratio))
        .collect();
    if present.is_empty() {
        page.push_str(
            "<p>No floor was measured in this run (<code>--floor</code> measures them).</p>\n",
        );
        return;
    }
    let _ = writeln!(
        page,
        "<table>\n<tr><th>ratio</th><th>what</th><th>measured</th><th>floor</th><th>ratio</th>{}</tr>",
        r.round_headers()
    );
    for (ratio, measured, floor, what) in present {
        let _ = writeln!(
            page,
            "<tr><th>{ratio}</th><td>{}</td>{}{}{}{}</tr>",
            escape(what),
            td(r.top.get(*measured)),
            td(r.top.get(*floor)),
            td(r.top.get(*ratio)),
            r.round_cells(ratio)
        );
    }
    page.push_str("</table>\n");
}

/// `1000` as `1k`, `2000000` as `2M`: the histogram's axis labels.
fn short(us: u64) -> String {
    match us {
        u if u >= 1_000_000 && u % 1_000_000 == 0 => format!("{}M", u / 1_000_000),
        u if u >= 1_000 && u % 1_000 == 0 => format!("{}k", u / 1_000),
        u => u.to_string(),
    }
}

fn latency(page: &mut String, r: &Report<'_>) -> Result<(), ChartError> {
    page.push_str(
        "<h2>Tool call latency</h2>\n<p>From the end of the model's answer that asks for a call \
         to the next model request, which carries its result: the tool's run and the harness's \
         work around it.</p>\n",
    );
    let _ = writeln!(
        page,
        "<table>\n<tr><th>percentile</th><th>µs</th>{}</tr>",
        r.round_headers()
    );
    for (key, label) in PERCENTILES {
        let _ = writeln!(
            page,
            "<tr><th>{label}</th>{}{}</tr>",
            td(r.top.get(key)),
            r.round_cells(key)
        );
    }
    page.push_str("</table>\n");
    for (i, round) in r.rounds.iter().enumerate() {
        let buckets: Vec<(u64, u64, u64)> = round
            .get("tool_call_histogram")
            .and_then(Value::as_array)
            .map(|b| {
                b.iter()
                    .filter_map(|b| {
                        let n = |k: &str| b.get(k).and_then(Value::as_u64);
                        Some((n("from_us")?, n("to_us")?, n("count")?))
                    })
                    .collect()
            })
            .unwrap_or_default();
        if buckets.is_empty() {
            continue;
        }
        // Room for "from–to" under each bar up to 8 bars; past that, the lower edge only.
        let bars: Vec<(String, u64)> = buckets
            .iter()
            .map(|b| {
                let label = if buckets.len() <= 8 {
                    format!("{}–{}", short(b.0), short(b.1))
                } else {
                    short(b.0)
                };
                (label, b.2)
            })
            .collect();
        let title = if r.several() {
            format!("Tool call latency, {}", r.round_name(i))
        } else {
            "Tool call latency".to_string()
        };
        page.push_str(&report_charts::histogram(
            &title,
            if buckets.len() <= 8 {
                "µs"
            } else {
                "µs (each bar: from its label to the next)"
            },
            &bars,
            i,
        )?);
        let _ = writeln!(
            page,
            "<details><summary>Buckets of {}</summary>\n<table>\n<tr><th>from, µs</th><th>to, µs</th><th>tool calls</th></tr>",
            r.round_name(i)
        );
        for (from, to, count) in buckets {
            let _ = writeln!(
                page,
                "<tr><td class=\"n\">{from}</td><td class=\"n\">{to}</td><td class=\"n\">{count}</td></tr>"
            );
        }
        page.push_str("</table>\n</details>\n");
    }
    Ok(())
}

/// The `(t in s, value)` points of a series column of one round.
fn points(round: &Map<String, Value>, column: &str) -> Vec<(f64, f64)> {
    let Some(series) = round.get("series") else {
        return Vec::new();
    };
    let col = |k: &str| -> Vec<f64> {
        series
            .get(k)
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_f64).collect())
            .unwrap_or_default()
    };
    col("t_ms")
        .into_iter()
        .zip(col(column))
        .map(|(t, v)| (t / 1000.0, v))
        .collect()
}

fn over_time(page: &mut String, r: &Report<'_>) -> Result<(), ChartError> {
    let charts = [
        (
            "Throughput over time",
            "calls_per_s",
            "tool calls/s",
            "Tool calls finished per second in each sampling interval.",
        ),
        (
            "CPU over time",
            "cpu_percent",
            "CPU % of one core",
            "This process's user and system CPU in each interval, in percent of one core (the tools' own processes are not in it).",
        ),
        (
            "Resident set over time",
            "rss_kb",
            "RSS, kB",
            "This process's resident set at the end of each interval.",
        ),
    ];
    for (title, column, y_desc, what) in charts {
        let _ = writeln!(page, "<h2>{title}</h2>\n<p>{}</p>", escape(what));
        let lines: Vec<Line> = r
            .rounds
            .iter()
            .enumerate()
            .map(|(i, round)| Line {
                name: r.round_name(i),
                points: points(round, column),
            })
            .filter(|l| !l.points.is_empty())
            .collect();
        if lines.is_empty() {
            page.push_str("<p>This report has no samples.</p>\n");
            continue;
        }
        page.push_str(&report_charts::lines(
            title,
            "time since the tasks' start, s",
            y_desc,
            &lines,
        )?);
    }
    Ok(())
}

/// Every scalar figure: the report's, then any only a round has, in order.
fn figure_keys<'a>(r: &Report<'a>) -> Vec<&'a str> {
    let mut keys: Vec<&str> = Vec::new();
    let maps = std::iter::once(r.top).chain(r.rounds.iter().copied());
    for map in maps {
        for (k, v) in map {
            let k = k.as_str();
            if is_scalar(v) && !PARAMETERS.contains(&k) && !keys.contains(&k) {
                keys.push(k);
            }
        }
    }
    keys
}

fn figures(page: &mut String, r: &Report<'_>) {
    let header = if r.several() { "median" } else { "value" };
    let _ = writeln!(
        page,
        "<h2>All figures</h2>\n<table>\n<tr><th>figure</th><th>{header}</th>{}</tr>",
        r.round_headers()
    );
    for key in figure_keys(r) {
        let _ = writeln!(
            page,
            "<tr><th>{}</th>{}{}</tr>",
            escape(key),
            td(r.top.get(key)),
            r.round_cells(key)
        );
    }
    page.push_str("</table>\n");
    // Anything else the report carries (a figure this page does not know yet).
    let known = [
        "floors",
        "load_average",
        "series",
        "tool_call_histogram",
        "per_round",
    ];
    for (k, v) in r.top {
        if !is_scalar(v) && !known.contains(&k.as_str()) {
            let _ = writeln!(page, "<p><b>{}</b>: {}</p>", escape(k), shown(v));
        }
    }
}

fn samples(page: &mut String, r: &Report<'_>) {
    page.push_str("<h2>Samples</h2>\n");
    for (i, round) in r.rounds.iter().enumerate() {
        let Some(series) = round.get("series").and_then(Value::as_object) else {
            continue;
        };
        let _ = writeln!(
            page,
            "<details><summary>Samples of {}, every {} ms</summary>\n<table>\n<tr>{}</tr>",
            r.round_name(i),
            series.get("interval_ms").map(shown).unwrap_or_default(),
            SERIES_COLUMNS
                .iter()
                .map(|(_, h)| format!("<th>{h}</th>"))
                .collect::<String>()
        );
        let column = |k: &str| series.get(k).and_then(Value::as_array);
        let rows = column("t_ms").map_or(0, Vec::len);
        for row in 0..rows {
            page.push_str("<tr>");
            for (key, _) in SERIES_COLUMNS {
                page.push_str(&td(column(key).and_then(|c| c.get(row))));
            }
            page.push_str("</tr>\n");
        }
        page.push_str("</table>\n</details>\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_text_is_escaped() {
        assert_eq!(
            escape(r#"<a href="x">&'</a>"#),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;&lt;/a&gt;"
        );
        let page = render(&json!({
            "workload": "<script>alert(1)</script>",
            "host": "a&b",
            "ok": true,
        }))
        .unwrap();
        assert!(!page.contains("<script>"), "{page}");
        assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(page.contains("a&amp;b"));
    }

    #[test]
    fn short_labels() {
        assert_eq!(short(500), "500");
        assert_eq!(short(2000), "2k");
        assert_eq!(short(5_000_000), "5M");
        assert_eq!(short(1500), "1500");
    }
}
