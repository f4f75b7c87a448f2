//! The conventions of a command-line tool, through the binary: shell completions that bash
//! loads, a man page, `--version` with the commit built, `run -` reading the prompt from stdin,
//! Ctrl-C at `chat`'s prompt exiting 130 (a `run` interrupted by Ctrl-C: `cli_errors`), and
//! `sessions ls` as the list.

use crate::common::cli as support;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::json;
use support::*;

/// `rookery <args>` in the sandbox, run to its end.
fn rookery(sb: &Sandbox, args: &[&str]) -> Out {
    let mut c = sb.command();
    c.args(args);
    Running::spawn(c).wait(RUN_TIMEOUT)
}

#[test]
fn bash_loads_the_completions() {
    let sb = Sandbox::new();
    let script = format!("source <('{BIN}' completions bash) && complete -p rookery");
    let out = Command::new("bash")
        .args(["--norc", "--noprofile", "-c", &script])
        .env("HOME", sb.path("user-home"))
        .stdin(Stdio::null())
        .output()
        .expect("run bash");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.starts_with("complete ") && stdout.trim_end().ends_with(" rookery"),
        "{stdout}"
    );
    assert_eq!(stderr, "");
}

#[test]
fn zsh_and_fish_completions_name_the_subcommands() {
    let sb = Sandbox::new();
    let zsh = rookery(&sb, &["completions", "zsh"]);
    zsh.expect_code(0);
    assert!(zsh.stdout.starts_with("#compdef rookery"), "{}", zsh.stdout);
    let fish = rookery(&sb, &["completions", "fish"]);
    fish.expect_code(0);
    for sub in ["run", "chat", "serve", "sessions", "completions", "man"] {
        assert!(
            fish.stdout.contains(&format!("-a \"{sub}\"")),
            "{sub}: {}",
            fish.stdout
        );
    }
    rookery(&sb, &["completions", "tcsh"]).expect_code(2);
}

#[test]
fn man_prints_a_manual_page() {
    let sb = Sandbox::new();
    let out = rookery(&sb, &["man"]);
    out.expect_code(0);
    assert!(out.stdout.starts_with(".ie"), "{}", out.stdout);
    assert!(out.stdout.contains("\n.TH rookery 1"), "{}", out.stdout);
    assert!(out.stdout.contains("completions"), "{}", out.stdout);
}

#[test]
fn version_names_the_commit_built() {
    let sb = Sandbox::new();
    let out = rookery(&sb, &["--version"]);
    out.expect_code(0);
    // The commit of this checkout (the build reruns when HEAD moves), `unknown` without git.
    let git = Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    let commit = git.unwrap_or_else(|| "unknown".to_string());
    assert_eq!(
        out.stdout,
        format!("rookery {} ({commit})\n", env!("CARGO_PKG_VERSION"))
    );
    let re = regex::Regex::new(r"^rookery \d+\.\d+\.\d+ \(([0-9a-f]{7,}|unknown)\)\n$").unwrap();
    assert!(re.is_match(&out.stdout), "{}", out.stdout);
}

#[test]
fn run_dash_reads_the_prompt_from_stdin() {
    let sb = Sandbox::new();
    let script = sb.script(&json!({"turns": [{"text": "read you"}]}));
    let mut cmd = sb.run_command(&["--script", s(&script), "-"]);
    cmd.stdin(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn rookery");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin
        .write_all(b"first line of the task\nsecond line\n")
        .expect("write the prompt");
    drop(stdin);
    let out = Running {
        stdout: Some(drain(child.stdout.take().expect("stdout"))),
        stderr: Some(drain(child.stderr.take().expect("stderr"))),
        child,
    }
    .wait(RUN_TIMEOUT);
    out.expect_code(0);
    assert!(out.stdout.contains("read you"), "{}", out.stdout);
    let records = read_records(&sb.trace());
    let prompts: Vec<&str> = records
        .iter()
        .filter(|r| kind(r) == "text" && r["payload"]["role"] == "user")
        .filter_map(|r| r["payload"]["text"].as_str())
        .collect();
    assert_eq!(prompts, vec!["first line of the task\nsecond line"]);

    // Nothing on stdin is a usage error, not an empty task.
    let empty = sb.run(&["--script", s(&script), "-"]);
    empty.expect_config_error(&["run -", "stdin held no prompt"]);
}

#[test]
fn ctrl_c_at_the_chat_prompt_exits_130() {
    let sb = Sandbox::new();
    let script = sb.script(&json!({"turns": [{"text": "never asked"}]}));
    let mut cmd = sb.command();
    cmd.args(["chat", "--home", s(&sb.home()), "--script", s(&script)])
        .stdin(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn chat");
    let stdin = child.stdin.take().expect("stdin");
    let mut err = BufReader::new(child.stderr.take().expect("stderr"));
    // The banner is printed once the REPL listens for input and signals.
    let mut banner = String::new();
    err.read_line(&mut banner).expect("read the banner");
    assert!(banner.starts_with("session "), "{banner}");
    kill(Pid::from_raw(child.id() as i32), Signal::SIGINT).expect("SIGINT");
    let out = Running {
        stdout: Some(drain(child.stdout.take().expect("stdout"))),
        stderr: Some(drain(err)),
        child,
    }
    .wait(Duration::from_secs(30));
    drop(stdin);
    out.expect_code(130);
    assert!(
        out.stdout.contains("rookery chat --resume "),
        "{}",
        out.stdout
    );
}

#[test]
fn sessions_ls_is_the_list() {
    let sb = Sandbox::new();
    let script = sb.script(&json!({"turns": [{"text": "done"}]}));
    sb.run(&["--script", s(&script), "a task to list"])
        .expect_code(0);
    let home = s(&sb.home()).to_string();
    let ls = rookery(&sb, &["sessions", "ls", "--home", &home]);
    ls.expect_code(0);
    let list = rookery(&sb, &["sessions", "list", "--home", &home]);
    assert_eq!(ls.stdout, list.stdout);
    assert!(ls.stdout.contains("a task to list"), "{}", ls.stdout);
    let json = rookery(&sb, &["sessions", "ls", "--json", "--home", &home]);
    json.expect_code(0);
    assert_eq!(json.stdout.lines().count(), 1, "{}", json.stdout);
}
