//! The spawned tasks that move bytes between a command's process and its actor: pipe and pty
//! readers (one output credit per chunk in the mailbox, the command's own bytes cut only on
//! character boundaries) and the stdin writers. They only read, write and cast to the actor; they hold no command state.

use std::os::fd::OwnedFd;
use std::sync::Arc;

use ractor::ActorRef;
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::ChildStdin;
use tokio::sync::{Semaphore, mpsc};

use super::{CommandMsg, READ_BUF};
use crate::process::ring::Utf8Splitter;

/// Sends one chunk of output to the actor once it has room for it (waits for a credit, which
/// the actor returns when the chunk is in its ring). False when the actor is gone.
async fn send_output(me: &ActorRef<CommandMsg>, credits: &Semaphore, bytes: Vec<u8>) -> bool {
    if bytes.is_empty() {
        return true;
    }
    // Never closed; were it, the chunk would still be delivered.
    if let Ok(permit) = credits.acquire().await {
        permit.forget();
    }
    me.cast(CommandMsg::Output(bytes)).is_ok()
}

pub(super) async fn read_stream<R: AsyncRead + Unpin>(
    mut stream: R,
    me: ActorRef<CommandMsg>,
    credits: Arc<Semaphore>,
) {
    // Read into the spare capacity (`read_buf`): the buffer is never zeroed, as a
    // `vec![0; READ_BUF]` per stream was.
    let mut buf = Vec::with_capacity(READ_BUF);
    let mut split = Utf8Splitter::default();
    loop {
        buf.clear();
        match stream.read_buf(&mut buf).await {
            Ok(0) => break,
            Ok(n) => {
                let chunk = split.push(&buf[..n]);
                if !send_output(&me, &credits, chunk).await {
                    return;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                tracing::debug!("command output read failed: {e}");
                break;
            }
        }
    }
    let rest = split.finish();
    send_output(&me, &credits, rest).await;
    let _ = me.cast(CommandMsg::StreamEnd);
}

pub(super) async fn read_pty(
    master: Arc<AsyncFd<OwnedFd>>,
    me: ActorRef<CommandMsg>,
    credits: Arc<Semaphore>,
) {
    let mut buf = vec![0u8; READ_BUF];
    let mut split = Utf8Splitter::default();
    loop {
        let Ok(mut guard) = master.readable().await else {
            break;
        };
        let read = guard
            .try_io(|fd| nix::unistd::read(fd.get_ref(), &mut buf).map_err(std::io::Error::from));
        drop(guard);
        match read {
            Ok(Ok(0)) => break,
            Ok(Ok(n)) => {
                let chunk = split.push(&buf[..n]);
                if !send_output(&me, &credits, chunk).await {
                    return;
                }
            }
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::Interrupted => {}
            // EIO: every slave descriptor is closed, i.e. the end of output.
            Ok(Err(_)) => break,
            Err(_would_block) => {}
        }
    }
    let rest = split.finish();
    send_output(&me, &credits, rest).await;
    let _ = me.cast(CommandMsg::StreamEnd);
}

pub(super) async fn write_pipe(mut stdin: ChildStdin, mut rx: mpsc::UnboundedReceiver<Vec<u8>>) {
    while let Some(bytes) = rx.recv().await {
        if stdin.write_all(&bytes).await.is_err() || stdin.flush().await.is_err() {
            // A closed stdin: later writes are silently ignored.
            break;
        }
    }
}

pub(super) async fn write_pty(
    master: Arc<AsyncFd<OwnedFd>>,
    mut rx: mpsc::UnboundedReceiver<Vec<u8>>,
) {
    while let Some(bytes) = rx.recv().await {
        let mut rest: &[u8] = &bytes;
        while !rest.is_empty() {
            let Ok(mut guard) = master.writable().await else {
                return;
            };
            match guard
                .try_io(|fd| nix::unistd::write(fd.get_ref(), rest).map_err(std::io::Error::from))
            {
                Ok(Ok(n)) => rest = &rest[n..],
                Ok(Err(e)) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Ok(Err(_)) => return,
                Err(_would_block) => {}
            }
        }
    }
}
