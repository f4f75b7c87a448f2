//! Shared helpers of the CLI integration tests: a sandboxed `rookery` run, trace readers and
//! record predicates.

use rookery::message::Payload;
use rookery::trace::reader::read_trace;
use serde_json::Value;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tempfile::TempDir;

pub const BIN: &str = env!("CARGO_BIN_EXE_rookery");

/// Upper bound for one ordinary `rookery run` (they take well under a second).
pub const RUN_TIMEOUT: Duration = Duration::from_secs(30);

pub const DENIED: &str = "Tool call denied by user.";

// ---------------------------------------------------------------------------------------------
// Harness
// ---------------------------------------------------------------------------------------------

/// A workspace, a Rookery home and a `$HOME`, all temporary; fixture files go in the root.
pub struct Sandbox {
    pub dir: TempDir,
}

impl Sandbox {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        for sub in ["ws", "rookery-home", "user-home"] {
            std::fs::create_dir(dir.path().join(sub)).expect("mkdir");
        }
        Sandbox { dir }
    }

    pub fn ws(&self) -> PathBuf {
        self.dir.path().join("ws")
    }

    pub fn home(&self) -> PathBuf {
        self.dir.path().join("rookery-home")
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Writes a fixture file next to (not inside) the workspace.
    pub fn file(&self, name: &str, contents: &str) -> PathBuf {
        let p = self.path(name);
        std::fs::write(&p, contents).expect("write fixture");
        p
    }

    pub fn script(&self, script: &Value) -> PathBuf {
        self.file("script.json", &script.to_string())
    }

    /// The binary with a clean environment: our `$HOME` (so no user config but one a test
    /// writes there), no `$XDG_CONFIG_HOME`, no `$ROOKERY_*` config variable, no
    /// `$ROOKERY_HOME`, no `RUST_LOG`, stdin `/dev/null`, the workspace as current directory.
    pub fn command(&self) -> Command {
        let mut c = Command::new(BIN);
        for (var, _) in rookery::config::env_layer::VARIABLES {
            c.env_remove(var);
        }
        c.env("HOME", self.path("user-home"))
            .env_remove("XDG_CONFIG_HOME")
            .env_remove(rookery::config::discovery::NO_CONFIG_ENV)
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
    pub fn run_command(&self, args: &[&str]) -> Command {
        let mut c = self.command();
        c.arg("run")
            .arg("--workspace")
            .arg(self.ws())
            .arg("--home")
            .arg(self.home())
            .args(args);
        c
    }

    pub fn run(&self, args: &[&str]) -> Out {
        Running::spawn(self.run_command(args)).wait(RUN_TIMEOUT)
    }

    pub fn trace_files(&self) -> Vec<PathBuf> {
        trace_files(&self.home())
    }

    /// The one trace this sandbox produced.
    pub fn trace(&self) -> PathBuf {
        let files = self.trace_files();
        assert_eq!(files.len(), 1, "expected exactly one trace file: {files:?}");
        files.into_iter().next().expect("one trace")
    }
}

pub fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 temp path")
}

/// What a finished run printed.
#[derive(Debug)]
pub struct Out {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Out {
    pub fn stdout_lines(&self) -> Vec<&str> {
        self.stdout.lines().collect()
    }

    /// Asserts the exit code, showing both streams when it is wrong.
    pub fn expect_code(&self, code: i32) -> &Self {
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
    pub fn expect_config_error(&self, needles: &[&str]) {
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
pub struct Running {
    pub child: Child,
    pub stdout: Option<JoinHandle<String>>,
    pub stderr: Option<JoinHandle<String>>,
}

pub fn drain(mut r: impl Read + Send + 'static) -> JoinHandle<String> {
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = r.read_to_end(&mut buf);
        String::from_utf8_lossy(&buf).into_owned()
    })
}

impl Running {
    pub fn spawn(mut cmd: Command) -> Self {
        let mut child = cmd.spawn().expect("spawn rookery");
        let stdout = Some(drain(child.stdout.take().expect("piped stdout")));
        let stderr = Some(drain(child.stderr.take().expect("piped stderr")));
        Running {
            child,
            stdout,
            stderr,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn exited(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }

    /// Waits for the exit (killing the child and failing the test after `timeout`).
    pub fn wait(mut self, timeout: Duration) -> Out {
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
    pub fn streams(&mut self) -> (String, String) {
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

pub fn trace_files(home: &Path) -> Vec<PathBuf> {
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
pub fn read_records(path: &Path) -> Vec<Value> {
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
pub fn kind(r: &Value) -> &str {
    match r["type"].as_str() {
        Some("session_meta") => "session_meta",
        _ => r["payload"]["type"].as_str().unwrap_or(""),
    }
}

pub fn of_kind<'a>(records: &'a [Value], k: &str) -> Vec<&'a Value> {
    records.iter().filter(|r| kind(r) == k).collect()
}

pub fn count(records: &[Value], k: &str) -> usize {
    of_kind(records, k).len()
}

/// The `tool_call_output` payload of call `id` (exactly one).
pub fn output_of<'a>(records: &'a [Value], id: &str) -> &'a Value {
    let outs: Vec<&Value> = of_kind(records, "tool_call_output")
        .into_iter()
        .filter(|r| r["payload"]["tool_call_id"] == id)
        .collect();
    assert_eq!(outs.len(), 1, "outputs of {id}");
    &outs[0]["payload"]
}

pub fn decision_of(records: &[Value], id: &str) -> String {
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
pub fn call_ids(records: &[Value]) -> Vec<String> {
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
pub fn check_pairing(records: &[Value], approvals: bool) {
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

pub fn last_payload(records: &[Value]) -> &Value {
    &records.last().expect("non-empty trace")["payload"]
}

pub fn abort_reasons(records: &[Value]) -> Vec<String> {
    of_kind(records, "abort")
        .iter()
        .map(|r| r["payload"]["reason"].as_str().unwrap_or("").to_string())
        .collect()
}

/// Parses every stdout line of a `--json` run as an envelope.
pub fn json_lines(out: &Out) -> Vec<Value> {
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

pub fn is_partial(v: &Value) -> bool {
    kind(v).starts_with("partial_")
}
