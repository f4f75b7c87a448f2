//! Linux: starting a command inside its session's sandbox. The parent clones (without sharing
//! memory) the first process of fresh user + PID + mount namespaces; that process sets the
//! namespaces up (`Confinement::enter_namespaces`) and becomes their init: it starts the command
//! with a vfork-style clone (the command's own session and process group; stdio, the
//! controlling terminal, the working directory, then `Confinement::restrict`, then `execve`),
//! forwards the signals rookery sends to its group to the command's group, reaps what the
//! command leaves (they are re-parented to it), and when the command exits writes its wait
//! status to the report pipe and exits, which kills whatever is left in the namespace (`&`
//! children do not outlive a call anyway; see `docs/tools.md`). A command killed with SIGKILL
//! from outside takes the init with it.
//!
//! The report pipe first says whether the start worked: the step that failed and its errno, so
//! the spawn fails with what went wrong and nothing runs unconfined. Children here make raw
//! system calls only (no allocation, no lock): the parent has other threads. The unsandboxed
//! path (`spawn_raw.rs`) does none of this.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::sync::atomic::{AtomicI32, Ordering};

use super::spawn_raw::{above_stdio, default_dispositions};
use crate::sandbox::{ChildFailure, Confinement};

/// Stack of each child (the init and the command before its exec run only a few calls).
const CHILD_STACK: usize = 64 * 1024;

/// Steps of the process side (the sandbox's own are below 100, see `sandbox::step`).
mod step {
    pub(super) const DUP2: u32 = 101;
    pub(super) const SETSID: u32 = 102;
    pub(super) const CTTY: u32 = 103;
    pub(super) const PARENT_DEATH: u32 = 104;
    pub(super) const CHDIR: u32 = 105;
    pub(super) const EXEC: u32 = 106;
    pub(super) const CLONE: u32 = 107;
    pub(super) const INIT_GONE: u32 = 108;
}

/// The report's code for "the command started".
const STARTED: u32 = 0;
/// The report's code for "the command exited; the value is its wait status".
const EXITED: u32 = u32::MAX;

/// Signals rookery sends to a command's group, passed on by the init to the command's own
/// group (a PID namespace's init gets none it has no handler for).
const FORWARDED: [libc::c_int; 13] = [
    libc::SIGHUP,
    libc::SIGINT,
    libc::SIGQUIT,
    libc::SIGTERM,
    libc::SIGUSR1,
    libc::SIGUSR2,
    libc::SIGALRM,
    libc::SIGCONT,
    libc::SIGWINCH,
    libc::SIGTSTP,
    libc::SIGTTIN,
    libc::SIGTTOU,
    libc::SIGPIPE,
];

/// In the init (a copy of our memory): the command's process group, the target of forwarding.
static COMMAND_PGID: AtomicI32 = AtomicI32::new(0);

/// A failed sandboxed start: which step, the OS error, and whether the step was the
/// sandbox's (namespaces, Landlock, seccomp, capabilities) or an ordinary one (exec, chdir).
#[derive(Debug)]
pub struct ConfinedError {
    pub step: &'static str,
    pub source: io::Error,
    pub sandbox: bool,
}

impl ConfinedError {
    fn new(code: u32, errno: i32) -> Self {
        let (step, sandbox) = match code {
            step::DUP2 => ("place stdio", false),
            step::SETSID => ("start a new session", false),
            step::CTTY => ("take the terminal", false),
            step::PARENT_DEATH => ("the spawning thread is gone", true),
            step::CHDIR => ("enter the working directory", false),
            step::EXEC => ("execute bash", false),
            step::CLONE => ("start the command inside the namespaces", true),
            step::INIT_GONE => ("the sandbox's init exited before the command started", true),
            other => (crate::sandbox::step::name(other), true),
        };
        ConfinedError {
            step,
            source: io::Error::from_raw_os_error(errno),
            sandbox,
        }
    }
}

/// What the children need, prepared by the parent. The init gets a copy (its own memory);
/// the command shares the init's memory until it execs.
#[repr(C)]
struct InitArgs {
    program: *const libc::c_char,
    argv: *const *const libc::c_char,
    envp: *const *const libc::c_char,
    cwd: *const libc::c_char,
    stdio: [libc::c_int; 3],
    tty: bool,
    conf: *const Confinement,
    /// Write end of the report pipe.
    report: libc::c_int,
    /// A pidfd of rookery, readable once it has exited.
    parent: libc::c_int,
    /// Top of the command's stack.
    exec_stack: *mut libc::c_void,
    /// Set by the command when a step failed (it then exits 127).
    failure: ChildFailure,
}

fn errno() -> libc::c_int {
    io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EINVAL)
}

/// Writes one 8-byte record to the report pipe (one `write` of at most `PIPE_BUF`: atomic).
fn report(fd: libc::c_int, code: u32, value: i32) {
    let mut rec = [0u8; 8];
    rec[..4].copy_from_slice(&code.to_ne_bytes());
    rec[4..].copy_from_slice(&value.to_ne_bytes());
    // SAFETY: a valid 8-byte buffer.
    unsafe { libc::write(fd, rec.as_ptr().cast(), rec.len()) };
}

/// Init side: reports the failure and exits.
fn fail(a: &InitArgs, code: u32, errno: i32) -> ! {
    report(a.report, code, errno);
    // SAFETY: ends this child without running any handler of the parent.
    unsafe { libc::_exit(127) }
}

extern "C" fn forward(sig: libc::c_int) {
    let pgid = COMMAND_PGID.load(Ordering::Relaxed);
    if pgid > 0 {
        // SAFETY: kill is async-signal-safe; errno is saved and restored around it so the
        // interrupted code sees its own.
        unsafe {
            let saved = *libc::__errno_location();
            libc::kill(-pgid, sig);
            *libc::__errno_location() = saved;
        }
    }
}

/// The first process of the namespaces (their init), in its own copy of our memory.
extern "C" fn init_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` points at this process's copy of the parent's `InitArgs`, whose pointers
    // (strings, the confinement, the command's stack) point into the same copy. Only raw
    // system calls run here.
    unsafe {
        let a = &mut *(arg as *mut InitArgs);
        default_dispositions();
        // Its own group, so rookery's group signals reach it (and only it) to be forwarded.
        if libc::setsid() == -1 {
            fail(a, step::SETSID, errno());
        }
        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) == -1 {
            fail(a, step::PARENT_DEATH, errno());
        }
        // Rookery may have died before prctl took effect (getppid says 0 across namespaces).
        let mut pfd = libc::pollfd {
            fd: a.parent,
            events: libc::POLLIN,
            revents: 0,
        };
        if libc::poll(&mut pfd, 1, 0) != 0 {
            fail(a, step::PARENT_DEATH, libc::ESRCH);
        }
        if let Err(f) = (*a.conf).enter_namespaces() {
            fail(a, f.step, f.errno);
        }
        // Its memory is a copy of rookery's: nobody may read it through /proc or ptrace.
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
        let pid = libc::clone(
            exec_main,
            a.exec_stack,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            arg,
        );
        if pid == -1 {
            fail(a, step::CLONE, errno());
        }
        let failure = std::ptr::read_volatile(&a.failure);
        if failure.errno != 0 {
            let mut status = 0;
            libc::waitpid(pid, &mut status, 0);
            fail(a, failure.step, failure.errno);
        }
        COMMAND_PGID.store(pid, Ordering::Relaxed);
        for sig in FORWARDED {
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = forward as extern "C" fn(libc::c_int) as libc::sighandler_t;
            act.sa_flags = libc::SA_RESTART;
            libc::sigfillset(&mut act.sa_mask);
            libc::sigaction(sig, &act, std::ptr::null_mut());
        }
        report(a.report, STARTED, 0);
        // Every other descriptor of rookery's was copied here: none may stay open (pipes of
        // other commands would never see their end).
        let keep = a.report as libc::c_uint;
        libc::syscall(
            libc::SYS_close_range,
            0 as libc::c_uint,
            keep - 1,
            0 as libc::c_uint,
        );
        libc::syscall(
            libc::SYS_close_range,
            keep + 1,
            libc::c_uint::MAX,
            0 as libc::c_uint,
        );
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
        loop {
            let mut status = 0;
            let r = libc::waitpid(-1, &mut status, 0);
            if r == pid {
                report(a.report, EXITED, status);
                libc::_exit(0);
            }
            if r == -1 && errno() != libc::EINTR {
                libc::_exit(127);
            }
        }
    }
}

/// The command, sharing the init's memory until it execs.
extern "C" fn exec_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the init's `InitArgs` (the init is suspended until this child has
    // exec'd or exited); only raw system calls run here.
    unsafe {
        let a = &mut *(arg as *mut InitArgs);
        let fail = |a: &mut InitArgs, step: u32, errno: i32| -> libc::c_int {
            a.failure = ChildFailure { step, errno };
            libc::_exit(127)
        };
        for (target, &fd) in a.stdio.iter().enumerate() {
            if libc::dup2(fd, target as libc::c_int) == -1 {
                return fail(a, step::DUP2, errno());
            }
        }
        if libc::setsid() == -1 {
            return fail(a, step::SETSID, errno());
        }
        if a.tty && libc::ioctl(0, libc::TIOCSCTTY as _, 0) == -1 {
            return fail(a, step::CTTY, errno());
        }
        if libc::chdir(a.cwd) == -1 {
            return fail(a, step::CHDIR, errno());
        }
        if let Err(f) = (*a.conf).restrict() {
            return fail(a, f.step, f.errno);
        }
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
        libc::execve(a.program, a.argv, a.envp);
        fail(a, step::EXEC, errno())
    }
}

/// Starts `program` confined by `conf` (see the module text); returns the init's pid (the
/// leader of the group rookery signals) and the report pipe the command's status comes
/// through ([`command_status`]).
pub fn spawn(
    program: &CString,
    argv: &[CString],
    envp: &[CString],
    cwd: &CString,
    stdio: [RawFd; 3],
    tty: bool,
    conf: &Confinement,
) -> Result<(libc::pid_t, OwnedFd), ConfinedError> {
    let os = |code: u32| {
        move |e: io::Error| ConfinedError::new(code, e.raw_os_error().unwrap_or(libc::EIO))
    };
    let mut owned = super::reaper::owned();
    let mut argv_p: Vec<*const libc::c_char> = argv.iter().map(|s| s.as_ptr()).collect();
    argv_p.push(std::ptr::null());
    let mut envp_p: Vec<*const libc::c_char> = envp.iter().map(|s| s.as_ptr()).collect();
    envp_p.push(std::ptr::null());
    let (rep_r, rep_w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
        .map_err(|e| ConfinedError::new(step::CLONE, e as i32))?;
    let rep_r = above_stdio(rep_r).map_err(os(step::CLONE))?;
    let rep_w = above_stdio(rep_w).map_err(os(step::CLONE))?;
    // SAFETY: pidfd_open has no memory arguments; a valid result is a descriptor we own.
    let raw = unsafe { libc::syscall(libc::SYS_pidfd_open, libc::getpid(), 0) };
    if raw < 0 {
        return Err(ConfinedError::new(step::PARENT_DEATH, errno()));
    }
    // SAFETY: `raw` is a fresh pidfd (close-on-exec) owned by nobody else.
    let parent = unsafe { OwnedFd::from_raw_fd(raw as RawFd) };
    // Left uninitialized: each child writes its frames before it reads them.
    let mut stacks = Box::<[u8]>::new_uninit_slice(2 * CHILD_STACK);
    let base = stacks.as_mut_ptr().cast::<u8>();
    let top = |end: usize| {
        // SAFETY: `end` is at most the buffer's length; aligned down to 16 bytes.
        let p = unsafe { base.add(end) };
        // SAFETY: stays inside the buffer (at most 15 bytes below `p`).
        unsafe { p.sub(p as usize % 16) }
    };
    let (init_top, exec_top) = (top(CHILD_STACK), top(2 * CHILD_STACK));
    let mut args = InitArgs {
        program: program.as_ptr(),
        argv: argv_p.as_ptr(),
        envp: envp_p.as_ptr(),
        cwd: cwd.as_ptr(),
        stdio,
        tty,
        conf,
        report: rep_w.as_raw_fd(),
        parent: parent.as_raw_fd(),
        exec_stack: exec_top.cast(),
        failure: ChildFailure { step: 0, errno: 0 },
    };
    // SAFETY: without CLONE_VM the child runs on its own copy of `stacks` and `args`; signals
    // are blocked around the clone so no handler of ours runs in the child before it resets
    // them.
    let pid = unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        let pid = libc::clone(
            init_main,
            init_top.cast(),
            conf.clone_flags() | libc::SIGCHLD,
            (&mut args as *mut InitArgs).cast(),
        );
        let clone_err = errno();
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        if pid == -1 {
            return Err(ConfinedError::new(step::CLONE, clone_err));
        }
        pid
    };
    drop((rep_w, parent, stacks));
    let reap = |pid: libc::pid_t| {
        let mut status = 0;
        // SAFETY: reaps our own child, which has reported a failure (or died).
        unsafe { libc::waitpid(pid, &mut status, 0) };
    };
    let (code, value) = match read_record(&rep_r) {
        Ok(Some(rec)) => rec,
        Ok(None) => (step::INIT_GONE, libc::ECHILD),
        Err(e) => (step::INIT_GONE, e.raw_os_error().unwrap_or(libc::EIO)),
    };
    if code != STARTED {
        reap(pid);
        return Err(ConfinedError::new(code, value));
    }
    // The status is read once the init has exited: never block on it.
    // SAFETY: fcntl on a descriptor we own.
    unsafe {
        let flags = libc::fcntl(rep_r.as_raw_fd(), libc::F_GETFL);
        libc::fcntl(rep_r.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK);
    }
    owned.insert(pid);
    Ok((pid, rep_r))
}

/// Reads one 8-byte record; `None` at the end of the pipe (or with nothing there yet on a
/// non-blocking pipe).
fn read_record(fd: &OwnedFd) -> io::Result<Option<(u32, i32)>> {
    let mut rec = [0u8; 8];
    let mut got = 0;
    while got < rec.len() {
        // SAFETY: reads into the unfilled tail of a local buffer.
        let n = unsafe {
            libc::read(
                fd.as_raw_fd(),
                rec[got..].as_mut_ptr().cast(),
                rec.len() - got,
            )
        };
        if n == 0 {
            return Ok(None);
        }
        if n < 0 {
            let e = io::Error::last_os_error();
            match e.kind() {
                io::ErrorKind::Interrupted => continue,
                io::ErrorKind::WouldBlock => return Ok(None),
                _ => return Err(e),
            }
        }
        got += n as usize;
    }
    let code = u32::from_ne_bytes([rec[0], rec[1], rec[2], rec[3]]);
    let value = i32::from_ne_bytes([rec[4], rec[5], rec[6], rec[7]]);
    Ok(Some((code, value)))
}

/// The command's own wait status, once its init has exited (`None`: the init was killed before
/// it could write it).
pub(super) fn command_status(report: &OwnedFd) -> Option<ExitStatus> {
    match read_record(report) {
        Ok(Some((EXITED, status))) => Some(ExitStatus::from_raw(status)),
        _ => None,
    }
}
