//! `rookery chat --resume ID` through the binary: with only `--home` (and an abbreviated id) a
//! scripted session continues its script at the next turn; a flag given on resume overrides
//! and is recorded in an appended `session_meta`.

use crate::common::cli as support;

use std::io::Write;
use std::process::{Command, Stdio};

use rookery::message::{OmniMessage, Payload};
use serde_json::json;
use support::*;

/// Runs `chat` with `args`, feeding `input`; returns (exit code, stdout, stderr).
fn chat(mut cmd: Command, input: &str) -> (Option<i32>, String, String) {
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn metas(sb: &Sandbox) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(sb.trace()).unwrap();
    text.lines()
        .filter_map(|l| OmniMessage::from_json(l).ok())
        .filter(|m| matches!(m.payload, Payload::SessionMeta(_)))
        .map(|m| serde_json::from_str(&m.to_json()).unwrap())
        .collect()
}

#[test]
fn a_scripted_session_resumes_with_only_home_at_the_next_turn() {
    let sb = Sandbox::new();
    let script =
        sb.script(&json!({"turns": [{"text": "first answer"}, {"text": "second answer"}]}));
    let mut cmd = sb.command();
    cmd.args(["chat", "--home", s(&sb.home()), "--script", s(&script)]);
    let (code, out, err) = chat(cmd, "hello\n");
    assert_eq!(code, Some(0), "{out}\n{err}");
    assert!(out.lines().any(|l| l == "first answer"), "{out}");
    let last = out.lines().last().unwrap();
    let id = last
        .strip_prefix("rookery chat --resume ")
        .unwrap()
        .to_string();
    let meta = &metas(&sb)[0];
    assert_eq!(meta["payload"]["script"], s(&script), "{meta}");
    assert_eq!(meta["payload"]["tool_profile"], "penguin");

    // An abbreviated id and no model flag: the script continues at its second turn.
    let short = &id[..id.len() - 4];
    let mut cmd = sb.command();
    cmd.args(["chat", "--home", s(&sb.home()), "--resume", short]);
    let (code, out, err) = chat(cmd, "again\n");
    assert_eq!(code, Some(0), "{out}\n{err}");
    assert!(out.lines().any(|l| l == "second answer"), "{out}\n{err}");
    assert!(!out.contains("first answer"), "{out}");
    assert_eq!(metas(&sb).len(), 1, "no flag, nothing to record");

    // A flag on resume overrides (a new script) and is recorded.
    let other = sb.file("other.json", r#"{"turns": [{"text": "other answer"}]}"#);
    let mut cmd = sb.command();
    cmd.args([
        "chat",
        "--home",
        s(&sb.home()),
        "--resume",
        &id,
        "--script",
        s(&other),
    ]);
    let (code, out, err) = chat(cmd, "third\n");
    assert_eq!(code, Some(0), "{out}\n{err}");
    let metas = metas(&sb);
    assert_eq!(metas.len(), 2, "{metas:?}");
    assert_eq!(metas[1]["payload"]["reopened_with"], json!(["--script"]));
    assert_eq!(metas[1]["payload"]["script"], s(&other));
    assert_eq!(metas[1]["payload"]["script_position"], 2);
}
