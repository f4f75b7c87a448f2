//! End-to-end tests of `rookery run`, driving the built binary: the README tour, `--json` and
//! `--partials`, usage and configuration errors (exit 2), approval modes, `max_turns`, model
//! errors and retries, tool error texts, `{{output:K:REGEX}}` placeholders and Ctrl-C.
//!
//! Every run gets its own workspace, Rookery home and `$HOME` (temporary directories), stdin is
//! `/dev/null` (never a terminal) and every wait is bounded.

use std::collections::{HashMap, VecDeque};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rookery::message::Payload;
use rookery::trace::reader::read_trace;
use serde_json::{Value, json};
use tempfile::TempDir;

const BIN: &str = env!("CARGO_BIN_EXE_rookery");

/// Upper bound for one ordinary `rookery run` (they take well under a second).
const RUN_TIMEOUT: Duration = Duration::from_secs(30);

const DENIED: &str = "Tool call denied by user.";

// ---------------------------------------------------------------------------------------------
// Harness
// ---------------------------------------------------------------------------------------------

/// A workspace, a Rookery home and a `$HOME`, all temporary; fixture files go in the root.
struct Sandbox {
    dir: TempDir,
}

impl Sandbox {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        for sub in ["ws", "rookery-home", "user-home"] {
            std::fs::create_dir(dir.path().join(sub)).expect("mkdir");
        }
        Sandbox { dir }
    }

    fn ws(&self) -> PathBuf {
        self.dir.path().join("ws")
    }

    fn home(&self) -> PathBuf {
        self.dir.path().join("rookery-home")
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Writes a fixture file next to (not inside) the workspace.
    fn file(&self, name: &str, contents: &str) -> PathBuf {
        let p = self.path(name);
        std::fs::write(&p, contents).expect("write fixture");
        p
    }

    fn script(&self, script: &Value) -> PathBuf {
        self.file("script.json", &script.to_string())
    }

    /// The binary with a clean environment: our `$HOME`, no `$ROOKERY_HOME`, no `RUST_LOG`,
    /// stdin `/dev/null`, the workspace as current directory.
    fn command(&self) -> Command {
        let mut c = Command::new(BIN);
        c.env("HOME", self.path("user-home"))
            .env_remove("ROOKERY_HOME")
            .env_remove("RUST_LOG")
            .env("NO_COLOR", "1")
            .current_dir(self.ws())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    }

    /// `rookery run --workspace W --home H <args>`.
    fn run_command(&self, args: &[&str]) -> Command {
        let mut c = self.command();
        c.arg("run")
            .arg("--workspace")
            .arg(self.ws())
            .arg("--home")
            .arg(self.home())
            .args(args);
        c
    }

    fn run(&self, args: &[&str]) -> Out {
        Running::spawn(self.run_command(args)).wait(RUN_TIMEOUT)
    }

    fn trace_files(&self) -> Vec<PathBuf> {
        trace_files(&self.home())
    }

    /// The one trace this sandbox produced.
    fn trace(&self) -> PathBuf {
        let files = self.trace_files();
        assert_eq!(files.len(), 1, "expected exactly one trace file: {files:?}");
        files.into_iter().next().expect("one trace")
    }
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 temp path")
}

/// What a finished run printed.
#[derive(Debug)]
struct Out {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Out {
    fn stdout_lines(&self) -> Vec<&str> {
        self.stdout.lines().collect()
    }

    /// Asserts the exit code, showing both streams when it is wrong.
    fn expect_code(&self, code: i32) -> &Self {
        assert_eq!(
            self.code,
            Some(code),
            "exit code\n--- stdout\n{}\n--- stderr\n{}",
            self.stdout,
            self.stderr
        );
        self
    }

    /// A usage/configuration error: exit 2, nothing on stdout, one line on stderr that
    /// contains every `needle`.
    fn expect_config_error(&self, needles: &[&str]) {
        self.expect_code(2);
        assert_eq!(self.stdout, "", "stdout of a configuration error");
        let lines: Vec<&str> = self.stderr.lines().collect();
        assert_eq!(
            lines.len(),
            1,
            "one-line reason expected, got:\n{}",
            self.stderr
        );
        for needle in needles {
            assert!(
                lines[0].contains(needle),
                "stderr should mention {needle:?}: {}",
                lines[0]
            );
        }
    }
}

/// A spawned child whose stdout and stderr are drained by threads (no pipe deadlock).
struct Running {
    child: Child,
    stdout: Option<JoinHandle<String>>,
    stderr: Option<JoinHandle<String>>,
}

fn drain(mut r: impl Read + Send + 'static) -> JoinHandle<String> {
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = r.read_to_end(&mut buf);
        String::from_utf8_lossy(&buf).into_owned()
    })
}

impl Running {
    fn spawn(mut cmd: Command) -> Self {
        let mut child = cmd.spawn().expect("spawn rookery");
        let stdout = Some(drain(child.stdout.take().expect("piped stdout")));
        let stderr = Some(drain(child.stderr.take().expect("piped stderr")));
        Running {
            child,
            stdout,
            stderr,
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn exited(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }

    /// Waits for the exit (killing the child and failing the test after `timeout`).
    fn wait(mut self, timeout: Duration) -> Out {
        let deadline = Instant::now() + timeout;
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                break status;
            }
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                let (stdout, stderr) = self.streams();
                panic!(
                    "rookery did not exit within {timeout:?}\n--- stdout\n{stdout}\n--- stderr\n{stderr}"
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let (stdout, stderr) = self.streams();
        Out {
            code: status.code(),
            stdout,
            stderr,
        }
    }

    /// Everything the child wrote (call once it has exited).
    fn streams(&mut self) -> (String, String) {
        let join = |h: Option<JoinHandle<String>>| {
            h.map(|h| h.join().expect("output reader"))
                .unwrap_or_default()
        };
        (join(self.stdout.take()), join(self.stderr.take()))
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        // Only reached without `wait` when a test fails midway: never leave the child behind.
        if !self.exited() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Traces
// ---------------------------------------------------------------------------------------------

fn trace_files(home: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(days) = std::fs::read_dir(home.join("traces")) else {
        return out;
    };
    for day in days.flatten() {
        if let Ok(files) = std::fs::read_dir(day.path()) {
            for f in files.flatten() {
                if f.path().extension().is_some_and(|e| e == "jsonl") {
                    out.push(f.path());
                }
            }
        }
    }
    out.sort();
    out
}

/// Every line of the trace as JSON; asserts that every line parses (serde_json and the
/// library's tolerant reader agree: nothing skipped, no torn tail, no unknown payload).
fn read_records(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).expect("read trace");
    assert!(text.ends_with('\n'), "trace must end with a newline");
    let records: Vec<Value> = text
        .lines()
        .enumerate()
        .map(|(i, line)| {
            serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("trace line {} does not parse ({e}): {line}", i + 1))
        })
        .collect();
    let read = read_trace(path).expect("read_trace");
    assert!(
        read.skipped_lines.is_empty(),
        "skipped: {:?}",
        read.skipped_lines
    );
    assert!(!read.torn_tail, "torn tail");
    assert_eq!(read.records.len(), records.len());
    for m in &read.records {
        assert!(
            !matches!(m.payload, Payload::Unknown { .. }),
            "unknown record kind in the trace: {}",
            m.to_json()
        );
        assert!(!m.has_origin(), "origin-tagged record in the trace");
    }
    for r in &records {
        let t = kind(r);
        assert!(
            !t.starts_with("partial_"),
            "partial record in the trace: {r}"
        );
    }
    records
}

/// The record's kind: `session_meta`, or its payload `type`.
fn kind(r: &Value) -> &str {
    match r["type"].as_str() {
        Some("session_meta") => "session_meta",
        _ => r["payload"]["type"].as_str().unwrap_or(""),
    }
}

fn of_kind<'a>(records: &'a [Value], k: &str) -> Vec<&'a Value> {
    records.iter().filter(|r| kind(r) == k).collect()
}

fn count(records: &[Value], k: &str) -> usize {
    of_kind(records, k).len()
}

/// The `tool_call_output` payload of call `id` (exactly one).
fn output_of<'a>(records: &'a [Value], id: &str) -> &'a Value {
    let outs: Vec<&Value> = of_kind(records, "tool_call_output")
        .into_iter()
        .filter(|r| r["payload"]["tool_call_id"] == id)
        .collect();
    assert_eq!(outs.len(), 1, "outputs of {id}");
    &outs[0]["payload"]
}

fn decision_of(records: &[Value], id: &str) -> String {
    let ds: Vec<&Value> = of_kind(records, "approval_decision")
        .into_iter()
        .filter(|r| r["payload"]["tool_call_id"] == id)
        .collect();
    assert_eq!(ds.len(), 1, "approval decisions of {id}");
    ds[0]["payload"]["decision"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

/// The ids of the trace's tool calls, in order.
fn call_ids(records: &[Value]) -> Vec<String> {
    of_kind(records, "tool_call")
        .iter()
        .map(|r| {
            r["payload"]["tool_call_id"]
                .as_str()
                .expect("id")
                .to_string()
        })
        .collect()
}

/// Every tool_call has exactly one output after it; with `approvals`, also exactly one
/// approval_decision between the call and its output.
fn check_pairing(records: &[Value], approvals: bool) {
    let ids = call_ids(records);
    let mut seen = std::collections::HashSet::new();
    for id in &ids {
        assert!(seen.insert(id.clone()), "duplicate tool_call id {id}");
        let pos = |k: &str| -> Vec<usize> {
            records
                .iter()
                .enumerate()
                .filter(|(_, r)| kind(r) == k && r["payload"]["tool_call_id"] == id.as_str())
                .map(|(i, _)| i)
                .collect()
        };
        let call = pos("tool_call")[0];
        let outs = pos("tool_call_output");
        assert_eq!(outs.len(), 1, "{id} must have exactly one output");
        assert!(outs[0] > call, "{id}: output before the call");
        if approvals {
            let ds = pos("approval_decision");
            assert_eq!(ds.len(), 1, "{id} must have exactly one approval_decision");
            assert!(
                call < ds[0] && ds[0] < outs[0],
                "{id}: approval_decision must come after the call and before its output"
            );
        }
    }
    // No output without a call.
    for o in of_kind(records, "tool_call_output") {
        let id = o["payload"]["tool_call_id"].as_str().unwrap_or("");
        assert!(seen.contains(id), "output of an unknown call {id}");
    }
}

fn last_payload(records: &[Value]) -> &Value {
    &records.last().expect("non-empty trace")["payload"]
}

fn abort_reasons(records: &[Value]) -> Vec<String> {
    of_kind(records, "abort")
        .iter()
        .map(|r| r["payload"]["reason"].as_str().unwrap_or("").to_string())
        .collect()
}

/// Parses every stdout line of a `--json` run as an envelope.
fn json_lines(out: &Out) -> Vec<Value> {
    out.stdout_lines()
        .iter()
        .map(|line| {
            let v: Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line}"));
            assert!(
                v["timestamp"].is_string(),
                "envelope without timestamp: {line}"
            );
            assert!(
                matches!(
                    v["type"].as_str(),
                    Some("session_meta" | "model_msg" | "event_msg")
                ),
                "envelope type: {line}"
            );
            assert!(v["payload"].is_object(), "envelope without payload: {line}");
            let m = rookery::OmniMessage::from_json(line)
                .unwrap_or_else(|e| panic!("not an OmniMessage ({e}): {line}"));
            assert!(
                !matches!(m.payload, Payload::Unknown { .. }),
                "unknown: {line}"
            );
            v
        })
        .collect()
}

fn is_partial(v: &Value) -> bool {
    kind(v).starts_with("partial_")
}

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
        !out.stderr.contains("[Y/n]"),
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

// ---------------------------------------------------------------------------------------------
// 5. max_turns
// ---------------------------------------------------------------------------------------------

/// Two turns with tool calls (two calls, then one), then a closing text.
fn two_tool_turns(sb: &Sandbox) -> PathBuf {
    sb.script(&json!({"turns": [
        {"text": "first", "tool_calls": [
            {"name": "write_file", "arguments": {"file_path": "a.txt", "content": "A\n"}},
            {"name": "write_file", "arguments": {"file_path": "b.txt", "content": "B\n"}}
        ]},
        {"text": "second", "tool_calls": [
            {"name": "write_file", "arguments": {"file_path": "c.txt", "content": "C\n"}}
        ]},
        {"text": "all done"}
    ]}))
}

#[test]
fn max_turns_flag_stops_the_task() {
    let sb = Sandbox::new();
    let script = two_tool_turns(&sb);
    let out = sb.run(&["--script", s(&script), "--max-turns", "1", "hi"]);
    out.expect_code(1);
    let lines = out.stdout_lines();
    assert!(
        lines.contains(&"[reached max turns (1); stopping]"),
        "{}",
        out.stdout
    );
    assert!(!lines.contains(&"second"));
    assert!(sb.ws().join("a.txt").exists() && sb.ws().join("b.txt").exists());
    assert!(
        !sb.ws().join("c.txt").exists(),
        "the second turn must not run"
    );
    let records = read_records(&sb.trace());
    assert_eq!(count(&records, "request_begin"), 1);
    assert_eq!(call_ids(&records), vec!["call_0", "call_1"]);
    check_pairing(&records, true);
    let task_end = last_payload(&records);
    assert_eq!(task_end["type"], "task_end");
    assert_ne!(task_end["status"], "completed");
}

#[test]
fn max_turns_from_config_applies_and_the_flag_overrides_it() {
    let sb = Sandbox::new();
    let script = two_tool_turns(&sb);
    let cfg = sb.file("agent.yaml", "max_turns: 2\n");

    // The config alone: two turns run, the third request is refused.
    let out = sb.run(&["--script", s(&script), "--config", s(&cfg), "--json", "hi"]);
    out.expect_code(1);
    let stream = json_lines(&out);
    let texts: Vec<&str> = of_kind(&stream, "text")
        .iter()
        .filter_map(|v| v["payload"]["text"].as_str())
        .collect();
    assert_eq!(
        texts,
        vec!["first", "second", "[reached max turns (2); stopping]"]
    );
    assert!(sb.ws().join("c.txt").exists());
    let records = read_records(&sb.trace());
    assert_eq!(count(&records, "request_begin"), 2);
    check_pairing(&records, true);

    // The flag wins over the config, in both directions.
    let sb = Sandbox::new();
    let script = two_tool_turns(&sb);
    let cfg = sb.file("agent.yaml", "max_turns: 2\n");
    let out = sb.run(&[
        "--script",
        s(&script),
        "--config",
        s(&cfg),
        "--max-turns",
        "1",
        "hi",
    ]);
    out.expect_code(1);
    assert!(
        out.stdout_lines()
            .contains(&"[reached max turns (1); stopping]"),
        "{}",
        out.stdout
    );
    assert!(!sb.ws().join("c.txt").exists());

    let sb = Sandbox::new();
    let script = two_tool_turns(&sb);
    let cfg = sb.file("agent.yaml", "max_turns: 1\n");
    let out = sb.run(&[
        "--script",
        s(&script),
        "--config",
        s(&cfg),
        "--max-turns",
        "5",
        "hi",
    ]);
    out.expect_code(0);
    assert!(out.stdout_lines().contains(&"all done"), "{}", out.stdout);
    assert!(!out.stdout.contains("reached max turns"));
}

// ---------------------------------------------------------------------------------------------
// 6. Model errors and retries
// ---------------------------------------------------------------------------------------------

fn request_ends(records: &[Value]) -> Vec<Value> {
    of_kind(records, "request_end")
        .iter()
        .map(|r| r["payload"].clone())
        .collect()
}

#[test]
fn auth_error_ends_the_task_at_once() {
    let sb = Sandbox::new();
    let script = sb.script(&json!({"turns": [{"error": "auth"}, {"text": "never"}]}));
    let out = sb.run(&["--script", s(&script), "hi"]);
    out.expect_code(1);
    assert!(!out.stdout.contains("never"));
    let records = read_records(&sb.trace());
    assert_eq!(count(&records, "request_begin"), 1, "auth is not retried");
    let ends = request_ends(&records);
    assert_eq!(ends.len(), 1);
    assert_eq!(ends[0]["status"], "auth");
    assert!(ends[0].get("retry_in_ms").is_none());
    let reasons = abort_reasons(&records);
    assert_eq!(reasons.len(), 1);
    assert!(reasons[0].starts_with("llm request error:"), "{reasons:?}");
    assert!(
        out.stdout.contains(&format!("! aborted: {}", reasons[0])),
        "{}",
        out.stdout
    );
    assert_eq!(last_payload(&records)["type"], "task_end");
    assert_ne!(last_payload(&records)["status"], "completed");
}

#[test]
fn retryable_errors_reconnect_with_the_configured_backoff() {
    let sb = Sandbox::new();
    let cfg = sb.file(
        "agent.yaml",
        "retry: {max_retries: 5, base_ms: 0, cap_ms: 0}\n",
    );
    let script = sb.script(&json!({"turns": [
        {"error": "failed"}, {"error": "timeout"}, {"text": "ok"}
    ]}));
    let out = sb.run(&["--script", s(&script), "--config", s(&cfg), "hi"]);
    out.expect_code(0);
    assert!(out.stdout_lines().contains(&"ok"), "{}", out.stdout);
    let records = read_records(&sb.trace());
    assert_eq!(count(&records, "request_begin"), 3);
    let ends = request_ends(&records);
    assert_eq!(ends.len(), 3, "{ends:?}");
    assert_eq!(ends[0]["status"], "failed");
    assert_eq!(ends[0]["attempt"], 1);
    assert_eq!(ends[0]["retry_in_ms"], 0);
    assert_eq!(ends[1]["status"], "timeout");
    assert_eq!(ends[1]["attempt"], 2);
    assert_eq!(ends[1]["retry_in_ms"], 0);
    assert_eq!(ends[2]["status"], "completed");
    assert_eq!(ends[2]["attempt"], 3);
    assert!(ends[2].get("retry_in_ms").is_none());
    assert!(abort_reasons(&records).is_empty());
    assert_eq!(
        *last_payload(&records),
        json!({"type": "task_end", "status": "completed"})
    );

    // Out of retries.
    let sb = Sandbox::new();
    let cfg = sb.file(
        "agent.yaml",
        "retry: {max_retries: 1, base_ms: 0, cap_ms: 0}\n",
    );
    let script = sb.script(&json!({"turns": [
        {"error": "failed"}, {"error": "failed"}, {"text": "too late"}
    ]}));
    let out = sb.run(&["--script", s(&script), "--config", s(&cfg), "hi"]);
    out.expect_code(1);
    assert!(!out.stdout.contains("too late"));
    let records = read_records(&sb.trace());
    assert_eq!(count(&records, "request_begin"), 2);
    let ends = request_ends(&records);
    assert_eq!(ends.len(), 2);
    assert_eq!(ends[1]["attempt"], 2);
    assert!(ends[1].get("retry_in_ms").is_none());
    let reasons = abort_reasons(&records);
    assert_eq!(reasons.len(), 1);
    assert!(
        reasons[0].starts_with("llm request failed after 1 retries: "),
        "{reasons:?}"
    );
    assert_eq!(last_payload(&records)["type"], "task_end");
    assert_ne!(last_payload(&records)["status"], "completed");
}

// ---------------------------------------------------------------------------------------------
// 7. Tool error texts and placeholders
// ---------------------------------------------------------------------------------------------

#[test]
fn tool_errors_are_failed_outputs_and_placeholders_chain_calls() {
    let sb = Sandbox::new();
    let script = sb.script(&json!({"turns": [
        {"tool_calls": [
            {"name": "nope", "arguments": {}},                                // call_0
            {"name": "read_file", "arguments": "{not json"},                  // call_1
            {"name": "read_file", "arguments": ""},                           // call_2
            {"name": "read_file", "arguments": {"file_path": "missing.txt"}}, // call_3
            {"name": "write_file",                                            // call_4
             "arguments": {"file_path": "v.txt", "content": "version=42 build=7\n"}}
        ]},
        {"tool_calls": [
            {"name": "read_file", "arguments": {"file_path": "v.txt"}}        // call_5
        ]},
        {"tool_calls": [
            {"name": "write_file", "arguments": {                             // call_6
                "file_path": "out-{{output:-1:version=(\\d+)}}.txt",
                "content": "build {{output:5:build=(\\d+)}} size {{output:4:(\\d+) bytes}}\n"
            }}
        ]},
        {"text": "done"}
    ]}));
    let out = sb.run(&["--script", s(&script), "hi"]);
    out.expect_code(0);
    let records = read_records(&sb.trace());
    check_pairing(&records, true);

    let o = output_of(&records, "call_0");
    assert_eq!(o["output"], "Unknown tool: nope");
    assert_eq!(o["stop_reason"], "failed");

    let o = output_of(&records, "call_1");
    let text = o["output"].as_str().expect("output");
    assert!(
        text.starts_with("Tool call \"read_file\" failed: the arguments are not valid JSON ("),
        "{text}"
    );
    assert!(
        text.ends_with("). Re-issue the call with one complete, valid JSON object."),
        "{text}"
    );
    assert_eq!(o["stop_reason"], "failed");

    let o = output_of(&records, "call_2");
    assert_eq!(
        o["output"],
        "Tool call \"read_file\" failed: the arguments field is empty. Re-issue the call with a complete JSON object."
    );
    assert_eq!(o["stop_reason"], "failed");

    let o = output_of(&records, "call_3");
    let text = o["output"].as_str().expect("output");
    assert!(
        text.starts_with("File not found: \"missing.txt\""),
        "{text}"
    );
    assert_eq!(o["stop_reason"], "failed");

    assert_eq!(output_of(&records, "call_4")["stop_reason"], "completed");
    assert_eq!(
        output_of(&records, "call_5")["output"],
        "     1\tversion=42 build=7"
    );

    // The placeholders were resolved in the call itself and had their effect on disk.
    let call6 = of_kind(&records, "tool_call")[6]["payload"].clone();
    let args: Value =
        serde_json::from_str(call6["arguments"].as_str().expect("args")).expect("json");
    assert_eq!(args["file_path"], "out-42.txt");
    assert_eq!(output_of(&records, "call_6")["stop_reason"], "completed");
    assert_eq!(
        std::fs::read_to_string(sb.ws().join("out-42.txt")).expect("out-42.txt"),
        "build 7 size 19\n"
    );

    // The transcript marks failures.
    assert!(
        out.stdout_lines()
            .contains(&"    Unknown tool: nope  (failed)"),
        "{}",
        out.stdout
    );
}

// ---------------------------------------------------------------------------------------------
// 8. Ctrl-C
// ---------------------------------------------------------------------------------------------

#[test]
fn sigint_aborts_the_running_task() {
    let sb = Sandbox::new();
    let script = sb.script(&json!({"turns": [
        {"tool_calls": [
            {"name": "write_file", "arguments": {"file_path": "a.txt", "content": "A\n"}}
        ]},
        {"delay_ms": 20000, "text": "too late"}
    ]}));
    let mut child = Running::spawn(sb.run_command(&["--script", s(&script), "hi"]));

    // Wait until the second (slow) request has begun: the tool call is settled and the CLI is
    // well inside its event loop.
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let begun = sb.trace_files().first().is_some_and(|p| {
            std::fs::read_to_string(p)
                .unwrap_or_default()
                .lines()
                .filter(|l| l.contains(r#""type":"request_begin""#))
                .count()
                >= 2
        });
        if begun {
            break;
        }
        assert!(
            !child.exited(),
            "rookery exited before the slow request began"
        );
        assert!(Instant::now() < deadline, "the slow request never began");
        std::thread::sleep(Duration::from_millis(20));
    }

    let sent = Instant::now();
    let status = Command::new("kill")
        .args(["-INT", &child.pid().to_string()])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -INT failed");
    let out = child.wait(Duration::from_secs(10));
    assert!(sent.elapsed() < Duration::from_secs(10));
    out.expect_code(1);
    assert!(!out.stdout.contains("too late"));

    let records = read_records(&sb.trace());
    check_pairing(&records, true);
    assert_eq!(output_of(&records, "call_0")["stop_reason"], "completed");
    let n = records.len();
    assert!(n >= 2);
    assert_eq!(kind(&records[n - 2]), "abort", "{}", records[n - 2]);
    assert_eq!(
        *last_payload(&records),
        json!({"type": "task_end", "status": "aborted"})
    );
}
