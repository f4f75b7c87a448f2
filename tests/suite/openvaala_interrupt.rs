//! An interrupted openvaala `bash` call stops its command, through the real binary: the
//! user's `POST /v1/sessions/{id}/abort` under `rookery serve`, and a parent's
//! `interrupt_agent` of a child under `rookery run`. The command's `sleep` is gone (its pid
//! checked in `/proc`) while the session lives on, and the call's output names the command.

use std::path::Path;
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::common::cli::{self, Running, Sandbox, s};
use crate::common::serve::{Server, sandbox};

/// Starts a `sleep 300` in the background of the command and writes its pid to `sleep.pid`
/// (atomically), then waits for it: the command runs until something stops it.
const SLEEPER: &str = "sleep 300 & echo $! > sleep.tmp && mv sleep.tmp sleep.pid; wait";

/// How long a test waits for a file to appear or a process to go.
const LIMIT: Duration = Duration::from_secs(20);

fn bash(command: &str) -> Value {
    json!({"name": "bash", "arguments": {"command": command, "wait_seconds": 120}})
}

/// True while `pid` is a live (not zombie) `sleep`.
fn sleep_alive(pid: i32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let running = stat
        .rsplit(')')
        .next()
        .map(|rest| rest.trim_start())
        .is_some_and(|state| !state.is_empty() && !state.starts_with(['Z', 'X']));
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    running && cmdline.starts_with(b"sleep\0")
}

/// The pid in `ws/sleep.pid` once it runs `sleep`, waiting up to [`LIMIT`] for the file and for
/// the exec (`$!` names the forked shell, which on a loaded machine may not have exec'd yet).
fn sleeper_pid(ws: &Path) -> i32 {
    let path = ws.join("sleep.pid");
    let deadline = Instant::now() + LIMIT;
    loop {
        if let Ok(text) = std::fs::read_to_string(&path)
            && let Ok(pid) = text.trim().parse()
            && sleep_alive(pid)
        {
            return pid;
        }
        assert!(
            Instant::now() < deadline,
            "the command never wrote {path:?}, or its pid never ran sleep"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether the sleep is gone within [`LIMIT`] (polled).
fn gone_in_time(pid: i32) -> bool {
    let deadline = Instant::now() + LIMIT;
    while sleep_alive(pid) {
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

/// The output of an interrupted bash call: its header naming the stopped command, why it
/// stopped, and the close-out's note.
fn assert_interrupted_output(output: &str) {
    let header =
        regex::Regex::new(r"\Acommand_id: cmd-[0-9a-f]{8}\nstatus: failed\nnext_cursor: 0\n\n")
            .unwrap();
    assert!(header.is_match(output), "{output}");
    assert!(
        output.contains("[stopped: its bash call was interrupted]"),
        "{output}"
    );
    assert!(
        output.ends_with("[interrupted: tool aborted by user]"),
        "{output}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abort_under_serve_stops_the_running_bash_command() {
    let server = Server::start_in(
        sandbox(&json!({"turns": [{"tool_calls": [bash(SLEEPER)]}, {"text": "done"}]})),
        None,
    );
    let (status, v) = server
        .call(
            "POST",
            "/v1/sessions",
            Some(json!({"workspace": server.ws(), "tools_profile": "openvaala"})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{v}");
    let id = v["session_id"].as_str().unwrap().to_string();
    let after = server.task(&id, "go").await;
    let ws = server.ws();
    let pid = tokio::task::spawn_blocking(move || sleeper_pid(&ws))
        .await
        .unwrap();
    assert!(
        sleep_alive(pid),
        "the sleep {pid} should run before the abort"
    );

    let (status, _) = server
        .call("POST", &format!("/v1/sessions/{id}/abort"), None)
        .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let events = server.events_until_task_end(&id, after).await;
    // The session lives on (idle): only the interrupted call's command was stopped.
    assert_eq!(server.status_of(&id).await, "idle");
    let gone = tokio::task::spawn_blocking(move || gone_in_time(pid))
        .await
        .unwrap();
    let output = events
        .iter()
        .find(|(_, e)| e["payload"]["type"] == "tool_call_output")
        .map(|(_, e)| e["payload"].clone())
        .expect("the bash call's output");
    assert_eq!(output["stop_reason"], "aborted", "{output}");
    assert!(gone, "the sleep {pid} outlived the abort of its bash call");
    assert_interrupted_output(output["output"].as_str().unwrap());
}

#[test]
fn interrupt_agent_stops_the_bash_command_of_the_child() {
    let sb = Sandbox::new();
    let agent = "{{output:0:agent_id: (agent-[0-9a-f]{8})}}";
    let script = sb.script(&json!({
        "turns": [
            {"tool_calls": [{"name": "spawn_agent", "arguments":
                {"task_name": "sleeper", "message": "child-sleep: start the sleeper"}}]},
            // Interrupts only once the test has seen the sleep run (else the sleep may be gone
            // before the test looks for it).
            {"tool_calls": [bash("while [ ! -f observed ]; do sleep 0.05; done")]},
            {"tool_calls": [{"name": "interrupt_agent", "arguments": {"target": agent}}]},
            // Keeps the session (and so the child) alive until the test has looked.
            {"tool_calls": [bash("while [ ! -f checked ]; do sleep 0.05; done")]},
            {"text": "parent done"}],
        "children": [{"when_prompt_contains": "child-sleep", "turns": [
            {"tool_calls": [bash(SLEEPER)]}, {"text": "unreached"}]}]
    }));
    let run = Running::spawn(sb.run_command(&[
        "--tools-profile",
        "openvaala",
        "--script",
        s(&script),
        "go",
    ]));
    let pid = sleeper_pid(&sb.ws());
    std::fs::write(sb.ws().join("observed"), "").unwrap();
    let gone = gone_in_time(pid);
    std::fs::write(sb.ws().join("checked"), "").unwrap();
    let out = run.wait(cli::RUN_TIMEOUT);
    out.expect_code(0);
    assert!(gone, "the sleep {pid} outlived interrupt_agent");

    // The child's bash call names the command it stopped.
    let outputs: Vec<String> = sb
        .trace_files()
        .iter()
        .flat_map(|f| cli::read_records(f))
        .filter(|r| cli::kind(r) == "tool_call_output")
        .filter(|r| r["payload"]["stop_reason"] == "aborted")
        .map(|r| r["payload"]["output"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(outputs.len(), 1, "{outputs:#?}");
    assert_interrupted_output(&outputs[0]);
}
