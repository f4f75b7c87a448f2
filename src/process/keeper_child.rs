//! Linux: the keeper's own side of `sandbox_keeper.rs` (read its module text for the protocol):
//! setting the session's namespaces up, serving start requests, starting each command (a
//! vfork-style clone that places stdio, takes its own session and terminal, enters the working
//! directory, applies `Confinement::restrict_command` and execs), reaping and reporting.
//!
//! It runs in a copy of a multi-threaded process: system calls only, no allocation, no lock,
//! no logging. Rookery's side of the protocol is not here.

use std::io;
use std::os::fd::RawFd;

use super::keeper_protocol::{END, EXITED, HEADER, REQUEST_FDS, STARTED, step};
use crate::sandbox::{ChildFailure, Confinement};

/// Commands one keeper runs at once (more are refused, never queued unwatched).
const MAX_RUNNING: usize = 1024;

/// The keeper's view of the session and of the command being started.
#[repr(C)]
pub(super) struct KeeperArgs {
    /// The keeper's copy of the session's confinement.
    pub(super) conf: *const Confinement,
    /// The keeper's end of the control socket.
    pub(super) control: libc::c_int,
    /// Top of the commands' stack (in the keeper's memory).
    pub(super) exec_stack: *mut libc::c_void,
    pub(super) program: *const libc::c_char,
    pub(super) argv: *const *const libc::c_char,
    pub(super) envp: *const *const libc::c_char,
    pub(super) cwd: *const libc::c_char,
    pub(super) stdio: [libc::c_int; 3],
    pub(super) tty: bool,
    /// Set by the command when a step failed (it then exits 127).
    pub(super) failure: ChildFailure,
}

/// Writes one record (`creds`: the pid to name in `SCM_CREDENTIALS`); false when it failed.
fn keeper_send(sock: libc::c_int, code: u32, value: i32, creds: Option<libc::pid_t>) -> bool {
    let mut rec = [0u8; 8];
    rec[..4].copy_from_slice(&code.to_ne_bytes());
    rec[4..].copy_from_slice(&value.to_ne_bytes());
    let mut cmsg = [0u64; 8];
    let mut iov = libc::iovec {
        iov_base: rec.as_mut_ptr().cast(),
        iov_len: rec.len(),
    };
    // SAFETY: as in `send_fds`; the credentials are the command's pid and our own ids (the
    // keeper may name any pid of its namespace: it has CAP_SYS_ADMIN in its user namespace).
    unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        if let Some(pid) = creds {
            let size = std::mem::size_of::<libc::ucred>() as u32;
            msg.msg_control = cmsg.as_mut_ptr().cast();
            msg.msg_controllen = libc::CMSG_SPACE(size) as _;
            let h = libc::CMSG_FIRSTHDR(&msg);
            (*h).cmsg_level = libc::SOL_SOCKET;
            (*h).cmsg_type = libc::SCM_CREDENTIALS;
            (*h).cmsg_len = libc::CMSG_LEN(size) as _;
            let cred = libc::ucred {
                pid,
                uid: libc::getuid(),
                gid: libc::getgid(),
            };
            std::ptr::write_unaligned(libc::CMSG_DATA(h).cast::<libc::ucred>(), cred);
        }
        libc::sendmsg(sock, &msg, libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL) == rec.len() as isize
    }
}

fn close(fd: libc::c_int) {
    // SAFETY: closes a descriptor the keeper owns.
    unsafe { libc::close(fd) };
}

fn exit(code: libc::c_int) -> ! {
    loop {
        crate::sandbox::sys::call(libc::SYS_exit_group, [code as usize, 0, 0, 0, 0, 0]);
    }
}

/// Closes every descriptor but `keep` (sorted, distinct).
fn close_all_but(keep: &mut [libc::c_int]) {
    keep.sort_unstable();
    let mut from = 0usize;
    for &k in keep.iter() {
        let k = k as usize;
        if k > from {
            crate::sandbox::sys::call(libc::SYS_close_range, [from, k - 1, 0, 0, 0, 0]);
        }
        from = k + 1;
    }
    crate::sandbox::sys::call(
        libc::SYS_close_range,
        [from, libc::c_uint::MAX as usize, 0, 0, 0, 0],
    );
}

/// The keeper: sets the namespaces up, reports, then serves requests until the control socket
/// ends.
pub(super) extern "C" fn keeper_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` points at the keeper's copy of the `KeeperArgs` rookery prepared (its own
    // memory: nobody else writes it).
    let a = unsafe { &mut *(arg as *mut KeeperArgs) };
    // SAFETY: the copy of the session's confinement, alive in this memory until we exit.
    let conf = unsafe { &*a.conf };
    let control = a.control;
    let fail = |code: u32, errno: i32| -> ! {
        keeper_send(control, code, errno, None);
        exit(127)
    };
    // Its own session: the terminal's and rookery's group signals are not for it.
    if let Err(e) = crate::sandbox::sys::check(crate::sandbox::sys::call(libc::SYS_setsid, [0; 6]))
    {
        fail(step::SETSID, e);
    }
    // Every descriptor of rookery's was copied here: none may stay open (pipes of other
    // commands would never see their end, and rookery's end of the control socket must end
    // with rookery).
    close_all_but(&mut [control, conf.ruleset_fd()]);
    // Descriptors 0-2 stay taken (by /dev/null), so no received one lands there and a
    // command's stdio is never placed over another of its sources.
    loop {
        let fd = crate::sandbox::sys::call(
            libc::SYS_openat,
            [
                libc::AT_FDCWD as isize as usize,
                c"/dev/null".as_ptr() as usize,
                (libc::O_RDWR | libc::O_CLOEXEC) as usize,
                0,
                0,
                0,
            ],
        );
        if fd < 0 {
            fail(step::KEEPER_START, (-fd) as i32);
        }
        if fd > 2 {
            close(fd as libc::c_int);
            break;
        }
    }
    if let Err(f) = conf.enter_namespaces() {
        fail(f.step, f.errno);
    }
    // Once for every command: the emptied bounding and ambient sets and the default signal
    // dispositions are inherited (a handler of rookery's must not run in a command before its
    // exec, and a signal rookery ignores must reach it). Every signal stays blocked here.
    if let Err(f) = conf.drop_inheritable_caps() {
        fail(f.step, f.errno);
    }
    default_dispositions_raw();
    let mask: u64 = 1 << (libc::SIGCHLD - 1);
    let sfd = crate::sandbox::sys::call(
        libc::SYS_signalfd4,
        [
            -1isize as usize,
            &mask as *const u64 as usize,
            8,
            (libc::SFD_CLOEXEC | libc::SFD_NONBLOCK) as usize,
            0,
            0,
        ],
    );
    if sfd < 0 {
        fail(step::SIGNALFD, (-sfd) as i32);
    }
    if let Err(f) = conf.install_filters() {
        fail(f.step, f.errno);
    }
    if !keeper_send(control, STARTED, 0, None) {
        exit(0);
    }
    let mut running = [(0 as libc::pid_t, -1 as libc::c_int); MAX_RUNNING];
    loop {
        let mut fds = [
            libc::pollfd {
                fd: control,
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: sfd as libc::c_int,
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        let r =
            crate::sandbox::sys::call(libc::SYS_ppoll, [fds.as_mut_ptr() as usize, 2, 0, 0, 8, 0]);
        if r < 0 {
            if r == -(libc::EINTR as isize) {
                continue;
            }
            exit(127);
        }
        if fds[1].revents != 0 {
            reap(sfd as libc::c_int, &mut running);
        }
        if fds[0].revents != 0 && !serve(a, &mut running) {
            exit(0);
        }
    }
}

/// Reaps every exited child; reports the commands' statuses.
fn reap(sfd: libc::c_int, running: &mut [(libc::pid_t, libc::c_int); MAX_RUNNING]) {
    let mut info = [0u8; 128];
    while crate::sandbox::sys::call(
        libc::SYS_read,
        [sfd as usize, info.as_mut_ptr() as usize, 128, 0, 0, 0],
    ) > 0
    {}
    loop {
        let mut status: libc::c_int = 0;
        let r = crate::sandbox::sys::call(
            libc::SYS_wait4,
            [
                -1isize as usize,
                &mut status as *mut libc::c_int as usize,
                libc::WNOHANG as usize,
                0,
                0,
                0,
            ],
        );
        if r <= 0 {
            return;
        }
        let pid = r as libc::pid_t;
        if let Some(slot) = running.iter_mut().find(|(p, _)| *p == pid) {
            keeper_send(slot.1, EXITED, status, None);
            close(slot.1);
            *slot = (0, -1);
        }
    }
}

/// Reads and serves one request; false at the end of the control socket.
fn serve(a: &mut KeeperArgs, running: &mut [(libc::pid_t, libc::c_int); MAX_RUNNING]) -> bool {
    let mut header = [0u8; HEADER];
    let mut cmsg = [0u64; 8];
    let mut iov = libc::iovec {
        iov_base: header.as_mut_ptr().cast(),
        iov_len: header.len(),
    };
    let mut fds = [-1 as libc::c_int; REQUEST_FDS];
    let mut got = 0;
    // SAFETY: as in `try_recv_record`, in the keeper's own memory.
    let (n, flags) = unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = cmsg.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&cmsg) as _;
        let n = libc::recvmsg(
            a.control,
            &mut msg,
            libc::MSG_DONTWAIT | libc::MSG_CMSG_CLOEXEC,
        );
        let mut h = if n > 0 {
            libc::CMSG_FIRSTHDR(&msg)
        } else {
            std::ptr::null_mut()
        };
        while !h.is_null() {
            if (*h).cmsg_level == libc::SOL_SOCKET && (*h).cmsg_type == libc::SCM_RIGHTS {
                let count = ((*h).cmsg_len as usize - libc::CMSG_LEN(0) as usize) / 4;
                let data = libc::CMSG_DATA(h).cast::<RawFd>();
                for i in 0..count {
                    let fd = std::ptr::read_unaligned(data.add(i));
                    if got < REQUEST_FDS {
                        fds[got] = fd;
                        got += 1;
                    } else {
                        close(fd);
                    }
                }
            }
            h = libc::CMSG_NXTHDR(&msg, h);
        }
        (n, msg.msg_flags)
    };
    if n == 0 {
        return false;
    }
    if n < 0 {
        let e = io::Error::last_os_error().raw_os_error().unwrap_or(0);
        return e == libc::EAGAIN || e == libc::EINTR;
    }
    let close_all =
        |fds: &[libc::c_int]| fds.iter().filter(|&&fd| fd >= 0).for_each(|&fd| close(fd));
    if got != REQUEST_FDS || n as usize != HEADER || flags & libc::MSG_CTRUNC != 0 {
        if got > 3 {
            keeper_send(fds[3], step::REQUEST, libc::EPROTO, None);
        }
        close_all(&fds);
        return true;
    }
    let report = fds[3];
    let Some(slot) = running.iter().position(|(p, _)| *p == 0) else {
        keeper_send(report, step::KEEPER_FULL, libc::EAGAIN, None);
        close_all(&fds);
        return true;
    };
    let word =
        |i: usize| u32::from_ne_bytes([header[i], header[i + 1], header[i + 2], header[i + 3]]);
    let (tty, argc, envc) = (word(0) != 0, word(4) as usize, word(8) as usize);
    let len = u64::from_ne_bytes([
        header[16], header[17], header[18], header[19], header[20], header[21], header[22],
        header[23],
    ]) as usize;
    let started = start_command(a, &fds, tty, argc, envc, len);
    // The command has its copies (or failed): ours go, but the report socket.
    close_all(&[fds[0], fds[1], fds[2], fds[4]]);
    match started {
        Ok(pid) => {
            if keeper_send(report, STARTED, 0, Some(pid)) {
                running[slot] = (pid, report);
            } else {
                // Rookery gave up on this start: the command must not run on unwatched.
                crate::sandbox::sys::call(
                    libc::SYS_kill,
                    [-(pid as isize) as usize, libc::SIGKILL as usize, 0, 0, 0, 0],
                );
                crate::sandbox::sys::call(
                    libc::SYS_kill,
                    [pid as usize, libc::SIGKILL as usize, 0, 0, 0, 0],
                );
                close(report);
            }
        }
        Err(f) => {
            keeper_send(report, f.step, f.errno, None);
            close(report);
        }
    }
    true
}

/// Maps the request's strings and starts the command; its pid (in the keeper's namespace).
fn start_command(
    a: &mut KeeperArgs,
    fds: &[libc::c_int; REQUEST_FDS],
    tty: bool,
    argc: usize,
    envc: usize,
    len: usize,
) -> Result<libc::pid_t, ChildFailure> {
    let bad = ChildFailure {
        step: step::REQUEST,
        errno: libc::EINVAL,
    };
    // program, cwd, argv…, END, envp…, END
    let slots = argc
        .checked_add(envc)
        .and_then(|n| n.checked_add(4))
        .ok_or(bad)?;
    if argc == 0 || len <= slots.saturating_mul(8) {
        return Err(bad);
    }
    let map = crate::sandbox::sys::call(
        libc::SYS_mmap,
        [
            0,
            len,
            (libc::PROT_READ | libc::PROT_WRITE) as usize,
            libc::MAP_PRIVATE as usize,
            fds[4] as usize,
            0,
        ],
    );
    let map = crate::sandbox::sys::check(map).map_err(|errno| ChildFailure {
        step: step::REQUEST,
        errno,
    })? as usize;
    let unmap = || crate::sandbox::sys::call(libc::SYS_munmap, [map, len, 0, 0, 0, 0]);
    // SAFETY: `map` is a private writable mapping of `len` bytes; the table of `slots` 8-byte
    // words is inside it (checked above) and page aligned.
    let table = unsafe { std::slice::from_raw_parts_mut(map as *mut u64, slots) };
    // SAFETY: the last byte of the mapping.
    let ends_with_nul = unsafe { *((map + len - 1) as *const u8) } == 0;
    let ends = [argc + 2, argc + envc + 3];
    let valid = ends_with_nul
        && table.iter().enumerate().all(|(i, &off)| {
            if ends.contains(&i) {
                off == END
            } else {
                off as usize >= slots * 8 && (off as usize) < len
            }
        });
    if !valid {
        unmap();
        return Err(bad);
    }
    for (i, off) in table.iter_mut().enumerate() {
        *off = if ends.contains(&i) {
            0
        } else {
            map as u64 + *off
        };
    }
    a.program = table[0] as usize as *const libc::c_char;
    a.cwd = table[1] as usize as *const libc::c_char;
    a.argv = table[2..].as_ptr().cast();
    a.envp = table[argc + 3..].as_ptr().cast();
    a.stdio = [fds[0], fds[1], fds[2]];
    a.tty = tty;
    a.failure = ChildFailure { step: 0, errno: 0 };
    // SAFETY: the command shares the keeper's memory until it execs (CLONE_VFORK suspends the
    // keeper meanwhile), runs on its own stack and reads only `a` and the mapping.
    let pid = unsafe {
        libc::clone(
            exec_main,
            a.exec_stack,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            (a as *mut KeeperArgs).cast(),
        )
    };
    unmap();
    if pid == -1 {
        return Err(ChildFailure {
            step: step::CLONE,
            errno: libc::EAGAIN,
        });
    }
    // SAFETY: the command wrote it before it exec'd or exited.
    let failure = unsafe { std::ptr::read_volatile(&a.failure) };
    if failure.errno != 0 {
        let mut status: libc::c_int = 0;
        crate::sandbox::sys::call(
            libc::SYS_wait4,
            [
                pid as usize,
                &mut status as *mut libc::c_int as usize,
                0,
                0,
                0,
                0,
            ],
        );
        return Err(failure);
    }
    Ok(pid)
}

/// Every signal disposition back to its default (in the keeper, whose commands inherit them).
/// Raw calls only.
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

/// The command, sharing the keeper's memory until it execs. Raw calls only.
extern "C" fn exec_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the keeper's `KeeperArgs` (the keeper is suspended until this child has
    // exec'd or exited).
    let a = unsafe { &mut *(arg as *mut KeeperArgs) };
    let ok = |nr: libc::c_long, args: [usize; 6]| {
        crate::sandbox::sys::check(crate::sandbox::sys::call(nr, args)).map(drop)
    };
    let fail = |a: &mut KeeperArgs, step: u32, errno: i32| -> libc::c_int {
        a.failure = ChildFailure { step, errno };
        exit(127)
    };
    for (target, &fd) in a.stdio.iter().enumerate() {
        if let Err(e) = ok(libc::SYS_dup3, [fd as usize, target, 0, 0, 0, 0]) {
            return fail(a, step::DUP2, e);
        }
    }
    if let Err(e) = ok(libc::SYS_setsid, [0; 6]) {
        return fail(a, step::SETSID, e);
    }
    if a.tty
        && let Err(e) = ok(libc::SYS_ioctl, [0, libc::TIOCSCTTY as usize, 0, 0, 0, 0])
    {
        return fail(a, step::CTTY, e);
    }
    if let Err(e) = ok(libc::SYS_chdir, [a.cwd as usize, 0, 0, 0, 0, 0]) {
        return fail(a, step::CHDIR, e);
    }
    // SAFETY: the keeper's copy of the session's confinement, alive while the keeper runs.
    if let Err(f) = unsafe { (*a.conf).restrict_command() } {
        return fail(a, f.step, f.errno);
    }
    let none = 0u64;
    let _ = ok(
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
    let e = ok(libc::SYS_execve, exec).err().unwrap_or(libc::EIO);
    fail(a, step::EXEC, e)
}
