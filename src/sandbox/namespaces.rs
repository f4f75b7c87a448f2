//! The child side of a session's namespaces: the first process of a fresh user + PID + mount
//! namespace maps its own uid/gid to themselves, mounts a `/proc` of its PID namespace, and
//! hides each `deny_read` path (an empty read-only tmpfs over a directory, `/dev/null` over a
//! file). Landlock is allow-only, so this is what makes a hole inside a readable tree exact.
//!
//! Everything here runs between clone and exec: raw system calls on strings prepared by
//! [`NsSetup::new`], no allocation, no locks. It creates no namespace itself (the process layer
//! clones into them, or `Confinement::apply_in_child` unshares).

use std::ffi::{CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use super::SandboxError;
use super::confinement::{ChildFailure, step};

const SETGROUPS: &CStr = c"/proc/self/setgroups";
const UID_MAP: &CStr = c"/proc/self/uid_map";
const GID_MAP: &CStr = c"/proc/self/gid_map";
const PROC: &CStr = c"/proc";
const DEV_NULL: &CStr = c"/dev/null";
const TMPFS: &CStr = c"tmpfs";
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
    /// path that does not exist (now) is skipped; any other failure is returned.
    pub(super) fn enter(&self, mount_proc: bool) -> Result<(), ChildFailure> {
        write_all(SETGROUPS, b"deny", step::SETGROUPS)?;
        write_all(UID_MAP, &self.uid_map, step::UID_MAP)?;
        write_all(GID_MAP, &self.gid_map, step::GID_MAP)?;
        if mount_proc {
            let flags = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
            // SAFETY: NUL-terminated constant strings; no data argument.
            let r = unsafe {
                libc::mount(
                    c"proc".as_ptr(),
                    PROC.as_ptr(),
                    c"proc".as_ptr(),
                    flags,
                    std::ptr::null(),
                )
            };
            if r == -1 {
                return Err(ChildFailure::last(step::MOUNT_PROC));
            }
        }
        for path in &self.deny {
            mask(path)?;
        }
        Ok(())
    }
}

/// Hides one path: an empty read-only tmpfs over a directory, `/dev/null` over anything else.
fn mask(path: &CStr) -> Result<(), ChildFailure> {
    let flags = libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
    // SAFETY: NUL-terminated strings prepared before the clone.
    let r = unsafe {
        libc::mount(
            TMPFS.as_ptr(),
            path.as_ptr(),
            TMPFS.as_ptr(),
            flags,
            MASK_OPTS.as_ptr().cast(),
        )
    };
    if r == 0 {
        return Ok(());
    }
    match last_errno() {
        libc::ENOENT => Ok(()),
        libc::ENOTDIR => {
            // SAFETY: as above; a bind mount takes no file system type nor data.
            let r = unsafe {
                libc::mount(
                    DEV_NULL.as_ptr(),
                    path.as_ptr(),
                    std::ptr::null(),
                    libc::MS_BIND,
                    std::ptr::null(),
                )
            };
            if r == -1 {
                return Err(ChildFailure::last(step::MASK_FILE));
            }
            Ok(())
        }
        errno => Err(ChildFailure {
            step: step::MASK_DIR,
            errno,
        }),
    }
}

/// Writes `data` to `path` in one `write` (the id map files take a whole map at once).
fn write_all(path: &CStr, data: &[u8], what: u32) -> Result<(), ChildFailure> {
    // SAFETY: a NUL-terminated path; the descriptor is closed below.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC) };
    if fd == -1 {
        return Err(ChildFailure::last(what));
    }
    // SAFETY: `data` is a valid buffer of its length.
    let n = unsafe { libc::write(fd, data.as_ptr().cast(), data.len()) };
    let failure = if n == data.len() as isize {
        None
    } else if n == -1 {
        Some(ChildFailure::last(what))
    } else {
        Some(ChildFailure {
            step: what,
            errno: libc::EIO,
        })
    };
    // SAFETY: closes the descriptor opened above.
    unsafe { libc::close(fd) };
    failure.map_or(Ok(()), Err)
}

pub(super) fn last_errno() -> libc::c_int {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EINVAL)
}
