//! Linux: starting a command inside its session's sandbox. The parent clones the first process
//! of fresh user + PID + mount namespaces, sharing its memory (`CLONE_VM`, as the unsandboxed
//! spawn does, so no page table is copied and rookery's pages never turn copy-on-write); that
//! process sets the namespaces up (`Confinement::enter_namespaces`) and becomes their init: it
//! starts the command with a vfork-style clone (the command's own session and process group;
//! stdio, the controlling terminal, the working directory, then `Confinement::restrict`, then
//! `execve`), forwards the signals rookery sends to its group to the command's group (through a
//! signalfd), reaps what the command leaves (they are re-parented to it), and when the command
//! exits writes its wait status to the report pipe and exits, which kills whatever is left in
//! the namespace (`&` children do not outlive a call anyway; see `docs/tools.md`). A command
//! killed with SIGKILL from outside takes the init with it.
//!
//! The report pipe first says whether the start worked: the step that failed and its errno, so the
//! spawn fails with what went wrong and nothing runs unconfined. The start is awaited on that pipe,
//! so the spawning thread runs other tasks meanwhile (a blocked runtime thread made every
//! concurrent spawn wait). What the children read of ours until the report is boxed (`Launch`); a
//! start dropped before its report kills the init and leaks the box. The init shares rookery's
//! memory and the spawning thread's TLS while that thread runs on: it makes only raw system calls,
//! except the libc `clone` of the command, which writes `errno` when it fails (it then fails
//! closed), and once it has reported the start it touches nothing but its own stack, which
//! [`InitStack`] keeps alive until the init is reaped. The sandboxed processes cannot reach that
//! memory: Landlock refuses them any `ptrace` or `/proc/<pid>/mem` access to the unsandboxed init,
//! and its `/proc` hides processes they may not inspect. The unsandboxed path (`spawn_raw.rs`) does
//! none of this.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::sync::Arc;

use tokio::io::unix::AsyncFd;

use super::spawn_raw::above_stdio;
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
    pub(super) const SIGNALFD: u32 = 109;
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

/// A failed sandboxed start: which step, the OS error, and whether the step was the
/// sandbox's (namespaces, Landlock, seccomp, capabilities) or an ordinary one (exec, chdir).
#[derive(Debug)]
pub struct ConfinedError {
    /// What the step did, as the error text names it.
    pub step: &'static str,
    /// The OS error it failed with.
    pub source: io::Error,
    /// Whether the step was the sandbox's own (not exec or chdir).
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
            step::SIGNALFD => ("receive the group's signals in the init", true),
            other => (crate::sandbox::step::name(other), true),
        };
        ConfinedError {
            step,
            source: io::Error::from_raw_os_error(errno),
            sandbox,
        }
    }
}

/// What the children need, prepared by the parent (who keeps it until the start is reported;
/// the init reads nothing of it afterwards).
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
    raw::write(fd, rec.as_ptr(), rec.len());
}

/// Init side: reports the failure and exits.
fn fail(a: &InitArgs, code: u32, errno: i32) -> ! {
    report(a.report, code, errno);
    raw::exit(127)
}

/// The kernel's signal set (`sigset_t` of the system calls: one bit per signal).
fn sigmask(sigs: &[libc::c_int]) -> u64 {
    sigs.iter().fold(0, |m, &s| m | 1u64 << (s - 1))
}

/// The first process of the namespaces (their init), sharing our memory.
extern "C" fn init_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the parent's boxed `InitArgs`, alive until the start is reported (the
    // parent awaits the report pipe meanwhile; a cancelled start leaks the box). Every call here
    // is a raw one (`raw`, `sandbox::sys`) except the clone of the command, whose errno may be
    // another thread's: it fails closed.
    unsafe {
        let a = &mut *(arg as *mut InitArgs);
        // Its own group, so rookery's group signals reach it (and only it) to be forwarded.
        if let Err(e) = raw::ok(libc::SYS_setsid, [0; 6]) {
            fail(a, step::SETSID, e);
        }
        let pdeath = [
            libc::PR_SET_PDEATHSIG as usize,
            libc::SIGKILL as usize,
            0,
            0,
            0,
            0,
        ];
        if let Err(e) = raw::ok(libc::SYS_prctl, pdeath) {
            fail(a, step::PARENT_DEATH, e);
        }
        // Rookery may have died before prctl took effect (getppid says 0 across namespaces).
        let mut pfd = libc::pollfd {
            fd: a.parent,
            events: libc::POLLIN,
            revents: 0,
        };
        let now = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        let polled = crate::sandbox::sys::call(
            libc::SYS_ppoll,
            [
                &mut pfd as *mut libc::pollfd as usize,
                1,
                &now as *const libc::timespec as usize,
                0,
                8,
                0,
            ],
        );
        if polled != 0 {
            fail(a, step::PARENT_DEATH, libc::ESRCH);
        }
        if let Err(f) = (*a.conf).enter_namespaces() {
            fail(a, f.step, f.errno);
        }
        // Every signal stays blocked here (the parent blocked them around the clone); the ones
        // to pass on and SIGCHLD are read from a signalfd. A blocked signal reaches a PID
        // namespace's init even without a handler.
        let mask = sigmask(&FORWARDED) | sigmask(&[libc::SIGCHLD]);
        let sfd = crate::sandbox::sys::call(
            libc::SYS_signalfd4,
            [
                -1isize as usize,
                &mask as *const u64 as usize,
                8,
                libc::SFD_CLOEXEC as usize,
                0,
                0,
            ],
        );
        if sfd < 0 {
            fail(a, step::SIGNALFD, (-sfd) as i32);
        }
        let sfd = sfd as libc::c_int;
        let pid = libc::clone(
            exec_main,
            a.exec_stack,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            arg,
        );
        if pid == -1 {
            fail(a, step::CLONE, libc::EAGAIN);
        }
        let failure = std::ptr::read_volatile(&a.failure);
        if failure.errno != 0 {
            let mut status = 0;
            raw::wait4(pid, &mut status, 0);
            fail(a, failure.step, failure.errno);
        }
        // Every other descriptor of rookery's was copied here: none may stay open (pipes of
        // other commands would never see their end).
        let report_fd = a.report;
        let (lo, hi) = (report_fd.min(sfd) as usize, report_fd.max(sfd) as usize);
        let close = |from: usize, to: usize| {
            if from <= to {
                let _ = raw::ok(libc::SYS_close_range, [from, to, 0, 0, 0, 0]);
            }
        };
        if lo > 0 {
            close(0, lo - 1);
        }
        close(lo + 1, hi - 1);
        close(hi + 1, libc::c_uint::MAX as usize);
        report(report_fd, STARTED, 0);
        // From here on the parent runs again: nothing but this stack.
        supervise(sfd, report_fd, pid)
    }
}

/// The init's loop after the start: forwards signals to the command's group, reaps, and reports
/// the command's status when it exits. Raw system calls only (see the module text).
fn supervise(sfd: libc::c_int, report_fd: libc::c_int, command: libc::pid_t) -> ! {
    loop {
        // SAFETY: a zeroed signalfd_siginfo is a valid buffer of its size.
        let mut info: libc::signalfd_siginfo = unsafe { std::mem::zeroed() };
        let size = std::mem::size_of::<libc::signalfd_siginfo>();
        let n = raw::read(sfd, (&mut info as *mut libc::signalfd_siginfo).cast(), size);
        if n == -(libc::EINTR as isize) {
            continue;
        }
        if n != size as isize {
            raw::exit(127);
        }
        let sig = info.ssi_signo as libc::c_int;
        if sig != libc::SIGCHLD {
            raw::kill(-command, sig);
            continue;
        }
        loop {
            let mut status: libc::c_int = 0;
            let r = raw::wait4(-1, &mut status, libc::WNOHANG);
            if r == command as isize {
                let mut rec = [0u8; 8];
                rec[..4].copy_from_slice(&EXITED.to_ne_bytes());
                rec[4..].copy_from_slice(&status.to_ne_bytes());
                raw::write(report_fd, rec.as_ptr(), rec.len());
                raw::exit(0);
            }
            if r <= 0 {
                break;
            }
        }
    }
}

/// The init's and the command's system calls, through `sandbox::sys` (they leave the shared
/// `errno` alone; each returns `-errno` on failure).
mod raw {
    use crate::sandbox::sys::call;

    pub(super) fn read(fd: libc::c_int, buf: *mut u8, len: usize) -> isize {
        call(libc::SYS_read, [fd as usize, buf as usize, len, 0, 0, 0])
    }

    pub(super) fn write(fd: libc::c_int, buf: *const u8, len: usize) -> isize {
        call(libc::SYS_write, [fd as usize, buf as usize, len, 0, 0, 0])
    }

    pub(super) fn kill(pid: libc::pid_t, sig: libc::c_int) -> isize {
        call(
            libc::SYS_kill,
            [pid as isize as usize, sig as usize, 0, 0, 0, 0],
        )
    }

    pub(super) fn wait4(pid: libc::pid_t, status: &mut libc::c_int, options: libc::c_int) -> isize {
        let status = status as *mut libc::c_int as usize;
        call(
            libc::SYS_wait4,
            [pid as isize as usize, status, options as usize, 0, 0, 0],
        )
    }

    /// A call that only fails or succeeds: `Err(errno)`.
    pub(super) fn ok(nr: libc::c_long, a: [usize; 6]) -> Result<(), i32> {
        crate::sandbox::sys::check(call(nr, a)).map(drop)
    }

    pub(super) fn exit(code: libc::c_int) -> ! {
        loop {
            call(libc::SYS_exit_group, [code as usize, 0, 0, 0, 0, 0]);
        }
    }
}

/// Every signal disposition back to its default (a handler of rookery's must not run in the
/// command before its exec; an ignored signal must reach the command). Raw calls only.
fn default_dispositions_raw() {
    /// The kernel's `struct sigaction` (x86_64 and aarch64).
    #[repr(C)]
    struct KernelSigaction {
        handler: usize,
        flags: libc::c_ulong,
        restorer: usize,
        mask: u64,
    }
    for sig in 1..=64usize {
        if sig == libc::SIGKILL as usize || sig == libc::SIGSTOP as usize {
            continue;
        }
        let mut old = KernelSigaction {
            handler: 0,
            flags: 0,
            restorer: 0,
            mask: 0,
        };
        let got = crate::sandbox::sys::call(
            libc::SYS_rt_sigaction,
            [sig, 0, &mut old as *mut KernelSigaction as usize, 8, 0, 0],
        );
        if got == 0 && old.handler != libc::SIG_DFL {
            let dfl = KernelSigaction {
                handler: libc::SIG_DFL,
                flags: 0,
                restorer: 0,
                mask: 0,
            };
            crate::sandbox::sys::call(
                libc::SYS_rt_sigaction,
                [sig, &dfl as *const KernelSigaction as usize, 0, 8, 0, 0],
            );
        }
    }
}

/// The command, sharing the init's (that is, our) memory until it execs. Raw calls only.
extern "C" fn exec_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the parent's boxed `InitArgs` (the init is suspended until this child
    // has exec'd or exited; the parent keeps the box until the init reports, or leaks it).
    let a = unsafe { &mut *(arg as *mut InitArgs) };
    let fail = |a: &mut InitArgs, step: u32, errno: i32| -> libc::c_int {
        a.failure = ChildFailure { step, errno };
        raw::exit(127)
    };
    default_dispositions_raw();
    for (target, &fd) in a.stdio.iter().enumerate() {
        if let Err(e) = raw::ok(libc::SYS_dup3, [fd as usize, target, 0, 0, 0, 0]) {
            return fail(a, step::DUP2, e);
        }
    }
    if let Err(e) = raw::ok(libc::SYS_setsid, [0; 6]) {
        return fail(a, step::SETSID, e);
    }
    if a.tty {
        let sctty = [0, libc::TIOCSCTTY as usize, 0, 0, 0, 0];
        if let Err(e) = raw::ok(libc::SYS_ioctl, sctty) {
            return fail(a, step::CTTY, e);
        }
    }
    if let Err(e) = raw::ok(libc::SYS_chdir, [a.cwd as usize, 0, 0, 0, 0, 0]) {
        return fail(a, step::CHDIR, e);
    }
    // SAFETY: `conf` points at the session's confinement, alive for the whole spawn.
    if let Err(f) = unsafe { (*a.conf).restrict() } {
        return fail(a, f.step, f.errno);
    }
    let none = 0u64;
    let _ = raw::ok(
        libc::SYS_rt_sigprocmask,
        [
            libc::SIG_SETMASK as usize,
            &none as *const u64 as usize,
            0,
            8,
            0,
            0,
        ],
    );
    let exec = [
        a.program as usize,
        a.argv as usize,
        a.envp as usize,
        0,
        0,
        0,
    ];
    let e = raw::ok(libc::SYS_execve, exec).err().unwrap_or(libc::EIO);
    fail(a, step::EXEC, e)
}

/// The stacks of a sandboxed command's init and of the command before its exec. The init runs
/// on it, in our memory, until it exits: the owner frees it only once the init is reaped and
/// leaks it otherwise (see `ChildProc`).
pub struct InitStack(#[allow(dead_code)] Box<[std::mem::MaybeUninit<u8>]>);

impl std::fmt::Debug for InitStack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("InitStack")
    }
}

/// What the children read of the parent's memory until the start is reported: the
/// arguments, the strings and pointer arrays they point into, and the confinement. Boxed, so
/// nothing moves while the children read it.
struct Launch {
    args: InitArgs,
    _argv_p: Vec<*const libc::c_char>,
    _envp_p: Vec<*const libc::c_char>,
    _strings: (CString, Vec<CString>, Vec<CString>, CString),
    _conf: Arc<Confinement>,
}

// SAFETY: the raw pointers point into the `Launch`'s own strings and confinement, which move
// with it (their heap buffers never move); nothing else shares them.
unsafe impl Send for Launch {}

/// A clone whose start has not been reported yet. Dropped before that (the spawning future
/// was cancelled), it kills the init (and with it the namespace) and leaks what the children
/// may still read: freeing it could let them read freed memory.
struct Pending {
    pid: libc::pid_t,
    launch: Option<Box<Launch>>,
    stacks: Option<Box<[std::mem::MaybeUninit<u8>]>>,
}

impl Drop for Pending {
    fn drop(&mut self) {
        if let Some(launch) = self.launch.take() {
            // SAFETY: kill of our own child (not reaped: its pid is still ours).
            unsafe { libc::kill(self.pid, libc::SIGKILL) };
            std::mem::forget(launch);
            std::mem::forget(self.stacks.take());
        }
    }
}

/// Starts `program` confined by `conf` (see the module text); returns the init's pid (the
/// leader of the group rookery signals), the report pipe the command's status comes through
/// (`command_status`) and the init's stack. The start is awaited on the report pipe: the
/// runtime's thread is not blocked while the namespaces are set up and the command execs.
/// Must run inside a tokio runtime, on a thread that outlives the command (a runtime worker).
pub async fn spawn(
    strings: (CString, Vec<CString>, Vec<CString>, CString),
    stdio: [RawFd; 3],
    tty: bool,
    conf: Arc<Confinement>,
) -> Result<(libc::pid_t, OwnedFd, InitStack), ConfinedError> {
    let os = |code: u32| {
        move |e: io::Error| ConfinedError::new(code, e.raw_os_error().unwrap_or(libc::EIO))
    };
    // Not the owned lock: held across the start, it would serialize every spawn.
    let starting = super::reaper::Starting::announce();
    let (rep_r, rep_w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
        .map_err(|e| ConfinedError::new(step::CLONE, e as i32))?;
    let rep_r = above_stdio(rep_r).map_err(os(step::CLONE))?;
    let rep_w = above_stdio(rep_w).map_err(os(step::CLONE))?;
    // Read without blocking: the start is awaited, and the status is read once the init exited.
    // SAFETY: fcntl on a descriptor we own.
    unsafe {
        let flags = libc::fcntl(rep_r.as_raw_fd(), libc::F_GETFL);
        libc::fcntl(rep_r.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK);
    }
    // SAFETY: pidfd_open has no memory arguments; a valid result is a descriptor we own.
    let raw = unsafe { libc::syscall(libc::SYS_pidfd_open, libc::getpid(), 0) };
    if raw < 0 {
        return Err(ConfinedError::new(step::PARENT_DEATH, errno()));
    }
    // SAFETY: `raw` is a fresh pidfd (close-on-exec) owned by nobody else.
    let parent = unsafe { OwnedFd::from_raw_fd(raw as RawFd) };
    let pending = clone_init(
        strings,
        stdio,
        tty,
        conf,
        rep_w.as_raw_fd(),
        parent.as_raw_fd(),
    )?;
    let pid = pending.pid;
    let mut pending = pending;
    drop((rep_w, parent));
    let (rep_r, record) = start_record(rep_r).await;
    let (code, value) = match record {
        Ok(Some(rec)) => rec,
        Ok(None) => (step::INIT_GONE, libc::ECHILD),
        Err(e) => {
            // The start is unknown: the command must not run on unwatched.
            // SAFETY: kill of our own child.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            (step::INIT_GONE, e.raw_os_error().unwrap_or(libc::EIO))
        }
    };
    // Reported (or the init is gone): the children read nothing of ours any more.
    drop(pending.launch.take());
    let stacks = pending.stacks.take();
    if code != STARTED {
        let mut status = 0;
        // SAFETY: reaps our own child, which has reported a failure (or died).
        unsafe { libc::waitpid(pid, &mut status, 0) };
        drop(stacks);
        return Err(ConfinedError::new(code, value));
    }
    starting.record(pid);
    let Some(stacks) = stacks else {
        return Err(ConfinedError::new(step::INIT_GONE, libc::EIO));
    };
    Ok((pid, rep_r, InitStack(stacks)))
}

/// Clones the init (see [`spawn`]); the children read the returned `Pending`'s launch.
fn clone_init(
    strings: (CString, Vec<CString>, Vec<CString>, CString),
    stdio: [RawFd; 3],
    tty: bool,
    conf: Arc<Confinement>,
    report: RawFd,
    parent: RawFd,
) -> Result<Pending, ConfinedError> {
    let mut argv_p: Vec<*const libc::c_char> = strings.1.iter().map(|s| s.as_ptr()).collect();
    argv_p.push(std::ptr::null());
    let mut envp_p: Vec<*const libc::c_char> = strings.2.iter().map(|s| s.as_ptr()).collect();
    envp_p.push(std::ptr::null());
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
    let mut launch = Box::new(Launch {
        args: InitArgs {
            program: strings.0.as_ptr(),
            argv: argv_p.as_ptr(),
            envp: envp_p.as_ptr(),
            cwd: strings.3.as_ptr(),
            stdio,
            tty,
            conf: Arc::as_ptr(&conf),
            report,
            parent,
            exec_stack: exec_top.cast(),
            failure: ChildFailure { step: 0, errno: 0 },
        },
        _argv_p: argv_p,
        _envp_p: envp_p,
        _strings: strings,
        _conf: conf,
    });
    let args: *mut InitArgs = &mut launch.args;
    // SAFETY: the init shares our memory: `launch` (what the children read) stays alive until
    // the init reports the start or its failure, or is leaked (`Pending`); `stacks` until the
    // init is reaped (returned to the caller, or kept here on failure until after the reap).
    // Signals are blocked around the clone so no handler of ours runs in the child; the init
    // keeps them blocked and the command resets them before exec.
    let pid = unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        let pid = libc::clone(
            init_main,
            init_top.cast(),
            (*(*args).conf).clone_flags() | libc::SIGCHLD,
            args.cast(),
        );
        let clone_err = errno();
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        if pid == -1 {
            return Err(ConfinedError::new(step::CLONE, clone_err));
        }
        pid
    };
    Ok(Pending {
        pid,
        launch: Some(launch),
        stacks: Some(stacks),
    })
}

/// Awaits the init's first record on the (non-blocking) report pipe: `None` at its end.
async fn start_record(rep_r: OwnedFd) -> (OwnedFd, io::Result<Option<(u32, i32)>>) {
    // SAFETY: the `OwnedFd` reports the descriptor it owns, open until `afd` gives it back.
    let afd = match unsafe { AsyncFd::register(rep_r) } {
        Ok(afd) => afd,
        Err(e) => {
            let (fd, e) = e.into_parts();
            return (fd, Err(e));
        }
    };
    let record = loop {
        let mut ready = match afd.readable().await {
            Ok(ready) => ready,
            Err(e) => break Err(e),
        };
        match try_read_record(afd.get_ref()) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => ready.clear_ready(),
            other => break other,
        }
    };
    (afd.into_inner(), record)
}

/// Reads one 8-byte record; `None` at the end of the pipe (or with nothing there yet on a
/// non-blocking pipe).
fn read_record(fd: &OwnedFd) -> io::Result<Option<(u32, i32)>> {
    match try_read_record(fd) {
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
        other => other,
    }
}

/// Reads one 8-byte record (written in one `write`, so it comes whole); `None` at the end of
/// the pipe, `WouldBlock` with nothing there yet.
fn try_read_record(fd: &OwnedFd) -> io::Result<Option<(u32, i32)>> {
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
                io::ErrorKind::WouldBlock if got > 0 => continue,
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
