//! One owner per session: an exclusive, non-blocking `flock(2)` on the session's trace file,
//! taken by the process that opens the session and held on the trace writer's descriptor for
//! as long as that writer lives (the kernel drops it with the process, `kill -9` included).
//!
//! This module only takes locks and names their holder (from `/proc/locks`); it never reads or
//! writes a trace's content.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;

/// Why a trace could not be locked.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another open file description holds the lock (another process, as a rule).
    #[error("the trace is locked by {}", holder_text(*.pid))]
    Held {
        /// The holder's process id, when the system reports it.
        pid: Option<u32>,
    },
    /// The lock call failed for another reason.
    #[error("cannot lock the trace: {0}")]
    Io(#[from] io::Error),
}

fn holder_text(pid: Option<u32>) -> String {
    match pid {
        Some(p) => format!("pid {p}"),
        None => "an unknown process".to_string(),
    }
}

/// Takes an exclusive non-blocking `flock` on `file`. Released by [`unlock`] or when the last
/// descriptor of this open file description is closed.
pub fn lock_exclusive(file: &File) -> Result<(), LockError> {
    loop {
        // SAFETY: flock on a descriptor this `File` owns; no memory is passed.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc == 0 {
            return Ok(());
        }
        let err = io::Error::last_os_error();
        match err.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EWOULDBLOCK) => {
                return Err(LockError::Held {
                    pid: holder_pid(file),
                });
            }
            _ => return Err(LockError::Io(err)),
        }
    }
}

/// Releases the lock early (the descriptor stays open).
pub fn unlock(file: &File) {
    // SAFETY: as in `lock_exclusive`.
    let _ = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_UN) };
}

/// The pid `/proc/locks` names for the `FLOCK` lock on `file`'s inode, if it can be found.
pub fn holder_pid(file: &File) -> Option<u32> {
    let meta = file.metadata().ok()?;
    let text = std::fs::read_to_string("/proc/locks").ok()?;
    holder_in(&text, meta.dev(), meta.ino())
}

/// Parses `/proc/locks` lines (`1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF`): the pid of a
/// `FLOCK` on `ino`, preferring an entry whose device also matches (overlay filesystems report
/// another device than `stat`).
fn holder_in(text: &str, dev: u64, ino: u64) -> Option<u32> {
    let major = libc::major(dev) as u64;
    let minor = libc::minor(dev) as u64;
    let mut by_inode = None;
    for line in text.lines() {
        let mut fields = line.split_whitespace().skip(1);
        let (Some(kind), _, _, Some(pid), Some(id)) = (
            fields.next(),
            fields.next(),
            fields.next(),
            fields.next(),
            fields.next(),
        ) else {
            continue;
        };
        if kind != "FLOCK" {
            continue;
        }
        let mut parts = id.split(':');
        let (Some(ma), Some(mi), Some(inode)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        if inode.parse::<u64>().ok() != Some(ino) {
            continue;
        }
        let Ok(pid) = pid.parse::<u32>() else {
            continue;
        };
        let same_dev = u64::from_str_radix(ma, 16).ok() == Some(major)
            && u64::from_str_radix(mi, 16).ok() == Some(minor);
        if same_dev {
            return Some(pid);
        }
        by_inode.get_or_insert(pid);
    }
    by_inode
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_description_is_refused_and_names_this_process() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        let a = File::create(&path).unwrap();
        lock_exclusive(&a).unwrap();
        let b = File::open(&path).unwrap();
        match lock_exclusive(&b) {
            Err(LockError::Held { pid }) => assert_eq!(pid, Some(std::process::id())),
            other => panic!("expected Held, got {other:?}"),
        }
        unlock(&a);
        lock_exclusive(&b).unwrap();
        drop(b);
        lock_exclusive(&a).unwrap();
    }

    #[test]
    fn proc_locks_lines_parse() {
        let dev = libc::makedev(8, 1);
        let text = "1: POSIX  ADVISORY  WRITE 11 08:01:77 0 EOF\n\
                    2: FLOCK  ADVISORY  WRITE 22 00:2f:77 0 EOF\n\
                    3: FLOCK  ADVISORY  WRITE 33 08:01:77 0 EOF\n\
                    garbage\n";
        assert_eq!(holder_in(text, dev, 77), Some(33));
        assert_eq!(holder_in(text, libc::makedev(9, 9), 77), Some(22));
        assert_eq!(holder_in(text, dev, 78), None);
    }
}
