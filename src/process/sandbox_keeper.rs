//! Linux: the keeper of a sandboxed session, the one process that holds the session's user, PID
//! and mount namespaces. Rookery clones it once per session (its own copy of our memory, so it
//! may be the parent of processes in those namespaces); it maps its ids, mounts the namespace's
//! `/proc`, hides the `deny_read` paths, installs the session's seccomp filters on itself,
//! reports that it is ready, and then starts each command of the session on request: a
//! vfork-style clone (stdio, the command's own session and process group, the terminal, the
//! working directory, `Confinement::restrict_command`, `execve`), so a command costs no
//! namespace, mount or filter compilation of its own. It reaps the commands (and whatever they
//! leave: it is the namespace's init) and reports each command's wait status.
//!
//! The protocol, on unix seqpacket sockets: a request on the control socket is a 24-byte header
//! (terminal flag, argument and variable counts, the size of the strings) with five descriptors
//! (stdin, stdout, stderr, the command's report socket, a memfd holding the strings); the keeper
//! answers on the report socket with one 8-byte record: the start (with `SCM_CREDENTIALS` naming
//! the command, whose pid the kernel translates into ours) or the step that failed, then the
//! command's wait status when it exits. The keeper exits at the end of the control socket: when
//! the session's confinement is dropped, or rookery dies. Its namespace's processes die with it.
//!
//! The keeper is a copy of a multi-threaded process: it never allocates, locks or logs, only
//! makes system calls (its side is `keeper_child.rs`). A keeper that is gone fails the next
//! command closed (`spawn_confined.rs`).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;

use tokio::io::unix::AsyncFd;

use super::keeper_child::{KeeperArgs, keeper_main};
use super::keeper_protocol::{ConfinedError, HEADER, REQUEST_FDS, STARTED, read_record, step};
use crate::sandbox::{ChildFailure, Confinement};

/// Stack of the keeper and of each command before its exec (in the keeper's memory).
const STACK: usize = 64 * 1024;
/// A running keeper, as rookery holds it: its pid (our child) and our end of the control socket.
/// Dropped (with the session's confinement), it closes the socket, which ends the keeper and
/// every process of its namespaces; a helper thread reaps it.
#[derive(Debug)]
pub(crate) struct Keeper {
    pid: libc::pid_t,
    control: Option<OwnedFd>,
}

impl Drop for Keeper {
    fn drop(&mut self) {
        drop(self.control.take());
        let pid = self.pid;
        let reaped = std::thread::Builder::new()
            .name("rookery-keeper-reap".into())
            .spawn(move || super::spawn_raw::reap(pid, false).map(drop));
        if let Err(e) = reaped {
            tracing::warn!(pid, error = %e, "cannot start the keeper's reaper; it stays a zombie");
        }
    }
}

impl Keeper {
    /// Sends one request (see the module text); waits while the socket is full. An error
    /// means the keeper is gone.
    pub(super) async fn send(
        &self,
        header: &[u8; HEADER],
        fds: [RawFd; REQUEST_FDS],
    ) -> io::Result<()> {
        let Some(control) = &self.control else {
            return Err(io::Error::from_raw_os_error(libc::EPIPE));
        };
        let mut waiter: Option<AsyncFd<OwnedFd>> = None;
        loop {
            match send_fds(control.as_raw_fd(), header, &fds) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if waiter.is_none() {
                        // SAFETY: the `OwnedFd` reports the descriptor it owns (a duplicate of
                        // the control socket), open until the `AsyncFd` drops.
                        waiter = Some(unsafe { AsyncFd::register(control.try_clone()?) }?);
                    }
                    if let Some(w) = &waiter {
                        w.writable().await?.clear_ready();
                    }
                }
                other => return other,
            }
        }
    }
}

/// Returns the session's keeper, starting it if there is none (or the last one is gone).
pub(super) async fn keeper_for(conf: &Arc<Confinement>) -> Result<Arc<Keeper>, ConfinedError> {
    let mut slot = conf.keeper_slot().lock().await;
    if let Some(k) = slot.clone().and_then(|a| a.downcast::<Keeper>().ok()) {
        return Ok(k);
    }
    let keeper = Arc::new(start(conf).await?);
    *slot = Some(keeper.clone());
    tracing::debug!(pid = keeper.pid, "sandbox keeper started");
    Ok(keeper)
}

/// The pid of the session's keeper, if one runs (the bench reads its CPU, the tests its
/// namespaces and its end).
pub async fn keeper_pid(conf: &Arc<Confinement>) -> Option<libc::pid_t> {
    let slot = conf.keeper_slot().lock().await;
    slot.clone()
        .and_then(|a| a.downcast::<Keeper>().ok())
        .map(|k| k.pid)
}

/// Forgets `keeper` (found gone) so the session's next command starts a fresh one.
pub(super) async fn forget(conf: &Arc<Confinement>, keeper: &Arc<Keeper>) {
    let mut slot = conf.keeper_slot().lock().await;
    let same = slot
        .as_ref()
        .is_some_and(|a| std::ptr::addr_eq(Arc::as_ptr(a), Arc::as_ptr(keeper)));
    if same {
        tracing::warn!(pid = keeper.pid, "the session's sandbox keeper is gone");
        *slot = None;
    }
}

/// Clones the keeper and awaits its ready record.
async fn start(conf: &Arc<Confinement>) -> Result<Keeper, ConfinedError> {
    let fail = |code: u32| {
        move |e: io::Error| ConfinedError::new(code, e.raw_os_error().unwrap_or(libc::EIO))
    };
    let (ours, theirs) = seqpacket_pair().map_err(fail(step::KEEPER_START))?;
    let starting = super::reaper::Starting::announce();
    let pid = clone_keeper(conf, theirs.as_raw_fd()).map_err(fail(step::KEEPER_START))?;
    starting.record(pid);
    drop(theirs);
    // Without a control socket yet: dropped on a failure below, it is reaped by its thread.
    let mut keeper = Keeper { pid, control: None };
    let record = read_record(&ours).await;
    match record {
        Ok(Some((STARTED, _))) => {
            keeper.control = Some(ours);
            Ok(keeper)
        }
        Ok(Some((code, errno))) => Err(ConfinedError::new(code, errno)),
        Ok(None) => Err(ConfinedError::new(step::KEEPER_GONE, libc::ECHILD)),
        Err(e) => {
            // SAFETY: kill of our own child, not reaped yet (its pid is still ours).
            unsafe { libc::kill(pid, libc::SIGKILL) };
            Err(fail(step::KEEPER_GONE)(e))
        }
    }
}

/// Clones the keeper (see [`start`]) with `control` as its end of the control socket.
fn clone_keeper(conf: &Arc<Confinement>, control: RawFd) -> io::Result<libc::pid_t> {
    let mut stack = Box::<[u8]>::new_uninit_slice(2 * STACK);
    let base = stack.as_mut_ptr().cast::<u8>();
    let top = |end: usize| {
        // SAFETY: `end` is at most the buffer's length; aligned down to 16 bytes, inside it.
        unsafe {
            let p = base.add(end);
            p.sub(p as usize % 16)
        }
    };
    let mut args = Box::new(KeeperArgs {
        conf: Arc::as_ptr(conf),
        control,
        exec_stack: top(2 * STACK).cast(),
        program: std::ptr::null(),
        argv: std::ptr::null(),
        envp: std::ptr::null(),
        cwd: std::ptr::null(),
        stdio: [-1; 3],
        tty: false,
        failure: ChildFailure { step: 0, errno: 0 },
    });
    // SAFETY: without CLONE_VM the keeper runs on its own copy of our memory (the stacks, the
    // arguments and the confinement are copied as they are now, so freeing ours afterwards is
    // fine). Signals are blocked around the clone so no handler of ours runs in the keeper; it
    // keeps them blocked and each command resets them before exec.
    let pid = unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        let pid = libc::clone(
            keeper_main,
            top(STACK).cast(),
            conf.clone_flags() | libc::SIGCHLD,
            (&mut *args as *mut KeeperArgs).cast(),
        );
        let err = io::Error::last_os_error();
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        if pid == -1 {
            return Err(err);
        }
        pid
    };
    drop((args, stack));
    Ok(pid)
}

/// A unix seqpacket socket pair, close-on-exec, both ends above stdio.
pub(super) fn seqpacket_pair() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: socketpair writes two descriptors into `fds` on success.
    let r = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    };
    if r == -1 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: two fresh descriptors nobody else owns.
    let (a, b) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    Ok((
        super::spawn_raw::above_stdio(a)?,
        super::spawn_raw::above_stdio(b)?,
    ))
}

/// One non-blocking `sendmsg` of `data` with `fds` attached.
fn send_fds(sock: RawFd, data: &[u8], fds: &[RawFd]) -> io::Result<()> {
    let mut cmsg = [0u64; 8];
    let fd_bytes = std::mem::size_of_val(fds);
    // SAFETY: CMSG_SPACE/CMSG_LEN are pure arithmetic.
    let (space, len) = unsafe {
        (
            libc::CMSG_SPACE(fd_bytes as u32),
            libc::CMSG_LEN(fd_bytes as u32),
        )
    };
    if space as usize > std::mem::size_of_val(&cmsg) {
        return Err(io::Error::from_raw_os_error(libc::E2BIG));
    }
    let mut iov = libc::iovec {
        iov_base: data.as_ptr() as *mut libc::c_void,
        iov_len: data.len(),
    };
    // SAFETY: a zeroed msghdr is valid; every pointer set below outlives the call, and the
    // control buffer holds one header of `space` bytes (checked above).
    unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = cmsg.as_mut_ptr().cast();
        msg.msg_controllen = space as _;
        let h = libc::CMSG_FIRSTHDR(&msg);
        (*h).cmsg_level = libc::SOL_SOCKET;
        (*h).cmsg_type = libc::SCM_RIGHTS;
        (*h).cmsg_len = len as _;
        std::ptr::copy_nonoverlapping(fds.as_ptr(), libc::CMSG_DATA(h).cast::<RawFd>(), fds.len());
        let n = libc::sendmsg(sock, &msg, libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL);
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "sandbox_keeper_tests.rs"]
mod tests;
