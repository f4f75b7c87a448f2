//! Resuming after a crash, through the binary: a `rookery run` killed with SIGKILL while a
//! tool call runs leaves that call without an output; the resumed session records its
//! placeholder once, so every `tool_call` of the trace has exactly one output, on every later
//! resume too. A torn last line is cut off by the first reopen, and no reader warns about it
//! afterwards.

use crate::common::cli as support;
use crate::common::commands::live_with_cmdline;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;
use support::*;

/// A command no other test runs: found and stopped by its command line after the kill.
const SLEEP_ARGV: [&str; 2] = ["sleep", "93.25"];

const PLACEHOLDER: &str = "[interrupted: process exited before the tool finished]";

/// `rookery chat --home H --resume ID` reading `input` from a file.
fn resume(sb: &Sandbox, id: &str, input: &str) -> Out {
    let input_file = sb.file("chat-input.txt", input);
    let mut cmd = sb.command();
    cmd.args(["chat", "--home", s(&sb.home()), "--resume", id])
        .stdin(Stdio::from(std::fs::File::open(input_file).unwrap()));
    Running::spawn(cmd).wait(RUN_TIMEOUT)
}

fn sessions_list(sb: &Sandbox) -> Out {
    let mut cmd = sb.command();
    cmd.args(["sessions", "list", "--home", s(&sb.home())]);
    Running::spawn(cmd).wait(RUN_TIMEOUT)
}

fn session_id(trace: &Path) -> String {
    let name = trace.file_name().and_then(|n| n.to_str()).unwrap();
    name.strip_suffix("_001.jsonl").unwrap().to_string()
}

/// Waits (bounded, generously) until the sandbox's trace holds a `tool_call` record.
fn wait_for_tool_call(sb: &Sandbox, run: &mut Running) -> PathBuf {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        assert!(!run.exited(), "rookery ended before its tool call");
        if let Some(trace) = sb.trace_files().into_iter().next() {
            let text = std::fs::read_to_string(&trace).unwrap_or_default();
            if text.contains("\"type\":\"tool_call\"") {
                return trace;
            }
        }
        assert!(Instant::now() < deadline, "no tool_call in the trace");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn kill9(pid: u32) {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
}

/// Stops the orphaned `sleep` of the killed run (and its shell, if it did not `exec`).
fn stop_orphans() {
    let command = SLEEP_ARGV.join(" ");
    let shell = ["bash", "-lc", command.as_str()];
    for pid in live_with_cmdline(&SLEEP_ARGV)
        .into_iter()
        .chain(live_with_cmdline(&shell))
    {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

#[test]
fn a_call_in_flight_at_kill_9_gets_one_recorded_placeholder_on_resume() {
    let sb = Sandbox::new();
    let script = sb.script(&json!({"turns": [
        {"tool_calls": [{"name": "exec_command",
                         "arguments": {"cmd": SLEEP_ARGV.join(" "), "yield_time_ms": 120_000}}]},
        {"text": "after the crash"}
    ]}));
    let mut cmd: Command = sb.run_command(&["--script", s(&script), "sleep a while"]);
    cmd.stdin(Stdio::null());
    let mut run = Running::spawn(cmd);
    let trace = wait_for_tool_call(&sb, &mut run);
    kill9(run.pid());
    let killed = run.wait(RUN_TIMEOUT);
    stop_orphans();
    assert_eq!(killed.code, None, "killed by a signal");
    let id = session_id(&trace);

    let out = resume(&sb, &id, "go on\n");
    out.expect_code(0);
    assert!(
        out.stdout.lines().any(|l| l == "after the crash"),
        "{}",
        out.stdout
    );
    let records = read_records(&trace);
    check_pairing(&records, false);
    let ids = call_ids(&records);
    assert_eq!(ids.len(), 1, "{records:?}");
    let output = output_of(&records, &ids[0]);
    assert_eq!(output["output"], PLACEHOLDER);
    assert_eq!(output["stop_reason"], "aborted");

    // A later resume finds the output in the trace and records nothing more.
    let out = resume(&sb, &id, "");
    out.expect_code(0);
    let again = read_records(&trace);
    check_pairing(&again, false);
    assert_eq!(count(&again, "tool_call_output"), 1);
    assert_eq!(
        again.len(),
        records.len(),
        "nothing recorded without a task"
    );
}

#[test]
fn a_torn_last_line_is_cut_on_reopen_and_never_warned_about_again() {
    let sb = Sandbox::new();
    let script = sb.script(&json!({"turns": [{"text": "one"}, {"text": "two"}]}));
    sb.run(&["--script", s(&script), "hello"]).expect_code(0);
    let trace = sb.trace();
    let id = session_id(&trace);
    let whole = std::fs::read_to_string(&trace).unwrap();
    // A crash in the middle of a write: half a record, no newline.
    let torn = r#"{"v":1,"type":"model","payload":{"type":"text","role":"assi"#;
    std::fs::write(&trace, format!("{whole}{torn}")).unwrap();
    let before = sessions_list(&sb);
    before.expect_code(0);
    assert!(!before.stderr.contains("malformed"), "{}", before.stderr);

    let out = resume(&sb, &id, "again\n");
    out.expect_code(0);
    assert!(out.stdout.lines().any(|l| l == "two"), "{}", out.stdout);
    assert!(
        out.stderr.contains("cut a torn last line"),
        "{}",
        out.stderr
    );
    let text = std::fs::read_to_string(&trace).unwrap();
    assert!(text.starts_with(&whole), "the whole records are kept");
    assert!(!text.contains(torn), "the fragment is gone");
    // Every reader, every time: no skipped line, no torn tail, no warning.
    read_records(&trace);
    for _ in 0..2 {
        let list = sessions_list(&sb);
        list.expect_code(0);
        assert!(!list.stderr.contains("malformed"), "{}", list.stderr);
        assert!(list.stdout.contains(&id), "{}", list.stdout);
    }
    resume(&sb, &id, "").expect_code(0);
    read_records(&trace);
}

#[test]
fn a_whole_record_without_its_newline_is_kept_on_reopen() {
    let sb = Sandbox::new();
    let script = sb.script(&json!({"turns": [{"text": "one"}, {"text": "two"}]}));
    sb.run(&["--script", s(&script), "hello"]).expect_code(0);
    let trace = sb.trace();
    let id = session_id(&trace);
    let whole = std::fs::read_to_string(&trace).unwrap();
    let unterminated = whole.strip_suffix('\n').unwrap();
    std::fs::write(&trace, unterminated).unwrap();

    let out = resume(&sb, &id, "again\n");
    out.expect_code(0);
    assert!(
        !out.stderr.contains("cut a torn last line"),
        "{}",
        out.stderr
    );
    let text = std::fs::read_to_string(&trace).unwrap();
    assert!(text.starts_with(&whole), "the last record kept, terminated");
    read_records(&trace);
}
