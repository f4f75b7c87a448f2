//! A session's SSE numbered by the store (`serve --store`): the follower that hands each
//! committed record to the session's [`EventLog`] under its `trace_records.seq`, in order and
//! each once, and the replay of a `seq` range from the store for a client whose
//! `Last-Event-ID` is older than the ring.
//!
//! The follower reads its append stream's [`CommitFeed`]; when the feed dropped batches (it
//! fell behind) or started after records it did not see, it reads the store from the last
//! `seq` it sent, a bounded page at a time. It only reads the store and feeds the log; it never
//! writes a record nor touches the session.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use super::error::ApiError;
use super::sse::{EventLog, Record};
use crate::error::RookeryError;
use crate::store::PgStore;
use crate::store::commits::CommitFeed;
use crate::store::records::{RECORD_PAGE, records_after};

/// Records read back and waiting for an SSE client, at most.
const READ_AHEAD: usize = 16;

/// Pause before reading the store again after it failed.
const RETRY: Duration = Duration::from_millis(500);

/// Reads of the store a follower tries, after its stream ended, to send what was committed.
const FINAL_TRIES: u32 = 10;

/// How long a session's end waits for its follower to send what was committed last.
pub const FOLLOWER_END: Duration = Duration::from_secs(10);

/// The JSON of a stored record (its line without the newline).
fn json_of(record: &[u8]) -> String {
    let line = record.strip_suffix(b"\n").unwrap_or(record);
    String::from_utf8_lossy(line).into_owned()
}

/// A session's event log on the store and the task following its commits into it.
pub type Followed = (Arc<EventLog>, tokio::task::JoinHandle<()>);

/// A session's log on the store and its follower, when its append stream has a feed to
/// follow: `carried` (a hibernated session's stored log, which goes on from what it sent,
/// reading first what other nodes stored meanwhile) or a new log numbered from the stream's
/// first `seq`. `None` when there is no feed (the caller
/// numbers the log itself). `dropped` counts the clients dropped for lagging.
pub fn start(
    store: &PgStore,
    id: &str,
    carried: Option<Arc<EventLog>>,
    new_log: impl FnOnce(i64) -> EventLog,
    dropped: impl Fn(usize) + Send + Sync + 'static,
) -> Option<Followed> {
    let feed = store.commit_feeds().take(id)?;
    let log = match carried {
        Some(log) if log.is_stored() => log,
        // A session hibernated with no client kept only its last number, not a stored log:
        // it goes on with a new one numbered by the store (a log numbered by the server
        // would give ids no other node knows, and none of what another node wrote meanwhile).
        _ => Arc::new(new_log(feed.first_seq)),
    };
    log.follow_commits(feed.committed.clone());
    let follower = tokio::spawn(follow(
        store.clone(),
        id.to_string(),
        log.clone(),
        feed,
        dropped,
    ));
    Some((log, follower))
}

/// Follows session `id`'s commits into `log` until its append stream ends (and what it
/// committed was sent). Returns then.
pub async fn follow(
    store: PgStore,
    id: String,
    log: Arc<EventLog>,
    feed: CommitFeed,
    dropped: impl Fn(usize),
) {
    let CommitFeed {
        mut batches,
        mut committed,
        ..
    } = feed;
    let dropped_clients = dropped;
    let push = |seq: i64, record: Vec<u8>| {
        let mut dropped = 0;
        let pushed = log.push_stored(seq, json_of(&record), &mut dropped);
        if dropped > 0 {
            dropped_clients(dropped);
        }
        pushed
    };
    // What was committed before the feed was taken.
    let to = *committed.borrow_and_update();
    if to >= log.next_stored() {
        catch_up(&store, &id, &log, to, &push).await;
    }
    loop {
        tokio::select! {
            batch = batches.recv() => {
                let Some(batch) = batch else { break };
                for (seq, record) in batch {
                    if seq > log.next_stored() {
                        catch_up(&store, &id, &log, seq - 1, &push).await;
                    }
                    if seq == log.next_stored() {
                        push(seq, record);
                    }
                }
            }
            changed = committed.changed() => {
                if changed.is_err() {
                    break;
                }
                let to = *committed.borrow_and_update();
                // What the channel dropped (it is empty and the watch is ahead).
                if batches.is_empty() && to >= log.next_stored() {
                    catch_up(&store, &id, &log, to, &push).await;
                }
            }
        }
    }
    // The stream ended: what it committed last goes out before the log may close.
    let to = *committed.borrow();
    let mut tries = 0;
    while log.next_stored() <= to && tries < FINAL_TRIES {
        catch_up(&store, &id, &log, to, &push).await;
        tries += 1;
        if log.next_stored() <= to {
            tokio::time::sleep(RETRY).await;
        }
    }
}

/// Sends the stored records from the log's next `seq` up to `to` (a failed read is logged and
/// left for the next commit).
async fn catch_up(
    store: &PgStore,
    id: &str,
    log: &EventLog,
    to: i64,
    push: &impl Fn(i64, Vec<u8>) -> bool,
) {
    while log.next_stored() <= to {
        let after = log.next_stored() - 1;
        let page = match records_after(store, id, after, RECORD_PAGE).await {
            Ok(page) => page,
            Err(e) => {
                tracing::warn!(session = %id, "cannot read the store for the SSE stream: {e}");
                return;
            }
        };
        if page.is_empty() {
            return;
        }
        for (seq, record) in page {
            if seq > to || (seq == log.next_stored() && !push(seq, record)) {
                return;
            }
        }
    }
}

/// Session `id`'s stored records with `seq` in `(from, to]`, in order, a bounded page at a
/// time; the first page is read before the answer starts (503 `store_unavailable` while the
/// store is down). The channel ends at `to`, at a failed read (logged) or when the client
/// went away.
pub async fn replay(
    store: PgStore,
    id: String,
    (from, to): (i64, i64),
) -> Result<mpsc::Receiver<Arc<Record>>, ApiError> {
    let (tx, rx) = mpsc::channel(READ_AHEAD);
    let mut page = records_after(&store, &id, from, RECORD_PAGE)
        .await
        .map_err(|e| ApiError::from(RookeryError::Store(e)))?;
    tokio::spawn(async move {
        loop {
            let full = page.len() as i64 == RECORD_PAGE;
            let mut last = from;
            for (seq, record) in std::mem::take(&mut page) {
                last = seq;
                if seq > to {
                    return;
                }
                let Ok(n) = u64::try_from(seq) else {
                    continue;
                };
                if tx
                    .send(Arc::new(Record::new(n, json_of(&record))))
                    .await
                    .is_err()
                    || seq == to
                {
                    return;
                }
            }
            if !full {
                return;
            }
            page = match records_after(&store, &id, last, RECORD_PAGE).await {
                Ok(page) => page,
                Err(e) => {
                    tracing::warn!(session = %id, "cannot read the store for an SSE replay: {e}");
                    return;
                }
            };
        }
    });
    Ok(rx)
}

#[cfg(test)]
mod tests {
    use super::super::sse::RING_BYTES;
    use super::*;
    use crate::message::build;

    fn partial() -> crate::message::OmniMessage {
        build::partial_text(
            crate::message::EventType::Delta,
            "p".to_string(),
            crate::message::StopReason::Completed,
        )
    }

    fn ids(records: &[Arc<Record>]) -> Vec<(u64, bool)> {
        records.iter().map(|r| (r.seq, r.id)).collect()
    }

    #[test]
    fn a_stored_log_sends_records_under_their_seq_in_order_and_the_rest_without_id() {
        // Woken with records 0..=4 in the store.
        let log = EventLog::stored(5, 3, RING_BYTES, 8);
        let mut dropped = 0;
        // A recorded message of the session waits for its commit; a partial goes at once.
        assert_eq!(log.push_streamed(&build::user_text("u", None)), 0);
        log.push_streamed(&partial());
        assert!(!log.push_stored(6, "{}".into(), &mut dropped), "a gap");
        assert!(log.push_stored(5, "{}".into(), &mut dropped));
        assert!(!log.push_stored(5, "{}".into(), &mut dropped), "a repeat");
        log.push_streamed(&partial());
        assert!(log.push_stored(6, "{}".into(), &mut dropped));
        assert_eq!(log.last_seq(), 6);
        assert_eq!(log.next_stored(), 7);
        // The ring keeps the last three: (5), partial after 5, 6.
        let sub = log.subscribe(Some(2));
        assert_eq!(sub.from_store, Some((2, 4)));
        assert_eq!(ids(&sub.replay), [(5, true), (5, false), (6, true)]);
        // From the id before the ring's first record: the store has nothing to add.
        let sub = log.subscribe(Some(4));
        assert_eq!(sub.from_store, None);
        assert_eq!(sub.replay.len(), 3);
        // After 5: the partial that followed it, then 6.
        assert_eq!(ids(&log.subscribe(Some(5)).replay), [(5, false), (6, true)]);
        assert!(log.subscribe(Some(6)).replay.is_empty());
        assert_eq!(log.subscribe(None).from_store, None);
        assert_eq!(dropped, 0);
    }

    #[test]
    fn a_stored_log_whose_ring_has_no_record_reads_the_store_up_to_its_last_seq() {
        let log = EventLog::stored(10, 8, RING_BYTES, 8);
        log.push_streamed(&partial());
        let sub = log.subscribe(Some(3));
        assert_eq!(sub.from_store, Some((3, 9)));
        // The partial came after 9: it follows what the store gives.
        assert_eq!(ids(&sub.replay), [(9, false)]);
        // A new session: nothing stored yet, nothing to read.
        let fresh = EventLog::stored(0, 8, RING_BYTES, 8);
        assert_eq!(fresh.subscribe(Some(0)).from_store, None);
        let mut dropped = 0;
        assert!(fresh.push_stored(0, "{}".into(), &mut dropped));
        assert_eq!(fresh.last_seq(), 0);
        assert_eq!(fresh.next_stored(), 1);
    }

    #[tokio::test]
    async fn a_client_gets_no_record_at_or_below_its_last_event_id_even_live() {
        use axum::response::IntoResponse;
        // Woken with 0..=4 stored before; its follower has not yet read 5 and 6, which were
        // committed (a task's `events_after` says 6), when a client comes with 6.
        let log = EventLog::stored(5, 8, RING_BYTES, 8);
        let sub = log.subscribe(Some(6));
        assert_eq!(sub.floor, Some(6));
        assert_eq!(sub.from_store, None);
        let mut dropped = 0;
        for seq in 5..=7 {
            assert!(log.push_stored(seq, format!("{{\"n\":{seq}}}"), &mut dropped));
        }
        log.push_streamed(&partial());
        log.close();
        let body = super::super::sse::sse_response(sub, None)
            .into_response()
            .into_body();
        let bytes = axum::body::to_bytes(body, 1 << 20).await.unwrap();
        let text = String::from_utf8(bytes.to_vec()).unwrap();
        let ids: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("id:").map(str::trim))
            .collect();
        assert_eq!(ids, ["7"], "{text}");
        assert!(
            text.contains("{\"n\":7}") && !text.contains("{\"n\":6}"),
            "{text}"
        );
        assert_eq!(
            text.matches("data:").count(),
            2,
            "7 and the partial: {text}"
        );
        // Without a store the floor stays off (an id from an earlier run replays everything).
        assert_eq!(
            EventLog::new(8, RING_BYTES, 8).subscribe(Some(3)).floor,
            None
        );
    }
}
