//! `rookery bench --report FILE.html` end to end through the real binary: the page parses as
//! well-formed XHTML, loads nothing from elsewhere, and shows every number and text of the
//! `--json` report of the same run (outside its charts), its four charts, each ratio beside its
//! floor, and with `--rounds 2` both rounds; a report path in a missing directory is refused
//! before the run, and so is `--report` with a scenario that has no page (`--idle-sessions`).

use std::path::Path;

use quick_xml::XmlVersion;
use quick_xml::events::Event;
use quick_xml::reader::Reader;
use serde_json::Value;

fn bench(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let home = dir.join("user-home");
    std::fs::create_dir_all(&home).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_rookery"))
        .arg("bench")
        .args(args)
        .env("TMPDIR", dir)
        .env("HOME", &home)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// What the test reads of a page.
#[derive(Debug, Default)]
struct Page {
    /// The text outside the charts, each element's on a line of its own.
    text: String,
    /// The text inside the charts (`<svg>`).
    chart_text: String,
    /// Every table row's cells, in order.
    rows: Vec<Vec<String>>,
    /// `<h2>` headings.
    headings: Vec<String>,
    /// `<svg>` elements.
    charts: usize,
}

/// Parses `html` as XML (fails on anything not well-formed: a tag left open or closed twice,
/// an entity XML does not define, a second root) and refuses any external reference.
fn parse(html: &str) -> Page {
    let mut reader = Reader::from_str(html);
    reader.config_mut().check_end_names = true;
    let mut page = Page::default();
    let mut stack: Vec<String> = Vec::new();
    let mut roots = 0;
    loop {
        let event = match reader.read_event() {
            Ok(e) => e,
            Err(e) => panic!(
                "not well-formed at byte {}: {e}\n{}",
                reader.buffer_position(),
                &html[..(reader.buffer_position() as usize).min(html.len())]
            ),
        };
        let mut text = String::new();
        if matches!(event, Event::Start(_) | Event::End(_) | Event::Empty(_)) {
            // Texts of different elements never run together; one text's pieces (split at
            // each entity) do.
            page.text.push('\n');
            page.chart_text.push('\n');
        }
        match &event {
            Event::Start(e) | Event::Empty(e) => {
                let name = e.name().as_ref().to_string();
                check_element(&name, e);
                if stack.is_empty() {
                    roots += 1;
                }
                match name.as_str() {
                    "tr" => page.rows.push(Vec::new()),
                    "td" | "th" => page
                        .rows
                        .last_mut()
                        .expect("a cell in a row")
                        .push(String::new()),
                    "svg" => page.charts += 1,
                    "h2" => page.headings.push(String::new()),
                    _ => {}
                }
                if matches!(event, Event::Start(_)) {
                    stack.push(name);
                }
            }
            Event::End(e) => {
                let name = e.name().as_ref().to_string();
                assert_eq!(
                    stack.pop().as_deref(),
                    Some(name.as_str()),
                    "unbalanced </{name}>"
                );
            }
            Event::Text(t) => text = t.html_content().into_owned(),
            Event::CData(_) => panic!("no CDATA expected"),
            Event::GeneralRef(r) => {
                let name: &str = r;
                text = match r.resolve_char_ref().unwrap() {
                    Some(c) => c.to_string(),
                    None => match name {
                        "amp" => "&",
                        "lt" => "<",
                        "gt" => ">",
                        "quot" => "\"",
                        "apos" => "'",
                        other => panic!("&{other}; is not an entity XML defines"),
                    }
                    .to_string(),
                };
            }
            Event::Eof => break,
            _ => {}
        }
        if text.is_empty() {
            continue;
        }
        let inside = |tag: &str| stack.iter().any(|s| s == tag);
        if inside("style") {
            assert!(
                !text.contains("url(") && !text.contains("@import"),
                "the style loads something: {text}"
            );
        }
        if inside("svg") {
            page.chart_text.push_str(&text);
            continue;
        }
        page.text.push_str(&text);
        if (inside("td") || inside("th"))
            && let Some(cell) = page.rows.last_mut().and_then(|r| r.last_mut())
        {
            cell.push_str(&text);
        }
        if inside("h2") {
            page.headings.last_mut().unwrap().push_str(&text);
        }
    }
    assert!(stack.is_empty(), "left open: {stack:?}");
    assert_eq!(roots, 1, "one root element");
    page
}

/// No element that loads something, no attribute pointing elsewhere.
fn check_element(name: &str, e: &quick_xml::events::BytesStart<'_>) {
    assert!(
        ![
            "link",
            "script",
            "img",
            "iframe",
            "object",
            "embed",
            "audio",
            "video",
            "source",
            "image",
            "use",
            "foreignObject",
        ]
        .contains(&name),
        "<{name}> in a self-contained page"
    );
    for a in e.attributes() {
        let a = a.unwrap();
        let key = a.key.as_ref().to_string();
        let value = a
            .normalized_value(XmlVersion::Implicit1_0)
            .unwrap()
            .to_lowercase();
        if [
            "src",
            "href",
            "xlink:href",
            "srcset",
            "action",
            "data",
            "poster",
        ]
        .contains(&key.as_str())
        {
            assert!(
                !value.starts_with("http:")
                    && !value.starts_with("https:")
                    && !value.starts_with("//"),
                "<{name} {key}=\"{value}\"> loads from elsewhere"
            );
        }
        if key == "style" {
            assert!(!value.contains("url("), "<{name} style> loads something");
        }
    }
}

/// Every number of `v` (as the JSON writes it) and every text, with where it is.
fn leaves(v: &Value, at: &str, out: &mut Vec<(String, String, bool)>) {
    match v {
        Value::Number(n) => out.push((at.to_string(), n.to_string(), true)),
        Value::String(s) => out.push((at.to_string(), s.clone(), false)),
        Value::Bool(b) => out.push((at.to_string(), b.to_string(), false)),
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                leaves(x, &format!("{at}[{i}]"), out);
            }
        }
        Value::Object(m) => {
            for (k, x) in m {
                leaves(x, &format!("{at}.{k}"), out);
            }
        }
        Value::Null => {}
    }
}

/// Each number of the JSON is a whole token of the page's text (outside the charts), and each
/// text is in it.
fn assert_shows_every_figure(v: &Value, page: &Page) {
    let is_num = |c: char| c.is_ascii_digit() || ".eE+-".contains(c);
    let tokens: std::collections::HashSet<&str> = page
        .text
        .split(|c: char| !is_num(c))
        .filter(|t| !t.is_empty())
        .collect();
    let mut all = Vec::new();
    leaves(v, "", &mut all);
    assert!(all.len() > 40, "a report with figures: {v}");
    for (at, shown, number) in all {
        if number {
            assert!(
                tokens.contains(shown.as_str()),
                "{at} = {shown} is not on the page"
            );
        } else {
            assert!(
                page.text.contains(&shown),
                "{at} = {shown:?} is not on the page"
            );
        }
    }
}

fn row<'a>(page: &'a Page, first: &str) -> &'a [String] {
    page.rows
        .iter()
        .find(|r| r.first().map(String::as_str) == Some(first))
        .unwrap_or_else(|| panic!("no row {first}: {:?}", page.rows))
}

fn run_with_report(dir: &Path, args: &[&str]) -> (Value, Page) {
    let html = dir.join("report.html");
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["--json", "--report", html.to_str().unwrap()]);
    let (code, stdout, stderr) = bench(dir, &all);
    assert_eq!(code, 0, "{stderr}");
    let v: Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    let text = std::fs::read_to_string(&html).unwrap();
    assert!(
        text.starts_with("<!DOCTYPE html>"),
        "{}",
        &text[..100.min(text.len())]
    );
    (v, parse(&text))
}

#[test]
fn report_is_well_formed_self_contained_and_shows_every_figure_of_the_json() {
    let dir = tempfile::tempdir().unwrap();
    let (v, page) = run_with_report(
        dir.path(),
        &[
            "--workload",
            "read",
            "--sessions",
            "2",
            "--turns",
            "8",
            "--model-latency-ms",
            "30",
        ],
    );
    assert_eq!(v["ok"], true, "{v}");
    // 8 answers of 30 ms each: at least two 100 ms samples.
    let t = v["series"]["t_ms"].as_array().unwrap();
    assert!(t.len() >= 2, "{v}");
    assert_eq!(
        v["series"]["tool_calls"].as_array().unwrap().last(),
        Some(&Value::from(16))
    );
    let counted: u64 = v["tool_call_histogram"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["count"].as_u64().unwrap())
        .sum();
    assert_eq!(counted, 16, "{v}");
    assert_shows_every_figure(&v, &page);
    // Histogram, throughput, CPU, RSS.
    assert_eq!(page.charts, 4, "{:?}", page.headings);
    for h in [
        "Parameters",
        "Tool call latency",
        "Throughput over time",
        "CPU over time",
        "Resident set over time",
    ] {
        assert!(
            page.headings.iter().any(|x| x == h),
            "no {h}: {:?}",
            page.headings
        );
    }
    assert_eq!(row(&page, "p99")[1], v["tool_call_p99_us"].to_string());
    assert_eq!(row(&page, "workload")[1], "read");
}

#[test]
fn rounds_show_each_round_and_each_ratio_beside_its_floor() {
    let dir = tempfile::tempdir().unwrap();
    let (v, page) = run_with_report(
        dir.path(),
        &[
            "--workload",
            "exec",
            "--sessions",
            "2",
            "--turns",
            "3",
            "--floor",
            "--floor-spawns",
            "6",
            "--floor-workers",
            "2",
            "--rounds",
            "2",
        ],
    );
    let rounds = v["per_round"].as_array().unwrap();
    assert_eq!(rounds.len(), 2);
    assert_shows_every_figure(&v, &page);
    // Each round's histogram, and its line in each of the three charts over time.
    assert_eq!(page.charts, 5, "{:?}", page.headings);
    for r in ["round 1", "round 2"] {
        assert!(
            page.chart_text.contains(&format!("Tool call latency, {r}")),
            "{}",
            page.chart_text
        );
        assert_eq!(
            page.chart_text.matches(r).count(),
            4,
            "{r}: {}",
            page.chart_text
        );
    }
    let ratio = row(&page, "ratio_wall_to_concurrent_floor");
    let cells: Vec<String> = [
        "wall_ms",
        "floor_concurrent_ms",
        "ratio_wall_to_concurrent_floor",
    ]
    .iter()
    .map(|k| v[k].to_string())
    .chain(
        rounds
            .iter()
            .map(|r| r["ratio_wall_to_concurrent_floor"].to_string()),
    )
    .collect();
    assert_eq!(ratio[2..], cells[..], "{ratio:?}");
    let seq = row(&page, "ratio_per_call_to_seq_floor");
    assert_eq!(seq[3], v["floor_seq_per_spawn_ms"].to_string(), "{seq:?}");
    let header = page
        .rows
        .iter()
        .find(|r| r.first().map(String::as_str) == Some("figure"))
        .unwrap();
    assert_eq!(header[1..], ["median", "round 1", "round 2"], "{header:?}");
}

#[test]
fn a_report_in_a_missing_directory_is_refused_before_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-dir").join("r.html");
    let (code, stdout, stderr) = bench(
        dir.path(),
        &[
            "--workload",
            "read",
            "--sessions",
            "1",
            "--turns",
            "1",
            "--report",
            missing.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 2, "{stdout}{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
    assert!(stderr.contains("does not exist"), "{stderr}");
    assert!(!missing.exists());
    // The other scenarios have no page.
    let page = dir.path().join("idle.html");
    let (code, _, stderr) = bench(
        dir.path(),
        &["--idle-sessions", "1", "--report", page.to_str().unwrap()],
    );
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--report"), "{stderr}");
    assert!(!page.exists());
}
