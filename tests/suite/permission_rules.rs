//! Permission rules in Claude Code's syntax through the `rookery run` binary: from a
//! `--settings` file under `always-ask` (an allow rule runs a matching call unasked, the classic
//! bypasses of a shell allow rule are asked, and with no terminal denied), and from the agent
//! config's `permissions:` under the default `allow-all` (a deny rule catches a part of a
//! compound command, an ask rule asks), and `serve --settings` (rules and hooks for every
//! session).

use crate::common::cli as support;

use support::*;

use serde_json::{Value, json};

fn exec(cmd: &str) -> Value {
    json!({"name": "exec_command", "arguments": {"description": "run", "cmd": cmd}})
}

fn read(path: &str) -> Value {
    json!({"name": "read_file", "arguments": {"file_path": path}})
}

fn decision(records: &[Value], id: &str) -> (String, String, Value) {
    let ds: Vec<&Value> = of_kind(records, "approval_decision")
        .into_iter()
        .filter(|r| r["payload"]["tool_call_id"] == id)
        .collect();
    assert_eq!(ds.len(), 1, "decisions of {id}");
    let p = &ds[0]["payload"];
    (
        p["decision"].as_str().unwrap_or("").to_string(),
        p["source"].as_str().unwrap_or("").to_string(),
        p["reason"].clone(),
    )
}

#[test]
fn settings_allow_rules_match_words_and_every_bypass_is_asked() {
    let sb = Sandbox::new();
    std::fs::create_dir_all(sb.ws().join("src")).expect("mkdir");
    std::fs::write(sb.ws().join("src/a.txt"), "in src\n").expect("write");
    std::fs::write(sb.ws().join("secret.txt"), "secret\n").expect("write");
    let settings = sb.file(
        "settings.json",
        &json!({"permissions": {"allow": ["Bash(echo ok:*)", "Read(./src/**)"]}}).to_string(),
    );
    let bypasses = [
        "echo ok && touch p1",
        "echo ok; touch p2",
        "echo ok | tee p3",
        "echo ok $(touch p4)",
        "echo ok `touch p5`",
        "echo ok\ntouch p6",
        "echo ok > p7",
    ];
    let mut calls = vec![exec("echo ok"), read("src/a.txt"), read("secret.txt")];
    calls.extend(bypasses.iter().map(|c| exec(c)));
    let script = sb.script(&json!({"turns": [{"tool_calls": calls}, {"text": "done"}]}));
    let out = sb.run(&[
        "--approve",
        "always-ask",
        "--script",
        s(&script),
        "--settings",
        s(&settings),
        "go",
    ]);
    out.expect_code(0);
    let records = read_records(&sb.trace());
    check_pairing(&records, true);
    assert_eq!(
        decision(&records, "call_0"),
        ("allow".into(), "rule".into(), json!("Bash(echo ok:*)"))
    );
    assert_eq!(
        decision(&records, "call_1"),
        ("allow".into(), "rule".into(), json!("Read(./src/**)"))
    );
    assert!(
        output_of(&records, "call_1")["output"]
            .as_str()
            .unwrap_or("")
            .contains("in src")
    );
    // No rule: asked, and with no terminal denied.
    for i in 2..3 + bypasses.len() {
        let id = format!("call_{i}");
        let (d, source, _) = decision(&records, &id);
        assert_eq!((d.as_str(), source.as_str()), ("deny", "user"), "{id}");
    }
    for n in 1..=7 {
        assert!(!sb.ws().join(format!("p{n}")).exists(), "p{n}");
    }
}

#[test]
fn config_deny_and_ask_rules_beat_allow_all() {
    let sb = Sandbox::new();
    let config = sb.file(
        "agent.yaml",
        "permissions:\n  deny: [\"Bash(touch:*)\"]\n  ask: [\"Write(docs/**)\"]\n",
    );
    let script = sb.script(&json!({"turns": [
        {"tool_calls": [
            exec("echo hi && touch d1"),
            {"name": "write_file", "arguments": {"file_path": "docs/a.md", "content": "x"}},
            {"name": "write_file", "arguments": {"file_path": "b.md", "content": "y"}}
        ]},
        {"text": "done"}
    ]}));
    let out = sb.run(&["--script", s(&script), "--config", s(&config), "go"]);
    out.expect_code(0);
    let records = read_records(&sb.trace());
    check_pairing(&records, true);
    assert!(!sb.ws().join("d1").exists());
    assert_eq!(
        decision(&records, "call_0"),
        ("deny".into(), "rule".into(), json!("Bash(touch:*)"))
    );
    assert_eq!(
        output_of(&records, "call_0")["output"],
        "Tool call denied by permission rule Bash(touch:*)."
    );
    assert!(!sb.ws().join("docs/a.md").exists());
    let (d, source, reason) = decision(&records, "call_1");
    assert_eq!((d.as_str(), source.as_str()), ("deny", "user"));
    assert_eq!(reason, json!("Write(docs/**)"));
    assert_eq!(decision(&records, "call_2").0, "allow");
    assert!(sb.ws().join("b.md").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_settings_rules_and_hooks_apply_to_every_session() {
    use crate::common::serve as harness;
    let dir = harness::sandbox(&json!({"turns": [
        {"tool_calls": [exec("echo hi && touch s1"), exec("echo fine > ok.txt")]},
        {"text": "done"}
    ]}));
    let log = dir.path().join("hook.log");
    let hook = dir.path().join("hook.sh");
    std::fs::write(
        &hook,
        format!(
            "#!/bin/bash\njq -r '.tool_name + \"|\" + .tool_input.command' >> {}\n",
            log.display()
        ),
    )
    .expect("hook");
    let mut perm = std::fs::metadata(&hook).expect("meta").permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
    std::fs::set_permissions(&hook, perm).expect("chmod");
    let settings = dir.path().join("settings.json");
    std::fs::write(
        &settings,
        json!({
            "permissions": {"deny": ["Bash(touch:*)"]},
            "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": hook.display().to_string()}]}]}
        })
        .to_string(),
    )
    .expect("settings");
    let settings = settings.display().to_string();
    let server = harness::Server::start_with(dir, None, &["--settings", &settings]);
    let id = server.create(Some("allow-all")).await;
    let after = server.task(&id, "go").await;
    server.events_until_task_end(&id, after).await;
    let records = read_records(&server.trace(&id));
    assert_eq!(
        decision(&records, "call_0"),
        ("deny".into(), "rule".into(), json!("Bash(touch:*)"))
    );
    assert_eq!(decision(&records, "call_1").0, "allow");
    assert!(!server.ws().join("s1").exists());
    assert!(server.ws().join("ok.txt").exists());
    let log = std::fs::read_to_string(&log).expect("hook log");
    let mut lines: Vec<&str> = log.lines().collect();
    lines.sort();
    assert_eq!(
        lines,
        ["Bash|echo fine > ok.txt", "Bash|echo hi && touch s1"],
        "{log}"
    );
}
