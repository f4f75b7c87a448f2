//! `rookery run` through the binary, part two: max turns, model errors and retries, tool error
//! texts and placeholders, and SIGINT.

use crate::common::cli as support;

use support::*;

use serde_json::{Value, json};
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

// ---------------------------------------------------------------------------------------------
// 5. max_turns
// ---------------------------------------------------------------------------------------------

/// Two turns with tool calls (two calls, then one), then a closing text.
fn two_tool_turns(sb: &Sandbox) -> PathBuf {
    sb.script(&json!({"turns": [
        {"text": "first", "tool_calls": [
            {"name": "write_file", "arguments": {"file_path": "a.txt", "content": "A\n"}},
            {"name": "write_file", "arguments": {"file_path": "b.txt", "content": "B\n"}}
        ]},
        {"text": "second", "tool_calls": [
            {"name": "write_file", "arguments": {"file_path": "c.txt", "content": "C\n"}}
        ]},
        {"text": "all done"}
    ]}))
}

#[test]
fn max_turns_flag_stops_the_task() {
    let sb = Sandbox::new();
    let script = two_tool_turns(&sb);
    let out = sb.run(&["--script", s(&script), "--max-turns", "1", "hi"]);
    out.expect_code(1);
    let lines = out.stdout_lines();
    assert!(
        lines.contains(&"[reached max turns (1); stopping]"),
        "{}",
        out.stdout
    );
    assert!(!lines.contains(&"second"));
    assert!(sb.ws().join("a.txt").exists() && sb.ws().join("b.txt").exists());
    assert!(
        !sb.ws().join("c.txt").exists(),
        "the second turn must not run"
    );
    let records = read_records(&sb.trace());
    assert_eq!(count(&records, "request_begin"), 1);
    assert_eq!(call_ids(&records), vec!["call_0", "call_1"]);
    check_pairing(&records, true);
    let task_end = last_payload(&records);
    assert_eq!(task_end["type"], "task_end");
    assert_ne!(task_end["status"], "completed");
}

#[test]
fn max_turns_from_config_applies_and_the_flag_overrides_it() {
    let sb = Sandbox::new();
    let script = two_tool_turns(&sb);
    let cfg = sb.file("agent.yaml", "max_turns: 2\n");

    // The config alone: two turns run, the third request is refused.
    let out = sb.run(&["--script", s(&script), "--config", s(&cfg), "--json", "hi"]);
    out.expect_code(1);
    let stream = json_lines(&out);
    // The prompt's own record comes first (role user), then the assistant's texts.
    let texts: Vec<&str> = of_kind(&stream, "text")
        .iter()
        .filter_map(|v| v["payload"]["text"].as_str())
        .collect();
    assert_eq!(
        texts,
        vec!["hi", "first", "second", "[reached max turns (2); stopping]"]
    );
    assert!(sb.ws().join("c.txt").exists());
    let records = read_records(&sb.trace());
    assert_eq!(count(&records, "request_begin"), 2);
    check_pairing(&records, true);

    // The flag wins over the config, in both directions.
    let sb = Sandbox::new();
    let script = two_tool_turns(&sb);
    let cfg = sb.file("agent.yaml", "max_turns: 2\n");
    let out = sb.run(&[
        "--script",
        s(&script),
        "--config",
        s(&cfg),
        "--max-turns",
        "1",
        "hi",
    ]);
    out.expect_code(1);
    assert!(
        out.stdout_lines()
            .contains(&"[reached max turns (1); stopping]"),
        "{}",
        out.stdout
    );
    assert!(!sb.ws().join("c.txt").exists());

    let sb = Sandbox::new();
    let script = two_tool_turns(&sb);
    let cfg = sb.file("agent.yaml", "max_turns: 1\n");
    let out = sb.run(&[
        "--script",
        s(&script),
        "--config",
        s(&cfg),
        "--max-turns",
        "5",
        "hi",
    ]);
    out.expect_code(0);
    assert!(out.stdout_lines().contains(&"all done"), "{}", out.stdout);
    assert!(!out.stdout.contains("reached max turns"));
}

// ---------------------------------------------------------------------------------------------
// 6. Model errors and retries
// ---------------------------------------------------------------------------------------------

fn request_ends(records: &[Value]) -> Vec<Value> {
    of_kind(records, "request_end")
        .iter()
        .map(|r| r["payload"].clone())
        .collect()
}

#[test]
fn auth_error_ends_the_task_at_once() {
    let sb = Sandbox::new();
    let script = sb.script(&json!({"turns": [{"error": "auth"}, {"text": "never"}]}));
    let out = sb.run(&["--script", s(&script), "hi"]);
    out.expect_code(1);
    assert!(!out.stdout.contains("never"));
    let records = read_records(&sb.trace());
    assert_eq!(count(&records, "request_begin"), 1, "auth is not retried");
    let ends = request_ends(&records);
    assert_eq!(ends.len(), 1);
    assert_eq!(ends[0]["status"], "auth");
    assert!(ends[0].get("retry_in_ms").is_none());
    let reasons = abort_reasons(&records);
    assert_eq!(reasons.len(), 1);
    assert!(reasons[0].starts_with("llm request error:"), "{reasons:?}");
    // The transcript says what the trace says: the task failed, for this reason.
    assert_eq!(last_payload(&records)["status"], "failed");
    assert!(
        out.stdout.contains(&format!("! failed: {}", reasons[0])),
        "{}",
        out.stdout
    );
    assert!(!out.stdout.contains("! aborted"), "{}", out.stdout);
    assert_eq!(last_payload(&records)["type"], "task_end");
    assert_ne!(last_payload(&records)["status"], "completed");
}

#[test]
fn retryable_errors_reconnect_with_the_configured_backoff() {
    let sb = Sandbox::new();
    let cfg = sb.file(
        "agent.yaml",
        "retry: {max_retries: 5, base_ms: 0, cap_ms: 0}\n",
    );
    let script = sb.script(&json!({"turns": [
        {"error": "failed"}, {"error": "timeout"}, {"text": "ok"}
    ]}));
    let out = sb.run(&["--script", s(&script), "--config", s(&cfg), "hi"]);
    out.expect_code(0);
    assert!(out.stdout_lines().contains(&"ok"), "{}", out.stdout);
    let records = read_records(&sb.trace());
    assert_eq!(count(&records, "request_begin"), 3);
    let ends = request_ends(&records);
    assert_eq!(ends.len(), 3, "{ends:?}");
    assert_eq!(ends[0]["status"], "failed");
    assert_eq!(ends[0]["attempt"], 1);
    assert_eq!(ends[0]["retry_in_ms"], 0);
    assert_eq!(ends[1]["status"], "timeout");
    assert_eq!(ends[1]["attempt"], 2);
    assert_eq!(ends[1]["retry_in_ms"], 0);
    assert_eq!(ends[2]["status"], "completed");
    assert_eq!(ends[2]["attempt"], 3);
    assert!(ends[2].get("retry_in_ms").is_none());
    assert!(abort_reasons(&records).is_empty());
    assert_eq!(
        *last_payload(&records),
        json!({"type": "task_end", "status": "completed"})
    );

    // Out of retries.
    let sb = Sandbox::new();
    let cfg = sb.file(
        "agent.yaml",
        "retry: {max_retries: 1, base_ms: 0, cap_ms: 0}\n",
    );
    let script = sb.script(&json!({"turns": [
        {"error": "failed"}, {"error": "failed"}, {"text": "too late"}
    ]}));
    let out = sb.run(&["--script", s(&script), "--config", s(&cfg), "hi"]);
    out.expect_code(1);
    assert!(!out.stdout.contains("too late"));
    let records = read_records(&sb.trace());
    assert_eq!(count(&records, "request_begin"), 2);
    let ends = request_ends(&records);
    assert_eq!(ends.len(), 2);
    assert_eq!(ends[1]["attempt"], 2);
    assert!(ends[1].get("retry_in_ms").is_none());
    let reasons = abort_reasons(&records);
    assert_eq!(reasons.len(), 1);
    assert!(
        reasons[0].starts_with("llm request failed after 1 retries: "),
        "{reasons:?}"
    );
    assert_eq!(last_payload(&records)["type"], "task_end");
    assert_ne!(last_payload(&records)["status"], "completed");
}

// ---------------------------------------------------------------------------------------------
// 7. Tool error texts and placeholders
// ---------------------------------------------------------------------------------------------

#[test]
fn tool_errors_are_failed_outputs_and_placeholders_chain_calls() {
    let sb = Sandbox::new();
    let script = sb.script(&json!({"turns": [
        {"tool_calls": [
            {"name": "nope", "arguments": {}},                                // call_0
            {"name": "read_file", "arguments": "{not json"},                  // call_1
            {"name": "read_file", "arguments": ""},                           // call_2
            {"name": "read_file", "arguments": {"file_path": "missing.txt"}}, // call_3
            {"name": "write_file",                                            // call_4
             "arguments": {"file_path": "v.txt", "content": "version=42 build=7\n"}}
        ]},
        {"tool_calls": [
            {"name": "read_file", "arguments": {"file_path": "v.txt"}}        // call_5
        ]},
        {"tool_calls": [
            {"name": "write_file", "arguments": {                             // call_6
                "file_path": "out-{{output:-1:version=(\\d+)}}.txt",
                "content": "build {{output:5:build=(\\d+)}} size {{output:4:(\\d+) bytes}}\n"
            }}
        ]},
        {"text": "done"}
    ]}));
    let out = sb.run(&["--script", s(&script), "hi"]);
    out.expect_code(0);
    let records = read_records(&sb.trace());
    check_pairing(&records, true);

    let o = output_of(&records, "call_0");
    assert_eq!(o["output"], "Unknown tool: nope");
    assert_eq!(o["stop_reason"], "failed");

    let o = output_of(&records, "call_1");
    let text = o["output"].as_str().expect("output");
    assert!(
        text.starts_with("Tool call \"read_file\" failed: the arguments are not valid JSON ("),
        "{text}"
    );
    assert!(
        text.ends_with("). Re-issue the call with one complete, valid JSON object."),
        "{text}"
    );
    assert_eq!(o["stop_reason"], "failed");

    let o = output_of(&records, "call_2");
    assert_eq!(
        o["output"],
        "Tool call \"read_file\" failed: the arguments field is empty. Re-issue the call with a complete JSON object."
    );
    assert_eq!(o["stop_reason"], "failed");

    let o = output_of(&records, "call_3");
    let text = o["output"].as_str().expect("output");
    assert!(
        text.starts_with("File not found: \"missing.txt\""),
        "{text}"
    );
    assert_eq!(o["stop_reason"], "failed");

    assert_eq!(output_of(&records, "call_4")["stop_reason"], "completed");
    assert_eq!(
        output_of(&records, "call_5")["output"],
        "     1\tversion=42 build=7"
    );

    // The placeholders were resolved in the call itself and had their effect on disk.
    let call6 = of_kind(&records, "tool_call")[6]["payload"].clone();
    let args: Value =
        serde_json::from_str(call6["arguments"].as_str().expect("args")).expect("json");
    assert_eq!(args["file_path"], "out-42.txt");
    assert_eq!(output_of(&records, "call_6")["stop_reason"], "completed");
    assert_eq!(
        std::fs::read_to_string(sb.ws().join("out-42.txt")).expect("out-42.txt"),
        "build 7 size 19\n"
    );

    // The transcript marks failures.
    assert!(
        out.stdout_lines()
            .contains(&"    Unknown tool: nope  (failed)"),
        "{}",
        out.stdout
    );
}

// ---------------------------------------------------------------------------------------------
// 8. Ctrl-C
// ---------------------------------------------------------------------------------------------

#[test]
fn sigint_aborts_the_running_task() {
    let sb = Sandbox::new();
    let script = sb.script(&json!({"turns": [
        {"tool_calls": [
            {"name": "write_file", "arguments": {"file_path": "a.txt", "content": "A\n"}}
        ]},
        {"delay_ms": 20000, "text": "too late"}
    ]}));
    let mut child = Running::spawn(sb.run_command(&["--script", s(&script), "hi"]));

    // Wait until the second (slow) request has begun: the tool call is settled and the CLI is
    // well inside its event loop.
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let begun = sb.trace_files().first().is_some_and(|p| {
            std::fs::read_to_string(p)
                .unwrap_or_default()
                .lines()
                .filter(|l| l.contains(r#""type":"request_begin""#))
                .count()
                >= 2
        });
        if begun {
            break;
        }
        assert!(
            !child.exited(),
            "rookery exited before the slow request began"
        );
        assert!(Instant::now() < deadline, "the slow request never began");
        std::thread::sleep(Duration::from_millis(20));
    }

    let sent = Instant::now();
    let status = Command::new("kill")
        .args(["-INT", &child.pid().to_string()])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -INT failed");
    let out = child.wait(Duration::from_secs(10));
    assert!(sent.elapsed() < Duration::from_secs(10));
    // 128 + SIGINT, as shells report a command ended by Ctrl-C.
    out.expect_code(130);
    assert!(!out.stdout.contains("too late"));

    let records = read_records(&sb.trace());
    check_pairing(&records, true);
    assert_eq!(output_of(&records, "call_0")["stop_reason"], "completed");
    let n = records.len();
    assert!(n >= 2);
    assert_eq!(kind(&records[n - 2]), "abort", "{}", records[n - 2]);
    assert_eq!(
        *last_payload(&records),
        json!({"type": "task_end", "status": "aborted"})
    );
}
