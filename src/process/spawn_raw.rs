//! Linux: starting a command without copying the runtime's address space — `clone(CLONE_VM |
//! CLONE_VFORK)` (what `posix_spawn` does) with our own child-side steps (new session, optional
//! controlling terminal, parent-death signal, stdio, working directory), then `execve` — and
//! waiting for it through a pidfd.
//!
//! `fork` copies the page tables of the whole process and makes every later write fault, which
//! dominated the cost of a short command under load; a vfork-style child borrows the parent's
//! memory until `execve`. The child side makes raw system calls only (no allocation, no locks).
//! It knows nothing of bash or environments: `spawn.rs` builds the argv/envp.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;

use tokio::io::unix::AsyncFd;

/// Stack of the vfork child (it runs only the few calls of `child_main`).
const CHILD_STACK: usize = 64 * 1024;

/// What the child needs, prepared by the parent (pointers stay valid: the parent is suspended
/// until the child has exec'd or exited).
#[repr(C)]
struct ChildArgs {
    program: *const libc::c_char,
    argv: *const *const libc::c_char,
    envp: *const *const libc::c_char,
    cwd: *const libc::c_char,
    stdio: [libc::c_int; 3],
    tty: bool,
    /// Set the parent-death signal (SIGKILL when the spawning thread dies).
    parent_death: bool,
    parent: libc::pid_t,
    /// Set by the child when a step failed (it then exits 127).
    errno: libc::c_int,
}

fn errno() -> libc::c_int {
    io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EINVAL)
}

/// Runs in the child, on its own stack, sharing the parent's memory: raw calls only.
extern "C" fn child_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the `ChildArgs` the parent keeps alive across the clone; the calls below
    // are async-signal-safe system calls on descriptors and strings the parent prepared.
    unsafe {
        let a = &mut *(arg as *mut ChildArgs);
        default_dispositions();
        let fail = |a: &mut ChildArgs| -> libc::c_int {
            a.errno = errno();
            libc::_exit(127)
        };
        for (target, &fd) in a.stdio.iter().enumerate() {
            if libc::dup2(fd, target as libc::c_int) == -1 {
                return fail(a);
            }
        }
        if libc::setsid() == -1 {
            return fail(a);
        }
        if a.tty && libc::ioctl(0, libc::TIOCSCTTY as _, 0) == -1 {
            return fail(a);
        }
        if a.parent_death && libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) == -1 {
            return fail(a);
        }
        // The parent may have died before prctl took effect.
        if a.parent_death && libc::getppid() != a.parent {
            a.errno = libc::ESRCH;
            libc::_exit(127);
        }
        if libc::chdir(a.cwd) == -1 {
            return fail(a);
        }
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::pthread_sigmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
        libc::execve(a.program, a.argv, a.envp);
        fail(a)
    }
}

/// Child side: every signal disposition back to its default. Handlers of the parent must not
/// run in a child, and signals the parent ignores (a shell starting us in the background
/// ignores SIGINT/SIGQUIT, `nohup` SIGHUP) must reach the command. Raw calls only.
fn default_dispositions() {
    for sig in 1..libc::SIGRTMAX() {
        if sig == libc::SIGKILL || sig == libc::SIGSTOP {
            continue;
        }
        // SAFETY: sigaction with zeroed (valid) structs on the calling process only.
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, std::ptr::null(), &mut old) == 0
                && old.sa_sigaction != libc::SIG_DFL
            {
                let mut dfl: libc::sigaction = std::mem::zeroed();
                dfl.sa_sigaction = libc::SIG_DFL;
                libc::sigaction(sig, &dfl, std::ptr::null_mut());
            }
        }
    }
}

/// A descriptor number of at least 3 (so placing stdio in the child never clobbers another
/// source), close-on-exec.
pub fn above_stdio(fd: OwnedFd) -> io::Result<OwnedFd> {
    if fd.as_raw_fd() > 2 {
        return Ok(fd);
    }
    // SAFETY: F_DUPFD_CLOEXEC returns a new descriptor we then own.
    let new = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 3) };
    if new == -1 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `new` is a fresh descriptor owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(new) })
}

/// Starts `program` with `argv`/`envp` in `cwd`, stdio from `stdio` (descriptors of at least
/// 3), as the leader of a new session, with the parent-death signal; returns its pid.
pub fn spawn(
    program: &CString,
    argv: &[CString],
    envp: &[CString],
    cwd: &CString,
    stdio: [RawFd; 3],
    tty: bool,
) -> io::Result<libc::pid_t> {
    spawn_with(program, argv, envp, cwd, stdio, tty, true)
}

/// [`spawn`], choosing whether the child gets the parent-death signal (the guard process must
/// outlive us). The pid is recorded as ours (see `reaper.rs`) before anyone could reap it.
pub fn spawn_with(
    program: &CString,
    argv: &[CString],
    envp: &[CString],
    cwd: &CString,
    stdio: [RawFd; 3],
    tty: bool,
    parent_death: bool,
) -> io::Result<libc::pid_t> {
    // Not the owned lock: held across the clone, it would serialize every spawn.
    let starting = super::reaper::Starting::announce();
    let mut argv_p: Vec<*const libc::c_char> = argv.iter().map(|s| s.as_ptr()).collect();
    argv_p.push(std::ptr::null());
    let mut envp_p: Vec<*const libc::c_char> = envp.iter().map(|s| s.as_ptr()).collect();
    envp_p.push(std::ptr::null());
    let mut args = ChildArgs {
        program: program.as_ptr(),
        argv: argv_p.as_ptr(),
        envp: envp_p.as_ptr(),
        cwd: cwd.as_ptr(),
        stdio,
        tty,
        parent_death,
        // SAFETY: getpid has no preconditions.
        parent: unsafe { libc::getpid() },
        errno: 0,
    };
    // Left uninitialized: the child writes its frames before it reads them, and zeroing 64 KiB
    // per spawn was a visible part of a short command's cost.
    let mut stack = Box::<[u8]>::new_uninit_slice(CHILD_STACK);
    // SAFETY: the stack grows down from its 16-byte aligned top; `args`, `stack` and the
    // pointer arrays outlive the clone because CLONE_VFORK suspends this thread until the child
    // has exec'd or exited. Signals are blocked around the clone so no handler of ours runs on
    // the child's stack; the child resets the handlers and its mask before exec.
    let pid = unsafe {
        let top = stack.as_mut_ptr().cast::<u8>().add(CHILD_STACK);
        let top = top.sub(top as usize % 16);
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        let pid = libc::clone(
            child_main,
            top as *mut libc::c_void,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            &mut args as *mut ChildArgs as *mut libc::c_void,
        );
        let clone_err = errno();
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        if pid == -1 {
            return Err(io::Error::from_raw_os_error(clone_err));
        }
        pid
    };
    drop(stack);
    // SAFETY: reading the field the child wrote before it exited (it is gone or exec'd now).
    let child_errno = unsafe { std::ptr::read_volatile(&args.errno) };
    if child_errno != 0 {
        let mut status = 0;
        // SAFETY: reaps our own exited child.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        return Err(io::Error::from_raw_os_error(child_errno));
    }
    starting.record(pid);
    Ok(pid)
}

/// A spawned child, waited for through a pidfd (or a blocking thread without pidfd support),
/// or a sandboxed command, a child of its session's keeper, whose status comes through its
/// report socket (see `spawn_confined.rs`).
#[derive(Debug)]
pub struct ChildProc {
    pid: libc::pid_t,
    status: Option<ExitStatus>,
    /// A sandboxed command's report socket.
    report: Option<OwnedFd>,
}

impl ChildProc {
    /// The child with this pid (not yet waited for).
    pub fn new(pid: libc::pid_t) -> Self {
        ChildProc {
            pid,
            status: None,
            report: None,
        }
    }

    /// A sandboxed command (not our child), whose status comes through `report`.
    pub(crate) fn confined(pid: libc::pid_t, report: OwnedFd) -> Self {
        ChildProc {
            pid,
            status: None,
            report: Some(report),
        }
    }

    /// The pid, if it fits a `u32`.
    pub fn id(&self) -> Option<u32> {
        u32::try_from(self.pid).ok()
    }

    /// Waits for the child to exit and reaps it (only once; later calls repeat the status).
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        if let Some(s) = self.status {
            return Ok(s);
        }
        if let Some(report) = self.report.take() {
            let status = super::keeper_protocol::wait_status(report).await?;
            self.status = Some(status);
            return Ok(status);
        }
        let pid = self.pid;
        // SAFETY: pidfd_open has no memory arguments; a valid result is a descriptor we own.
        let raw = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        let status = if raw >= 0 {
            // SAFETY: `raw` is a fresh pidfd owned by nobody else.
            let fd = unsafe { OwnedFd::from_raw_fd(raw as RawFd) };
            // SAFETY: the `OwnedFd` reports the descriptor it owns, open until `afd` drops.
            let afd = unsafe { AsyncFd::register(fd) }?;
            // Readable once the process has exited.
            let _ = afd.readable().await?;
            reap(pid, true)?
        } else {
            tokio::task::spawn_blocking(move || reap(pid, false))
                .await
                .map_err(io::Error::other)??
        };
        self.status = Some(status);
        Ok(status)
    }
}

/// `waitpid` for `pid`, retried on EINTR. Without `exited`, first waits for the exit without
/// reaping (`WNOWAIT`), so the reap itself and the removal from the owned set happen together
/// under the set's lock (no new child can be given the pid in between).
pub(super) fn reap(pid: libc::pid_t, exited: bool) -> io::Result<ExitStatus> {
    if !exited {
        loop {
            // SAFETY: a zeroed siginfo is a valid out value; waits for our own child.
            let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
            // SAFETY: valid out pointer; WNOWAIT leaves the child waitable.
            let r = unsafe {
                libc::waitid(
                    libc::P_PID,
                    pid as libc::id_t,
                    &mut info,
                    libc::WEXITED | libc::WNOWAIT,
                )
            };
            if r == 0 {
                break;
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }
    let mut owned = super::reaper::owned();
    loop {
        let mut status = 0;
        // SAFETY: waits for our own child; `status` is a valid out pointer.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r == pid {
            owned.remove(&pid);
            return Ok(ExitStatus::from_raw(status));
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(s: &str) -> CString {
        CString::new(s).unwrap()
    }

    #[tokio::test]
    async fn runs_in_a_new_session_and_reports_the_exit() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let (r, w) = nix::unistd::pipe().unwrap();
        let (r, w) = (above_stdio(r).unwrap(), above_stdio(w).unwrap());
        let script = format!(
            "pwd > {}; ps -o sid= -p $$ | tr -d ' ' >> {}; exit 3",
            out.display(),
            out.display()
        );
        let argv = [c("sh"), c("-c"), c(&script)];
        let pid = spawn(
            &c("/bin/sh"),
            &argv,
            &[c("PATH=/usr/bin:/bin")],
            &c(dir.path().to_str().unwrap()),
            [r.as_raw_fd(), w.as_raw_fd(), w.as_raw_fd()],
            false,
        )
        .unwrap();
        let status = ChildProc::new(pid).wait().await.unwrap();
        assert_eq!(status.code(), Some(3));
        let text = std::fs::read_to_string(&out).unwrap();
        let mut lines = text.lines();
        assert_eq!(
            lines.next(),
            Some(dir.path().canonicalize().unwrap().to_str().unwrap())
        );
        // The leader of its own session: sid == pid.
        assert_eq!(lines.next(), Some(pid.to_string().as_str()));
    }

    #[tokio::test]
    async fn a_failed_step_is_an_error() {
        let argv = [c("true")];
        let err = spawn(
            &c("/bin/true"),
            &argv,
            &[],
            &c("/nonexistent/rookery-dir"),
            [0, 1, 2],
            false,
        )
        .unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENOENT));
        let err = spawn(
            &c("/nonexistent/bash"),
            &argv,
            &[],
            &c("/"),
            [0, 1, 2],
            false,
        )
        .unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENOENT));
    }
}
