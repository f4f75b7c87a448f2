//! What a session's append stream has committed, told to whoever follows the session (the
//! server's SSE): each committed batch as `(seq, record)` pairs on a bounded channel, and the
//! highest committed `seq` on a watch that always holds the latest value.
//!
//! The writer never waits for a follower: a batch that does not fit the channel is dropped,
//! and the follower, seeing the watch ahead of what it got, reads the store from its last
//! `seq` instead. A stream's feed waits in the store's registry until a follower takes it, and
//! leaves it when the stream ends. It owns no statement and decides nothing about leases.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::{mpsc, watch};

/// Committed batches a follower may be behind before the next ones are dropped.
pub const FEED_BATCHES: usize = 64;

/// One committed batch: each record with its `seq`, in order.
pub type Committed = Vec<(i64, Vec<u8>)>;

/// A session's commits, as a follower reads them.
pub struct CommitFeed {
    /// The `seq` the stream's first record got (the session's records before it were stored
    /// earlier).
    pub first_seq: i64,
    /// The committed batches (some may have been dropped: see the watch).
    pub batches: mpsc::Receiver<Committed>,
    /// The highest committed `seq` (`first_seq - 1` before the first commit).
    pub committed: watch::Receiver<i64>,
}

/// The writer's side of a feed.
pub struct Publisher {
    tx: mpsc::Sender<Committed>,
    committed: watch::Sender<i64>,
    /// Whether a follower took the feed (nothing is copied for nobody).
    wanted: Arc<AtomicBool>,
    feeds: CommitFeeds,
    id: String,
    generation: u64,
}

impl Publisher {
    /// Tells the follower that `records` were committed from `first_seq` on. Never waits.
    pub fn publish(&self, first_seq: i64, records: &[Vec<u8>]) {
        if records.is_empty() {
            return;
        }
        let last = first_seq + records.len() as i64 - 1;
        if !self.wanted.load(Ordering::Acquire) {
            self.committed.send_replace(last);
            return;
        }
        let batch: Committed = (first_seq..).zip(records.iter().cloned()).collect();
        // Sent before the watch moves: a follower that sees the watch ahead and an empty
        // channel reads the store, and skips what it then also gets here.
        if let Err(mpsc::error::TrySendError::Full(_)) = self.tx.try_send(batch) {
            tracing::debug!(session = %self.id, "SSE follower behind: it reads the store");
        }
        self.committed.send_replace(last);
    }
}

impl Drop for Publisher {
    fn drop(&mut self) {
        self.feeds.remove(&self.id, self.generation);
    }
}

struct Waiting {
    feed: CommitFeed,
    wanted: Arc<AtomicBool>,
    generation: u64,
}

/// The feeds of a process's streams not yet taken by a follower (cheap to clone).
#[derive(Clone, Default)]
pub struct CommitFeeds {
    waiting: Arc<Mutex<HashMap<String, Waiting>>>,
    generations: Arc<AtomicU64>,
}

impl CommitFeeds {
    /// A new feed for session `id`'s stream whose first record is `first_seq` (it replaces a
    /// feed of an earlier stream of the session nobody took).
    pub fn open(&self, id: &str, first_seq: i64) -> Publisher {
        let (tx, batches) = mpsc::channel(FEED_BATCHES);
        let (committed_tx, committed) = watch::channel(first_seq - 1);
        let wanted = Arc::new(AtomicBool::new(false));
        let generation = self.generations.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut waiting) = self.waiting.lock() {
            waiting.insert(
                id.to_string(),
                Waiting {
                    feed: CommitFeed {
                        first_seq,
                        batches,
                        committed,
                    },
                    wanted: wanted.clone(),
                    generation,
                },
            );
        }
        Publisher {
            tx,
            committed: committed_tx,
            wanted,
            feeds: self.clone(),
            id: id.to_string(),
            generation,
        }
    }

    /// Session `id`'s current stream's feed, for its one follower.
    pub fn take(&self, id: &str) -> Option<CommitFeed> {
        let waiting = self.waiting.lock().ok()?.remove(id)?;
        waiting.wanted.store(true, Ordering::Release);
        Some(waiting.feed)
    }

    fn remove(&self, id: &str, generation: u64) {
        if let Ok(mut waiting) = self.waiting.lock()
            && waiting.get(id).is_some_and(|w| w.generation == generation)
        {
            waiting.remove(id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_taken_feed_gets_batches_and_drops_them_when_full_but_the_watch_moves() {
        let feeds = CommitFeeds::default();
        let publisher = feeds.open("s", 5);
        // Nobody follows yet: only the watch.
        publisher.publish(5, &[b"a".to_vec()]);
        let mut feed = feeds.take("s").unwrap();
        assert!(feeds.take("s").is_none());
        assert_eq!(feed.first_seq, 5);
        assert_eq!(*feed.committed.borrow(), 5);
        assert!(feed.batches.try_recv().is_err());
        for i in 0..FEED_BATCHES as i64 + 3 {
            publisher.publish(6 + i, &[b"b".to_vec()]);
        }
        let mut got = 0;
        while let Ok(batch) = feed.batches.try_recv() {
            assert_eq!(batch[0].0, 6 + got);
            got += 1;
        }
        assert_eq!(got, FEED_BATCHES as i64);
        assert_eq!(*feed.committed.borrow(), 5 + FEED_BATCHES as i64 + 3);
    }

    #[test]
    fn an_untaken_feed_leaves_with_its_stream_but_not_a_newer_one() {
        let feeds = CommitFeeds::default();
        let old = feeds.open("s", 0);
        let new = feeds.open("s", 4);
        drop(old);
        assert_eq!(feeds.take("s").unwrap().first_seq, 4);
        let again = feeds.open("s", 9);
        drop(again);
        assert!(feeds.take("s").is_none());
        drop(new);
    }
}
