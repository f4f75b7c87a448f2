//! Memory of a flooding command, through the `rookery` binary: `yes` for 6 s in the foreground,
//! in the background and under a pseudo-terminal must not grow `rookery run` beyond its 1 MiB
//! output ring plus a small constant over the same run with a quiet command. The peak is the child's `ru_maxrss` as `wait4` reports it
//! once it has exited (so no sampling can miss the peak).

use crate::common::cli as support;

use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::*;

/// How much a flood may add to the peak of the same run with a quiet command: far below what
/// buffering 6 s of `yes` takes (gigabytes), far above the 1 MiB ring and the reads in flight.
/// (A bound on the peak itself would measure the binary too, which grows with the build.)
const GROWTH_LIMIT_KB: i64 = 24 * 1024;

/// The peak RSS of the same binary running one quiet command in the foreground: what the
/// binary, the runtime and a session cost before any flood.
fn quiet_peak_kb() -> i64 {
    let sb = Sandbox::new();
    let script = json!({"turns": [
        {"tool_calls": [{"name": "exec_command", "arguments": {
            "description": "quiet", "cmd": "echo quiet"}}]},
        {"text": "done quietly"}
    ]});
    let (_, out, peak) = run_measured(&sb, &script);
    assert!(out.contains("done quietly"), "{out}");
    peak
}

/// Runs `rookery run` on `script` and returns (exit code, stdout, peak RSS in KiB).
fn run_measured(sb: &Sandbox, script: &Value) -> (Option<i32>, String, i64) {
    let path = sb.script(script);
    let mut cmd = sb.run_command(&["--script", s(&path), "flood"]);
    cmd.stdin(Stdio::null());
    let mut child = cmd.spawn().expect("spawn rookery");
    let stdout = drain(child.stdout.take().expect("stdout"));
    let stderr = drain(child.stderr.take().expect("stderr"));
    let pid = child.id() as libc::pid_t;
    let deadline = Instant::now() + Duration::from_secs(90);
    let (status, usage) = loop {
        let mut status = 0;
        // SAFETY: a zeroed rusage is a valid out value; `pid` is our own child.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: valid out pointers; WNOHANG never blocks.
        let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        if r == pid {
            break (status, usage);
        }
        assert!(r == 0, "wait4 failed: {}", std::io::Error::last_os_error());
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("rookery did not finish in time");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    // The status was reaped by wait4; `child` must not wait again.
    std::mem::forget(child);
    let out = stdout.join().expect("stdout reader");
    let err = stderr.join().expect("stderr reader");
    let code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
    assert_eq!(
        code,
        Some(0),
        "rookery failed\n--- stdout\n{out}\n--- stderr\n{err}"
    );
    (code, out, usage.ru_maxrss)
}

fn assert_bounded(what: &str, peak_kb: i64, stdout: &str) {
    let quiet_kb = quiet_peak_kb();
    eprintln!(
        "{what}: peak RSS {} MiB, {} MiB with a quiet command",
        peak_kb / 1024,
        quiet_kb / 1024
    );
    assert!(
        peak_kb - quiet_kb < GROWTH_LIMIT_KB,
        "{what}: rookery peaked at {peak_kb} KiB, {quiet_kb} KiB with a quiet command (growth \
         limit {GROWTH_LIMIT_KB} KiB)\n{}",
        stdout.chars().take(2000).collect::<String>()
    );
}

#[test]
fn foreground_flood_stays_within_the_ring() {
    // wait4's peak RSS of a forked child counts the parent's pages at the fork: run in a
    // small process of its own, not in the shared test process.
    if !crate::common::own_process::own_process(
        module_path!(),
        "foreground_flood_stays_within_the_ring",
    ) {
        return;
    }
    let sb = Sandbox::new();
    let script = json!({"turns": [
        {"tool_calls": [{"name": "exec_command", "arguments": {
            "description": "flood", "cmd": "timeout 6 yes; echo flood-over"}}]},
        {"text": "done flooding"}
    ]});
    let (_, out, peak) = run_measured(&sb, &script);
    assert!(out.contains("done flooding"), "{out}");
    // The output really was a flood: truncated at the tool's cap.
    let records = read_records(&sb.trace());
    let output = output_of(&records, "call_0")["output"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        output.starts_with("y\ny\n"),
        "{}",
        &output[..output.len().min(200)]
    );
    assert!(
        output.contains("[output truncated: exceeded"),
        "{output:.300}"
    );
    assert_bounded("foreground", peak, &out);
}

#[test]
fn background_flood_stays_within_the_ring() {
    // wait4's peak RSS of a forked child counts the parent's pages at the fork: run in a
    // small process of its own, not in the shared test process.
    if !crate::common::own_process::own_process(
        module_path!(),
        "background_flood_stays_within_the_ring",
    ) {
        return;
    }
    let sb = Sandbox::new();
    let script = json!({"turns": [
        {"tool_calls": [{"name": "exec_command", "arguments": {
            "description": "flood", "cmd": "timeout 6 yes", "run_in_background": true}}]},
        // Nobody reads the command while it floods: the ring fills and its reader must wait.
        {"text": "waiting", "delay_ms": 7000},
        {"text": "done waiting"}
    ]});
    let (_, out, peak) = run_measured(&sb, &script);
    let records = read_records(&sb.trace());
    // The notice of the finished flood came back (so the command really ran to its end).
    let notice = records.iter().any(|r| {
        r["payload"]["type"] == "text"
            && r["payload"]["text"]
                .as_str()
                .is_some_and(|t| t.starts_with("[background_task_done]") && t.contains("y\ny\n"))
    });
    assert!(notice, "no completion notice with the flood's tail");
    assert_bounded("background", peak, &out);
}

#[test]
fn pty_flood_stays_within_the_ring() {
    // wait4's peak RSS of a forked child counts the parent's pages at the fork: run in a
    // small process of its own, not in the shared test process.
    if !crate::common::own_process::own_process(module_path!(), "pty_flood_stays_within_the_ring") {
        return;
    }
    let sb = Sandbox::new();
    let script = json!({"turns": [
        {"tool_calls": [{"name": "exec_command", "arguments": {
            "description": "flood", "cmd": "timeout 6 yes", "tty": true, "run_in_background": true}}]},
        {"text": "waiting", "delay_ms": 7000},
        {"text": "done waiting"}
    ]});
    let (_, out, peak) = run_measured(&sb, &script);
    assert_bounded("pty", peak, &out);
}
