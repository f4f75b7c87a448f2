//! Process-tree ownership, through the `rookery` binary: whatever a command starts — `setsid`
//! daemons, a double fork (`(setsid … &)`), `nohup … &`, the `sleep` child of `sleep N; echo
//! done` — is gone after the command ends or is killed, after the session ends (`rookery run`,
//! `DELETE` of a `serve` session, SIGTERM of `serve`) and after `kill -9` of rookery.
//!
//! Each test marks its processes with unique names (`exec -a <marker>`, a unique `sleep`
//! duration) and looks for them in `/proc`; every wait polls with a 20 s deadline. Zombies count
//! as gone (they run nothing and have no command line).

use crate::common::cli as support;
use crate::common::commands as lib_support;
use crate::common::serve as harness;

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::{Running, Sandbox, read_records, s};

const WAIT: Duration = Duration::from_secs(20);

/// The unique names of one test's processes.
struct Markers {
    base: String,
    sleep: String,
}

impl Markers {
    fn new(tag: &str) -> Self {
        let n: u32 = rand::random::<u32>() % 1_000_000;
        Markers {
            base: format!("rk-tree-{tag}-{}-{n}", std::process::id()),
            sleep: format!("41.{n:06}"),
        }
    }

    /// A command that starts three detached daemons and then `sleep 41.x; echo done`.
    fn daemons(&self) -> String {
        let b = &self.base;
        format!(
            "setsid bash -c 'exec -a {b}-setsid sleep 300' & \
             (setsid bash -c 'exec -a {b}-dfork sleep 300' </dev/null >/dev/null 2>&1 &); \
             nohup bash -c 'exec -a {b}-nohup sleep 300' >/dev/null 2>&1 & \
             sleep {}; echo done",
            self.sleep
        )
    }

    /// The live processes of this test, as `(pid, command line)`.
    fn live(&self) -> Vec<(i32, String)> {
        let mut out = Vec::new();
        let Ok(dir) = std::fs::read_dir("/proc") else {
            return out;
        };
        for pid in dir
            .filter_map(Result::ok)
            .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        {
            let Ok(raw) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
                continue;
            };
            let cmdline = String::from_utf8_lossy(&raw).replace('\0', " ");
            let ours = cmdline.starts_with(&self.base)
                || cmdline.trim_end() == format!("sleep {}", self.sleep);
            if ours && !zombie(pid) {
                out.push((pid, cmdline));
            }
        }
        out
    }

    /// Waits until all four processes run.
    fn wait_all_up(&self) {
        let deadline = Instant::now() + WAIT;
        loop {
            let live = self.live();
            let names = ["-setsid", "-dfork", "-nohup"];
            let daemons = names.iter().all(|n| {
                live.iter()
                    .any(|(_, c)| c.starts_with(&format!("{}{n}", self.base)))
            });
            let sleeper = live.iter().any(|(_, c)| c.starts_with("sleep "));
            if daemons && sleeper {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the daemons never all started: {live:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits until none of them runs.
    fn wait_all_gone(&self, what: &str) {
        let deadline = Instant::now() + WAIT;
        loop {
            let live = self.live();
            if live.is_empty() {
                return;
            }
            if Instant::now() >= deadline {
                // Do not leave them behind for the next test run.
                for (pid, _) in &live {
                    let _ = nix::sys::signal::kill(
                        nix::unistd::Pid::from_raw(*pid),
                        nix::sys::signal::Signal::SIGKILL,
                    );
                }
                panic!("still alive after {what}: {live:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn zombie(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|t| {
            let rest = &t[t.rfind(')')? + 1..];
            rest.split_whitespace()
                .next()
                .map(|st| st == "Z" || st == "X")
        })
        .unwrap_or(true)
}

/// A foreground call that waits (up to 60 s) until `file` exists.
fn wait_for_file(file: &Path) -> Value {
    json!({"name": "exec_command", "arguments": {"description": "wait for the test",
        "cmd": format!("while [ ! -e {} ]; do sleep 0.05; done; echo released", file.display()),
        "yield_time_ms": 60000}})
}

fn background(cmd: &str) -> Value {
    json!({"name": "exec_command", "arguments": {"description": "daemons", "cmd": cmd,
        "run_in_background": true}})
}

fn wait_exit(run: &mut Running) {
    let deadline = Instant::now() + WAIT;
    while !run.exited() {
        assert!(Instant::now() < deadline, "rookery did not exit");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn everything_a_session_started_dies_with_rookery_run() {
    let m = Markers::new("run-end");
    let sb = Sandbox::new();
    let ready = sb.path("ready");
    let script = sb.script(&json!({"turns": [
        {"tool_calls": [background(&m.daemons()), wait_for_file(&ready)]},
        {"text": "leaving the daemons running"}
    ]}));
    let run = Running::spawn(sb.run_command(&["--script", s(&script), "start daemons"]));
    m.wait_all_up();
    std::fs::write(&ready, "").expect("release");
    run.wait(Duration::from_secs(60)).expect_code(0);
    m.wait_all_gone("the end of rookery run");
}

#[test]
fn everything_dies_with_a_sigkilled_rookery() {
    let m = Markers::new("run-kill9");
    let sb = Sandbox::new();
    let never = sb.path("never");
    let script = sb.script(&json!({"turns": [
        {"tool_calls": [background(&m.daemons()), wait_for_file(&never)]},
        {"text": "unreachable"}
    ]}));
    let mut run = Running::spawn(sb.run_command(&["--script", s(&script), "start daemons"]));
    m.wait_all_up();
    run.child.kill().expect("SIGKILL rookery");
    wait_exit(&mut run);
    m.wait_all_gone("kill -9 of rookery");
}

#[test]
fn a_finished_or_killed_command_takes_its_detached_children_along() {
    let fg = Markers::new("fg-end");
    let bg = Markers::new("kill-cmd");
    let sb = Sandbox::new();
    let (r1, r2) = (sb.path("ready1"), sb.path("ready2"));
    // The foreground command starts its daemons, waits for the test, and ends.
    let fg_cmd = format!(
        "{}\nwhile [ ! -e {} ]; do sleep 0.05; done; echo launched",
        fg.daemons().replace("; echo done", " & wait_for_me=1"),
        r1.display()
    );
    let script = sb.script(&json!({"turns": [
        {"tool_calls": [
            background(&bg.daemons()),
            {"name": "exec_command", "arguments": {"description": "fg", "cmd": fg_cmd,
              "yield_time_ms": 60000}}]},
        {"tool_calls": [
            {"name": "kill_command", "arguments": {"process_id": "{{output:0:(proc-[0-9a-f]{8})}}"}},
            wait_for_file(&r2)]},
        {"text": "done"}
    ]}));
    let mut run = Running::spawn(sb.run_command(&["--script", s(&script), "go"]));
    fg.wait_all_up();
    bg.wait_all_up();
    std::fs::write(&r1, "").expect("release");
    // The foreground command ended: its daemons die; kill_command kills the other tree.
    fg.wait_all_gone("the end of a foreground command");
    bg.wait_all_gone("kill_command");
    assert!(!run.exited(), "rookery is still running the task");
    std::fs::write(&r2, "").expect("release");
    let out = run.wait(Duration::from_secs(60));
    out.expect_code(0);
    let records = read_records(&sb.trace());
    let killed = support::output_of(&records, "call_2")["output"]
        .as_str()
        .unwrap_or("")
        .to_string();
    assert!(killed.contains("proc-"), "{killed}");
}

fn serve_script(m: &Markers) -> Value {
    json!({"turns": [
        {"tool_calls": [background(&m.daemons())]},
        {"text": "started"}
    ]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_serve_session_takes_its_processes_along() {
    let m = Markers::new("serve-delete");
    let server = harness::Server::start(&serve_script(&m));
    let id = server.create(None).await;
    let after = server.task(&id, "start daemons").await;
    server.events_until_task_end(&id, after).await;
    tokio::task::spawn_blocking({
        let m = Markers {
            base: m.base.clone(),
            sleep: m.sleep.clone(),
        };
        move || m.wait_all_up()
    })
    .await
    .expect("wait");
    // The double-forked daemon's parent is gone: it was re-parented to rookery (subreaper).
    let pid = server.pid().as_raw();
    let orphan = m
        .live()
        .into_iter()
        .find(|(_, c)| c.starts_with(&format!("{}-dfork", m.base)))
        .map(|(p, _)| p)
        .expect("the double-forked daemon");
    let deadline = Instant::now() + WAIT;
    while parent_of(orphan) != Some(pid) {
        // Its subshell exits right after the fork; until then it is the parent.
        assert!(Instant::now() < deadline, "orphans come back to rookery");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (status, body) = server
        .call("DELETE", &format!("/v1/sessions/{id}"), None)
        .await;
    assert_eq!(status.as_u16(), 204, "{body}");
    tokio::task::spawn_blocking(move || m.wait_all_gone("DELETE of the session"))
        .await
        .expect("wait");
    // The server itself lives on, and reaped the orphans that came back to it (subreaper):
    // no zombie children are left behind.
    let (status, _) = server.call("GET", "/healthz", None).await;
    assert_eq!(status.as_u16(), 200);
    tokio::task::spawn_blocking(move || {
        let deadline = Instant::now() + WAIT;
        loop {
            let zombies = zombie_children(pid);
            if zombies.is_empty() {
                return;
            }
            assert!(Instant::now() < deadline, "unreaped children {zombies:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
    })
    .await
    .expect("wait");
}

fn parent_of(pid: i32) -> Option<i32> {
    let t = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    t[t.rfind(')')? + 1..]
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// Zombie children of `parent`.
fn zombie_children(parent: i32) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|t| {
                let rest = t.rfind(')').map_or("", |i| &t[i + 1..]);
                let mut f = rest.split_whitespace();
                let state = f.next().unwrap_or("");
                let ppid = f.next().and_then(|p| p.parse::<i32>().ok());
                state == "Z" && ppid == Some(parent)
            })
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_of_serve_takes_every_process_along() {
    let m = Markers::new("serve-term");
    let mut server = harness::Server::start(&serve_script(&m));
    let id = server.create(None).await;
    let after = server.task(&id, "start daemons").await;
    server.events_until_task_end(&id, after).await;
    let up = Markers {
        base: m.base.clone(),
        sleep: m.sleep.clone(),
    };
    tokio::task::spawn_blocking(move || up.wait_all_up())
        .await
        .expect("wait");
    nix::sys::signal::kill(server.pid(), nix::sys::signal::Signal::SIGTERM).expect("SIGTERM");
    let deadline = Instant::now() + WAIT;
    let status = loop {
        if let Some(st) = server.child.try_wait().expect("try_wait") {
            break st;
        }
        assert!(Instant::now() < deadline, "serve did not exit on SIGTERM");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(status.code(), Some(0), "{}", server.stderr());
    tokio::task::spawn_blocking(move || m.wait_all_gone("SIGTERM of serve"))
        .await
        .expect("wait");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eviction_kills_the_detached_processes_of_a_command() {
    let mut h = lib_support::harness_with(1).await;
    let n = std::process::id();
    let daemon = format!("rk-evict-setsid-{n}");
    let orphan = format!("rk-evict-dfork-{n}");
    let cmd = format!(
        "setsid bash -c 'exec -a {daemon} sleep 300' & \
         (setsid bash -c 'exec -a {orphan} sleep 300' </dev/null >/dev/null 2>&1 &); sleep 300"
    );
    let first = lib_support::start_bg(&h, &cmd).await;
    lib_support::eventually(WAIT, "both daemons started", || {
        lib_support::live_with_cmdline(&[&daemon, "300"]).len() == 1
            && lib_support::live_with_cmdline(&[&orphan, "300"]).len() == 1
    })
    .await;
    // A second command in a registry of one evicts the first, detached members included.
    let _second = lib_support::start_bg(&h, "sleep 301").await;
    match h.next_event().await {
        rookery::actors::command_supervisor::CommandEvent::Evicted { process_id, status } => {
            assert_eq!(
                (process_id.as_str(), status.as_str()),
                (first.as_str(), "running")
            );
        }
        other => panic!("unexpected {other:?}"),
    }
    lib_support::eventually(WAIT, "the evicted command's daemons are gone", || {
        lib_support::live_with_cmdline(&[&daemon, "300"]).is_empty()
            && lib_support::live_with_cmdline(&[&orphan, "300"]).is_empty()
    })
    .await;
    h.handle.shutdown().await;
}

/// A double-forked daemon is re-parented to rookery (a subreaper): when the end of its
/// foreground command has it killed, rookery reaps it too, so not even a zombie is left while
/// rookery runs on (it finds such orphans among its main thread's children).
#[test]
fn a_killed_orphan_is_reaped_while_rookery_runs() {
    let sb = Sandbox::new();
    let (pid_file, release) = (sb.path("orphan.pid"), sb.path("release"));
    let cmd = format!(
        "(setsid bash -c 'echo $$ > {}.tmp && mv {0}.tmp {0}; exec sleep 300' \
         </dev/null >/dev/null 2>&1 &); \
         while [ ! -e {0} ]; do sleep 0.05; done; echo started",
        pid_file.display()
    );
    let script = sb.script(&json!({"turns": [
        {"tool_calls": [{"name": "exec_command", "arguments": {"description": "orphan",
            "cmd": cmd, "yield_time_ms": 60000}}]},
        {"tool_calls": [wait_for_file(&release)]},
        {"text": "done"}
    ]}));
    let mut run = Running::spawn(sb.run_command(&["--script", s(&script), "go"]));
    let deadline = Instant::now() + WAIT;
    let pid: i32 = loop {
        if let Some(pid) = std::fs::read_to_string(&pid_file)
            .ok()
            .and_then(|t| t.trim().parse().ok())
        {
            break pid;
        }
        assert!(Instant::now() < deadline, "the orphan never started");
        std::thread::sleep(Duration::from_millis(20));
    };
    // Gone from /proc altogether: killed by the sweep and reaped by rookery, its new parent.
    let deadline = Instant::now() + WAIT;
    while Path::new(&format!("/proc/{pid}")).exists() {
        if Instant::now() >= deadline {
            let state = if zombie(pid) { "a zombie" } else { "alive" };
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
            panic!("the orphan {pid} is still {state}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!run.exited(), "rookery is still running the task");
    std::fs::write(&release, "").expect("release");
    run.wait(Duration::from_secs(60)).expect_code(0);
}
