//! What a finished command leaves behind, through a real `CommandSupervisor` and real `bash`
//! processes (HOME points at an empty directory): nothing. Its readers, its waiter and its timers
//! end with it, so the memory of a session that runs many short commands does not grow with the
//! number it ran.

use crate::common::commands as support;

use std::time::{Duration, Instant};

use rookery::message::StopReason;
use serde_json::json;
use support::*;

/// Waits (generously, for a loaded machine) until at most `limit` tasks are alive on this
/// runtime; the number alive when it stopped waiting.
async fn alive_tasks_within(limit: usize) -> usize {
    let metrics = tokio::runtime::Handle::current().metrics();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let alive = metrics.num_alive_tasks();
        if alive <= limit || Instant::now() > deadline {
            return alive;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The number of tasks alive once it holds still for 200 ms (at most 20 s of waiting).
async fn settled_tasks() -> usize {
    let metrics = tokio::runtime::Handle::current().metrics();
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut last = metrics.num_alive_tasks();
    loop {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let alive = metrics.num_alive_tasks();
        if alive == last || Instant::now() > deadline {
            return alive;
        }
        last = alive;
    }
}

/// Each foreground command waits for its output in a read window (60 s by default). The timer
/// of that window outlived a command that ended at once and kept the command actor's mailboxes
/// alive until it fired: about 6 kB per command, for a minute.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finished_foreground_commands_leave_no_task_behind() {
    let h = harness().await;
    // The first command starts what lives with the supervisor (the guard process and so on).
    let r = h.call("exec_command", json!({"cmd": "true"})).await;
    assert_eq!(r.stop, StopReason::Completed, "{}", r.output);
    let base = settled_tasks().await;
    for _ in 0..20 {
        let r = h.call("exec_command", json!({"cmd": "true"})).await;
        assert_eq!(r.stop, StopReason::Completed, "{}", r.output);
    }
    // Well before the 60 s windows would have ended.
    let alive = alive_tasks_within(base).await;
    assert!(
        alive <= base,
        "{alive} tasks alive after 20 finished commands, {base} before them"
    );
}
