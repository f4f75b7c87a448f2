//! Guardrails through the `rookery run` binary: a `--hooks` settings.json with a bash hook,
//! `hooks:` in the agent config with a python PostToolUse hook, the command policy under the
//! default allow-all (on the shell tools of both profiles), `commands.policy` semantics (a bad
//! regex warned about by name) and a bad hooks file as a configuration error.

use crate::common::cli as support;

use support::*;

use serde_json::{Value, json};
use std::path::PathBuf;

fn exec(cmd: &str) -> Value {
    json!({"name": "exec_command", "arguments": {"description": "run", "cmd": cmd}})
}

fn hook_script(sb: &Sandbox, name: &str, body: &str) -> PathBuf {
    let p = sb.file(name, body);
    let mut perm = std::fs::metadata(&p).expect("meta").permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
    std::fs::set_permissions(&p, perm).expect("chmod");
    p
}

fn decision_record(records: &[Value], id: &str) -> Value {
    let ds: Vec<&Value> = of_kind(records, "approval_decision")
        .into_iter()
        .filter(|r| r["payload"]["tool_call_id"] == id)
        .collect();
    assert_eq!(ds.len(), 1, "decisions of {id}");
    ds[0]["payload"].clone()
}

#[test]
fn a_settings_json_hook_blocks_a_call_with_exit_2() {
    let sb = Sandbox::new();
    let hook = hook_script(
        &sb,
        "guard.sh",
        "#!/bin/bash\ninput=$(cat)\nif echo \"$input\" | grep -q 'touch'; then echo \"touching is not allowed\" >&2; exit 2; fi\nexit 0\n",
    );
    let settings = sb.file(
        "settings.json",
        &json!({"permissions": {"allow": []}, "hooks": {"PreToolUse": [
            {"matcher": "exec_command|bash", "hooks": [{"type": "command", "command": hook.display().to_string(), "timeout": 30}]}
        ]}})
        .to_string(),
    );
    let script = sb.script(&json!({"turns": [
        {"tool_calls": [exec("touch blocked.txt"), exec("echo fine > fine.txt")]},
        {"text": "done"}
    ]}));
    let out = sb.run(&[
        "--script",
        s(&script),
        "--hooks",
        s(&settings),
        "--json",
        "go",
    ]);
    out.expect_code(0);
    assert!(!sb.ws().join("blocked.txt").exists());
    assert!(sb.ws().join("fine.txt").exists());
    let records = read_records(&sb.trace());
    assert_eq!(
        output_of(&records, "call_0")["output"],
        "Tool call blocked by PreToolUse hook: touching is not allowed"
    );
    assert_eq!(output_of(&records, "call_0")["stop_reason"], "aborted");
    let d = decision_record(&records, "call_0");
    assert_eq!(
        (&d["decision"], &d["source"], &d["reason"]),
        (
            &json!("deny"),
            &json!("hook"),
            &json!("touching is not allowed")
        )
    );
    let d = decision_record(&records, "call_1");
    assert_eq!(
        (&d["decision"], &d["source"]),
        (&json!("allow"), &json!("mode"))
    );
    // The streamed JSON lines carry the same decision.
    assert!(
        json_lines(&out).iter().any(
            |l| l["payload"]["type"] == "approval_decision" && l["payload"]["source"] == "hook"
        ),
        "{}",
        out.stdout
    );
}

#[test]
fn config_hooks_add_post_tool_use_context_and_the_policy_denies_under_allow_all() {
    let sb = Sandbox::new();
    let hook = hook_script(
        &sb,
        "post.py",
        "#!/usr/bin/env python3\nimport json, sys\nd = json.load(sys.stdin)\nprint(json.dumps({'hookSpecificOutput': {'hookEventName': 'PostToolUse', 'additionalContext': 'post saw ' + d['tool_input']['cmd']}}))\n",
    );
    let config = sb.file(
        "agent.yaml",
        &format!(
            "hooks:\n  PostToolUse:\n    - matcher: \"*\"\n      hooks:\n        - type: command\n          command: \"{}\"\n",
            hook.display()
        ),
    );
    let script = sb.script(&json!({"turns": [
        {"tool_calls": [exec("touch ran.txt; false && rm -rf ~"), exec("echo hi")]},
        {"text": "done"}
    ]}));
    let out = sb.run(&["--script", s(&script), "--config", s(&config), "go"]);
    out.expect_code(0);
    assert!(!sb.ws().join("ran.txt").exists());
    let records = read_records(&sb.trace());
    assert_eq!(
        output_of(&records, "call_0")["output"],
        "Tool call denied by policy."
    );
    let d = decision_record(&records, "call_0");
    assert_eq!(
        (&d["decision"], &d["source"], &d["reason"]),
        (
            &json!("forbidden"),
            &json!("policy"),
            &json!("rm-recursive-force")
        )
    );
    assert_eq!(
        output_of(&records, "call_1")["output"],
        "hi\n\n\npost saw echo hi"
    );
}

#[test]
fn policy_config_disables_replaces_and_warns_about_a_bad_regex() {
    let sb = Sandbox::new();
    let config = sb.file(
        "agent.yaml",
        "commands:\n  policy:\n    rules:\n      - name: no-touch\n        pattern: '(^|[;&|]\\s*)touch\\b'\n      - name: broken-rule\n        pattern: '('\n",
    );
    let script = sb.script(&json!({"turns": [
        {"tool_calls": [exec("touch a.txt"), exec("echo ok > b.txt; false && rm -rf /")]},
        {"text": "done"}
    ]}));
    let out = sb.run(&["--script", s(&script), "--config", s(&config), "go"]);
    out.expect_code(0);
    assert!(
        out.stderr.contains("broken-rule") && out.stderr.contains("bad regex"),
        "{}",
        out.stderr
    );
    assert!(!sb.ws().join("a.txt").exists());
    // `rules` replaced the defaults: the rm rule is gone.
    assert!(sb.ws().join("b.txt").exists());
    let records = read_records(&sb.trace());
    assert_eq!(decision_record(&records, "call_0")["reason"], "no-touch");
    assert_eq!(decision_record(&records, "call_1")["decision"], "allow");
}

#[test]
fn the_policy_checks_the_openvaala_shell_tools_under_allow_all() {
    let sb = Sandbox::new();
    let call = |name: &str, args: Value| json!({"tool_calls": [{"name": name, "arguments": args}]});
    let id = "{{output:1:command_id: (cmd-[0-9a-f]{8})}}";
    let script = sb.script(&json!({"turns": [
        call("bash", json!({"command": "touch ran.txt; false && rm -rf ~"})),
        call(
            "bash",
            json!({"command": "stty -echo; echo ready; read x; echo \"got:$x\"", "interactive": true, "wait_seconds": 0}),
        ),
        call("read_command_output", json!({"command_id": id, "cursor": 0, "wait_seconds": 30})),
        call("write_stdin", json!({"command_id": id, "chars": "touch typed.txt; false && rm -rf ~\n"})),
        call("write_stdin", json!({"command_id": id, "chars": "\u{3}"})),
        call("bash", json!({"command": "echo hi"})),
        {"text": "done"}
    ]}));
    let out = sb.run(&["--tools-profile", "openvaala", "--script", s(&script), "go"]);
    out.expect_code(0);
    assert!(!sb.ws().join("ran.txt").exists());
    assert!(!sb.ws().join("typed.txt").exists());
    let records = read_records(&sb.trace());
    check_pairing(&records, true);
    for denied in ["call_0", "call_3"] {
        assert_eq!(
            output_of(&records, denied)["output"],
            "Tool call denied by policy.",
            "{denied}"
        );
        let d = decision_record(&records, denied);
        assert_eq!(
            (&d["decision"], &d["source"], &d["reason"]),
            (
                &json!("forbidden"),
                &json!("policy"),
                &json!("rm-recursive-force")
            ),
            "{denied}"
        );
    }
    // The other calls run: the program still waits for the line the policy stopped until the
    // Ctrl-C ends it (the exemption itself is pinned by the policy's unit tests).
    for allowed in ["call_1", "call_2", "call_4", "call_5"] {
        assert_eq!(
            decision_record(&records, allowed)["decision"],
            "allow",
            "{allowed}"
        );
    }
    let ready = output_of(&records, "call_2")["output"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        ready.contains("ready") && !ready.contains("got:"),
        "{ready}"
    );
    let hi = output_of(&records, "call_5")["output"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(hi.ends_with("hi\n") || hi.contains("\nhi"), "{hi}");
}

#[test]
fn a_bad_hooks_file_is_a_configuration_error() {
    let sb = Sandbox::new();
    let script = sb.script(&json!({"turns": [{"text": "done"}]}));
    let bad = sb.file(
        "hooks.json",
        r#"{"PreToolUse": [{"matcher": "(", "hooks": []}]}"#,
    );
    let out = sb.run(&["--script", s(&script), "--hooks", s(&bad), "go"]);
    out.expect_config_error(&["hooks.json", "bad matcher", "unclosed group"]);
    let missing = sb.path("nope.json");
    let out = sb.run(&["--script", s(&script), "--hooks", s(&missing), "go"]);
    out.expect_config_error(&["nope.json"]);
}

/// The guide's example hook, taken from the guide itself (`docs/guide/guardrails.md`).
fn readme_block(after: &str, fence: &str) -> String {
    let readme = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/docs/guide/guardrails.md"
    ))
    .expect("docs/guide/guardrails.md");
    let start = readme.find(after).expect("example paragraph");
    let rest = &readme[start..];
    let open = rest.find(fence).expect("fence") + fence.len();
    let close = rest[open..].find("```").expect("closing fence");
    rest[open..open + close].to_string()
}

#[test]
fn the_readme_example_hook_works() {
    let sb = Sandbox::new();
    let guard = readme_block("A working example", "```bash\n");
    let settings = readme_block("A working example", "```json\n");
    let path = sb.ws().join("guard.sh");
    std::fs::write(&path, guard).expect("write guard");
    let mut perm = std::fs::metadata(&path).expect("meta").permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
    std::fs::set_permissions(&path, perm).expect("chmod");
    let settings = sb.file("settings.json", &settings);
    let script = sb.script(&json!({"turns": [
        {"tool_calls": [exec("git push"), exec("cat .env"), exec("echo fine")]},
        {"text": "done"}
    ]}));
    let out = sb.run(&[
        "--script",
        s(&script),
        "--hooks",
        s(&settings),
        "push my branch",
    ]);
    out.expect_code(0);
    let records = read_records(&sb.trace());
    assert_eq!(
        output_of(&records, "call_0")["output"],
        "Tool call blocked by PreToolUse hook: pushing is for humans"
    );
    // Asked on the terminal despite allow-all; stdin is /dev/null, so the prompt denies.
    let d = decision_record(&records, "call_1");
    assert_eq!(
        (&d["decision"], &d["source"], &d["reason"]),
        (&json!("deny"), &json!("user"), &json!("touches .env"))
    );
    assert_eq!(decision_record(&records, "call_2")["source"], "mode");
    assert_eq!(output_of(&records, "call_2")["stop_reason"], "completed");
}
