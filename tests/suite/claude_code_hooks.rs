//! A Claude Code `settings.json` as a user has it, through the `rookery run` binary
//! (`--settings FILE` and `--hooks FILE`), with hook scripts in the shapes published
//! collections use: a bash + jq guard matching `Bash` and reading `tool_input.command`, a node
//! hook rewriting the command with `updatedInput` in Claude Code's shape, a python formatter
//! matching `Write|Edit` that reads `tool_response.filePath` / `success`, the older
//! `{"decision": "ask"}` under allow-all, an absolute `transcript_path` with a relative
//! `--home`, and the openvaala shell tool matched as `Bash` too.

use crate::common::cli as support;

use support::*;

use serde_json::{Value, json};
use std::path::PathBuf;

fn hook_script(sb: &Sandbox, name: &str, body: &str) -> PathBuf {
    let p = sb.file(name, body);
    let mut perm = std::fs::metadata(&p).expect("meta").permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
    std::fs::set_permissions(&p, perm).expect("chmod");
    p
}

fn group(matcher: &str, command: &std::path::Path) -> Value {
    json!({"matcher": matcher, "hooks": [{"type": "command", "command": command.display().to_string(), "timeout": 60}]})
}

fn decision(records: &[Value], id: &str) -> Value {
    let ds: Vec<&Value> = of_kind(records, "approval_decision")
        .into_iter()
        .filter(|r| r["payload"]["tool_call_id"] == id)
        .collect();
    assert_eq!(ds.len(), 1, "decisions of {id}");
    ds[0]["payload"].clone()
}

/// The bash + jq guard: blocks `--no-verify`, and logs what it was told.
const GUARD: &str = r#"#!/bin/bash
input=$(cat)
tool=$(echo "$input" | jq -r '.tool_name')
own=$(echo "$input" | jq -r '.rookery_tool_name')
cmd=$(echo "$input" | jq -r '.tool_input.command // empty')
tp=$(echo "$input" | jq -r '.transcript_path')
seen=no
case "$tp" in /*) [ -f "$tp" ] && seen=yes ;; esac
echo "$tool|$own|$cmd|$seen" >> "$CLAUDE_PROJECT_DIR/../guard.log"
if [[ "$tool" == "Bash" && "$cmd" == *"--no-verify"* ]]; then
  echo "do not skip the git hooks" >&2
  exit 2
fi
exit 0
"#;

/// The node rewriter: `echo original` becomes a command that leaves a file.
const REWRITE: &str = r#"#!/usr/bin/env node
let data = '';
process.stdin.on('data', c => data += c);
process.stdin.on('end', () => {
  const input = JSON.parse(data);
  if (input.tool_name === 'Bash' && input.tool_input.command === 'echo original') {
    const updated = {...input.tool_input, command: 'echo rewritten > rewritten.txt'};
    console.log(JSON.stringify({hookSpecificOutput: {hookEventName: 'PreToolUse', updatedInput: updated}}));
  }
});
"#;

/// The python formatter: strips trailing blanks of the file Claude Code's Write result names.
const FORMAT: &str = r#"#!/usr/bin/env python3
import json, os, sys
data = json.load(sys.stdin)
resp = data.get("tool_response", {})
path = resp.get("filePath")
with open(os.path.join(os.environ["CLAUDE_PROJECT_DIR"], "..", "format.log"), "a") as log:
    log.write("%s|%s|%s|%s\n" % (data["tool_name"], data["tool_input"].get("file_path"), path, resp.get("success")))
if path and resp.get("success"):
    full = os.path.join(data["cwd"], path)
    with open(full) as f:
        text = f.read()
    with open(full, "w") as f:
        f.write("\n".join(l.rstrip() for l in text.split("\n")))
"#;

/// The older top-level shape: `ask` for files named ask*.
const ASK: &str = r#"#!/bin/bash
input=$(cat)
case "$(echo "$input" | jq -r '.tool_input.file_path')" in
  ask*) echo '{"decision": "ask", "reason": "check this one"}' ;;
esac
"#;

fn exec(cmd: &str) -> Value {
    json!({"name": "exec_command", "arguments": {"description": "run", "cmd": cmd}})
}

fn write(path: &str, content: &str) -> Value {
    json!({"name": "write_file", "arguments": {"file_path": path, "content": content}})
}

#[test]
fn a_claude_code_settings_file_sees_claude_code_names_and_fields() {
    let sb = Sandbox::new();
    let guard = hook_script(&sb, "guard.sh", GUARD);
    let rewrite = hook_script(&sb, "rewrite.js", REWRITE);
    let format = hook_script(&sb, "format.py", FORMAT);
    let ask = hook_script(&sb, "ask.sh", ASK);
    let settings = sb.file(
        "settings.json",
        &json!({
            "model": "claude-sonnet",
            "env": {"A": "1"},
            "hooks": {
                "PreToolUse": [group("Bash", &guard), group("Bash", &rewrite), group("Write", &ask)],
                "PostToolUse": [group("Write|Edit|MultiEdit", &format)]
            }
        })
        .to_string(),
    );
    let script = sb.script(&json!({"turns": [
        {"tool_calls": [
            exec("git commit --no-verify -m wip"),
            exec("echo original"),
            write("f.txt", "a   \nb  \n"),
            write("ask.txt", "x")
        ]},
        {"text": "done"}
    ]}));
    // A relative --home: the hook still gets an absolute transcript_path.
    let mut cmd = sb.command();
    cmd.arg("run")
        .arg("--workspace")
        .arg(sb.ws())
        .args(["--home", "../rookery-home"])
        .args(["--script", s(&script), "--settings", s(&settings), "go"]);
    let out = Running::spawn(cmd).wait(std::time::Duration::from_secs(120));
    out.expect_code(0);
    assert!(
        out.stderr.contains("keys ignored")
            && out.stderr.contains("model")
            && out.stderr.contains("env"),
        "{}",
        out.stderr
    );
    let records = read_records(&sb.trace());
    check_pairing(&records, true);
    // The guard matched `Bash`, read `tool_input.command` and blocked.
    assert_eq!(
        output_of(&records, "call_0")["output"],
        "Tool call blocked by PreToolUse hook: do not skip the git hooks"
    );
    let log = std::fs::read_to_string(sb.path("guard.log")).expect("guard log");
    let mut lines: Vec<&str> = log.lines().collect();
    lines.sort();
    assert_eq!(
        lines,
        [
            "Bash|exec_command|echo original|yes",
            "Bash|exec_command|git commit --no-verify -m wip|yes",
        ],
        "{log}"
    );
    // The node hook's `updatedInput` (Claude Code's `command`) became the tool's `cmd`.
    assert_eq!(
        std::fs::read_to_string(sb.ws().join("rewritten.txt")).expect("rewritten"),
        "rewritten\n"
    );
    let rw = of_kind(&records, "hook_rewrite");
    assert_eq!(rw.len(), 1);
    let args: Value =
        serde_json::from_str(rw[0]["payload"]["arguments"].as_str().unwrap_or("")).expect("json");
    assert_eq!(
        args,
        json!({"description": "run", "cmd": "echo rewritten > rewritten.txt"})
    );
    // The formatter read Write's `filePath` and `success`.
    assert_eq!(
        std::fs::read_to_string(sb.ws().join("f.txt")).expect("f.txt"),
        "a\nb\n"
    );
    let log = std::fs::read_to_string(sb.path("format.log")).expect("format log");
    assert_eq!(log, "Write|f.txt|f.txt|True\n");
    // `{"decision": "ask"}` asked even under allow-all: no terminal, so denied by the user.
    assert!(!sb.ws().join("ask.txt").exists());
    let d = decision(&records, "call_3");
    assert_eq!(
        (&d["decision"], &d["source"], &d["reason"]),
        (&json!("deny"), &json!("user"), &json!("check this one"))
    );
}

#[test]
fn the_openvaala_shell_tool_is_bash_to_a_hooks_file() {
    let sb = Sandbox::new();
    let guard = hook_script(&sb, "guard.sh", GUARD);
    let hooks = sb.file(
        "hooks.json",
        &json!({"PreToolUse": [group("Bash", &guard)]}).to_string(),
    );
    let script = sb.script(&json!({"turns": [
        {"tool_calls": [
            {"name": "bash", "arguments": {"command": "touch skipped.txt --no-verify"}},
            {"name": "bash", "arguments": {"command": "touch ran.txt"}}
        ]},
        {"text": "done"}
    ]}));
    let out = sb.run(&[
        "--tools-profile",
        "openvaala",
        "--script",
        s(&script),
        "--hooks",
        s(&hooks),
        "go",
    ]);
    out.expect_code(0);
    assert!(!sb.ws().join("skipped.txt").exists());
    assert!(sb.ws().join("ran.txt").exists());
    let log = std::fs::read_to_string(sb.path("guard.log")).expect("guard log");
    assert!(log.contains("Bash|bash|touch ran.txt|yes"), "{log}");
}
