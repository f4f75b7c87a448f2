//! Background commands through a whole session: exec_command output in the loop, a background
//! completion notice extending the task by one turn, and no process left after close.

use crate::common;

use std::time::Duration;

use common::*;
use rookery::Host;
use rookery::message::{ModelPayload, Sender, StopReason};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_and_background_notice_through_the_loop() {
    let (_d, ws, home) = tempdirs();
    let marker = ws.join("bg-done");
    let model = Recording::new(scripted(json!({"turns": [
        {"tool_calls": [
            {"name": "exec_command", "arguments": {"description": "say hi", "cmd": "echo hi; exit 3"}},
            {"name": "exec_command", "arguments": {"description": "background", "run_in_background": true,
              "cmd": format!("sleep 0.3; echo finished > {}; echo bg-output", marker.display())}}]},
        {"text": "waiting", "delay_ms": 3000},
        {"text": "saw the notice"}
    ]})));
    let host = Host::start(&home).await.unwrap();
    let s = host
        .create_session(options(&ws, model.clone()))
        .await
        .unwrap();
    let summary = tokio::time::timeout(Duration::from_secs(60), s.run_task("go"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(summary.status, StopReason::Completed);
    let reqs = model.requests();
    let outs = outputs(&reqs[1]);
    assert!(
        outs[0].0.starts_with("hi\n") && outs[0].0.ends_with("[exit code: 3]"),
        "{:?}",
        outs[0]
    );
    assert_eq!(outs[0].1, StopReason::Failed);
    assert!(
        outs[1]
            .0
            .contains("[command running in background with process_id proc-"),
        "{}",
        outs[1].0
    );
    // The notice may ride the second request or extend the task by one more turn.
    let notice = reqs.iter().flatten().find_map(|m| match m {
        ModelPayload::Text {
            text,
            sender: Some(Sender::Harness),
            ..
        } => Some(text.clone()),
        _ => None,
    });
    let notice = match notice {
        Some(n) => n,
        None => {
            // Finished before the notice: it is held for the next task.
            s.run_task("next").await.unwrap();
            model
                .requests()
                .iter()
                .flatten()
                .find_map(|m| match m {
                    ModelPayload::Text {
                        text,
                        sender: Some(Sender::Harness),
                        ..
                    } => Some(text.clone()),
                    _ => None,
                })
                .expect("notice delivered to the next task")
        }
    };
    assert!(notice.starts_with("[background_task_done]\n"), "{notice}");
    assert!(notice.contains("kind: command"));
    assert!(notice.contains("bg-output"));
    assert!(marker.exists());
    s.close().await.unwrap();
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_a_session_kills_its_running_commands() {
    let (_d, ws, home) = tempdirs();
    let pidfile = ws.join("pid");
    let model = scripted(json!({"turns": [
        {"tool_calls": [{"name": "exec_command", "arguments": {"description": "long", "run_in_background": true,
          "cmd": format!("echo $$ > {}; exec sleep 600", pidfile.display())}}]},
        {"text": "started"}
    ]}));
    let host = Host::start(&home).await.unwrap();
    let s = host.create_session(options(&ws, model)).await.unwrap();
    s.run_task("go").await.unwrap();
    let pid = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            if let Ok(t) = std::fs::read_to_string(&pidfile)
                && let Ok(p) = t.trim().parse::<i32>()
            {
                return p;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .unwrap();
    assert!(std::path::Path::new(&format!("/proc/{pid}")).exists());
    s.close().await.unwrap();
    let gone = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            // Gone, or a zombie about to be reaped by its parent.
            if stat.is_empty() || stat.contains(") Z ") {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(gone.is_ok(), "process {pid} outlived its session");
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_of_rookery_leaves_no_command_behind() {
    let (dir, ws, home) = tempdirs();
    let pidfile = ws.join("pid");
    let script = dir.path().join("s.json");
    std::fs::write(
        &script,
        json!({"turns": [
            {"tool_calls": [{"name": "exec_command", "arguments": {"description": "long", "run_in_background": true,
              "cmd": format!("echo $$ > {}; exec sleep 600", pidfile.display())}}]},
            {"text": "holding", "delay_ms": 60000}
        ]})
        .to_string(),
    )
    .unwrap();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_rookery"))
        .env("ROOKERY_NO_CONFIG", "1")
        .args(["run", "--script"])
        .arg(&script)
        .arg("--workspace")
        .arg(&ws)
        .arg("--home")
        .arg(&home)
        .arg("go")
        .env("HOME", dir.path())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let pid = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            if let Ok(t) = std::fs::read_to_string(&pidfile)
                && let Ok(p) = t.trim().parse::<i32>()
            {
                return p;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .unwrap();
    assert!(std::path::Path::new(&format!("/proc/{pid}")).exists());
    child.start_kill().unwrap();
    child.wait().await.unwrap();
    let gone = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            if stat.is_empty() || stat.contains(") Z ") {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(gone.is_ok(), "command {pid} survived a SIGKILL of rookery");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_reaches_commands_even_when_rookery_ignores_sigint() {
    // Ignoring SIGINT is process-wide and inherited by every child: not in the shared process.
    if !crate::common::own_process::own_process(
        module_path!(),
        "ctrl_c_reaches_commands_even_when_rookery_ignores_sigint",
    ) {
        return;
    }
    // A shell that starts rookery in the background makes it ignore SIGINT; its commands must
    // still get the default disposition so input_command's Ctrl-C works.
    // SAFETY: setting a signal disposition to SIG_IGN for this test's own process.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_IGN);
    }
    let (dir, ws, home) = tempdirs();
    let id = "{{output:0:process_id (proc-[0-9a-f]+)}}";
    let model = Recording::new(scripted(json!({"turns": [
        {"tool_calls": [{"name": "exec_command", "arguments": {"description": "wait", "cmd": "sleep 30", "yield_time_ms": 300}}]},
        {"tool_calls": [{"name": "input_command", "arguments": {"description": "stop", "process_id": id, "chars": "\u{3}", "yield_time_ms": 10000}}]},
        {"text": "stopped"}
    ]})));
    let host = Host::start(&home).await.unwrap();
    // An empty HOME for the shells: a Ctrl-C that lands while `bash -l` still runs slow login
    // files (a `$(…)` of .bashrc on a loaded machine) is taken by them, not by the `sleep`.
    let shell_home = dir.path().join("shell-home");
    std::fs::create_dir(&shell_home).unwrap();
    let mut o = options(&ws, model.clone());
    o.command_env = vec![("HOME".into(), shell_home.display().to_string())];
    let s = host.create_session(o).await.unwrap();
    s.run_task("go").await.unwrap();
    let reqs = model.requests();
    let last = reqs.last().unwrap();
    let out = last
        .iter()
        .rev()
        .find_map(|m| match m {
            ModelPayload::ToolCallOutput { output, .. } => Some(output.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(out, "[terminated by signal SIGINT]");
    host.shutdown().await;
}
