//! The messages a new user meets, through the real binary: each subcommand's help lists its
//! choices, usage errors are one line pointing at the subcommand's `--help`, start-up errors
//! name the path or value and the fix, a failed task is shown as the trace records it, the
//! scripted model's bad regex is one line, an unset key variable is said once, `bench` refuses
//! what it cannot do and reports a model serving another workload, and `--json` prints the
//! prompt's record with the trace path on stderr.

use crate::common::cli as support;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::json;
use support::*;

const BIN: &str = env!("CARGO_BIN_EXE_rookery");
const WAIT: Duration = Duration::from_secs(30);

fn rookery(args: &[&str]) -> Out {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .args(args)
        .env("HOME", dir.path())
        .env_remove("XDG_CONFIG_HOME")
        .env("TMPDIR", dir.path())
        .env_remove("ROOKERY_HOME")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    Out {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Exit 2, nothing on stdout, exactly one stderr line; returns it.
fn one_line_error(out: &Out) -> String {
    out.expect_code(2);
    assert_eq!(out.stdout, "", "stdout of a usage error");
    let lines: Vec<&str> = out.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one line expected, got:\n{}", out.stderr);
    lines[0].to_string()
}

#[test]
fn each_subcommand_help_lists_the_approval_modes() {
    for sub in ["run", "chat"] {
        let out = rookery(&[sub, "--help"]);
        out.expect_code(0);
        for (mode, help) in [
            ("allow-all", "run every tool call"),
            ("deny-all", "deny every tool call"),
            ("read-only", "allow tools with permission r"),
            ("always-ask", "ask before every tool call"),
        ] {
            assert!(
                out.stdout
                    .lines()
                    .any(|l| l.contains(&format!("{mode}:")) && l.contains(help)),
                "{sub} --help should list {mode}: {}",
                out.stdout
            );
        }
        let short = rookery(&[sub, "-h"]);
        assert!(
            short
                .stdout
                .contains("[possible values: allow-all, deny-all, read-only, always-ask]"),
            "{}",
            short.stdout
        );
    }
}

#[test]
fn bench_help_lists_its_workloads_and_has_no_script_flag() {
    let out = rookery(&["bench", "--help"]);
    out.expect_code(0);
    assert!(
        out.stdout.contains("exec:") && out.stdout.contains("read:"),
        "{}",
        out.stdout
    );
    assert!(!out.stdout.contains("--script"), "{}", out.stdout);
    let line = one_line_error(&rookery(&["bench", "--workload", "write"]));
    assert!(
        line.contains("'write'") && line.contains("[possible values: exec, read]"),
        "{line}"
    );
    assert!(line.ends_with("(see rookery bench --help)"), "{line}");
}

#[test]
fn usage_errors_point_at_the_subcommand_help() {
    let line = one_line_error(&rookery(&["run", "--approve"]));
    assert_eq!(
        line,
        "rookery: a value is required for '--approve <MODE>' but none was supplied [possible values: allow-all, deny-all, read-only, always-ask] (see rookery run --help)"
    );
    let line = one_line_error(&rookery(&["chat", "--approve", "sometimes"]));
    assert!(
        line.starts_with("rookery: invalid value 'sometimes' for '--approve <MODE>'")
            && line.ends_with("(see rookery chat --help)"),
        "{line}"
    );
    // Modes stay case-insensitive.
    let sb = Sandbox::new();
    let script = sb.script(&json!({"turns": [{"text": "fine"}]}));
    sb.run(&["--script", s(&script), "--approve", "READ-ONLY", "hi"])
        .expect_code(0);
    let line = one_line_error(&rookery(&["sessions", "show"]));
    assert!(
        line.ends_with("(see rookery sessions show --help)"),
        "{line}"
    );
    let line = one_line_error(&rookery(&["serve", "--listen"]));
    assert!(line.ends_with("(see rookery serve --help)"), "{line}");
}

#[test]
fn a_home_that_is_a_file_names_the_path_and_the_fix() {
    let sb = Sandbox::new();
    let script = sb.script(&json!({"turns": [{"text": "hi"}]}));
    let file = sb.file("not-a-dir", "x");
    let mut cmd = sb.command();
    cmd.args(["run", "--home", s(&file), "--script", s(&script), "go"]);
    let out = Running::spawn(cmd).wait(WAIT);
    let line = one_line_error(&out);
    assert_eq!(
        line,
        format!(
            "rookery: cannot create traces under {}: Not a directory (pass --home DIR, or set ROOKERY_HOME, to a directory rookery can write)",
            file.display()
        )
    );
}

#[test]
fn a_listen_port_alone_gets_a_host_port_hint() {
    let sb = Sandbox::new();
    let script = sb.script(&json!({"turns": []}));
    let mut cmd = sb.command();
    cmd.args(["serve", "--listen", "7878", "--home", s(&sb.home())]);
    cmd.args(["--script", s(&script)]);
    let out = Running::spawn(cmd).wait(WAIT);
    let line = one_line_error(&out);
    assert!(
        line.starts_with("rookery: --listen 7878: ")
            && line.ends_with("(use HOST:PORT, e.g. 127.0.0.1:7878)"),
        "{line}"
    );
}

#[test]
fn a_failed_task_is_shown_as_its_trace_records_it() {
    let sb = Sandbox::new();
    let script = sb.script(&json!({"turns": [{"error": "auth"}]}));
    let out = sb.run(&["--script", s(&script), "hi"]);
    out.expect_code(1);
    let records = read_records(&sb.trace());
    let status = last_payload(&records)["status"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(status, "failed");
    let reason = &abort_reasons(&records)[0];
    assert!(
        out.stdout_lines()
            .contains(&format!("! {status}: {reason}").as_str()),
        "{}",
        out.stdout
    );
    assert!(!out.stdout.contains("! aborted"), "{}", out.stdout);
}

#[test]
fn a_bad_placeholder_regex_is_one_line() {
    let sb = Sandbox::new();
    let script = sb.script(&json!({"turns": [{"tool_calls": [
        {"name": "read_file", "arguments": {"file_path": "{{output:0:(}}"}}
    ]}]}));
    let out = sb.run(&["--script", s(&script), "hi"]);
    let line = one_line_error(&out);
    assert!(
        line.contains("placeholder regex \"(\" is invalid: unclosed group"),
        "{line}"
    );
}

#[test]
fn an_unset_key_variable_is_said_once_on_stderr() {
    let sb = Sandbox::new();
    let cfg = sb.file("agent.yaml", "retry: {max_retries: 0}\n");
    let out = sb.run(&[
        "--provider",
        "openai",
        "--base-url",
        "http://127.0.0.1:9/v1",
        "--model",
        "m",
        "--api-key-env",
        "ROOKERY_TEST_NEVER_SET_KEY",
        "--config",
        s(&cfg),
        "hi",
    ]);
    out.expect_code(1);
    let notices: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| l.contains("$ROOKERY_TEST_NEVER_SET_KEY"))
        .collect();
    assert_eq!(
        notices,
        [
            "rookery: note: $ROOKERY_TEST_NEVER_SET_KEY is not set (or empty): requests to the model carry no API key"
        ],
        "{}",
        out.stderr
    );
}

#[test]
fn bench_refuses_idle_sessions_with_workload_flags() {
    let line = one_line_error(&rookery(&[
        "bench",
        "--idle-sessions",
        "5",
        "--workload",
        "read",
        "--sessions",
        "3",
    ]));
    assert!(
        line.starts_with("rookery: the argument '--idle-sessions <N>' cannot be used with")
            && line.contains("--workload")
            && line.contains("--sessions")
            && line.ends_with("(see rookery bench --help)"),
        "{line}"
    );
}

#[test]
fn bench_reports_a_model_serving_another_workload() {
    let dir = tempfile::tempdir().unwrap();
    let mut mock = Command::new(BIN)
        .args([
            "bench",
            "--serve-mock",
            "--workload",
            "read",
            "--turns",
            "3",
        ])
        .env("HOME", dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut url = String::new();
    BufReader::new(mock.stdout.take().unwrap())
        .read_line(&mut url)
        .unwrap();
    let out = rookery(&[
        "bench",
        "--workload",
        "exec",
        "--turns",
        "3",
        "--provider",
        "openai",
        "--base-url",
        url.trim(),
        "--model",
        "bench",
        "--json",
    ]);
    let _ = mock.kill();
    let _ = mock.wait();
    out.expect_code(1);
    let report: serde_json::Value = serde_json::from_str(out.stdout.trim()).unwrap();
    assert_eq!(report["ok"], false, "{}", out.stdout);
    assert!(
        out.stderr.contains(
            "the model called read_file 3 times, but the exec workload calls exec_command"
        ),
        "{}",
        out.stderr
    );
}

#[test]
fn json_prints_the_prompt_record_and_the_trace_path() {
    let sb = Sandbox::new();
    let script = sb.script(&json!({"turns": [{"text": "hello back"}]}));
    let out = sb.run(&["--script", s(&script), "--json", "Say hello"]);
    out.expect_code(0);
    let lines = out.stdout_lines();
    let records = read_records(&sb.trace());
    let prompt = records
        .iter()
        .find(|r| r["payload"]["role"] == "user")
        .expect("the trace has the prompt");
    assert_eq!(prompt["payload"]["text"], "Say hello");
    let printed: serde_json::Value = serde_json::from_str(lines[1]).unwrap();
    assert_eq!(&printed, prompt, "the second line is the prompt's record");
    assert_eq!(
        out.stderr.lines().last(),
        Some(format!("trace: {}", sb.trace().display()).as_str()),
        "{}",
        out.stderr
    );
}
