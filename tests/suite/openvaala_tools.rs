//! The openvaala tool profile through `rookery run` with the scripted model: the profile switch
//! (config, flag, errors), the exact result header of the command tools, cursors across pages,
//! after 1 MiB was dropped and at a multi-byte boundary, `wait_seconds` returning early,
//! `timeout_seconds` stopping a process tree, `write_stdin` to a PTY program (and refused for a
//! pipe command), stop/list, read_file's numbered lines and AGENTS.md brought once, secret
//! stores refused, absolute paths through a symlinked `--workspace` accepted by read_file,
//! apply_patch and bash, and every call having exactly one output.

use crate::common::cli as support;

use std::time::{Duration, Instant};

use regex::Regex;
use serde_json::{Value, json};
use support::*;

/// The default list, then the collaboration tools (always present).
const OPENVAALA: [&str; 13] = [
    "read_file",
    "apply_patch",
    "bash",
    "read_command_output",
    "write_stdin",
    "stop_command",
    "list_commands",
    "spawn_agent",
    "send_message",
    "wait_agent",
    "interrupt_agent",
    "list_agents",
    "read_session_history",
];

/// `rookery run --tools-profile openvaala --script <turns>`; exit 0 expected.
pub(super) fn run_openvaala(sb: &Sandbox, calls: Vec<Value>) -> Vec<Value> {
    let mut turns: Vec<Value> = calls
        .into_iter()
        .map(|c| json!({"tool_calls": [c]}))
        .collect();
    turns.push(json!({"text": "done"}));
    let script = sb.script(&json!({ "turns": turns }));
    sb.run(&["--tools-profile", "openvaala", "--script", s(&script), "go"])
        .expect_code(0);
    let records = read_records(&sb.trace());
    check_pairing(&records, true);
    records
}

pub(super) fn call(name: &str, args: Value) -> Value {
    json!({"name": name, "arguments": args})
}

pub(super) fn text(records: &[Value], id: &str) -> String {
    output_of(records, id)["output"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn tool_names(records: &[Value]) -> Vec<String> {
    of_kind(records, "tool_list_ready")[0]["payload"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

/// The header of a command tool result, split from its output.
pub(super) struct Result {
    pub(super) id: String,
    pub(super) status: String,
    pub(super) exit_code: Option<i64>,
    pub(super) next_cursor: u64,
    pub(super) output: String,
}

pub(super) fn parse(text: &str) -> Result {
    let re = Regex::new(
        r"\Acommand_id: (cmd-[0-9a-f]{8})\nstatus: (running|exited|failed)\n(?:exit_code: (-?\d+)\n)?next_cursor: (\d+)\n\n",
    )
    .unwrap();
    let c = re
        .captures(text)
        .unwrap_or_else(|| panic!("no header in {text:?}"));
    Result {
        id: c[1].to_string(),
        status: c[2].to_string(),
        exit_code: c.get(3).map(|m| m.as_str().parse().unwrap()),
        next_cursor: c[4].parse().unwrap(),
        output: text[c.get(0).unwrap().end()..].to_string(),
    }
}

const ID: &str = "{{output:0:command_id: (cmd-[0-9a-f]{8})}}";

pub(super) fn cursor_of(k: i64) -> String {
    format!("{{{{output:{k}:next_cursor: (\\d+)}}}}")
}

#[test]
fn the_profile_is_a_tool_list_recorded_in_session_meta() {
    let sb = Sandbox::new();
    let records = run_openvaala(&sb, vec![]);
    assert_eq!(tool_names(&records), OPENVAALA);
    let meta = &of_kind(&records, "session_meta")[0]["payload"];
    assert_eq!(meta["tool_profile"], "openvaala");

    // The default profile: PenguinHarness's tools with apply_patch, none of OpenVaala's.
    let sb = Sandbox::new();
    let script = sb.script(&json!({"turns": [{"text": "hi"}]}));
    sb.run(&["--script", s(&script), "go"]).expect_code(0);
    let records = read_records(&sb.trace());
    let names = tool_names(&records);
    assert!(names.contains(&"exec_command".to_string()), "{names:?}");
    assert!(names.contains(&"apply_patch".to_string()), "{names:?}");
    assert!(!names.contains(&"bash".to_string()), "{names:?}");
    assert_eq!(
        of_kind(&records, "session_meta")[0]["payload"]["tool_profile"],
        "penguin"
    );
}

#[test]
fn config_flag_and_errors_of_the_profile_switch() {
    let sb = Sandbox::new();
    let script = sb.script(&json!({"turns": [{"text": "hi"}]}));
    let cfg = sb.file(
        "agent.yaml",
        "tools:\n  profile: openvaala\n  builtin: [bash, read_file]\n",
    );
    sb.run(&["--config", s(&cfg), "--script", s(&script), "go"])
        .expect_code(0);
    assert_eq!(
        tool_names(&read_records(&sb.trace())),
        [
            "bash",
            "read_file",
            "spawn_agent",
            "send_message",
            "wait_agent",
            "interrupt_agent",
            "list_agents",
            "read_session_history"
        ]
    );

    // The flag overrides the config: back to penguin, where `bash` is no tool.
    let sb2 = Sandbox::new();
    let cfg2 = sb2.file("agent.yaml", "tools:\n  profile: openvaala\n");
    let script2 = sb2.script(&json!({"turns": [{"text": "hi"}]}));
    sb2.run(&[
        "--config",
        s(&cfg2),
        "--tools-profile",
        "penguin",
        "--script",
        s(&script2),
        "go",
    ])
    .expect_code(0);
    let names = tool_names(&read_records(&sb2.trace()));
    assert!(names.contains(&"exec_command".to_string()), "{names:?}");

    let out = sb.run(&["--tools-profile", "vaala", "--script", s(&script), "go"]);
    out.expect_code(2);
    assert!(
        out.stderr.contains("unknown tool profile \"vaala\""),
        "{}",
        out.stderr
    );
    let bad = sb.file("bad.yaml", "tools:\n  profile: codex\n");
    sb.run(&["--config", s(&bad), "--script", s(&script), "go"])
        .expect_config_error(&["unknown tool profile \"codex\""]);
    let bad = sb.file(
        "bad2.yaml",
        "tools:\n  profile: openvaala\n  builtin: [bash, exec_command]\n",
    );
    sb.run(&["--config", s(&bad), "--script", s(&script), "go"])
        .expect_config_error(&["unknown tool \"exec_command\"", "openvaala profile"]);
    let bad = sb.file(
        "bad3.yaml",
        "tools:\n  profile: openvaala\n  builtin: [bash, spawn_agent]\n",
    );
    sb.run(&["--config", s(&bad), "--script", s(&script), "go"])
        .expect_config_error(&["\"spawn_agent\"", "collaboration tools are always present"]);
}

#[test]
fn bash_header_exit_codes_and_early_return() {
    let sb = Sandbox::new();
    std::fs::create_dir(sb.ws().join("sub")).unwrap();
    let records = run_openvaala(
        &sb,
        vec![
            call("bash", json!({"command": "printf 'hi\\n'; exit 3"})),
            // A long wait returns as soon as the command ends (the run's own 30 s bound would
            // fail the test otherwise).
            call(
                "bash",
                json!({"command": "sleep 0.3; pwd", "cwd": "sub", "wait_seconds": 600}),
            ),
            call("bash", json!({"command": "true", "cwd": "/"})),
            call("bash", json!({"command": "echo x", "cwd": "missing-dir"})),
        ],
    );
    let r = parse(&text(&records, "call_0"));
    assert_eq!(r.status, "exited");
    assert_eq!(r.exit_code, Some(3));
    assert_eq!(r.next_cursor, 3);
    assert_eq!(r.output, "hi\n");
    assert_eq!(
        text(&records, "call_0"),
        format!(
            "command_id: {}\nstatus: exited\nexit_code: 3\nnext_cursor: 3\n\nhi\n",
            r.id
        )
    );
    // A non-zero exit is a normal result.
    assert_eq!(output_of(&records, "call_0")["stop_reason"], "completed");
    let r = parse(&text(&records, "call_1"));
    assert_eq!((r.status.as_str(), r.exit_code), ("exited", Some(0)));
    assert_eq!(r.output, format!("{}/sub\n", sb.ws().display()));
    let t = text(&records, "call_2");
    assert!(t.contains("cwd \"/\" is outside the workspace"), "{t}");
    assert_eq!(output_of(&records, "call_2")["stop_reason"], "failed");
    let r = parse(&text(&records, "call_3"));
    assert_eq!(r.status, "failed");
    assert_eq!(r.exit_code, None);
    assert!(r.output.contains("could not start"), "{}", r.output);
}

#[test]
fn cursors_across_pages_after_a_drop_and_on_a_character_boundary() {
    let sb = Sandbox::new();
    let records = run_openvaala(
        &sb,
        vec![
            // 1,500,000 bytes: the ring keeps the last 1,048,576.
            call(
                "bash",
                json!({"command": "head -c 1500000 /dev/zero | tr '\\0' x", "wait_seconds": 60}),
            ),
            call(
                "read_command_output",
                json!({"command_id": ID, "cursor": cursor_of(-1), "wait_seconds": 0}),
            ),
            // 40,000 two-byte characters: the first page cannot end on an odd offset.
            call(
                "bash",
                json!({"command": "for i in $(seq 400); do printf 'é%.0s' $(seq 100); done", "wait_seconds": 60}),
            ),
            call(
                "read_command_output",
                json!({"command_id": "{{output:2:command_id: (cmd-[0-9a-f]{8})}}", "cursor": cursor_of(-1), "wait_seconds": 0}),
            ),
            call(
                "read_command_output",
                json!({"command_id": ID, "cursor": 0, "wait_seconds": 0}),
            ),
        ],
    );
    let first = text(&records, "call_0");
    assert!(first.len() <= 65_536, "{}", first.len());
    let r0 = parse(&first);
    assert_eq!(r0.status, "exited");
    let dropped = 1_500_000 - 1_048_576;
    let marker = format!("[{dropped} bytes dropped]\n");
    assert!(r0.output.starts_with(&marker), "{:?}", &r0.output[..40]);
    let page0 = r0.output.len() - marker.len();
    assert!(page0 > 60_000 && r0.output[marker.len()..].bytes().all(|b| b == b'x'));
    assert_eq!(r0.next_cursor, (dropped + page0) as u64);
    // The next page continues exactly there, with no drop line.
    let r1 = parse(&text(&records, "call_1"));
    assert!(!r1.output.starts_with('['));
    assert_eq!(r1.next_cursor, r0.next_cursor + r1.output.len() as u64);
    // Reading from 0 again starts at the oldest kept byte and says so.
    let again = parse(&text(&records, "call_4"));
    assert!(again.output.starts_with(&marker));

    let r2 = parse(&text(&records, "call_2"));
    assert!(text(&records, "call_2").len() <= 65_536);
    assert_eq!(r2.next_cursor % 2, 0, "a page ends on a character boundary");
    assert!(r2.output.chars().all(|c| c == 'é'));
    let r3 = parse(&text(&records, "call_3"));
    assert!(r3.output.chars().all(|c| c == 'é'));
    assert_eq!(r2.output.len() + r3.output.len(), 80_000);
    assert_eq!(r3.next_cursor, 80_000);
}

#[test]
fn running_commands_are_read_by_cursor_until_they_exit() {
    let sb = Sandbox::new();
    let fifo = sb.ws().join("gate");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let records = run_openvaala(
        &sb,
        vec![
            call(
                "bash",
                json!({"command": "echo early; read line < gate; echo \"late:$line\"", "wait_seconds": 0}),
            ),
            // Blocked on the fifo: the read returns with the first output, still running.
            call(
                "read_command_output",
                json!({"command_id": ID, "cursor": 0, "wait_seconds": 30}),
            ),
            call(
                "bash",
                json!({"command": "echo go > gate", "wait_seconds": 30}),
            ),
            call(
                "read_command_output",
                json!({"command_id": ID, "cursor": cursor_of(1), "wait_seconds": 30}),
            ),
            // Nothing past this cursor any more: the wait ends with the exit.
            call(
                "read_command_output",
                json!({"command_id": ID, "cursor": "{{output:3:next_cursor: (\\d+)}}", "wait_seconds": 30}),
            ),
            call("list_commands", json!({})),
        ],
    );
    let r = parse(&text(&records, "call_0"));
    assert_eq!(r.status, "running");
    assert!(r.exit_code.is_none());
    let r1 = parse(&text(&records, "call_1"));
    assert_eq!(r1.id, r.id);
    assert_eq!(
        (r1.status.as_str(), r1.output.as_str()),
        ("running", "early\n")
    );
    assert_eq!(r1.next_cursor, 6);
    let r3 = parse(&text(&records, "call_3"));
    assert_eq!(r3.output, "late:go\n");
    assert_eq!(r3.next_cursor, 14);
    let r4 = parse(&text(&records, "call_4"));
    assert_eq!(
        (
            r4.status.as_str(),
            r4.exit_code,
            r4.next_cursor,
            r4.output.as_str()
        ),
        ("exited", Some(0), 14, "")
    );
    let list = text(&records, "call_5");
    assert!(
        list.contains(&format!(
            "command_id: {}\nstatus: exited\nexit_code: 0\ncommand: echo early",
            r.id
        )),
        "{list}"
    );
    assert!(list.contains("command: echo go > gate"), "{list}");
}

fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            // A zombie is gone for our purposes.
            s.rsplit(')')
                .next()
                .map(|r| r.trim_start().starts_with('Z'))
                == Some(false)
        })
        .unwrap_or(false)
}

#[test]
fn timeout_stops_the_tree_and_stop_command_stops_a_command() {
    let sb = Sandbox::new();
    let records = run_openvaala(
        &sb,
        vec![
            call(
                "bash",
                json!({"command": "sleep 300 & echo $! > child.pid; sleep 300", "timeout_seconds": 1, "wait_seconds": 60}),
            ),
            call("bash", json!({"command": "sleep 300", "wait_seconds": 0})),
            call(
                "stop_command",
                json!({"command_id": "{{output:1:command_id: (cmd-[0-9a-f]{8})}}"}),
            ),
            call("list_commands", json!({})),
            call("read_command_output", json!({"command_id": "cmd-00000000"})),
        ],
    );
    let r = parse(&text(&records, "call_0"));
    assert_eq!(r.status, "failed");
    assert!(r.output.ends_with("[timed out after 1 s]"), "{}", r.output);
    let pid: i32 = std::fs::read_to_string(sb.ws().join("child.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while alive(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        !alive(pid),
        "the background child {pid} outlived the timeout"
    );

    let stopped = parse(&text(&records, "call_2"));
    assert_eq!(stopped.status, "failed");
    assert!(
        stopped.output.ends_with("[stopped by stop_command]"),
        "{}",
        stopped.output
    );
    let list = text(&records, "call_3");
    assert!(
        list.contains(&format!(
            "command_id: {}\nstatus: failed\ncommand: sleep 300",
            stopped.id
        )),
        "{list}"
    );
    assert_eq!(
        text(&records, "call_4"),
        "Unknown command_id \"cmd-00000000\": list_commands shows this session's commands."
    );
}

#[test]
fn write_stdin_to_a_pty_program_and_refused_for_pipes() {
    let sb = Sandbox::new();
    let records = run_openvaala(
        &sb,
        vec![
            call(
                "bash",
                json!({"command": "stty -echo; echo ready; read x; echo \"got:$x\"", "interactive": true, "wait_seconds": 0}),
            ),
            // Waits for `ready`: the terminal no longer echoes by then.
            call(
                "read_command_output",
                json!({"command_id": ID, "cursor": 0, "wait_seconds": 30}),
            ),
            call(
                "write_stdin",
                json!({"command_id": ID, "chars": "hello\n", "wait_seconds": 30}),
            ),
            call("bash", json!({"command": "sleep 30", "wait_seconds": 0})),
            call(
                "write_stdin",
                json!({"command_id": "{{output:3:command_id: (cmd-[0-9a-f]{8})}}", "chars": "x"}),
            ),
        ],
    );
    let ready = parse(&text(&records, "call_1"));
    assert!(ready.output.contains("ready"), "{}", ready.output);
    let got = parse(&text(&records, "call_2"));
    assert!(got.output.contains("got:hello"), "{}", got.output);
    assert!(got.next_cursor > ready.next_cursor);
    let id = parse(&text(&records, "call_3")).id;
    assert_eq!(
        text(&records, "call_4"),
        format!(
            "Command {id} is not interactive: write_stdin needs a command started by bash with interactive: true."
        )
    );
    assert_eq!(output_of(&records, "call_4")["stop_reason"], "failed");
}

#[test]
fn read_file_numbers_lines_pages_and_brings_agents_md_once() {
    let sb = Sandbox::new();
    let ws = sb.ws();
    std::fs::create_dir_all(ws.join("pkg")).unwrap();
    std::fs::write(ws.join("AGENTS.md"), "Use tabs.\n").unwrap();
    std::fs::write(ws.join("pkg/AGENTS.md"), "Run make.\n").unwrap();
    let lines: String = (1..=300).map(|i| format!("line {i}\n")).collect();
    std::fs::write(ws.join("pkg/a.txt"), &lines).unwrap();
    std::fs::write(ws.join("bin.dat"), b"ok\n\xff\xfe\n").unwrap();
    let records = run_openvaala(
        &sb,
        vec![
            call("read_file", json!({"path": "pkg/a.txt"})),
            call(
                "read_file",
                json!({"path": "pkg/a.txt", "offset": 299, "limit": 5}),
            ),
            call("read_file", json!({"path": "bin.dat"})),
            call("read_file", json!({"path": "../outside.txt"})),
        ],
    );
    let first = text(&records, "call_0");
    assert!(
        first.starts_with("     1\tline 1\n     2\tline 2\n"),
        "{first}"
    );
    assert!(first.contains("   200\tline 200\n[more lines follow: continue with offset=201]"));
    assert!(!first.contains("line 201\n"));
    assert!(first.ends_with(
        "<project_instructions path=\"AGENTS.md\">\nUse tabs.\n</project_instructions>\n\n<project_instructions path=\"pkg/AGENTS.md\">\nRun make.\n</project_instructions>"
    ), "{first}");
    // The second read of the session brings no instructions again.
    assert_eq!(
        text(&records, "call_1"),
        "   299\tline 299\n   300\tline 300"
    );
    let bin = text(&records, "call_2");
    assert!(bin.contains("not UTF-8"), "{bin}");
    assert_eq!(output_of(&records, "call_2")["stop_reason"], "failed");
    assert!(text(&records, "call_3").contains("outside the workspace"));
}

#[test]
fn read_file_refuses_secret_stores_and_symlinks_out_and_they_never_reach_the_trace() {
    let sb = Sandbox::new();
    let ws = sb.ws();
    std::fs::write(ws.join(".vault.toml"), "api_key = \"sk-live-vault\"\n").unwrap();
    std::os::unix::fs::symlink(".vault.toml", ws.join("notes.md")).unwrap();
    let elsewhere = sb.path("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::fs::write(elsewhere.join("key.txt"), "sk-live-elsewhere\n").unwrap();
    std::os::unix::fs::symlink(&elsewhere, ws.join("shared")).unwrap();
    let records = run_openvaala(
        &sb,
        vec![
            call("read_file", json!({"path": ".vault.toml"})),
            call("read_file", json!({"path": "notes.md"})),
            call("read_file", json!({"path": "shared/key.txt"})),
        ],
    );
    assert_eq!(
        text(&records, "call_2"),
        format!(
            "Path \"shared/key.txt\" is outside the workspace {}.",
            ws.display()
        )
    );
    for (id, path) in [("call_0", ".vault.toml"), ("call_1", "notes.md")] {
        assert_eq!(
            text(&records, id),
            format!(
                "Refusing to read \"{path}\": .vault.toml holds the user's secrets and must never enter the conversation."
            )
        );
        assert_eq!(output_of(&records, id)["stop_reason"], "failed");
    }
    let trace = std::fs::read_to_string(sb.trace()).unwrap();
    assert!(!trace.contains("sk-live-vault") && !trace.contains("sk-live-elsewhere"));
}

#[test]
fn absolute_paths_through_a_symlinked_workspace_are_inside() {
    let sb = Sandbox::new();
    let ws = std::fs::canonicalize(sb.ws()).unwrap();
    std::fs::write(ws.join("a.txt"), "hi\n").unwrap();
    let link = sb.path("wslink");
    std::os::unix::fs::symlink(&ws, &link).unwrap();
    let l = s(&link);
    let patch = format!("*** Begin Patch\n*** Add File: {l}/c.txt\n+x\n*** End Patch");
    let calls = [
        call("read_file", json!({"path": format!("{l}/a.txt")})),
        call("apply_patch", json!({"input": patch})),
        call("bash", json!({"command": "pwd", "cwd": l})),
    ];
    let script = sb.script(&json!({"turns": [{"tool_calls": calls}, {"text": "done"}]}));
    let home = sb.home();
    let mut cmd = sb.command();
    cmd.args(["run", "--tools-profile", "openvaala", "--workspace", l])
        .args(["--home", s(&home), "--script", s(&script), "go"]);
    Running::spawn(cmd).wait(RUN_TIMEOUT).expect_code(0);
    let records = read_records(&sb.trace());
    check_pairing(&records, true);
    for id in ["call_0", "call_1", "call_2"] {
        let t = text(&records, id);
        assert_eq!(
            output_of(&records, id)["stop_reason"],
            "completed",
            "{id}: {t}"
        );
    }
    assert_eq!(text(&records, "call_0"), "     1\thi");
    let added = format!("Success. Updated the following files:\nA {l}/c.txt\n");
    assert_eq!(text(&records, "call_1"), added);
    assert_eq!(std::fs::read_to_string(ws.join("c.txt")).unwrap(), "x\n");
    let pwd = parse(&text(&records, "call_2"));
    assert_eq!((pwd.status.as_str(), pwd.exit_code), ("exited", Some(0)));
    assert_eq!(pwd.output, format!("{}\n", ws.display()));
}
