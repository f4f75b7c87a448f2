//! The rest of a response body after its answer ended (`[DONE]`, or the usage chunk after the
//! finish reason): read to its end so that the connection goes back to the client's pool.
//!
//! A body dropped before its end closes its connection, and the next request of the session
//! pays for a new one (a socket, half a dozen socket options, a TLS handshake for https). A
//! server that flushes each event sends the chunked body's terminator after `[DONE]`, so
//! dropping at `[DONE]` closed every connection of such a server. This module must never hold
//! the answer back: the transport has already ended the request when it hands the body over.

use std::time::Duration;

use futures::{FutureExt, StreamExt};

use super::transport::ByteStream;

/// Most bytes read of a body after its answer ended.
const DRAIN_MAX: usize = 64 * 1024;
/// How long the rest of a body is waited for after its answer ended.
const DRAIN_WAIT: Duration = Duration::from_millis(500);

/// Reads the rest of a body whose answer has ended (`[DONE]`, or the usage after the finish
/// reason), so that its connection goes back to the pool: a body dropped before its end closes
/// the connection, and the next request pays for a new one. What has already arrived is read
/// at once (usually the body's end came with `[DONE]`); otherwise a task of its own waits for
/// the end, at most [`DRAIN_WAIT`] and [`DRAIN_MAX`] bytes, and then drops the body (and the
/// connection) as before. The answer is never held back by it.
pub(super) fn drain(mut bytes: ByteStream) {
    let mut read = 0usize;
    loop {
        match bytes.next().now_or_never() {
            Some(Some(Ok(chunk))) => {
                read += chunk.len();
                if read > DRAIN_MAX {
                    return;
                }
            }
            // The end (the connection is pooled) or an error (it is closed).
            Some(_) => return,
            None => break,
        }
    }
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    runtime.spawn(async move {
        let rest = async {
            while let Some(Ok(chunk)) = bytes.next().await {
                read += chunk.len();
                if read > DRAIN_MAX {
                    break;
                }
            }
        };
        let _ = tokio::time::timeout(DRAIN_WAIT, rest).await;
    });
}

#[cfg(test)]
mod tests {
    use std::pin::Pin;
    use std::task::{Context, Poll};

    use bytes::Bytes;
    use futures::Stream;
    use tokio::sync::{mpsc, oneshot};

    use super::*;

    /// A body fed by the test; says on drop whether it was read to its end.
    struct Watched {
        rx: mpsc::UnboundedReceiver<Bytes>,
        ended: bool,
        dropped: Option<oneshot::Sender<bool>>,
    }

    impl Stream for Watched {
        type Item = reqwest::Result<Bytes>;
        fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
            match self.rx.poll_recv(cx) {
                Poll::Ready(Some(b)) => Poll::Ready(Some(Ok(b))),
                Poll::Ready(None) => {
                    self.ended = true;
                    Poll::Ready(None)
                }
                Poll::Pending => Poll::Pending,
            }
        }
    }

    impl Drop for Watched {
        fn drop(&mut self) {
            if let Some(tx) = self.dropped.take() {
                let _ = tx.send(self.ended);
            }
        }
    }

    fn watched() -> (
        mpsc::UnboundedSender<Bytes>,
        ByteStream,
        oneshot::Receiver<bool>,
    ) {
        let (tx, rx) = mpsc::unbounded_channel();
        let (dtx, drx) = oneshot::channel();
        let body = Watched {
            rx,
            ended: false,
            dropped: Some(dtx),
        };
        (tx, Box::pin(body), drx)
    }

    #[tokio::test]
    async fn an_end_that_already_arrived_is_read_at_once() {
        let (tx, body, mut dropped) = watched();
        tx.send(Bytes::from_static(b"\r\n")).unwrap();
        drop(tx);
        drain(body);
        // No task, no wait: read to the end and dropped inside the call.
        assert_eq!(dropped.try_recv(), Ok(true));
    }

    #[tokio::test]
    async fn an_end_that_comes_later_is_waited_for() {
        let (tx, body, mut dropped) = watched();
        tx.send(Bytes::from_static(b"x")).unwrap();
        drain(body);
        assert!(dropped.try_recv().is_err(), "still waiting for the end");
        tx.send(Bytes::from_static(b"y")).unwrap();
        drop(tx);
        assert_eq!(dropped.await, Ok(true));
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_that_never_ends_is_given_up() {
        let (tx, body, dropped) = watched();
        drain(body);
        // Paused time runs ahead while every task waits: the bound, not the sender, ends it.
        assert_eq!(dropped.await, Ok(false));
        drop(tx);
    }

    #[tokio::test]
    async fn a_body_that_keeps_talking_is_given_up() {
        let (tx, body, mut dropped) = watched();
        for _ in 0..=DRAIN_MAX / 1024 {
            tx.send(Bytes::from(vec![b'x'; 1024])).unwrap();
        }
        drain(body);
        assert_eq!(dropped.try_recv(), Ok(false));
        drop(tx);
    }

    #[test]
    fn outside_a_runtime_the_body_is_dropped() {
        let (tx, body, mut dropped) = watched();
        drain(body);
        assert_eq!(dropped.try_recv(), Ok(false));
        drop(tx);
    }
}
