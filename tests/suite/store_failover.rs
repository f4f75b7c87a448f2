//! Failover on the `postgres` store (`docs/protocol.md#failover`), through the real binary on a
//! real Postgres the test starts: a `rookery run --store` killed with SIGKILL while a
//! foreground `exec_command` runs and a background one is registered, then `chat --resume` of
//! its session once the lease has run out. The new holder records, under its new epoch and
//! before the next task, the placeholder output of the call in flight, the lost task's
//! `task_end` (`failed`, `node_lost`) and the background command's `lost` notice; the next task
//! completes, and a later resume records nothing more. A session closed cleanly (its lease
//! given up) gets none of these records on resume, though it had a background command running.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::cli::*;
use crate::common::commands::live_with_cmdline;
use crate::common::postgres::TestPostgres;

const PLACEHOLDER: &str = "[interrupted: process exited before the tool finished]";

/// Commands no other test runs: found and stopped by their command line after the kill.
const BACKGROUND: [&str; 2] = ["sleep", "91.75"];
const FOREGROUND: [&str; 2] = ["sleep", "92.75"];

/// Lease TTL of both nodes: short, but long enough that a loaded machine renews it in time.
const TTL: &str = "3";

fn kill9(pid: u32) {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
}

/// Stops what is left of the killed run's commands (its guard normally has).
fn stop_orphans() {
    for argv in [BACKGROUND, FOREGROUND] {
        let command = argv.join(" ");
        let shell = ["bash", "-lc", command.as_str()];
        for pid in live_with_cmdline(&argv)
            .into_iter()
            .chain(live_with_cmdline(&shell))
        {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

/// Polls `sql` (one boolean) until it is true, failing with `what` after a generous bound.
fn wait_until(pg: &TestPostgres, sql: &str, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let rows = pg.query(sql);
        if rows.first().and_then(|r| r.first()).cloned().flatten() == Some("t".to_string()) {
            return;
        }
        assert!(Instant::now() < deadline, "{what}: {rows:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The one session of the store.
fn only_session(pg: &TestPostgres) -> String {
    let rows = pg.query("SELECT id FROM sessions");
    assert_eq!(rows.len(), 1, "{rows:?}");
    rows[0][0].clone().unwrap()
}

/// `rookery chat --resume ID` on the store, on a new node, reading `input`.
fn resume(sb: &Sandbox, url: &str, script: &std::path::Path, id: &str, input: &str) -> Out {
    let input = sb.file("chat-input.txt", input);
    let mut c: Command = sb.command();
    c.args(["chat", "--home", s(&sb.home()), "--workspace", s(&sb.ws())])
        .args(["--store", url, "--lease-ttl", TTL, "--script", s(script)])
        .args(["--resume", id])
        .stdin(Stdio::from(std::fs::File::open(input).unwrap()));
    Running::spawn(c).wait(RUN_TIMEOUT)
}

/// The session's trace as the store exports it.
fn exported(sb: &Sandbox, url: &str, id: &str) -> Vec<Value> {
    let mut c = sb.command();
    c.args(["store", "export", "--store", url, id]);
    let out = Running::spawn(c).wait(RUN_TIMEOUT);
    out.expect_code(0);
    out.stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn is_node_lost(r: &Value) -> bool {
    kind(r) == "task_end" && r["payload"]["reason"] == "node_lost"
}

fn is_lost_notice(r: &Value) -> bool {
    r["payload"]["sender"] == "harness"
        && r["payload"]["text"]
            .as_str()
            .is_some_and(|t| t.contains("\nstatus: lost\n"))
}

/// The id of the command a `[command running in background …]` output names.
fn background_id(records: &[Value]) -> String {
    of_kind(records, "tool_call_output")
        .iter()
        .filter_map(|r| r["payload"]["output"].as_str())
        .find_map(|o| {
            o.strip_prefix("[command running in background with process_id ")
                .and_then(|rest| rest.split(';').next())
        })
        .expect("a background command in the trace")
        .to_string()
}

#[test]
fn a_node_killed_mid_task_is_failed_over_with_every_call_paired() {
    let pg = TestPostgres::start();
    let url = pg.url();
    let sb = Sandbox::new();
    let script = sb.script(&json!({"turns": [
        {"tool_calls": [{"name": "exec_command",
                         "arguments": {"cmd": BACKGROUND.join(" "), "run_in_background": true}}]},
        {"tool_calls": [{"name": "exec_command",
                         "arguments": {"cmd": FOREGROUND.join(" "), "yield_time_ms": 120_000}}]},
        {"text": "after the failover"}
    ]}));
    // The schema first, so the polls below can read the tables from the start.
    let mut c = sb.command();
    c.args(["store", "migrate", "--store", &url]);
    Running::spawn(c).wait(RUN_TIMEOUT).expect_code(0);
    let mut run = Running::spawn(sb.run_command(&[
        "--store",
        &url,
        "--lease-ttl",
        TTL,
        "--script",
        s(&script),
        "start two commands",
    ]));

    // The foreground call is stored (so is everything before it): the node dies mid-task.
    wait_until(
        &pg,
        &format!(
            "SELECT count(*) > 0 FROM trace_records WHERE convert_from(record, 'UTF8') \
             LIKE '%\"type\":\"tool_call\"%{}%'",
            FOREGROUND.join(" ")
        ),
        "the foreground call never reached the store",
    );
    assert!(!run.exited(), "rookery ended before it was killed");
    kill9(run.pid());
    let killed = run.wait(RUN_TIMEOUT);
    stop_orphans();
    assert_eq!(killed.code, None, "killed by a signal");
    let id = only_session(&pg);

    // The dead node never gave the session up; its lease runs out.
    let owner = pg.query(&format!(
        "SELECT owner_node IS NOT NULL, epoch FROM sessions WHERE id = '{id}'"
    ));
    assert_eq!(owner, vec![vec![Some("t".into()), Some("1".into())]]);
    wait_until(
        &pg,
        &format!("SELECT lease_expiry < now() FROM sessions WHERE id = '{id}'"),
        "the dead node's lease never ran out",
    );

    let out = resume(&sb, &url, &script, &id, "go on\n");
    out.expect_code(0);
    assert!(
        out.stdout.lines().any(|l| l == "after the failover"),
        "{}\n{}",
        out.stdout,
        out.stderr
    );

    let records = exported(&sb, &url, &id);
    check_pairing(&records, false);
    let ids = call_ids(&records);
    assert_eq!(ids.len(), 2, "{records:#?}");
    let output = output_of(&records, &ids[1]);
    assert_eq!(output["output"], PLACEHOLDER);
    assert_eq!(output["stop_reason"], "aborted");

    // In order: the call's output, the lost task's end, the lost command, then the next task.
    let pos = |f: &dyn Fn(&Value) -> bool| -> Vec<usize> {
        records
            .iter()
            .enumerate()
            .filter(|(_, r)| f(r))
            .map(|(i, _)| i)
            .collect()
    };
    let placeholder =
        pos(&|r| kind(r) == "tool_call_output" && r["payload"]["tool_call_id"] == ids[1].as_str());
    let lost_task = pos(&is_node_lost);
    let lost_command = pos(&is_lost_notice);
    let next = pos(&|r| r["payload"]["text"] == "go on");
    assert_eq!(lost_task.len(), 1, "{records:#?}");
    assert_eq!(lost_command.len(), 1, "{records:#?}");
    assert_eq!(next.len(), 1, "{records:#?}");
    assert!(
        placeholder[0] < lost_task[0]
            && lost_task[0] < lost_command[0]
            && lost_command[0] < next[0],
        "{records:#?}"
    );
    assert_eq!(records[lost_task[0]]["payload"]["status"], "failed");
    let notice = records[lost_command[0]]["payload"]["text"]
        .as_str()
        .unwrap();
    let bg = background_id(&records);
    assert!(notice.contains(&format!("\nid: {bg}\n")), "{notice}");
    assert!(notice.contains("kind: command"), "{notice}");
    // The next task ran to its end.
    let ends = of_kind(&records, "task_end");
    assert_eq!(ends.len(), 2, "{records:#?}");
    assert_eq!(ends[1]["payload"]["status"], "completed");
    assert_eq!(ends[1]["payload"]["reason"], Value::Null);

    // Recorded by the new holder, under its epoch (not only in memory).
    let epochs = pg.query(&format!(
        "SELECT DISTINCT epoch FROM trace_records WHERE session_id = '{id}' \
         AND (convert_from(record, 'UTF8') LIKE '%node_lost%' \
              OR convert_from(record, 'UTF8') LIKE '%status: lost%' \
              OR convert_from(record, 'UTF8') LIKE '%{}%')",
        PLACEHOLDER.trim_start_matches('[').trim_end_matches(']')
    ));
    assert_eq!(epochs, vec![vec![Some("2".to_string())]]);

    // The chat gave the session up cleanly: a later resume records nothing of the kind.
    let again = resume(&sb, &url, &script, &id, "");
    again.expect_code(0);
    let later = exported(&sb, &url, &id);
    assert_eq!(later.iter().filter(|r| is_node_lost(r)).count(), 1);
    assert_eq!(later.iter().filter(|r| is_lost_notice(r)).count(), 1);
    assert_eq!(count(&later, "tool_call_output"), 2);
}

#[test]
fn a_session_given_up_cleanly_gets_no_failover_records() {
    let pg = TestPostgres::start();
    let url = pg.url();
    let sb = Sandbox::new();
    let script = sb.script(&json!({"turns": [
        {"tool_calls": [{"name": "exec_command",
                         "arguments": {"cmd": BACKGROUND.join(" "), "run_in_background": true}}]},
        {"text": "left it running"},
        {"text": "resumed"}
    ]}));
    let out = sb.run(&[
        "--store",
        &url,
        "--lease-ttl",
        TTL,
        "--script",
        s(&script),
        "start one",
    ]);
    out.expect_code(0);
    stop_orphans();
    let id = only_session(&pg);
    let owner = pg.query(&format!(
        "SELECT owner_node FROM sessions WHERE id = '{id}'"
    ));
    assert_eq!(owner, vec![vec![None]], "the run did not give its lease up");

    let out = resume(&sb, &url, &script, &id, "and now?\n");
    out.expect_code(0);
    assert!(
        out.stdout.lines().any(|l| l == "resumed"),
        "{}\n{}",
        out.stdout,
        out.stderr
    );
    let records = exported(&sb, &url, &id);
    check_pairing(&records, false);
    assert!(!records.iter().any(is_node_lost), "{records:#?}");
    assert!(!records.iter().any(is_lost_notice), "{records:#?}");
    let ends = of_kind(&records, "task_end");
    assert_eq!(ends.len(), 2);
    assert!(ends.iter().all(|e| e["payload"]["status"] == "completed"));
}
