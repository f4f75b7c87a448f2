//! `/compact` in `rookery chat`, through the binary: the idle session compacts at once, the
//! REPL waits for it, and the next line's request starts from the summary (the trace rotates).

use crate::common::cli as support;

use std::io::Write;
use std::process::Stdio;

use serde_json::json;
use support::*;

#[test]
fn slash_compact_compacts_the_idle_session_before_the_next_line() {
    let sb = Sandbox::new();
    let script = sb.script(&json!({"turns": [
        {"text": "first answer"},
        {"text": "[summary]the user said hello[/summary]"},
        {"text": "second answer"}
    ]}));
    let mut cmd = sb.command();
    cmd.args(["chat", "--home", s(&sb.home()), "--script", s(&script)])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"hello\n/compact\nagain\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(stderr.contains("compaction completed"), "{stderr}");
    assert!(stdout.lines().any(|l| l == "second answer"), "{stdout}");
    let mut files = sb.trace_files();
    files.sort();
    assert_eq!(files.len(), 2, "{files:?}");
    assert!(
        files[1].to_str().unwrap().ends_with("_002.jsonl"),
        "{files:?}"
    );
    let second = &files[1];
    let text = std::fs::read_to_string(second).unwrap();
    assert!(
        text.contains("[context_summary]\\nthe user said hello\\n[/context_summary]"),
        "{text}"
    );
    assert!(text.contains("\"again\""), "{text}");
}
