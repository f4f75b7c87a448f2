use super::*;

fn policy() -> CommandPolicy {
    CommandPolicy::default()
}

/// The definition of `tool` as its profile defines it (penguin's, else openvaala's).
fn def(tool: &str) -> ToolDefinitionConfig {
    crate::tools::profile::penguin::default_definition(tool)
        .or_else(|| crate::tools::profile::openvaala_definition(tool))
        .unwrap_or_else(|| panic!("no profile defines {tool}"))
}

/// The default rules without their set: every rule tried one by one, as when the union is too
/// large for one set. Every command of these tests must get the same answer both ways.
fn one_by_one() -> CommandPolicy {
    let (names, rules) = default_rules()
        .into_iter()
        .map(|(name, pattern)| (name, Regex::new(&pattern).unwrap()))
        .unzip();
    CommandPolicy {
        rules: Rules::Compiled(CompiledRules {
            names,
            matcher: Matcher::OneByOne(rules),
        }),
    }
}

fn assert_caught(rule: &str, commands: &[&str]) {
    let (p, q) = (policy(), one_by_one());
    for c in commands {
        assert_eq!(p.check(c), Some(rule), "expected {rule} to forbid {c:?}");
        assert_eq!(q.check(c), Some(rule), "one by one: {c:?}");
    }
}

fn assert_allowed(commands: &[&str]) {
    let (p, q) = (policy(), one_by_one());
    for c in commands {
        assert_eq!(p.check(c), None, "expected {c:?} to be allowed");
        assert_eq!(q.check(c), None, "one by one: {c:?}");
    }
}

#[test]
fn every_default_rule_compiles() {
    let names = policy().rule_names().len();
    assert_eq!(names, default_rules().len());
    // And all of them as one set, which answers the usual "no rule matches" in one scan.
    assert!(matches!(DEFAULT_RULES.matcher, Matcher::Set(_)));
}

#[test]
fn rm_recursive_force_of_root_home_and_glob() {
    assert_caught(
        "rm-recursive-force",
        &[
            "rm -rf /",
            "rm -fr /",
            "rm -Rf /",
            "rm -r -f /",
            "rm -f -r /",
            "rm --recursive --force /",
            "rm -rf --no-preserve-root /",
            "rm -rf /*",
            "rm -rf //",
            "rm -rf ~",
            "rm -rf ~/",
            "rm -rf ~/*",
            "rm -rf $HOME",
            "rm -rf \"$HOME\"",
            "rm -rf ${HOME}/*",
            "rm -rf *",
            "rm -rf ./*",
            "rm -rf .",
            "rm -rf ..",
            "rm -rf /usr",
            "rm -rf /etc/",
            "rm -rf / -v",
            "rm / -rf",
            "rm -rf build /",
            "/bin/rm -rf /",
            "sudo rm -rf /",
            "sudo -u root rm -rf /",
            "FOO=1 rm -rf /",
            "cd /tmp && rm -rf ~",
            "ls; rm -rf /",
            "echo $(rm -rf /)",
            "true\nrm -rf /",
        ],
    );
}

#[test]
fn quoting_escapes_and_wrappers_are_seen_through() {
    assert_caught(
        "rm-recursive-force",
        &[
            "rm -rf '/'",
            "\"rm\" \"-rf\" \"/\"",
            "r\"m\" -rf /",
            "\\rm -rf /",
            "rm -rf \\/",
            "rm  \t -rf    /",
            "rm -rf \\\n /",
            "sh -c 'rm -rf /'",
            "bash -c \"rm -rf ~\"",
            "bash -lc 'rm -rf /*'",
            "/bin/sh -ec 'cd x; rm -rf /'",
            "bash -c \"sh -c 'rm -rf /'\"",
            "eval 'rm -rf /'",
            "env sh -c 'rm -fr /'",
        ],
    );
}

#[test]
fn rm_look_alikes_are_allowed() {
    assert_allowed(&[
        "rm -rf ./build",
        "rm -rf build",
        "rm -rf /tmp/x",
        "rm -rf ~/project/build",
        "rm -rf $HOME/project",
        "rm -rf *.o",
        "rm -rf ./target/*",
        "rm -r /",
        "rm -f /",
        "rm -rf",
        "rm -r -v ~/x",
        "echo rm -rf /",
        "grep -r 'rm -rf /' docs",
        "git rm -rf --cached .",
        "rmdir /tmp/empty",
        "farm -rf /",
        "sh -c 'rm -rf ./build'",
        "sh script.sh -c 'x'",
        "bash -c 'ls /'",
        "rm -rf /usr/local/share/myapp",
        "rm -rf /var/tmp/cache",
    ]);
}

#[test]
fn mkfs_and_look_alikes() {
    assert_caught(
        "mkfs",
        &[
            "mkfs /dev/sda1",
            "mkfs.ext4 /dev/sdb1",
            "sudo mkfs.xfs -f /dev/nvme0n1p1",
            "/sbin/mke2fs /dev/sda",
            "mkswap /dev/sda2",
            "sh -c 'mkfs.vfat /dev/sdc'",
        ],
    );
    assert_allowed(&[
        "man mkfs",
        "echo mkfs",
        "cat mkfs.txt",
        "ls /sbin/mkfs.ext4",
        "which mkfs.ext4",
    ]);
}

#[test]
fn dd_to_block_devices_and_look_alikes() {
    assert_caught(
        "dd-to-block-device",
        &[
            "dd if=/dev/zero of=/dev/sda",
            "dd if=image.iso of=/dev/sdb bs=4M",
            "sudo dd bs=1M if=/dev/urandom of=/dev/nvme0n1",
            "dd if=x of=/dev/mmcblk0",
            "dd if=x of=/dev/disk2",
            "dd if=x of=/dev/mapper/root",
            "bash -c 'dd if=/dev/zero of=\"/dev/vda\"'",
        ],
    );
    assert_allowed(&[
        "dd if=/dev/sda of=./disk.img",
        "dd if=/dev/zero of=/dev/null bs=1M count=1",
        "dd if=/dev/zero of=./zeros bs=1k count=1",
        "echo dd of=/dev/sda",
    ]);
}

#[test]
fn redirects_onto_block_devices_and_look_alikes() {
    assert_caught(
        "overwrite-block-device",
        &[
            "echo x > /dev/sda",
            "cat image >/dev/sdb",
            "cat image >> /dev/nvme0n1",
            "cat image >| /dev/hda",
            "head -c 1M /dev/zero | tee /dev/sdc",
            "shred -n 1 /dev/sda",
            "wipefs -a /dev/sda",
            "sh -c 'cat x > /dev/xvda'",
        ],
    );
    assert_allowed(&[
        "ls > /dev/null",
        "cmd 2>/dev/null",
        "echo x > ./dev/sda",
        "cat /dev/sda > disk.img",
        "echo hi > /dev/stderr",
        "tee out.log",
    ]);
}

#[test]
fn fork_bombs_and_look_alikes() {
    assert_caught(
        "fork-bomb",
        &[
            ":(){ :|:& };:",
            ":() { : | : & }; :",
            "bomb() { bomb | bomb & }; bomb",
            "f(){ f|f & };f",
            "bash -c ':(){ :|:& };:'",
        ],
    );
    assert_allowed(&[
        "f() { echo hi; }; f",
        "ls | grep x &",
        "echo ':)'",
        "g() { ls -la | grep -v x; }",
    ]);
}

#[test]
fn recursive_chmod_of_root_and_look_alikes() {
    assert_caught(
        "chmod-recursive-root",
        &[
            "chmod -R 777 /",
            "chmod 777 -R /",
            "chmod --recursive a+rwx /",
            "sudo chmod -R 000 /etc",
            "chown -R nobody /",
            "chgrp -R users ~",
            "chmod -R 777 /*",
            "sh -c 'chmod -R 777 /'",
        ],
    );
    assert_allowed(&[
        "chmod -R 755 ./build",
        "chmod 777 /tmp/x",
        "chmod -R u+w /tmp/work",
        "chown -R me ./src",
        "chmod -r /",
        "chmod +x ./run.sh",
    ]);
}

#[test]
fn windows_rules_and_look_alikes() {
    assert_caught(
        "windows-recursive-delete",
        &[
            "rd /s /q C:\\",
            "rmdir /S /Q c:",
            "del /s /q C:\\*",
            "del /f /s /q C:\\*.*",
            "Remove-Item -Recurse -Force C:\\",
        ],
    );
    assert_caught(
        "windows-format-volume",
        &[
            "format C: /q",
            "Format-Volume -DriveLetter D",
            "Clear-Disk -Number 0",
        ],
    );
    assert_caught(
        "windows-disk-overwrite",
        &["copy zero.bin \\\\.\\PhysicalDrive0"],
    );
    assert_caught("windows-fork-bomb", &["%0|%0", "start %0 && start %0"]);
    assert_allowed(&[
        "rd /s /q C:\\build",
        "del /s /q .\\out",
        "Remove-Item -Recurse -Force .\\dist",
        "git format-patch HEAD~1",
        "clang-format -i main.c",
    ]);
}

#[test]
fn runtime_computed_commands_are_out_of_reach() {
    // A guardrail, not a sandbox: the policy reads text, it does not run it.
    assert_allowed(&["$(echo rm) -rf /", "x=rm; $x -rf /"]);
}

#[test]
fn config_semantics() {
    let off = CommandPolicy::from_config(&PolicyConfig {
        enabled: false,
        ..PolicyConfig::default()
    });
    assert_eq!(off.check("rm -rf /"), None);

    let disabled = CommandPolicy::from_config(&PolicyConfig {
        disable: vec!["rm-recursive-force".into()],
        ..PolicyConfig::default()
    });
    assert_eq!(disabled.check("rm -rf /"), None);
    assert_eq!(disabled.check("mkfs /dev/sda"), Some("mkfs"));

    let replaced = CommandPolicy::from_config(&PolicyConfig {
        rules: Some(vec![
            RuleConfig {
                name: "no-curl".into(),
                pattern: r"(?:^|[;&|]\s*)curl\b".into(),
                enabled: true,
            },
            RuleConfig {
                name: "off".into(),
                pattern: "ls".into(),
                enabled: false,
            },
            RuleConfig {
                name: "broken".into(),
                pattern: "(".into(),
                enabled: true,
            },
        ]),
        ..PolicyConfig::default()
    });
    assert_eq!(replaced.rule_names(), vec!["no-curl"]);
    assert_eq!(replaced.check("rm -rf /"), None);
    assert_eq!(replaced.check("ls; curl x"), Some("no-curl"));
    assert_eq!(replaced.check("ls"), None);
}

#[test]
fn the_shell_tools_of_both_profiles_are_checked_and_a_lone_ctrl_c_is_exempt() {
    use serde_json::json;
    let p = policy();
    // The shell text of each profile's shell tools: penguin's `exec_command` cmd and
    // `input_command` chars, openvaala's `bash` command and `write_stdin` chars.
    for (tool, args) in [
        (
            "exec_command",
            json!({"cmd": "rm -rf /", "description": "x"}),
        ),
        (
            "input_command",
            json!({"process_id": "1", "chars": "rm -rf ~\n"}),
        ),
        ("bash", json!({"command": "rm -rf /", "cwd": "."})),
        (
            "write_stdin",
            json!({"command_id": "cmd-1", "chars": "rm -rf ~\n"}),
        ),
    ] {
        assert_eq!(
            p.check_call(&def(tool), &args.to_string()),
            Some("rm-recursive-force"),
            "{tool}"
        );
        assert_eq!(p.check_call(&def(tool), "{not json"), None, "{tool}");
    }
    // Not shell text: the other tools, whatever their arguments hold.
    for (tool, args) in [
        (
            "read_command_output",
            json!({"command_id": "rm -rf /", "cursor": 0}),
        ),
        ("stop_command", json!({"command_id": "rm -rf /"})),
        (
            "write_file",
            json!({"file_path": "rm -rf /", "content": "rm -rf /"}),
        ),
    ] {
        assert_eq!(p.check_call(&def(tool), &args.to_string()), None, "{tool}");
    }
    // A lone Ctrl-C sent as input is exempt even from a rule that matches any text (it does
    // match a Ctrl-C given as a command); anything more is checked.
    let any = CommandPolicy::from_config(&PolicyConfig {
        rules: Some(vec![RuleConfig {
            name: "any".into(),
            pattern: "(?s).".into(),
            enabled: true,
        }]),
        ..PolicyConfig::default()
    });
    let cmd = json!({"cmd": "\u{3}"}).to_string();
    assert_eq!(any.check_call(&def("exec_command"), &cmd), Some("any"));
    for (tool, id) in [
        ("input_command", "process_id"),
        ("write_stdin", "command_id"),
    ] {
        let ctrl_c = json!({id: "1", "chars": "\u{3}"}).to_string();
        assert_eq!(p.check_call(&def(tool), &ctrl_c), None, "{tool}");
        assert_eq!(any.check_call(&def(tool), &ctrl_c), None, "{tool}");
        let more = json!({id: "1", "chars": "\u{3}\u{3}"}).to_string();
        assert_eq!(any.check_call(&def(tool), &more), Some("any"), "{tool}");
    }
}

#[test]
fn a_shell_tool_is_checked_at_the_argument_its_definition_declares() {
    use crate::tools::Permission;
    use crate::tools::definition::CommandArgument;
    use serde_json::json;
    let p = policy();
    let args = json!({"script": "rm -rf /", "cmd": "rm -rf /", "command": "rm -rf /"}).to_string();
    // A tool no profile has, whose definition declares `script` as its command text: the
    // policy reads that argument, and only that one.
    let runs_script =
        ToolDefinitionConfig::new("run_script", "d", json!({}), Permission::ReadWrite)
            .running(CommandArgument::Command("script"));
    assert_eq!(
        p.check_call(&runs_script, &args),
        Some("rm-recursive-force")
    );
    let safe = json!({"script": "ls", "cmd": "rm -rf /", "command": "rm -rf /"}).to_string();
    assert_eq!(p.check_call(&runs_script, &safe), None);
    // A tool named like a shell tool whose definition declares nothing is not one.
    let plain = ToolDefinitionConfig::new("bash", "d", json!({}), Permission::ReadWrite);
    assert_eq!(p.check_call(&plain, &args), None);
    // Input declared as stdin text keeps the lone Ctrl-C exemption under any name.
    let feeds = ToolDefinitionConfig::new("feed", "d", json!({}), Permission::ReadWrite)
        .running(CommandArgument::Stdin("keys"));
    let any = CommandPolicy::from_config(&PolicyConfig {
        rules: Some(vec![RuleConfig {
            name: "any".into(),
            pattern: "(?s).".into(),
            enabled: true,
        }]),
        ..PolicyConfig::default()
    });
    assert_eq!(
        any.check_call(&feeds, &json!({"keys": "\u{3}"}).to_string()),
        None
    );
    assert_eq!(
        any.check_call(&feeds, &json!({"keys": "ls"}).to_string()),
        Some("any")
    );
}

#[test]
fn the_default_rules_are_compiled_once_per_process_and_shared() {
    let a = CommandPolicy::default();
    let b = CommandPolicy::from_config(&PolicyConfig::default());
    // Both read the same process-wide compiled list (one compile, not one per config).
    assert!(std::ptr::eq(a.compiled(), b.compiled()));
    let names: Vec<String> = default_rules().into_iter().map(|(n, _)| n).collect();
    assert_eq!(a.rule_names(), names);
    assert_eq!(b.check("rm -rf /"), Some("rm-recursive-force"));
    // A config that changes the rules gets its own list.
    let disabled = CommandPolicy::from_config(&PolicyConfig {
        disable: vec!["mkfs".into()],
        ..PolicyConfig::default()
    });
    assert!(!std::ptr::eq(a.compiled(), disabled.compiled()));
    assert_eq!(disabled.rule_names().len(), names.len() - 1);
}

#[test]
fn the_first_matching_rule_wins_and_a_bad_one_is_skipped() {
    let rule = |name: &str, pattern: &str| RuleConfig {
        name: name.into(),
        pattern: pattern.into(),
        enabled: true,
    };
    let config = |rules: Vec<RuleConfig>| PolicyConfig {
        rules: Some(rules),
        ..PolicyConfig::default()
    };
    let p = CommandPolicy::from_config(&config(vec![
        rule("later-word", r"\bx\b"),
        rule("broken", "("),
        rule("touch", r"^touch\b"),
    ]));
    assert_eq!(p.rule_names(), ["later-word", "touch"]);
    assert!(matches!(p.compiled().matcher, Matcher::Set(_)));
    // Both rules match `touch x`: the first listed wins. `sh -c` is seen through.
    assert_eq!(p.check("touch x"), Some("later-word"));
    assert_eq!(p.check("sh -c 'touch y'"), Some("touch"));
    assert_eq!(p.check("echo fine"), None);
    let q = CommandPolicy::from_config(&config(vec![
        rule("touch", r"^touch\b"),
        rule("later-word", r"\bx\b"),
    ]));
    assert_eq!(q.check("touch x"), Some("touch"));
    assert_eq!(q.check("echo x"), Some("later-word"));
}
