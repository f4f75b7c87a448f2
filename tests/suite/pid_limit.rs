//! The orphan reaper of `rookery serve` at a pid limit it shares with its commands' processes
//! (a pids cgroup, as a fork bomb would leave it): when orphans die while not one more thread
//! can be made, their zombies are reaped all the same, nothing panics, and once the limit is
//! lifted the next command runs.

use crate::common::serve as harness;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::json;

/// How many orphans the command leaves.
const ORPHANS: usize = 40;

/// A pids cgroup of its own (v1 `pids` hierarchy or v2 with the `pids` controller); removed on
/// drop.
struct PidsCgroup {
    dir: PathBuf,
}

impl PidsCgroup {
    fn create(tag: &str) -> Option<PidsCgroup> {
        let roots = ["/sys/fs/cgroup/pids", "/sys/fs/cgroup"];
        let root = roots.iter().map(Path::new).find(|r| {
            r.join("cgroup.procs").exists()
                && (r.ends_with("pids")
                    || std::fs::read_to_string(r.join("cgroup.subtree_control"))
                        .is_ok_and(|c| c.split_whitespace().any(|c| c == "pids")))
        })?;
        let dir = root.join(format!("rookery-test-{tag}-{}", std::process::id()));
        std::fs::create_dir(&dir).ok()?;
        let cg = PidsCgroup { dir };
        cg.dir.join("pids.max").exists().then_some(cg)
    }

    fn add(&self, pid: u32) {
        std::fs::write(self.dir.join("cgroup.procs"), pid.to_string()).unwrap();
    }

    fn set_max(&self, max: &str) {
        std::fs::write(self.dir.join("pids.max"), max).unwrap();
    }

    fn current(&self) -> u64 {
        std::fs::read_to_string(self.dir.join("pids.current"))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    }
}

impl Drop for PidsCgroup {
    /// Kills what is left in the group (rookery's orphans after a failure, its guard) and
    /// removes the group once it is empty.
    fn drop(&mut self) {
        let _ = std::fs::write(self.dir.join("pids.max"), "max");
        let procs = self.dir.join("cgroup.procs");
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let left = std::fs::read_to_string(&procs).unwrap_or_default();
            if left.trim().is_empty() || Instant::now() > deadline {
                break;
            }
            for pid in left
                .split_whitespace()
                .filter_map(|p| p.parse::<i32>().ok())
            {
                // SAFETY: kill has no memory arguments; every process of the group is ours.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// `(pid, state, comm)` of every child of `parent`.
fn children(parent: u32) -> Vec<(i32, char, String)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|p| p.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let comm = stat[open + 1..close].to_string();
        let mut f = stat[close + 1..].split_whitespace();
        let state = f.next().and_then(|s| s.chars().next()).unwrap_or('?');
        let ppid: u32 = f.next().and_then(|p| p.parse().ok()).unwrap_or(0);
        if ppid == parent {
            out.push((pid, state, comm));
        }
    }
    out
}

/// Threads of `pid` named as tokio's (workers and blocking-pool threads alike).
fn tokio_threads(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.flatten()
                .filter(|t| {
                    std::fs::read_to_string(t.path().join("comm"))
                        .is_ok_and(|c| c.starts_with("tokio-r"))
                })
                .count()
        })
        .unwrap_or(0)
}

fn until(limit: Duration, what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !cond() {
        assert!(Instant::now() < deadline, "{what} within {limit:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orphans_dying_at_a_pid_limit_are_reaped_and_commands_go_on() {
    let Some(cg) = PidsCgroup::create("reap") else {
        panic!(
            "this test needs a pids cgroup of its own: run the tests as root on a kernel with \
             cgroups mounted (/sys/fs/cgroup with the pids controller, or /sys/fs/cgroup/pids)"
        );
    };
    // Orphans outside the command's group, session and cookie (the inner shell leaves them
    // before it forks): only the reaper ends them.
    let make = format!(
        "setsid -w env -u ROOKERY_CMD bash -c \
         'for i in $(seq 1 {ORPHANS}); do (sleep 300 > /dev/null 2>&1 &); done'; echo made"
    );
    let script = json!({"turns": [
        {"tool_calls": [{"name": "exec_command",
            "arguments": {"description": "orphans", "cmd": make}}]},
        {"text": "made them"},
        {"tool_calls": [{"name": "exec_command",
            "arguments": {"description": "after", "cmd": "echo still-running"}}]},
        {"text": "after"}]});
    let server = harness::Server::start(&script);
    let pid = server.pid().as_raw() as u32;
    cg.add(pid);
    let id = server.create(Some("allow-all")).await;
    let after = server.task(&id, "make orphans").await;
    server.events_until_task_end(&id, after).await;
    let sleeping = || {
        children(pid)
            .into_iter()
            .filter(|(_, state, comm)| comm == "sleep" && *state != 'Z')
            .map(|(p, _, _)| p)
            .collect::<Vec<_>>()
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while sleeping().len() != ORPHANS {
        assert!(
            Instant::now() < deadline,
            "{ORPHANS} orphans under rookery expected: {:?}",
            children(pid)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // No thread of tokio's blocking pool left (they end after 10 s idle): a reaper that needs
    // one has to start it.
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    until(Duration::from_secs(60), "an empty blocking pool", || {
        tokio_threads(pid) <= workers
    });
    // The pid budget used up: not one more process or thread.
    cg.set_max(&cg.current().to_string());
    for p in sleeping() {
        // SAFETY: kill has no memory arguments; `p` is one of the orphans found above.
        unsafe { libc::kill(p, libc::SIGKILL) };
    }
    until(
        Duration::from_secs(30),
        "no zombie left under rookery",
        || {
            children(pid)
                .iter()
                .all(|(_, state, comm)| !(comm == "sleep" && *state == 'Z'))
                && sleeping().is_empty()
        },
    );
    cg.set_max("max");
    let after = server.task(&id, "again").await;
    let events = server.events_until_task_end(&id, after).await;
    let ran = events.iter().any(|(_, v)| {
        v["payload"]["type"] == "tool_call_output"
            && v["payload"]["output"]
                .as_str()
                .is_some_and(|o| o.contains("still-running"))
    });
    assert!(ran, "{events:?}");
    let stderr = server.stderr();
    assert!(!stderr.contains("panic"), "{stderr}");
}
