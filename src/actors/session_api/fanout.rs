//! The bounded fan-out of a session's stream: one queue per subscriber, fed by `broadcast`.
//!
//! Owns `MessageReceiver` (the public end) and `MessageSender` (kept in `Subscribers`). A send
//! never blocks and never awaits: a full queue drops its OLDEST message, and the reader then gets
//! one `messages_dropped` event (`[... N earlier messages dropped ...]`) before the next message.
//! It must not hold the lock across an await, and must not record anything (the marker is built
//! here, for one subscriber, and never reaches the trace).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;
pub use tokio::sync::mpsc::error::TryRecvError;

use crate::message::{EventPayload, OmniMessage};

/// Messages queued per subscriber before the oldest are dropped.
pub const SUBSCRIBER_CAPACITY: usize = 4096;

#[derive(Default)]
struct Queue {
    items: VecDeque<Arc<OmniMessage>>,
    /// Dropped since the last marker was delivered.
    dropped: u64,
    /// The most messages ever queued at once.
    high_water: usize,
    sender_gone: bool,
    receiver_gone: bool,
}

struct Shared {
    queue: Mutex<Queue>,
    capacity: usize,
    notify: Notify,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        // A poisoned lock only means another thread panicked mid-push; the queue is still valid.
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A stream of a session's messages (partials, complete messages, events), in order. Bounded:
/// a reader that falls more than [`SUBSCRIBER_CAPACITY`] messages behind loses the oldest ones and
/// reads an `EventPayload::MessagesDropped` marker in their place.
pub struct MessageReceiver {
    shared: Arc<Shared>,
}

/// The session's end of one subscription.
pub struct MessageSender {
    shared: Arc<Shared>,
}

/// A new subscription holding at most `capacity` (at least 1) messages.
pub(crate) fn channel(capacity: usize) -> (MessageSender, MessageReceiver) {
    let shared = Arc::new(Shared {
        queue: Mutex::new(Queue::default()),
        capacity: capacity.max(1),
        notify: Notify::new(),
    });
    (
        MessageSender {
            shared: shared.clone(),
        },
        MessageReceiver { shared },
    )
}

/// The `[... N earlier messages dropped ...]` marker a lagging reader gets.
pub(super) fn dropped_marker(count: u64) -> OmniMessage {
    OmniMessage::event(EventPayload::MessagesDropped {
        count,
        text: format!("[... {count} earlier messages dropped ...]"),
    })
}

impl MessageSender {
    /// Queues `msg` without waiting; false once the receiver is gone.
    pub(crate) fn send(&self, msg: Arc<OmniMessage>) -> bool {
        {
            let mut q = self.shared.lock();
            if q.receiver_gone {
                return false;
            }
            if q.items.len() >= self.shared.capacity {
                q.items.pop_front();
                q.dropped += 1;
            }
            q.items.push_back(msg);
            q.high_water = q.high_water.max(q.items.len());
        }
        self.shared.notify.notify_one();
        true
    }
}

impl Drop for MessageSender {
    fn drop(&mut self) {
        self.shared.lock().sender_gone = true;
        self.shared.notify.notify_one();
    }
}

impl MessageReceiver {
    fn take(&mut self) -> Result<Arc<OmniMessage>, TryRecvError> {
        let mut q = self.shared.lock();
        if q.dropped > 0 {
            let count = std::mem::take(&mut q.dropped);
            return Ok(Arc::new(dropped_marker(count)));
        }
        match q.items.pop_front() {
            Some(m) => Ok(m),
            None if q.sender_gone => Err(TryRecvError::Disconnected),
            None => Err(TryRecvError::Empty),
        }
    }

    /// The next message; `None` once the session's stream ended and everything was read.
    /// Cancel-safe (nothing is lost when the future is dropped).
    pub async fn recv(&mut self) -> Option<Arc<OmniMessage>> {
        loop {
            match self.take() {
                Ok(m) => return Some(m),
                Err(TryRecvError::Disconnected) => return None,
                // A single waiter: `notify_one` keeps a permit when nobody waits yet.
                Err(TryRecvError::Empty) => self.shared.notify.notified().await,
            }
        }
    }

    /// The next message if one is queued, without waiting.
    pub fn try_recv(&mut self) -> Result<Arc<OmniMessage>, TryRecvError> {
        self.take()
    }

    /// Messages queued now (never more than [`SUBSCRIBER_CAPACITY`]).
    pub fn len(&self) -> usize {
        self.shared.lock().items.len()
    }

    /// True when nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The most messages this subscription ever held at once.
    pub fn high_water(&self) -> usize {
        self.shared.lock().high_water
    }
}

impl Drop for MessageReceiver {
    fn drop(&mut self) {
        let mut q = self.shared.lock();
        q.receiver_gone = true;
        q.items.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::build;

    fn msg(i: usize) -> Arc<OmniMessage> {
        Arc::new(build::partial_text(
            crate::message::EventType::Delta,
            i.to_string(),
            crate::message::StopReason::Completed,
        ))
    }

    fn text_of(m: &OmniMessage) -> Option<usize> {
        match m.as_model() {
            Some(crate::message::ModelPayload::PartialText { text, .. }) => text.parse().ok(),
            _ => None,
        }
    }

    #[tokio::test]
    async fn a_reader_that_never_reads_stays_bounded_and_is_told_what_it_lost() {
        let (tx, mut rx) = channel(SUBSCRIBER_CAPACITY);
        let total = 100_000;
        for i in 0..total {
            assert!(tx.send(msg(i)));
            assert!(rx.len() <= SUBSCRIBER_CAPACITY);
        }
        drop(tx);
        assert_eq!(rx.high_water(), SUBSCRIBER_CAPACITY);
        let first = rx.recv().await.unwrap();
        let Some(EventPayload::MessagesDropped { count, text }) = first.as_event() else {
            panic!("expected the marker first, got {}", first.to_json());
        };
        assert_eq!(*count as usize, total - SUBSCRIBER_CAPACITY);
        assert_eq!(text, &format!("[... {count} earlier messages dropped ...]"));
        let mut got = Vec::new();
        while let Some(m) = rx.recv().await {
            got.push(text_of(&m).unwrap());
        }
        // The newest messages survive, in order.
        let want: Vec<usize> = (total - SUBSCRIBER_CAPACITY..total).collect();
        assert_eq!(got, want);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_reader_that_keeps_up_loses_nothing() {
        let (tx, mut rx) = channel(8);
        let total = 20_000;
        let reader = tokio::spawn(async move {
            let mut got = Vec::new();
            while let Some(m) = rx.recv().await {
                got.push(m);
            }
            got
        });
        // The producer waits until the reader drained before queueing more (never more than 8).
        let ack_tx = tx;
        for i in 0..total {
            assert!(ack_tx.send(msg(i)));
            if i % 8 == 7 {
                tokio::task::yield_now().await;
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
                while !ack_tx.shared.lock().items.is_empty() && std::time::Instant::now() < deadline
                {
                    tokio::task::yield_now().await;
                }
            }
        }
        drop(ack_tx);
        let got = reader.await.unwrap();
        let nums: Vec<usize> = got.iter().map(|m| text_of(m).unwrap()).collect();
        assert_eq!(nums, (0..total).collect::<Vec<_>>());
    }

    #[tokio::test]
    async fn lost_and_received_add_up_when_the_reader_lags_now_and_then() {
        let (tx, mut rx) = channel(16);
        let total = 10_000;
        let (mut received, mut dropped) = (0u64, 0u64);
        for i in 0..total {
            tx.send(msg(i));
            if i % 100 == 0 {
                while let Ok(m) = rx.try_recv() {
                    match m.as_event() {
                        Some(EventPayload::MessagesDropped { count, .. }) => dropped += count,
                        _ => received += 1,
                    }
                }
            }
        }
        drop(tx);
        while let Some(m) = rx.recv().await {
            match m.as_event() {
                Some(EventPayload::MessagesDropped { count, .. }) => dropped += count,
                _ => received += 1,
            }
        }
        assert!(dropped > 0);
        assert_eq!(received + dropped, total as u64);
        assert_eq!(rx.try_recv().unwrap_err(), TryRecvError::Disconnected);
    }

    #[test]
    fn a_gone_reader_is_pruned() {
        let (tx, rx) = channel(4);
        assert!(tx.send(msg(0)));
        drop(rx);
        assert!(!tx.send(msg(1)));
    }
}
