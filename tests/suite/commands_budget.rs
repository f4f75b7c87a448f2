//! The concurrency budget of a session's tool calls (`tools.max_parallel`), through the
//! `rookery` binary with real shells: hundreds of calls in one turn never run more than the
//! budget at once, calls beyond it wait (and say so when it took over a second), and a call whose
//! command went to the background frees its slot.
//!
//! Concurrency is counted by the commands themselves: each one creates a file named after its
//! shell's pid in a shared directory, counts the files there, and removes its own before it
//! ends. A tool call holds its slot for longer than that window, so a count above the budget is
//! a breach.

use crate::common::cli as support;

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use support::*;

/// A command that records how many counted commands were running when it started.
fn counting_cmd(dir: &Path, hold_s: f64) -> String {
    let d = dir.display();
    format!(
        "touch {d}/run.$$; ls {d} | grep -c '^run\\.' >> {d}/counts; sleep {hold_s}; rm -f {d}/run.$$; echo counted"
    )
}

fn calls(n: usize, cmd: &str) -> Vec<Value> {
    (0..n)
        .map(|i| {
            json!({"name": "exec_command", "arguments": {
                "description": format!("count {i}"), "cmd": cmd}})
        })
        .collect()
}

/// The counts the commands recorded.
fn counts(dir: &Path) -> Vec<usize> {
    std::fs::read_to_string(dir.join("counts"))
        .unwrap_or_default()
        .lines()
        .map(|l| l.trim().parse().expect("a count"))
        .collect()
}

fn outputs(records: &[Value]) -> Vec<String> {
    of_kind(records, "tool_call_output")
        .iter()
        .map(|r| r["payload"]["output"].as_str().unwrap_or("").to_string())
        .collect()
}

#[test]
fn three_hundred_calls_never_exceed_the_default_budget() {
    let sb = Sandbox::new();
    let dir = sb.path("running");
    std::fs::create_dir(&dir).expect("mkdir");
    let script = json!({"turns": [
        {"tool_calls": calls(300, &counting_cmd(&dir, 0.3))},
        {"text": "all counted"}
    ]});
    let path = sb.script(&script);
    let out = Running::spawn(sb.run_command(&["--script", s(&path), "count"]))
        .wait(Duration::from_secs(300));
    out.expect_code(0);
    let counts = counts(&dir);
    assert_eq!(counts.len(), 300, "every command ran once");
    let max = counts.iter().copied().max().unwrap_or(0);
    assert!(max <= 16, "{max} commands ran at once (budget 16)");
    assert!(max >= 2, "calls did run in parallel: {counts:?}");

    let records = read_records(&sb.trace());
    check_pairing(&records, true);
    let outs = outputs(&records);
    assert_eq!(outs.len(), 300);
    assert!(outs.iter().all(|o| o.starts_with("counted")), "{outs:?}");
    // 300 calls of 0.3 s through 16 slots: the last ones waited seconds, and said so.
    let noted = outs
        .iter()
        .filter(|o| {
            o.contains(
                "s for a free tool slot: at most 16 tool calls run at once (tools.max_parallel)]",
            )
        })
        .count();
    assert!(noted > 0, "no call reported its wait");
    // Waiting is not evicting: no running shell was killed to make room.
    assert_eq!(count(&records, "command_evicted"), 0);
}

#[test]
fn configured_budget_is_respected_and_waits_are_reported() {
    let sb = Sandbox::new();
    let dir = sb.path("running");
    std::fs::create_dir(&dir).expect("mkdir");
    let config = sb.file("agent.yaml", "tools:\n  max_parallel: 3\n");
    let script = json!({"turns": [
        {"tool_calls": calls(15, &counting_cmd(&dir, 0.5))},
        {"text": "all counted"}
    ]});
    let path = sb.script(&script);
    let out = sb.run(&["--config", s(&config), "--script", s(&path), "count"]);
    out.expect_code(0);
    let counts = counts(&dir);
    assert_eq!(counts.len(), 15);
    let max = counts.iter().copied().max().unwrap_or(0);
    assert!(
        max <= 3,
        "{max} commands ran at once (budget 3): {counts:?}"
    );

    let records = read_records(&sb.trace());
    check_pairing(&records, true);
    let outs = outputs(&records);
    // Five rounds of half a second: the last round waited two seconds at least.
    let noted: Vec<&String> = outs
        .iter()
        .filter(|o| o.contains("for a free tool slot: at most 3 tool calls run at once"))
        .collect();
    assert!(!noted.is_empty(), "{outs:?}");
    for o in noted {
        // The note is the last line, after the command's own output.
        let last = o.lines().last().unwrap_or("");
        assert!(
            last.starts_with("[waited ") && last.ends_with("(tools.max_parallel)]"),
            "{o}"
        );
        assert!(o.starts_with("counted\n"), "{o}");
    }
}

#[test]
fn an_invalid_budget_is_a_configuration_error() {
    let sb = Sandbox::new();
    let config = sb.file("agent.yaml", "tools:\n  max_parallel: 0\n");
    let script = sb.script(&json!({"turns": [{"text": "hi"}]}));
    sb.run(&["--config", s(&config), "--script", s(&script), "hi"])
        .expect_config_error(&["tools.max_parallel must be"]);
}

#[test]
fn a_command_sent_to_the_background_frees_its_slot() {
    let sb = Sandbox::new();
    let config = sb.file("agent.yaml", "tools:\n  max_parallel: 1\n");
    let late = sb.path("late");
    let l = late.display();
    let script = json!({"turns": [
        {"tool_calls": [
            // Outlives its window: registered, the call returns, the command keeps running.
            {"name": "exec_command", "arguments": {"description": "window",
              "cmd": format!("sleep 25; touch {l}.0"), "yield_time_ms": 300}},
            {"name": "exec_command", "arguments": {"description": "background",
              "cmd": format!("sleep 25; touch {l}.1"), "run_in_background": true}},
            {"name": "exec_command", "arguments": {"description": "third",
              "cmd": format!("if [ -e {l}.0 ] || [ -e {l}.1 ]; then echo late; else echo early; fi")}}
        ]},
        {"text": "done"}
    ]});
    let path = sb.script(&script);
    let out = sb.run(&["--config", s(&config), "--script", s(&path), "go"]);
    out.expect_code(0);
    let records = read_records(&sb.trace());
    let first = output_of(&records, "call_0")["output"]
        .as_str()
        .unwrap_or("");
    assert!(
        first.contains("[process running with process_id proc-"),
        "{first}"
    );
    let third = output_of(&records, "call_2")["output"]
        .as_str()
        .unwrap_or("");
    assert!(third.starts_with("early"), "{third}");
}
