//! Process measurements for `rookery bench`: CPU time and peak RSS from `getrusage`, the current
//! RSS from `/proc/self/statm`, percentiles, trace file totals, the open-files limit, and the
//! spawn floors (`bash -lc true` spawned and waited for, with `HOME` pointing at an empty
//! directory so the login shell reads no user rc files).
//!
//! It knows nothing of sessions; every figure is read from the OS.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// CPU seconds and peak RSS of the process (`RUSAGE_SELF`) or of its reaped children.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Usage {
    /// User CPU seconds.
    pub user_s: f64,
    /// System CPU seconds.
    pub sys_s: f64,
    /// Peak resident set size in kB (Linux reports `ru_maxrss` in kB).
    pub max_rss_kb: u64,
}

impl Usage {
    /// User plus system CPU seconds.
    pub(crate) fn cpu_s(&self) -> f64 {
        self.user_s + self.sys_s
    }

    /// The user and system CPU seconds spent since `earlier` (the peak RSS is this one's).
    pub(crate) fn since(&self, earlier: &Usage) -> Usage {
        Usage {
            user_s: (self.user_s - earlier.user_s).max(0.0),
            sys_s: (self.sys_s - earlier.sys_s).max(0.0),
            max_rss_kb: self.max_rss_kb,
        }
    }

    /// CPU seconds spent since `earlier`.
    pub(crate) fn cpu_since(&self, earlier: &Usage) -> f64 {
        self.since(earlier).cpu_s()
    }
}

fn tv(t: libc::timeval) -> f64 {
    t.tv_sec as f64 + t.tv_usec as f64 / 1e6
}

fn rusage(who: libc::c_int) -> Usage {
    // SAFETY: `getrusage` only writes into the zeroed struct we pass.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid, writable `rusage`.
    if unsafe { libc::getrusage(who, &mut ru) } != 0 {
        return Usage::default();
    }
    Usage {
        user_s: tv(ru.ru_utime),
        sys_s: tv(ru.ru_stime),
        max_rss_kb: u64::try_from(ru.ru_maxrss).unwrap_or(0),
    }
}

/// This process.
pub(crate) fn self_usage() -> Usage {
    rusage(libc::RUSAGE_SELF)
}

/// The reaped children of this process (the spawned shells).
pub(crate) fn children_usage() -> Usage {
    rusage(libc::RUSAGE_CHILDREN)
}

/// CPU seconds of process `pid` and of the children it reaped (`utime + stime + cutime +
/// cstime` of `/proc/<pid>/stat`, in clock ticks); `None` when it cannot be read.
pub(crate) fn proc_cpu_with_children(pid: libc::pid_t) -> Option<f64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After the command name (in parentheses, maybe with spaces): fields 3.. of proc(5).
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime, stime, cutime, cstime are fields 14-17, i.e. 11-14 after the name.
    let mut ticks = 0u64;
    for f in fields.get(11..15)? {
        ticks += f.parse::<u64>().ok()?;
    }
    // SAFETY: `sysconf` has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    (hz > 0).then(|| ticks as f64 / hz as f64)
}

/// The resident set size right now, in kB (`None` where `/proc` is missing).
pub(crate) fn current_rss_kb() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = text.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: `sysconf` has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(pages * u64::try_from(page).ok()? / 1024)
}

/// Raises the soft open-files limit to the hard limit (each session holds its trace open).
pub(crate) fn raise_open_files_limit() {
    // SAFETY: get/setrlimit only read/write the struct we pass.
    unsafe {
        let mut lim: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            let _ = libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}

/// The `p`-th percentile (0..=100, nearest rank) of sorted values; 0 when empty.
pub(crate) fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Files and bytes under `dir`, recursively (0, 0 when it does not exist).
pub(crate) fn dir_totals(dir: &Path) -> (u64, u64) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return (0, 0);
    };
    let mut files = 0;
    let mut bytes = 0;
    for e in entries.flatten() {
        let Ok(meta) = e.metadata() else { continue };
        if meta.is_dir() {
            let (f, b) = dir_totals(&e.path());
            files += f;
            bytes += b;
        } else {
            files += 1;
            bytes += meta.len();
        }
    }
    (files, bytes)
}

/// Why a spawn floor could not be measured.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FloorError {
    /// bash could not be started.
    #[error("cannot run bash: {0}")]
    Bash(#[source] std::io::Error),
    /// `bash -lc true` did not succeed.
    #[error("bash -lc true ended with {0}")]
    Failed(std::process::ExitStatus),
}

/// One `bash -lc true`: spawn and wait.
async fn spawn_true(home: &Path, cwd: &Path) -> Result<(), FloorError> {
    let status = tokio::process::Command::new("bash")
        .arg("-lc")
        .arg("true")
        .current_dir(cwd)
        .env("HOME", home)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .await
        .map_err(FloorError::Bash)?;
    if status.success() {
        Ok(())
    } else {
        Err(FloorError::Failed(status))
    }
}

/// Wall time of `total` `bash -lc true` spawns run by `workers` concurrent workers.
pub(crate) async fn spawn_floor(
    total: usize,
    workers: usize,
    home: &Path,
    cwd: &Path,
) -> Result<Duration, FloorError> {
    let workers = workers.clamp(1, total.max(1));
    let start = Instant::now();
    let runs = (0..workers).map(|w| {
        // Worker w runs every spawn whose index is w modulo `workers`.
        let n = (w..total).step_by(workers).count();
        async move {
            for _ in 0..n {
                spawn_true(home, cwd).await?;
            }
            Ok::<(), FloorError>(())
        }
    });
    for r in futures::future::join_all(runs).await {
        r?;
    }
    Ok(start.elapsed())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_since_is_the_split_difference_never_negative() {
        let earlier = Usage {
            user_s: 1.0,
            sys_s: 2.0,
            max_rss_kb: 10,
        };
        let later = Usage {
            user_s: 1.5,
            sys_s: 1.75,
            max_rss_kb: 20,
        };
        let d = later.since(&earlier);
        assert_eq!((d.user_s, d.sys_s, d.max_rss_kb), (0.5, 0.0, 20));
        assert_eq!(later.cpu_since(&earlier), 0.5);
    }

    #[test]
    fn percentiles_by_nearest_rank() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&v, 50.0), 50);
        assert_eq!(percentile(&v, 99.0), 99);
        assert_eq!(percentile(&v, 100.0), 100);
        assert_eq!(percentile(&[7], 99.0), 7);
        assert_eq!(percentile(&[], 50.0), 0);
    }

    #[test]
    fn totals_count_nested_files() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("a/b")).unwrap();
        std::fs::write(dir.path().join("a/x"), "123").unwrap();
        std::fs::write(dir.path().join("a/b/y"), "45").unwrap();
        assert_eq!(dir_totals(dir.path()), (2, 5));
        assert_eq!(dir_totals(&dir.path().join("missing")), (0, 0));
    }

    #[tokio::test]
    async fn floor_runs_every_spawn() {
        let dir = tempfile::tempdir().unwrap();
        let took = spawn_floor(4, 2, dir.path(), dir.path()).await.unwrap();
        assert!(took > Duration::ZERO);
        assert!(self_usage().max_rss_kb > 0);
        assert!(current_rss_kb().unwrap_or(0) > 0);
    }
}
