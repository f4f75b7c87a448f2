//! How the CLI ends, through the binary: Ctrl-C at a terminal approval prompt (on a real pty),
//! SIGTERM of `run` and SIGINT of `chat` during a running tool pair every call; a trace on a
//! full filesystem fails `run` (exit 1); a closed stdout/stderr ends the run quietly; `chat`
//! skips a non-UTF-8 line and goes on; start-up errors name the path and the reason; an unknown
//! key in a `tools.builtin` entry is an error naming it.

use crate::common::cli as support;
use crate::common::paired;
use crate::common::tmpfs;

use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use paired::assert_trace_paired;
use rookery::message::{EventPayload, ModelPayload, OmniMessage, StopReason};
use serde_json::{Value, json};
use support::*;

const WAIT: Duration = Duration::from_secs(30);

fn records(path: &Path) -> Vec<OmniMessage> {
    let read = rookery::trace::reader::read_trace(path).unwrap();
    assert!(read.skipped_lines.is_empty() && !read.torn_tail, "{path:?}");
    read.records
}

/// Polls until `ready` holds for the sandbox's (only) trace.
fn until_trace(sb: &Sandbox, what: &str, ready: impl Fn(&[OmniMessage]) -> bool) {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(path) = sb.trace_files().first()
            && ready(&records(path))
        {
            return;
        }
        assert!(Instant::now() < deadline, "never saw {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn count_calls(recs: &[OmniMessage]) -> usize {
    recs.iter()
        .filter(|r| matches!(r.as_model(), Some(ModelPayload::ToolCall { .. })))
        .count()
}

fn wait_exit(child: &mut Child) -> Option<i32> {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s.code();
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            panic!("rookery did not exit");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn ends_aborted(recs: &[OmniMessage]) {
    let k: Vec<String> = recs
        .iter()
        .rev()
        .take(2)
        .map(|r| r.to_json())
        .collect::<Vec<_>>();
    assert!(
        matches!(
            recs.last().and_then(|r| r.as_event()),
            Some(EventPayload::TaskEnd {
                status: StopReason::Aborted,
                ..
            })
        ),
        "{k:?}"
    );
    assert!(
        matches!(
            recs[recs.len() - 2].as_event(),
            Some(EventPayload::Abort { .. })
        ),
        "{k:?}"
    );
}

fn two_reads() -> Value {
    json!({"turns": [
        {"tool_calls": [
            {"name": "read_file", "arguments": {"file_path": "a.txt"}},
            {"name": "read_file", "arguments": {"file_path": "b.txt"}}]},
        {"text": "unreached"}]})
}

#[test]
fn ctrl_c_at_the_terminal_prompt_pairs_every_call() {
    let sb = Sandbox::new();
    let script = sb.script(&two_reads());
    let pty = nix::pty::openpty(None, None).unwrap();
    let err_path = sb.path("stderr.txt");
    let mut cmd = sb.run_command(&["--script", s(&script), "--approve", "always-ask", "go"]);
    cmd.stdin(Stdio::from(pty.slave))
        .stderr(std::fs::File::create(&err_path).unwrap());
    let mut child = cmd.spawn().unwrap();
    let deadline = Instant::now() + WAIT;
    while !std::fs::read_to_string(&err_path)
        .unwrap_or_default()
        .contains("Allow read_file")
    {
        assert!(Instant::now() < deadline, "the prompt never appeared");
        std::thread::sleep(Duration::from_millis(20));
    }
    kill(Pid::from_raw(child.id() as i32), Signal::SIGINT).unwrap();
    let code = wait_exit(&mut child);
    drop(pty.master);
    let stderr = std::fs::read_to_string(&err_path).unwrap_or_default();
    assert_eq!(code, Some(130), "{stderr}");
    let recs = records(&sb.trace());
    let outs = assert_trace_paired(&recs);
    assert_eq!(
        outs,
        vec![
            (DENIED.to_string(), StopReason::Aborted),
            (DENIED.to_string(), StopReason::Aborted)
        ]
    );
    ends_aborted(&recs);
}

fn two_sleeps() -> Value {
    let call = json!({"name": "exec_command",
        "arguments": {"description": "wait", "cmd": "sleep 30"}});
    json!({"turns": [{"tool_calls": [call.clone(), call]}, {"text": "unreached"}]})
}

#[test]
fn sigterm_of_run_during_running_tools_pairs_every_call() {
    let sb = Sandbox::new();
    let script = sb.script(&two_sleeps());
    let r = Running::spawn(sb.run_command(&["--script", s(&script), "go"]));
    until_trace(&sb, "two dispatched calls", |recs| {
        recs.iter()
            .filter(|r| matches!(r.as_event(), Some(EventPayload::ApprovalDecision { .. })))
            .count()
            == 2
    });
    kill(Pid::from_raw(r.pid() as i32), Signal::SIGTERM).unwrap();
    r.wait(WAIT).expect_code(1);
    let recs = records(&sb.trace());
    assert_eq!(assert_trace_paired(&recs).len(), 2);
    ends_aborted(&recs);
}

#[test]
fn sigint_of_chat_with_an_approval_pending_pairs_every_call() {
    let sb = Sandbox::new();
    let script = sb.script(&two_reads());
    let mut cmd = sb.command();
    cmd.args(["chat", "--home", s(&sb.home()), "--script", s(&script)])
        .args(["--approve", "always-ask"])
        .stdin(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let out = drain(child.stdout.take().unwrap());
    let err = drain(child.stderr.take().unwrap());
    stdin.write_all(b"read both\n").unwrap();
    until_trace(&sb, "two calls", |recs| count_calls(recs) == 2);
    kill(Pid::from_raw(child.id() as i32), Signal::SIGINT).unwrap();
    until_trace(&sb, "the task's end", |recs| {
        matches!(
            recs.last().and_then(|r| r.as_event()),
            Some(EventPayload::TaskEnd { .. })
        )
    });
    drop(stdin);
    let code = wait_exit(&mut child);
    let (out, err) = (out.join().unwrap(), err.join().unwrap());
    assert_eq!(code, Some(0), "{out}\n{err}");
    let recs = records(&sb.trace());
    assert_eq!(assert_trace_paired(&recs).len(), 2);
    ends_aborted(&recs);
}

#[test]
fn a_full_trace_filesystem_fails_the_run_with_the_reason() {
    let sb = Sandbox::new();
    let Some(fs) = tmpfs::SmallFs::mount(
        &sb.home(),
        "a_full_trace_filesystem_fails_the_run_with_the_reason",
    ) else {
        return;
    };
    let filler = fs.join("filler");
    let fill = format!("head -c 2000000 /dev/zero > {}; true", filler.display());
    let script = sb.script(&json!({"turns": [
        {"tool_calls": [{"name": "exec_command",
            "arguments": {"description": "fill the disk", "cmd": fill}}]},
        {"tool_calls": [{"name": "exec_command",
            "arguments": {"description": "print a lot", "cmd": "seq 1 5000"}}]},
        {"text": "finished"}]}));
    let out = sb.run(&["--script", s(&script), "go"]);
    out.expect_code(1);
    let trace = sb.trace();
    let needle = format!(
        "rookery: trace write failed: No space left on device ({})",
        trace.display()
    );
    assert!(
        out.stderr.lines().any(|l| l == needle),
        "{needle}\n{}",
        out.stderr
    );
    // What reached the disk is whole lines, starting with the session's meta.
    let recs = records(&trace);
    assert!(matches!(
        recs.first().map(|r| &r.payload),
        Some(rookery::message::Payload::SessionMeta(_))
    ));
    drop(fs);
}

#[test]
fn a_closed_output_pipe_ends_the_run_quietly() {
    let sb = Sandbox::new();
    // The later texts come after `head` has gone.
    let script2 = sb.script(&json!({"turns": [
        {"tool_calls": [{"name": "exec_command",
            "arguments": {"description": "talk", "cmd": "seq 1 3"}}]},
        {"text": "second", "delay_ms": 300},
        {"text": "third", "delay_ms": 300}]}));
    let line = format!(
        "{} run --workspace {} --home {} --script {} go 2>&1 | head -1; exit ${{PIPESTATUS[0]}}",
        BIN,
        s(&sb.ws()),
        s(&sb.home()),
        s(&script2)
    );
    let out = Command::new("bash")
        .args(["-c", &line])
        .env("HOME", sb.path("user-home"))
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(out.status.signal(), None, "{out:?}");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 1);
}

#[test]
fn chat_reports_a_non_utf8_line_and_goes_on() {
    let sb = Sandbox::new();
    let script = sb.script(&json!({"turns": [{"text": "answered"}]}));
    let mut cmd = sb.command();
    cmd.args(["chat", "--home", s(&sb.home()), "--script", s(&script)])
        .stdin(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let out = drain(child.stdout.take().unwrap());
    let err = drain(child.stderr.take().unwrap());
    stdin.write_all(b"caf\xe9 au lait\nhello\n").unwrap();
    drop(stdin);
    let code = wait_exit(&mut child);
    let (out, err) = (out.join().unwrap(), err.join().unwrap());
    assert_eq!(code, Some(0), "{out}\n{err}");
    assert!(
        err.contains("rookery: input line 1 is not valid UTF-8"),
        "{err}"
    );
    assert!(out.lines().any(|l| l == "answered"), "{out}");
    let recs = records(&sb.trace());
    let users: Vec<String> = recs
        .iter()
        .filter_map(|r| match r.as_model() {
            Some(ModelPayload::Text { text, .. }) if r.to_json().contains("\"role\":\"user\"") => {
                Some(text.clone())
            }
            _ => None,
        })
        .collect();
    assert_eq!(users, ["hello"]);
}

#[test]
fn a_home_that_is_a_file_names_the_path_and_the_reason() {
    let sb = Sandbox::new();
    let script = sb.script(&json!({"turns": [{"text": "hi"}]}));
    let file = sb.file("not-a-dir", "x");
    let mut cmd = sb.command();
    cmd.args(["run", "--home", s(&file), "--script", s(&script), "go"]);
    let out = Running::spawn(cmd).wait(WAIT);
    out.expect_config_error(&[&format!(
        "rookery: cannot create traces under {}: Not a directory",
        file.display()
    )]);
    assert!(!out.stderr.contains("actor"), "{}", out.stderr);
}

#[test]
fn a_home_on_a_read_only_filesystem_names_the_path_and_the_reason() {
    let sb = Sandbox::new();
    let script = sb.script(&json!({"turns": [{"text": "hi"}]}));
    let ro = sb.path("ro");
    std::fs::create_dir(&ro).unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "ro,size=64k", "tmpfs"])
        .arg(&ro)
        .output()
        .unwrap();
    if !mounted.status.success() {
        eprintln!(
            "SKIPPED a_home_on_a_read_only_filesystem_names_the_path_and_the_reason: cannot mount ({})",
            String::from_utf8_lossy(&mounted.stderr).trim()
        );
        return;
    }
    let mut cmd = sb.command();
    cmd.args(["run", "--home", s(&ro), "--script", s(&script), "go"]);
    let out = Running::spawn(cmd).wait(WAIT);
    let _ = Command::new("umount").arg("-l").arg(&ro).status();
    out.expect_config_error(&[&format!(
        "rookery: cannot create traces under {}: Read-only file system",
        ro.display()
    )]);
}

#[test]
fn an_unknown_key_in_a_builtin_entry_is_a_start_up_error() {
    let sb = Sandbox::new();
    let script = sb.script(&json!({"turns": [{"text": "hi"}]}));
    let config = sb.file(
        "agent.yaml",
        "tools:\n  builtin:\n    - read_file\n    - name: write_file\n      timeoutMS: 5\n",
    );
    let out = sb.run(&["--script", s(&script), "--config", s(&config), "go"]);
    out.expect_config_error(&["unknown key \"timeoutMS\"", "\"write_file\""]);
}
