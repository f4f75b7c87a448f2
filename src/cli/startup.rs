//! The `rookery` binary's process set-up, before anything else runs (one thread, no runtime,
//! no logging yet):
//!
//! - **The environment leaves `/proc/<pid>/environ`.** The kernel shows a process's *initial*
//!   environment there (and `/proc/<pid>/mem` holds it) for as long as the process lives,
//!   whatever it later unsets; a command could read the provider key or the serve token from
//!   rookery's. So rookery moves its environment into an anonymous memory file and re-executes
//!   itself (same pid, same arguments) with only what the loader and the allocator read before
//!   `main` (`LD_*`, `MALLOC_*`, `MIMALLOC_*`, `GLIBC_TUNABLES`) plus [`MARKER`] naming that
//!   file. The new image puts every moved variable back with `setenv` (its heap, not the
//!   initial environment), closes the file and drops the marker, so the library reads the
//!   environment as before. Its process name (`comm`) is set back to the one it had.
//! - **Non-dumpable** (`PR_SET_DUMPABLE` 0): a process of the same user without
//!   `CAP_SYS_PTRACE` can no longer read rookery's memory, descriptors or environment files.
//! - **SIGXFSZ is caught by a handler that does nothing**: a write past `RLIMIT_FSIZE` then
//!   fails with `EFBIG` (a write error like any other) instead of killing rookery. A handler,
//!   not `SIG_IGN`, so children get the default again at their `exec`.
//!
//! It must not parse arguments, log (it returns what went wrong, for `main` to log), or start
//! a thread: `setenv` is only sound while the process has one thread.

use std::ffi::{CString, OsStr, OsString};
use std::io::{self, Read, Seek, Write};
use std::os::fd::{FromRawFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};

/// The variable that names the memory file holding the moved environment (a descriptor
/// number); seen only by the re-executed image, which removes it.
pub const MARKER: &str = "ROOKERY_MOVED_ENV";

/// The memory file's name (shown as `/memfd:rookery-env` among the descriptors).
const MEMFD_NAME: &std::ffi::CStr = c"rookery-env";

/// The first bytes of the memory file, so a stray [`MARKER`] is not taken for one.
const MAGIC: &[u8] = b"rookery-moved-env-1\0";

/// Variables read before `main` (by the dynamic loader, glibc and the allocator), which must
/// stay in the environment the new image starts with.
const KEPT_PREFIXES: [&str; 4] = ["LD_", "MALLOC_", "MIMALLOC_", "GLIBC_TUNABLES"];

/// A step of the set-up that did not work; the process goes on without it.
#[derive(Debug, thiserror::Error)]
pub enum StartupError {
    /// The environment could not be moved out of `/proc/<pid>/environ`.
    #[error(
        "cannot move the environment out of /proc/{pid}/environ ({0}); commands of the same \
         user may read the initial environment there",
        pid = std::process::id()
    )]
    Move(#[source] io::Error),
    /// The moved environment could not be restored.
    #[error("cannot restore the moved environment ({0}); variables may be missing")]
    Restore(#[source] io::Error),
    /// The process could not be made non-dumpable.
    #[error("cannot make the process non-dumpable: {0}")]
    Dumpable(#[source] io::Error),
    /// SIGXFSZ could not be caught.
    #[error("cannot catch SIGXFSZ ({0}); a write past the file size limit ends rookery")]
    FileSizeSignal(#[source] io::Error),
}

/// Runs the set-up; returns what did not work (to be logged once logging is set up). On the
/// first start this normally does not return: the process re-executes itself.
///
/// # Safety
///
/// The process must have exactly one thread (call it first thing in `main`): it sets
/// environment variables.
pub unsafe fn harden() -> Vec<StartupError> {
    let mut problems = Vec::new();
    match std::env::var_os(MARKER) {
        // SAFETY: the caller guarantees one thread.
        Some(fd) => match unsafe { restore(&fd) } {
            Ok(()) => {}
            Err(e) => problems.push(StartupError::Restore(e)),
        },
        None => {
            if let Err(e) = move_and_reexec() {
                problems.push(StartupError::Move(e));
            }
        }
    }
    // SAFETY: prctl with integer arguments only.
    if unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) } == -1 {
        problems.push(StartupError::Dumpable(io::Error::last_os_error()));
    }
    if let Err(e) = catch_file_size_signal() {
        problems.push(StartupError::FileSizeSignal(e));
    }
    problems
}

extern "C" fn on_file_size_signal(_: libc::c_int) {}

/// SIGXFSZ to a handler that does nothing: the write that raised it returns `EFBIG`.
fn catch_file_size_signal() -> io::Result<()> {
    // SAFETY: a zeroed sigaction is valid; the handler is an `extern "C" fn` that touches
    // nothing (async-signal-safe); the mask is emptied before use.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_file_size_signal as extern "C" fn(libc::c_int) as usize;
        action.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut action.sa_mask);
        if libc::sigaction(libc::SIGXFSZ, &action, std::ptr::null_mut()) == -1 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

fn kept(name: &OsStr) -> bool {
    let name = name.as_bytes();
    KEPT_PREFIXES.iter().any(|p| name.starts_with(p.as_bytes()))
}

fn cstring(bytes: Vec<u8>) -> io::Result<CString> {
    CString::new(bytes).map_err(|_| io::Error::other("a NUL byte in an argument"))
}

/// Writes the environment (but the kept variables) into a memory file and re-executes the
/// binary without it. Returns only on failure (or when nothing is to be moved).
fn move_and_reexec() -> io::Result<()> {
    let (keep, moved): (Vec<_>, Vec<_>) = std::env::vars_os().partition(|(name, _)| kept(name));
    if moved.is_empty() {
        return Ok(());
    }
    let mut payload = MAGIC.to_vec();
    payload.extend_from_slice(&process_name());
    payload.push(0);
    for (name, value) in &moved {
        payload.extend_from_slice(name.as_bytes());
        payload.push(0);
        payload.extend_from_slice(value.as_bytes());
        payload.push(0);
    }
    // SAFETY: a valid C string and no flags: the descriptor survives the exec on purpose.
    let raw = unsafe { libc::memfd_create(MEMFD_NAME.as_ptr(), 0) };
    if raw == -1 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor owned by nobody else; closed on every failure below.
    let mut file = unsafe { std::fs::File::from_raw_fd(raw) };
    file.write_all(&payload)?;
    let mut envp: Vec<CString> = keep
        .into_iter()
        .map(|(name, value)| {
            let mut kv = name.into_vec();
            kv.push(b'=');
            kv.extend_from_slice(value.as_bytes());
            cstring(kv)
        })
        .collect::<io::Result<_>>()?;
    envp.push(cstring(format!("{MARKER}={raw}").into_bytes())?);
    let argv: Vec<CString> = std::env::args_os()
        .map(|a| cstring(a.into_vec()))
        .collect::<io::Result<_>>()?;
    let argv_ptrs: Vec<*const libc::c_char> = argv
        .iter()
        .map(|a| a.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect();
    let envp_ptrs: Vec<*const libc::c_char> = envp
        .iter()
        .map(|e| e.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect();
    // SAFETY: NUL-terminated arrays of C strings that outlive the call.
    unsafe {
        libc::execve(
            c"/proc/self/exe".as_ptr(),
            argv_ptrs.as_ptr(),
            envp_ptrs.as_ptr(),
        )
    };
    Err(io::Error::last_os_error())
}

/// The process name (`comm`): an exec through `/proc/self/exe` would rename the process `exe`.
fn process_name() -> Vec<u8> {
    let mut name = [0u8; 16];
    // SAFETY: PR_GET_NAME writes at most 16 bytes, NUL included, into the buffer.
    if unsafe { libc::prctl(libc::PR_GET_NAME, name.as_mut_ptr(), 0, 0, 0) } == -1 {
        return Vec::new();
    }
    name.iter().take_while(|b| **b != 0).copied().collect()
}

/// Puts the moved variables back (see the module's header).
///
/// # Safety
///
/// The process must have one thread.
unsafe fn restore(marker: &OsStr) -> io::Result<()> {
    // SAFETY: one thread (the caller's promise).
    unsafe { std::env::remove_var(MARKER) };
    let fd: RawFd = marker
        .to_str()
        .and_then(|s| s.parse().ok())
        .filter(|fd| *fd > 2)
        .ok_or_else(|| io::Error::other(format!("{MARKER} names no descriptor")))?;
    let link = std::fs::read_link(format!("/proc/self/fd/{fd}"))?;
    let expected = format!("/memfd:{}", MEMFD_NAME.to_string_lossy());
    if !link.as_os_str().as_bytes().starts_with(expected.as_bytes()) {
        return Err(io::Error::other(format!(
            "{MARKER} names a descriptor that is not rookery's"
        )));
    }
    // SAFETY: the descriptor is the memory file the previous image left us (checked above);
    // nothing else owns it, and it is closed when `file` drops.
    let mut file = unsafe { std::fs::File::from_raw_fd(fd) };
    // The previous image left the offset at the end of what it wrote.
    file.rewind()?;
    let mut payload = Vec::new();
    file.read_to_end(&mut payload)?;
    drop(file);
    let rest = payload
        .strip_prefix(MAGIC)
        .ok_or_else(|| io::Error::other("the moved environment is not rookery's"))?;
    let mut fields = rest.split(|b| *b == 0);
    if let Some(name) = fields.next()
        && !name.is_empty()
        && let Ok(name) = CString::new(name)
    {
        // SAFETY: PR_SET_NAME reads a NUL-terminated string (cut to 15 bytes by the kernel).
        unsafe { libc::prctl(libc::PR_SET_NAME, name.as_ptr(), 0, 0, 0) };
    }
    while let (Some(name), Some(value)) = (fields.next(), fields.next()) {
        if name.is_empty() || name.contains(&b'=') {
            continue;
        }
        let name = OsString::from_vec(name.to_vec());
        let value = OsStr::from_bytes(value);
        // SAFETY: one thread (the caller's promise).
        unsafe { std::env::set_var(&name, value) };
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_what_is_read_before_main_is_kept() {
        for name in [
            "LD_PRELOAD",
            "MIMALLOC_ARENA_EAGER_COMMIT",
            "GLIBC_TUNABLES",
        ] {
            assert!(kept(OsStr::new(name)), "{name}");
        }
        for name in ["OPENAI_API_KEY", "PATH", "HOME", "MY_TOKEN", "ld_preload"] {
            assert!(!kept(OsStr::new(name)), "{name}");
        }
    }
}
