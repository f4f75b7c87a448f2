//! Linux: what rookery and a sandboxed session's keeper share (see `sandbox_keeper.rs` for the
//! protocol): the request's and the records' layout, the step codes of the process side, the
//! error of a failed sandboxed start, and the reading of records from a report socket (the
//! start, then a command's wait status).
//!
//! It starts nothing and holds no state.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;

use tokio::io::unix::AsyncFd;

/// Descriptors of a request: stdin, stdout, stderr, the report socket, the strings.
pub(super) const REQUEST_FDS: usize = 5;
/// Bytes of a request's header.
pub(super) const HEADER: usize = 24;
/// A record's code: ready (the keeper) or started (a command; the value is 0).
pub(super) const STARTED: u32 = 0;
/// A record's code: the command exited; the value is its wait status.
pub(super) const EXITED: u32 = u32::MAX;
/// A slot of the strings' table that ends a list (argv, envp).
pub(super) const END: u64 = u64::MAX;

/// Steps of the process side (the sandbox's own are below 100, see `sandbox::step`).
pub(super) mod step {
    pub(crate) const DUP2: u32 = 101;
    pub(crate) const SETSID: u32 = 102;
    pub(crate) const CTTY: u32 = 103;
    pub(crate) const CHDIR: u32 = 105;
    pub(crate) const EXEC: u32 = 106;
    pub(crate) const CLONE: u32 = 107;
    pub(crate) const SIGNALFD: u32 = 109;
    pub(crate) const KEEPER_START: u32 = 110;
    pub(crate) const KEEPER_GONE: u32 = 111;
    pub(crate) const KEEPER_FULL: u32 = 112;
    pub(crate) const REQUEST: u32 = 113;
}

/// A failed sandboxed start: which step, the OS error, and whether the step was the
/// sandbox's (namespaces, Landlock, seccomp, capabilities, the keeper) or an ordinary one
/// (exec, chdir).
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
    pub(super) fn new(code: u32, errno: i32) -> Self {
        let (step, sandbox) = match code {
            step::DUP2 => ("place stdio", false),
            step::SETSID => ("start a new session", false),
            step::CTTY => ("take the terminal", false),
            step::CHDIR => ("enter the working directory", false),
            step::EXEC => ("execute bash", false),
            step::CLONE => ("start the command inside the namespaces", true),
            step::SIGNALFD => ("receive the keeper's child signals", true),
            step::KEEPER_START => ("start the session's sandbox keeper", true),
            step::KEEPER_GONE => (
                "reach the session's sandbox keeper (it is gone; the command did not run, \
                 the next one starts a new keeper)",
                true,
            ),
            step::KEEPER_FULL => ("start a command: the session runs too many at once", true),
            step::REQUEST => ("read the command's request in the sandbox keeper", true),
            other => (crate::sandbox::step::name(other), true),
        };
        ConfinedError {
            step,
            source: io::Error::from_raw_os_error(errno),
            sandbox,
        }
    }
}

/// Awaits one 8-byte record on `sock` (non-blocking): `None` at its end.
pub(super) async fn read_record(sock: &OwnedFd) -> io::Result<Option<(u32, i32)>> {
    let r = read_record_creds(sock).await;
    r.map(|o| o.map(|(c, v, _)| (c, v)))
}

/// [`read_record`], with the pid of the credentials attached to the record (0: none; they
/// come with `SO_PASSCRED` set on `sock`).
pub(super) async fn read_record_creds(
    sock: &OwnedFd,
) -> io::Result<Option<(u32, i32, libc::pid_t)>> {
    let raw = sock.as_raw_fd();
    // SAFETY: `sock` stays open while `afd` (dropped at the end of this function) is registered.
    let afd = unsafe { AsyncFd::register(raw) }?;
    loop {
        let mut ready = afd.readable().await?;
        match try_recv_record(raw) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => ready.clear_ready(),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            other => return other,
        }
    }
}

/// One non-blocking `recvmsg` of a record: `None` at the end of the socket.
pub(super) fn try_recv_record(sock: RawFd) -> io::Result<Option<(u32, i32, libc::pid_t)>> {
    let mut rec = [0u8; 8];
    let mut cmsg = [0u64; 8];
    let mut iov = libc::iovec {
        iov_base: rec.as_mut_ptr().cast(),
        iov_len: rec.len(),
    };
    // SAFETY: a zeroed msghdr is valid; the buffers outlive the call; the control messages are
    // read within `msg_controllen` through the CMSG macros.
    unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = cmsg.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&cmsg) as _;
        let n = libc::recvmsg(sock, &mut msg, libc::MSG_DONTWAIT | libc::MSG_CMSG_CLOEXEC);
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        if n == 0 {
            return Ok(None);
        }
        if n as usize != rec.len() {
            return Err(io::Error::from_raw_os_error(libc::EPROTO));
        }
        let mut pid = 0;
        let mut h = libc::CMSG_FIRSTHDR(&msg);
        while !h.is_null() {
            if (*h).cmsg_level == libc::SOL_SOCKET && (*h).cmsg_type == libc::SCM_CREDENTIALS {
                let cred = std::ptr::read_unaligned(libc::CMSG_DATA(h).cast::<libc::ucred>());
                pid = cred.pid;
            } else if (*h).cmsg_level == libc::SOL_SOCKET && (*h).cmsg_type == libc::SCM_RIGHTS {
                // Nobody sends us descriptors; close any so none leaks.
                let n = ((*h).cmsg_len as usize - libc::CMSG_LEN(0) as usize) / 4;
                let data = libc::CMSG_DATA(h).cast::<RawFd>();
                for i in 0..n {
                    libc::close(std::ptr::read_unaligned(data.add(i)));
                }
            }
            h = libc::CMSG_NXTHDR(&msg, h);
        }
        let code = u32::from_ne_bytes([rec[0], rec[1], rec[2], rec[3]]);
        let value = i32::from_ne_bytes([rec[4], rec[5], rec[6], rec[7]]);
        Ok(Some((code, value, pid)))
    }
}

/// Awaits a started command's wait status on its report socket. The end of the socket without
/// one means the keeper is gone, and its namespaces with everything in them: the command was
/// killed (SIGKILL).
pub(super) async fn wait_status(report: OwnedFd) -> io::Result<ExitStatus> {
    Ok(match read_record(&report).await? {
        Some((EXITED, status)) => ExitStatus::from_raw(status),
        _ => ExitStatus::from_raw(libc::SIGKILL),
    })
}
