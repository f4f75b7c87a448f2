//! End-to-end tests of `rookery run`, driving the built binary: the README tour, `--json` and
//! `--partials`, usage and configuration errors (exit 2), approval modes, `max_turns`, model
//! errors and retries, tool error texts, `{{output:K:REGEX}}` placeholders and Ctrl-C.
//!
//! Every run gets its own workspace, Rookery home and `$HOME` (temporary directories), stdin is
//! `/dev/null` (never a terminal) and every wait is bounded.

use crate::common::cli as support;

use support::*;

use serde_json::{Value, json};
use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};

// ---------------------------------------------------------------------------------------------
// 1. The README tour
// ---------------------------------------------------------------------------------------------

fn tour_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/tour.json")
}

#[test]
fn tour_runs_end_to_end() {
    let sb = Sandbox::new();
    let out = sb.run(&["--script", s(&tour_script()), "Show me around"]);
    out.expect_code(0);

    // The workspace effect.
    let notes = std::fs::read_to_string(sb.ws().join("rookery-tour/notes.md")).expect("notes.md");
    assert!(
        notes.trim_end().ends_with("Status: done"),
        "notes.md:\n{notes}"
    );
    assert!(!notes.contains("Status: draft"));

    // The transcript: assistant texts, one `▸` line per call, indented outputs.
    let lines = out.stdout_lines();
    let script: Value =
        serde_json::from_str(&std::fs::read_to_string(tour_script()).expect("tour")).expect("json");
    for turn in script["turns"].as_array().expect("turns") {
        let text = turn["text"].as_str().expect("every tour turn has text");
        assert!(
            lines.contains(&text),
            "transcript lacks {text:?}:\n{}",
            out.stdout
        );
    }
    let call_lines: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| l.starts_with("▸ "))
        .collect();
    assert_eq!(call_lines.len(), 3, "one ▸ line per call:\n{}", out.stdout);
    for (line, name) in call_lines
        .iter()
        .zip(["write_file", "read_file", "edit_file"])
    {
        assert!(
            line.starts_with(&format!("▸ {name} — ")),
            "call line {line:?}"
        );
    }
    for expected in [
        "    Created \"rookery-tour/notes.md\" (4 lines, 80 bytes).",
        "         1\t# Rookery tour",
        "         4\tStatus: draft",
        "    Replaced 1 occurrence in \"rookery-tour/notes.md\".",
        "    +Status: done",
    ] {
        assert!(
            lines.contains(&expected),
            "transcript lacks the indented output line {expected:?}:\n{}",
            out.stdout
        );
    }
    assert!(
        !out.stdout.contains("Show me around"),
        "the prompt is not echoed"
    );

    // stderr names the trace path, which has the documented layout.
    let trace = sb.trace();
    let named: Vec<&str> = out
        .stderr
        .lines()
        .filter_map(|l| l.strip_prefix("trace: "))
        .collect();
    assert_eq!(named, vec![s(&trace)], "stderr:\n{}", out.stderr);
    let file = trace.file_name().and_then(|f| f.to_str()).expect("name");
    let session_id = file.strip_suffix("_001.jsonl").expect("_001.jsonl suffix");
    let id_re = regex::Regex::new(r"^session-(\d{4}-\d{2}-\d{2})-\d{2}-\d{2}-\d{2}-[0-9a-f]{8}$")
        .expect("regex");
    let caps = id_re.captures(session_id).expect("session id format");
    assert_eq!(
        trace.parent(),
        Some(sb.home().join("traces").join(&caps[1]).as_path())
    );

    // The trace.
    let records = read_records(&trace);
    assert_eq!(kind(&records[0]), "session_meta");
    assert_eq!(records[0]["payload"]["session_id"], session_id);
    assert_eq!(records[0]["payload"]["provider"], "scripted");
    assert_eq!(records[0]["payload"]["workspace"], s(&sb.ws()));
    assert_eq!(records[1]["type"], "model_msg");
    assert_eq!(records[1]["payload"]["type"], "text");
    assert_eq!(records[1]["payload"]["role"], "user");
    assert_eq!(records[1]["payload"]["text"], "Show me around");
    assert_eq!(count(&records, "tool_list_ready"), 1);
    assert_eq!(call_ids(&records), vec!["call_0", "call_1", "call_2"]);
    check_pairing(&records, true);
    for id in ["call_0", "call_1", "call_2"] {
        assert_eq!(decision_of(&records, id), "allow");
        assert_eq!(output_of(&records, id)["stop_reason"], "completed");
    }
    // The placeholder of the edit resolved against the read's output.
    let edit = of_kind(&records, "tool_call")[2]["payload"]["arguments"]
        .as_str()
        .expect("arguments")
        .to_string();
    let edit: Value = serde_json::from_str(&edit).expect("edit arguments");
    assert_eq!(edit["old_string"], "Status: draft");
    assert_eq!(count(&records, "request_begin"), 4);
    assert_eq!(
        *last_payload(&records),
        json!({"type": "task_end", "status": "completed"})
    );
    assert_eq!(count(&records, "task_end"), 1);
}

// ---------------------------------------------------------------------------------------------
// 2. --json and --partials
// ---------------------------------------------------------------------------------------------

#[test]
fn json_stream_matches_the_trace_and_has_no_partials() {
    let sb = Sandbox::new();
    let out = sb.run(&["--script", s(&tour_script()), "--json", "Show me around"]);
    out.expect_code(0);
    let stream = json_lines(&out);
    assert!(!stream.is_empty());
    assert!(
        stream.iter().all(|v| !is_partial(v)),
        "partials without --partials"
    );
    assert_eq!(
        stream.last().map(|v| v["payload"].clone()),
        Some(json!({"type": "task_end", "status": "completed"}))
    );
    assert_eq!(count(&stream, "tool_call"), 3);
    assert_eq!(count(&stream, "tool_call_output"), 3);
    assert_eq!(count(&stream, "approval_decision"), 3);

    // The stream and the trace carry the same messages, in the same order: every streamed line
    // is a trace record, and every trace record except the session's own header (session_meta,
    // the user's prompt) was streamed.
    let records = read_records(&sb.trace());
    let mut rest = records.iter();
    for v in &stream {
        assert!(
            rest.any(|r| r == v),
            "streamed line not in the trace (or out of order): {v}"
        );
    }
    for (i, r) in records.iter().enumerate() {
        if i < 2 {
            continue; // session_meta and the prompt may or may not be streamed
        }
        assert!(stream.contains(r), "trace record not streamed: {r}");
    }
}

/// Kind of the complete message a partial kind streams, and its content field.
fn segment_kind(partial: &str) -> Option<(&'static str, &'static str)> {
    Some(match partial {
        "partial_text" => ("text", "text"),
        "partial_thinking" => ("thinking", "thinking"),
        "partial_tool_call" => ("tool_call", "arguments"),
        "partial_tool_call_output" => ("tool_call_output", "output"),
        _ => return None,
    })
}

#[test]
fn partials_stream_segments_whose_deltas_add_up_to_the_complete_message() {
    let sb = Sandbox::new();
    let out = sb.run(&[
        "--script",
        s(&tour_script()),
        "--json",
        "--partials",
        "Show me around",
    ]);
    out.expect_code(0);
    let stream = json_lines(&out);

    // key = (complete kind, tool_call_id or ""): the open segment and the finished ones waiting
    // for their complete message.
    let mut open: HashMap<(String, String), String> = HashMap::new();
    let mut done: HashMap<(String, String), VecDeque<String>> = HashMap::new();
    let mut segments = HashMap::<&str, usize>::new();
    for v in &stream {
        let p = &v["payload"];
        let k = kind(v);
        let id = p["tool_call_id"].as_str().unwrap_or("").to_string();
        if let Some((complete, field)) = segment_kind(k) {
            let key = (complete.to_string(), id);
            match p["event_type"].as_str() {
                Some("start") => {
                    assert!(
                        open.insert(key.clone(), String::new()).is_none(),
                        "{key:?} restarted"
                    );
                }
                Some("delta") => open
                    .get_mut(&key)
                    .unwrap_or_else(|| panic!("delta outside a segment: {v}"))
                    .push_str(p[field].as_str().expect("content")),
                Some("stop") => {
                    let text = open
                        .remove(&key)
                        .unwrap_or_else(|| panic!("stray stop: {v}"));
                    done.entry(key).or_default().push_back(text);
                    *segments.entry(complete).or_default() += 1;
                }
                other => panic!("event_type {other:?}: {v}"),
            }
        } else if let Some((_, field)) = segment_kind(&format!("partial_{k}")) {
            if k == "text" && p["role"] == "user" {
                continue;
            }
            let key = (k.to_string(), id);
            let streamed = done
                .get_mut(&key)
                .and_then(VecDeque::pop_front)
                .unwrap_or_else(|| panic!("complete message without a streamed segment: {v}"));
            assert_eq!(
                streamed,
                p[field].as_str().expect("content"),
                "deltas of {key:?}"
            );
        }
    }
    assert!(open.is_empty(), "unterminated segments: {open:?}");
    assert!(
        done.values().all(VecDeque::is_empty),
        "segments without a complete message: {done:?}"
    );
    assert_eq!(segments.get("thinking"), Some(&1));
    assert_eq!(segments.get("text"), Some(&4));
    assert_eq!(segments.get("tool_call"), Some(&3));
    assert_eq!(segments.get("tool_call_output"), Some(&3));

    // Partials never reach the trace.
    let records = read_records(&sb.trace());
    assert_eq!(count(&records, "tool_call"), 3);
}

#[test]
fn partials_without_json_is_a_usage_error() {
    let sb = Sandbox::new();
    let script = sb.script(&json!({"turns": [{"text": "hi"}]}));
    let out = sb.run(&["--script", s(&script), "--partials", "hi"]);
    out.expect_code(2);
    assert_eq!(out.stdout, "");
    assert!(out.stderr.contains("--json"), "stderr: {}", out.stderr);
    assert!(sb.trace_files().is_empty(), "no session for a usage error");
}

// ---------------------------------------------------------------------------------------------
// 3. Usage and configuration errors
// ---------------------------------------------------------------------------------------------

#[test]
fn no_model_is_a_usage_error_naming_script() {
    let sb = Sandbox::new();
    let out = Running::spawn({
        let mut c = sb.command();
        c.args(["run", "hi"]);
        c
    })
    .wait(RUN_TIMEOUT);
    out.expect_config_error(&["--script"]);
    assert!(trace_files(&sb.path("user-home/.rookery")).is_empty());
}

#[test]
fn bad_scripts_configs_and_workspaces_exit_2_naming_the_problem() {
    let sb = Sandbox::new();
    let good = sb.file("good.json", r#"{"turns":[{"text":"hi"}]}"#);

    let missing = sb.path("missing.json");
    sb.run(&["--script", s(&missing), "hi"])
        .expect_config_error(&[s(&missing), "No such file"]);

    let bad = sb.file("bad.json", r#"{"turns":[{"text":"a"},{"txt":"b"}]}"#);
    sb.run(&["--script", s(&bad), "hi"]).expect_config_error(&[
        s(&bad),
        "turns[1]",
        "unknown field `txt`",
    ]);

    let cfg = sb.file("agent.yaml", "tools:\n  builtin: [read_file, frobnicate]\n");
    sb.run(&["--script", s(&good), "--config", s(&cfg), "hi"])
        .expect_config_error(&["frobnicate", "tools.builtin"]);

    let cfg = sb.file("typo.yaml", "max_turn: 3\n");
    sb.run(&["--script", s(&good), "--config", s(&cfg), "hi"])
        .expect_config_error(&["max_turn"]);

    let nowhere = sb.path("no-such-workspace");
    let out = Running::spawn({
        let mut c = sb.command();
        c.arg("run")
            .arg("--workspace")
            .arg(&nowhere)
            .arg("--home")
            .arg(sb.home())
            .args(["--script", s(&good), "hi"]);
        c
    })
    .wait(RUN_TIMEOUT);
    out.expect_config_error(&[s(&nowhere)]);

    let out = sb.run(&["--script", s(&good), "--approve", "sometimes", "hi"]);
    out.expect_code(2);
    assert_eq!(out.stdout, "");
    let first = out.stderr.lines().next().unwrap_or("");
    assert!(
        first.contains("sometimes") && first.contains("always-ask"),
        "stderr: {}",
        out.stderr
    );

    assert!(
        sb.trace_files().is_empty(),
        "no session starts on a usage error"
    );
}

// ---------------------------------------------------------------------------------------------
// 4. Approval modes
// ---------------------------------------------------------------------------------------------

/// One turn that writes `a.txt` and reads it, then a closing text.
fn write_and_read_script(sb: &Sandbox) -> PathBuf {
    sb.script(&json!({"turns": [
        {"tool_calls": [
            {"name": "write_file", "arguments": {"file_path": "a.txt", "content": "A\n"}},
            {"name": "read_file", "arguments": {"file_path": "a.txt"}}
        ]},
        {"text": "bye"}
    ]}))
}

fn notices(out: &Out) -> Vec<&str> {
    out.stderr
        .lines()
        .filter(|l| l.contains("no terminal"))
        .collect()
}

#[test]
fn deny_all_denies_every_call() {
    let sb = Sandbox::new();
    let script = write_and_read_script(&sb);
    let out = sb.run(&["--script", s(&script), "--approve", "deny-all", "hi"]);
    out.expect_code(0);
    assert!(
        !sb.ws().join("a.txt").exists(),
        "a denied write_file wrote the file"
    );
    assert!(
        notices(&out).is_empty(),
        "deny-all asks nobody: {}",
        out.stderr
    );
    let records = read_records(&sb.trace());
    check_pairing(&records, true);
    for id in ["call_0", "call_1"] {
        assert_eq!(decision_of(&records, id), "deny");
        let o = output_of(&records, id);
        assert_eq!(o["output"], DENIED);
        assert_eq!(o["stop_reason"], "aborted");
    }
    assert_eq!(
        out.stdout_lines()
            .iter()
            .filter(|l| **l == format!("    {DENIED}  (aborted)"))
            .count(),
        2,
        "{}",
        out.stdout
    );
    assert_eq!(
        *last_payload(&records),
        json!({"type": "task_end", "status": "completed"})
    );
}

#[test]
fn always_ask_without_a_terminal_denies_with_a_notice_per_call() {
    let sb = Sandbox::new();
    let script = write_and_read_script(&sb);
    let out = sb.run(&["--script", s(&script), "--approve", "always-ask", "hi"]);
    out.expect_code(0);
    assert!(!sb.ws().join("a.txt").exists());
    let records = read_records(&sb.trace());
    check_pairing(&records, true);
    for id in ["call_0", "call_1"] {
        assert_eq!(decision_of(&records, id), "deny");
        assert_eq!(output_of(&records, id)["output"], DENIED);
    }
    let notices = notices(&out);
    assert_eq!(notices.len(), 2, "one notice per call:\n{}", out.stderr);
    for (n, (name, id)) in notices
        .iter()
        .zip([("write_file", "call_0"), ("read_file", "call_1")])
    {
        assert!(
            n.contains(&format!("denied {name} ({id})")) && n.contains("--approve"),
            "notice: {n}"
        );
    }
    assert!(
        !out.stderr.contains("[a]lways for this session"),
        "must not prompt without a terminal"
    );
}

#[test]
fn read_only_allows_reads_and_denies_writes_without_a_terminal() {
    let sb = Sandbox::new();
    std::fs::write(sb.ws().join("a.txt"), "seed\n").expect("seed");
    let script = write_and_read_script(&sb);
    let out = sb.run(&["--script", s(&script), "--approve", "read-only", "hi"]);
    out.expect_code(0);
    assert_eq!(
        std::fs::read_to_string(sb.ws().join("a.txt")).expect("a.txt"),
        "seed\n"
    );
    let records = read_records(&sb.trace());
    check_pairing(&records, true);
    assert_eq!(decision_of(&records, "call_0"), "deny");
    assert_eq!(output_of(&records, "call_0")["output"], DENIED);
    assert_eq!(output_of(&records, "call_0")["stop_reason"], "aborted");
    assert_eq!(decision_of(&records, "call_1"), "allow");
    assert_eq!(output_of(&records, "call_1")["output"], "     1\tseed");
    assert_eq!(output_of(&records, "call_1")["stop_reason"], "completed");
    let notices = notices(&out);
    assert_eq!(
        notices.len(),
        1,
        "only the write is asked about:\n{}",
        out.stderr
    );
    assert!(notices[0].contains("write_file (call_0)"), "{}", notices[0]);
}
