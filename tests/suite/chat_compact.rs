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

#[test]
fn auto_false_never_compacts_by_itself_and_slash_compact_still_does() {
    let sb = Sandbox::new();
    // Each answer's usage is far over `max_context`: with the automatic trigger on, the second
    // line's request would be a summary request consuming the scripted "second answer".
    let big = json!({"input": 50_000, "output": 10});
    let script = sb.script(&json!({"turns": [
        {"text": "first answer", "usage": big},
        {"text": "second answer", "usage": big},
        {"text": "[summary]hello, then again[/summary]"},
        {"text": "third answer"}
    ]}));
    let config = sb.file(
        "agent.yaml",
        "compaction:\n  auto: false\n  max_context: 1000\n  max_turns: 1\n",
    );
    let mut cmd = sb.command();
    cmd.args(["chat", "--home", s(&sb.home()), "--script", s(&script)])
        .args(["--config", s(&config)])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"hello\nagain\n/compact\nthird\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    for answer in ["first answer", "second answer", "third answer"] {
        assert!(stdout.lines().any(|l| l == answer), "{answer}: {stdout}");
    }
    assert!(stderr.contains("compaction completed"), "{stderr}");
    let files = sb.trace_files();
    assert_eq!(files.len(), 2, "{files:?}");
    // The one compaction is the manual one, after the second answer.
    let first = read_records(&files[0]);
    let begins = of_kind(&first, "compaction_begin");
    assert_eq!(begins.len(), 1, "{first:?}");
    assert_eq!(begins[0]["payload"]["reason"], "manual");
    let second = read_records(&files[1]);
    assert_eq!(count(&second, "compaction_begin"), 0);
    assert!(
        std::fs::read_to_string(&files[1])
            .unwrap()
            .contains("[context_summary]\\nhello, then again\\n[/context_summary]")
    );
}
