//! The child side of a session's namespaces: the first process of a fresh user + PID + mount
//! namespace maps its own uid/gid to themselves, mounts a `/proc` of its PID namespace, and
//! hides each `deny_read` path (an empty read-only tmpfs over a directory, `/dev/null` over a
//! file). Landlock is allow-only, so this is what makes a hole inside a readable tree exact.
//!
//! Everything here runs between clone and exec: raw system calls on strings prepared by
//! [`NsSetup::new`], no allocation, no locks. It creates no namespace itself (the process layer
//! clones the session's keeper into them, or `Confinement::apply_in_child` unshares).

use std::ffi::{CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use super::confinement::{ChildFailure, step};
use super::{SandboxError, sys};

const SETGROUPS: &CStr = c"/proc/self/setgroups";
const UID_MAP: &CStr = c"/proc/self/uid_map";
const GID_MAP: &CStr = c"/proc/self/gid_map";
const PROC: &CStr = c"/proc";
const DEV_NULL: &CStr = c"/dev/null";
const TMPFS: &CStr = c"tmpfs";
/// Processes a reader may not inspect (`ptrace` read access, which Landlock refuses towards
/// anything outside its sandbox, the namespace's init included) are not even listed.
const PROC_OPTS: &CStr = c"hidepid=ptraceable";
/// An empty directory nobody may list, read-only.
const MASK_OPTS: &CStr = c"mode=000,size=4k";

/// What the first process of the namespaces sets up (built once per session).
#[derive(Debug)]
pub(super) struct NsSetup {
    uid_map: Vec<u8>,
    gid_map: Vec<u8>,
    deny: Vec<CString>,
}

impl NsSetup {
    /// Maps the caller's effective uid/gid to themselves; hides `deny`.
    pub(super) fn new(deny: &[PathBuf]) -> Result<Self, SandboxError> {
        // SAFETY: geteuid/getegid have no preconditions.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        let mut paths = Vec::with_capacity(deny.len());
        for p in deny {
            let c = CString::new(p.as_os_str().as_bytes()).map_err(|e| SandboxError::Path {
                path: p.clone(),
                source: std::io::Error::new(std::io::ErrorKind::InvalidInput, e),
            })?;
            paths.push(c);
        }
        Ok(NsSetup {
            uid_map: format!("{uid} {uid} 1\n").into_bytes(),
            gid_map: format!("{gid} {gid} 1\n").into_bytes(),
            deny: paths,
        })
    }

    /// In the first process of a new user + mount namespace (and PID namespace when
    /// `mount_proc`): the id maps, a fresh `/proc`, the masks over the denied paths. A denied
    /// path that does not exist (now) is skipped; any other failure is returned. Raw system
    /// calls only (see `sys.rs`).
    pub(super) fn enter(&self, mount_proc: bool) -> Result<(), ChildFailure> {
        write_all(SETGROUPS, b"deny", step::SETGROUPS)?;
        write_all(UID_MAP, &self.uid_map, step::UID_MAP)?;
        write_all(GID_MAP, &self.gid_map, step::GID_MAP)?;
        if mount_proc {
            let flags = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
            mount(c"proc", PROC, Some(c"proc"), flags, Some(PROC_OPTS)).map_err(|errno| {
                ChildFailure {
                    step: step::MOUNT_PROC,
                    errno,
                }
            })?;
        }
        for path in &self.deny {
            mask(path)?;
        }
        Ok(())
    }
}

fn mount(
    source: &CStr,
    target: &CStr,
    fstype: Option<&CStr>,
    flags: libc::c_ulong,
    data: Option<&CStr>,
) -> Result<(), i32> {
    let ptr = |c: Option<&CStr>| c.map_or(0, |c| c.as_ptr() as usize);
    sys::check(sys::call(
        libc::SYS_mount,
        [
            source.as_ptr() as usize,
            target.as_ptr() as usize,
            ptr(fstype),
            flags as usize,
            ptr(data),
            0,
        ],
    ))
    .map(drop)
}

/// Hides one path: an empty read-only tmpfs over a directory, `/dev/null` over anything else.
fn mask(path: &CStr) -> Result<(), ChildFailure> {
    let flags = libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
    match mount(TMPFS, path, Some(TMPFS), flags, Some(MASK_OPTS)) {
        Ok(()) | Err(libc::ENOENT) => Ok(()),
        Err(libc::ENOTDIR) => {
            mount(DEV_NULL, path, None, libc::MS_BIND, None).map_err(|errno| ChildFailure {
                step: step::MASK_FILE,
                errno,
            })
        }
        Err(errno) => Err(ChildFailure {
            step: step::MASK_DIR,
            errno,
        }),
    }
}

/// Writes `data` to `path` in one `write` (the id map files take a whole map at once).
fn write_all(path: &CStr, data: &[u8], what: u32) -> Result<(), ChildFailure> {
    let failed = |errno| ChildFailure { step: what, errno };
    let fd = sys::check(sys::call(
        libc::SYS_openat,
        [
            libc::AT_FDCWD as isize as usize,
            path.as_ptr() as usize,
            (libc::O_WRONLY | libc::O_CLOEXEC) as usize,
            0,
            0,
            0,
        ],
    ))
    .map_err(failed)?;
    let n = sys::call(
        libc::SYS_write,
        [fd as usize, data.as_ptr() as usize, data.len(), 0, 0, 0],
    );
    sys::call(libc::SYS_close, [fd as usize, 0, 0, 0, 0, 0]);
    match sys::check(n) {
        Ok(n) if n as usize == data.len() => Ok(()),
        Ok(_) => Err(failed(libc::EIO)),
        Err(errno) => Err(failed(errno)),
    }
}
