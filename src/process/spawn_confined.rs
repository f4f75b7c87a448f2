//! Linux: starting a command inside its session's sandbox, through the session's keeper
//! (`sandbox_keeper.rs`, started with the session's first command): the command's strings go
//! into a memfd, and a request with its stdio, a fresh report socket and that memfd goes to the
//! keeper, which starts the command in the session's namespaces, confined, as the leader of its
//! own session and process group. The start is awaited on the report socket (the spawning
//! thread runs other tasks meanwhile): either the start, with the command's pid (translated by
//! the kernel into ours, so rookery signals the command's group directly), or the step that
//! failed, so the spawn fails with what went wrong and nothing runs unconfined. The same socket
//! later carries the command's wait status (`wait_status`).
//!
//! A keeper that is gone (killed, or its namespaces broken) fails the command closed with a
//! clear error and is forgotten; the session's next command starts a fresh one. The unsandboxed
//! path (`spawn_raw.rs`) does none of this.

use std::ffi::CString;
use std::io::{self, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;

pub use super::keeper_protocol::ConfinedError;
use super::keeper_protocol::{END, HEADER, STARTED, step};
use super::sandbox_keeper as keeper;
use crate::sandbox::Confinement;

/// The program, argv, envp and working directory of a start.
type Strings = (CString, Vec<CString>, Vec<CString>, CString);

/// The request's memfd: a table of offsets (program, cwd, argv…, END, envp…, END), then the
/// NUL-terminated strings. Returns it and its size.
fn strings_memfd(strings: &Strings) -> io::Result<(OwnedFd, usize)> {
    let (program, argv, envp, cwd) = strings;
    let slots = argv.len() + envp.len() + 4;
    let mut table: Vec<u64> = Vec::with_capacity(slots);
    let mut data: Vec<u8> = Vec::new();
    let mut offset = slots * 8;
    let mut push = |s: &CString, table: &mut Vec<u64>| {
        table.push(offset as u64);
        let b = s.as_bytes_with_nul();
        data.extend_from_slice(b);
        offset += b.len();
    };
    push(program, &mut table);
    push(cwd, &mut table);
    for a in argv {
        push(a, &mut table);
    }
    table.push(END);
    for e in envp {
        push(e, &mut table);
    }
    table.push(END);
    let mut buf = Vec::with_capacity(slots * 8 + data.len());
    for t in &table {
        buf.extend_from_slice(&t.to_ne_bytes());
    }
    buf.extend_from_slice(&data);
    // SAFETY: memfd_create with a static name; a valid result is a descriptor we own.
    let fd = unsafe { libc::memfd_create(c"rookery-command".as_ptr(), libc::MFD_CLOEXEC) };
    if fd == -1 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor nobody else owns.
    let mut file = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
    file.write_all(&buf)?;
    Ok((OwnedFd::from(file), buf.len()))
}

/// Starts `program` confined by `conf` through the session's keeper (see the module text);
/// returns the command's pid (in our namespace: the leader of the group rookery signals) and
/// the report socket its status comes through (`wait_status`). Must run inside a tokio
/// runtime.
pub async fn spawn(
    strings: Strings,
    stdio: [RawFd; 3],
    tty: bool,
    conf: Arc<Confinement>,
) -> Result<(libc::pid_t, OwnedFd), ConfinedError> {
    let os = |code: u32| {
        move |e: io::Error| ConfinedError::new(code, e.raw_os_error().unwrap_or(libc::EIO))
    };
    let keeper = keeper::keeper_for(&conf).await?;
    let (memfd, len) = strings_memfd(&strings).map_err(os(step::REQUEST))?;
    let (ours, theirs) = keeper::seqpacket_pair().map_err(os(step::REQUEST))?;
    let on: libc::c_int = 1;
    // SAFETY: setsockopt on a socket we own, with a valid int.
    let passcred = unsafe {
        libc::setsockopt(
            ours.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PASSCRED,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if passcred == -1 {
        return Err(os(step::REQUEST)(io::Error::last_os_error()));
    }
    let mut header = [0u8; HEADER];
    header[0..4].copy_from_slice(&u32::from(tty).to_ne_bytes());
    header[4..8].copy_from_slice(&(strings.1.len() as u32).to_ne_bytes());
    header[8..12].copy_from_slice(&(strings.2.len() as u32).to_ne_bytes());
    header[16..24].copy_from_slice(&(len as u64).to_ne_bytes());
    let fds = [
        stdio[0],
        stdio[1],
        stdio[2],
        theirs.as_raw_fd(),
        memfd.as_raw_fd(),
    ];
    if let Err(e) = keeper.send(&header, fds).await {
        keeper::forget(&conf, &keeper).await;
        return Err(os(step::KEEPER_GONE)(e));
    }
    // The keeper holds its copies now: ours must go, so its end is the only one.
    drop((theirs, memfd));
    let mut awaiting = AwaitingStart(Some(ours));
    let record = match &awaiting.0 {
        Some(ours) => super::keeper_protocol::read_record_creds(ours).await,
        None => Err(io::Error::from_raw_os_error(libc::EBADF)),
    };
    match record {
        Ok(Some((STARTED, _, pid))) if pid > 0 => match awaiting.0.take() {
            Some(ours) => Ok((pid, ours)),
            None => Err(ConfinedError::new(step::REQUEST, libc::EBADF)),
        },
        Ok(Some((STARTED, _, _))) => Err(ConfinedError::new(step::REQUEST, libc::ESRCH)),
        Ok(Some((code, errno, _))) => Err(ConfinedError::new(code, errno)),
        Ok(None) => {
            keeper::forget(&conf, &keeper).await;
            Err(ConfinedError::new(step::KEEPER_GONE, libc::EPIPE))
        }
        Err(e) => Err(os(step::KEEPER_GONE)(e)),
    }
}

/// Our end of a command's report socket while its start is awaited. Dropped before the start
/// was taken (the spawning future was cancelled), it makes sure the command does not run on
/// unwatched: after `shutdown` the keeper's report of the start fails and it kills the command
/// itself, and a start reported before that is read here and the command's group killed.
struct AwaitingStart(Option<OwnedFd>);

impl Drop for AwaitingStart {
    fn drop(&mut self) {
        let Some(fd) = self.0.take() else {
            return;
        };
        // SAFETY: shutdown of a socket we own.
        unsafe { libc::shutdown(fd.as_raw_fd(), libc::SHUT_RD) };
        if let Ok(Some((STARTED, _, pid))) = super::keeper_protocol::try_recv_record(fd.as_raw_fd())
            && pid > 0
        {
            // SAFETY: kills of the command's group and leader, reported started a moment
            // ago (a pid reused between that report and now is out of reach in practice).
            unsafe {
                libc::kill(-pid, libc::SIGKILL);
                libc::kill(pid, libc::SIGKILL);
            }
        }
    }
}
