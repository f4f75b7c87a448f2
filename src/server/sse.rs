//! A served session's event log and its SSE fan-out: every message the session emits gets the
//! next sequence number (1, 2, 3, …), goes into a replay ring bounded by count and by bytes
//! (partials counted) and to each connected client's bounded buffer. A recorded message that
//! leaves the ring leaves its number and the hash of its JSON in an index, so a replay from
//! before the ring can find it in the trace (`sse_trace.rs`) under the same number.
//!
//! On the store (`serve --store`) the log is numbered by the store instead: each recorded
//! message goes out, once its batch is committed, under its `trace_records.seq`
//! ([`EventLog::push_stored`], fed by `sse_store.rs`), and what is not recorded (partials, the
//! server's own events) goes out at once without an id, so every `Last-Event-ID` a client holds
//! is a stored `seq` any node can go on from; a replay from before the ring reads the store by
//! `seq`.
//!
//! A client whose buffer is full is dropped (its stream ends; it reconnects with
//! `Last-Event-ID`), so a slow reader never blocks the session or the other clients. This file
//! never talks to the session actor: the server's per-session pump feeds it.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::response::sse::{Event, KeepAlive, Sse};
use futures::Stream;
use futures::stream::StreamExt;
use tokio::sync::mpsc;

use crate::message::OmniMessage;

/// Messages kept for `Last-Event-ID` replay, per session.
pub const RING_CAPACITY: usize = 4096;
/// Bytes (of the messages' JSON) kept for `Last-Event-ID` replay, per session, by default.
pub const RING_BYTES: usize = 64 * 1024 * 1024;
/// Recorded messages gone from the ring whose numbers are kept for a replay from the trace.
pub const TRACE_INDEX_CAPACITY: usize = 1 << 18;
/// Messages buffered per SSE client before it counts as too slow and is dropped.
pub const CLIENT_BUFFER: usize = 1024;
/// Interval of the keep-alive comments.
pub const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// One numbered message, serialized once.
#[derive(Debug, PartialEq, Eq)]
pub struct Record {
    /// The SSE event id (without [`Record::id`]: the newest id before it, which it is not sent
    /// with).
    pub seq: u64,
    /// Whether it is sent with its id (a message not stored, on the store, is not).
    pub id: bool,
    /// The SSE event name: the payload's type (`text`, `tool_call`, `request_begin`, …), or
    /// the envelope's (`session_meta`) when the payload has none.
    pub event: String,
    /// The message's JSON.
    pub json: String,
}

impl Record {
    /// The record numbered `seq` of the message JSON `json`, named by [`event_name`].
    pub fn new(seq: u64, json: String) -> Self {
        Record {
            seq,
            id: true,
            event: event_name(&json),
            json,
        }
    }

    /// A message sent without an id, after the one numbered `after`.
    pub fn unnumbered(after: u64, json: String) -> Self {
        Record {
            id: false,
            ..Record::new(after, json)
        }
    }
}

/// The SSE event name of a message's JSON: its payload's `type` for a `model_msg` or an
/// `event_msg`, else its envelope `type` (`session_meta`, or `message` for what is no message).
pub fn event_name(json: &str) -> String {
    #[derive(serde::Deserialize)]
    struct PayloadHead {
        #[serde(rename = "type")]
        kind: Option<String>,
    }
    #[derive(serde::Deserialize)]
    struct Head {
        #[serde(rename = "type")]
        kind: String,
        payload: Option<PayloadHead>,
    }
    let Ok(head) = serde_json::from_str::<Head>(json) else {
        return "message".to_string();
    };
    let inner = head.payload.and_then(|p| p.kind);
    let name = match (head.kind.as_str(), inner) {
        ("model_msg" | "event_msg", Some(inner)) => inner,
        _ => head.kind,
    };
    // An SSE field ends at a line break: a name is one token.
    if name.is_empty() || name.contains(['\n', '\r']) {
        "message".to_string()
    } else {
        name
    }
}

/// A recorded message gone from the ring: its number and the hash of its JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gone {
    /// The SSE event id.
    pub seq: u64,
    /// The hash of its JSON (to match it in the trace).
    pub hash: u64,
}

/// The hash [`Gone`] keeps of a message's JSON (the trace line without its newline).
pub fn json_hash(json: &[u8]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    json.hash(&mut h);
    h.finish()
}

struct Inner {
    /// Each message with whether the trace records it.
    ring: VecDeque<(Arc<Record>, bool)>,
    ring_bytes: usize,
    gone: VecDeque<Gone>,
    last_seq: u64,
    /// On the store: the `seq` of the next stored message.
    next_stored: i64,
    /// On the store: the highest `seq` the session's append stream committed.
    committed: Option<tokio::sync::watch::Receiver<i64>>,
    clients: Vec<mpsc::Sender<Arc<Record>>>,
    closed: bool,
}

/// The numbered message log of one session.
pub struct EventLog {
    inner: Mutex<Inner>,
    capacity: usize,
    max_bytes: usize,
    client_buffer: usize,
    /// Numbered by the store (see the module doc).
    stored: bool,
}

/// What a new client gets: the recorded messages gone from the ring (to read from the trace),
/// the ring's replay, then the live feed (none when the log is closed).
pub struct Subscription {
    /// Messages to read from the trace first, oldest first.
    pub from_trace: Vec<Gone>,
    /// On the store: the stored messages to read first, `seq` in `(from, to]`.
    pub from_store: Option<(i64, i64)>,
    /// The ring's messages after those.
    pub replay: Vec<Arc<Record>>,
    /// The live feed; `None` when the log is closed.
    pub live: Option<mpsc::Receiver<Arc<Record>>>,
    /// On the store: the client's `Last-Event-ID`. A record numbered at or below it is not
    /// sent, even live (a follower still reading the store after a wake may push records the
    /// client already has).
    pub floor: Option<u64>,
}

impl EventLog {
    /// A log whose ring keeps at most `capacity` messages and `max_bytes` bytes of JSON.
    pub fn new(capacity: usize, max_bytes: usize, client_buffer: usize) -> Self {
        EventLog {
            inner: Mutex::new(Inner {
                // Grown as messages come (up to `capacity`): an idle session holds a few.
                ring: VecDeque::new(),
                ring_bytes: 0,
                gone: VecDeque::new(),
                last_seq: 0,
                next_stored: 0,
                committed: None,
                clients: Vec::new(),
                closed: false,
            }),
            capacity: capacity.max(1),
            max_bytes,
            client_buffer: client_buffer.max(1),
            stored: false,
        }
    }

    /// A log numbered by the store, whose next stored message is `next_seq` (the ones before
    /// it are read from the store).
    pub fn stored(next_seq: i64, capacity: usize, max_bytes: usize, client_buffer: usize) -> Self {
        let mut log = EventLog::new(capacity, max_bytes, client_buffer);
        log.stored = true;
        if let Ok(inner) = log.inner.get_mut() {
            inner.next_stored = next_seq.max(0);
            inner.last_seq = u64::try_from(next_seq - 1).unwrap_or(0);
        }
        log
    }

    /// On the store: follows `committed`, the highest `seq` the session's append stream has
    /// committed (see [`Self::committed_seq`]).
    pub fn follow_commits(&self, committed: tokio::sync::watch::Receiver<i64>) {
        if let Ok(mut inner) = self.inner.lock() {
            inner.committed = Some(committed);
        }
    }

    /// On the store: the highest `seq` committed so far (which may not have been sent yet),
    /// else the newest number sent. A task's events follow it.
    pub fn committed_seq(&self) -> u64 {
        self.inner.lock().map_or(0, |i| {
            let committed = i
                .committed
                .as_ref()
                .map_or(0, |c| u64::try_from(*c.borrow()).unwrap_or(0));
            committed.max(i.last_seq)
        })
    }

    /// Whether the store numbers this log.
    pub fn is_stored(&self) -> bool {
        self.stored
    }

    /// On the store: the `seq` of the next stored message it expects.
    pub fn next_stored(&self) -> i64 {
        self.inner.lock().map_or(0, |i| i.next_stored)
    }

    /// On the store: sends the stored record `seq` (its JSON line) if it is the next one, and
    /// returns whether it was (an earlier one is a repeat, a later one would leave a gap: the
    /// caller reads the store first). Clients dropped for lagging are counted in `dropped`.
    pub fn push_stored(&self, seq: i64, json: String, dropped: &mut usize) -> bool {
        let Ok(mut inner) = self.inner.lock() else {
            return false;
        };
        if seq != inner.next_stored {
            return false;
        }
        inner.next_stored = seq + 1;
        inner.last_seq = u64::try_from(seq).unwrap_or(0);
        let record = Arc::new(Record::new(inner.last_seq, json));
        *dropped += self.add(&mut inner, record, false);
        true
    }

    /// A log whose first message is numbered `seq + 1` (a hibernated session's next log).
    pub fn after(seq: u64, capacity: usize, max_bytes: usize, client_buffer: usize) -> Self {
        let log = EventLog::new(capacity, max_bytes, client_buffer);
        if let Ok(mut inner) = log.inner.lock() {
            inner.last_seq = seq;
        }
        log
    }

    /// Numbers and stores `msg` and sends it to every client. Returns the number of clients
    /// dropped because their buffer was full.
    /// On the store it goes out at once without an id (use it for what the trace does not
    /// record, e.g. the server's own events; [`Self::push_streamed`] for the session's).
    pub fn push(&self, msg: &OmniMessage) -> usize {
        // Serialized and named before the lock: the other sessions' clients do not wait.
        let json = msg.to_json();
        let Ok(mut inner) = self.inner.lock() else {
            return 0;
        };
        let record = if self.stored {
            Record::unnumbered(inner.last_seq, json)
        } else {
            inner.last_seq += 1;
            Record::new(inner.last_seq, json)
        };
        let recorded = !self.stored && msg.is_recordable();
        self.add(&mut inner, Arc::new(record), recorded)
    }

    /// A message of the session's stream: as [`Self::push`], except that on the store a
    /// recordable one is left to [`Self::push_stored`] (it goes out once committed, under its
    /// `seq`).
    pub fn push_streamed(&self, msg: &OmniMessage) -> usize {
        if self.stored && msg.is_recordable() {
            return 0;
        }
        self.push(msg)
    }

    /// Keeps `record` in the ring (indexing what leaves it when `recorded`) and sends it.
    fn add(&self, inner: &mut Inner, record: Arc<Record>, recorded: bool) -> usize {
        inner.ring_bytes += record.json.len();
        inner.ring.push_back((record.clone(), recorded));
        while inner.ring.len() > self.capacity || inner.ring_bytes > self.max_bytes {
            let Some((old, recorded)) = inner.ring.pop_front() else {
                break;
            };
            inner.ring_bytes -= old.json.len();
            if recorded {
                if inner.gone.len() == TRACE_INDEX_CAPACITY {
                    inner.gone.pop_front();
                }
                inner.gone.push_back(Gone {
                    seq: old.seq,
                    hash: json_hash(old.json.as_bytes()),
                });
            }
        }
        let before = inner.clients.len();
        let mut lagged = 0;
        inner.clients.retain(|c| match c.try_send(record.clone()) {
            Ok(()) => true,
            Err(mpsc::error::TrySendError::Full(_)) => {
                lagged += 1;
                false
            }
            Err(mpsc::error::TrySendError::Closed(_)) => false,
        });
        if lagged > 0 {
            tracing::info!(
                dropped = lagged,
                clients = before,
                "dropped SSE clients that fell behind"
            );
        }
        lagged
    }

    /// The sequence number of the newest message (0 before the first).
    pub fn last_seq(&self) -> u64 {
        self.inner.lock().map_or(0, |i| i.last_seq)
    }

    /// Connected clients: those whose feed is still read (a disconnected client's feed is
    /// dropped with its connection, and it stops counting at once).
    pub fn clients(&self) -> usize {
        self.inner.lock().map_or(0, |mut i| {
            i.clients.retain(|c| !c.is_closed());
            i.clients.len()
        })
    }

    /// A new client. `after` is its `Last-Event-ID`: the messages after it are replayed, the
    /// recorded ones gone from the ring from the trace (an id beyond the newest one comes from
    /// an earlier server run: everything kept is replayed). Without it, the client gets only
    /// what comes next.
    pub fn subscribe(&self, after: Option<u64>) -> Subscription {
        let Ok(mut inner) = self.inner.lock() else {
            return Subscription {
                from_trace: Vec::new(),
                from_store: None,
                replay: Vec::new(),
                live: None,
                floor: None,
            };
        };
        let mut from_store = None;
        let floor = after.filter(|_| self.stored);
        let (from_trace, replay) = match after {
            None => (Vec::new(), Vec::new()),
            Some(n) if self.stored => {
                let n = i64::try_from(n).unwrap_or(i64::MAX);
                let first_kept = inner.ring.iter().find(|(r, _)| r.id).map(|(r, _)| r.seq);
                let to = match first_kept {
                    Some(seq) => i64::try_from(seq).unwrap_or(i64::MAX) - 1,
                    None => inner.next_stored - 1,
                };
                if n < to {
                    from_store = Some((n, to));
                }
                let kept = inner.ring.iter().map(|(r, _)| r);
                let n = u64::try_from(n).unwrap_or(0);
                // What has no id goes with the newest id before it: the partials that followed
                // event `n` (the answer it was streaming) are sent again.
                let after_n = |r: &&Arc<Record>| r.seq > n || (!r.id && r.seq == n);
                (Vec::new(), kept.filter(after_n).cloned().collect())
            }
            Some(n) => {
                let from = if n > inner.last_seq { 0 } else { n };
                let gone = inner.gone.iter().filter(|g| g.seq > from).copied();
                let kept = inner.ring.iter().map(|(r, _)| r);
                (
                    gone.collect(),
                    kept.filter(|r| r.seq > from).cloned().collect(),
                )
            }
        };
        let live = if inner.closed {
            None
        } else {
            let (tx, rx) = mpsc::channel(self.client_buffer);
            inner.clients.push(tx);
            Some(rx)
        };
        Subscription {
            from_trace,
            from_store,
            replay,
            live,
            floor,
        }
    }

    /// The session hibernates: the replay ring and the index of what left it are released
    /// (the messages stay in the trace), the numbering and the connected clients stay. A client
    /// reconnecting later is replayed what came after the hibernation.
    pub fn park(&self) {
        if let Ok(mut inner) = self.inner.lock() {
            inner.ring = VecDeque::new();
            inner.ring_bytes = 0;
            inner.gone = VecDeque::new();
            inner.clients.retain(|c| !c.is_closed());
            inner.clients.shrink_to_fit();
        }
    }

    /// The session has ended: live feeds end after what they have buffered.
    pub fn close(&self) {
        if let Ok(mut inner) = self.inner.lock() {
            inner.closed = true;
            inner.clients.clear();
        }
    }
}

/// The `text/event-stream` response for a subscription: `event: <payload type>`, `id: <seq>`
/// (left out for a message without one) and `data: <json>` per message, keep-alive comments in between. `earlier` (the records read back from the trace
/// for `sub.from_trace`) comes first.
pub fn sse_response(
    sub: Subscription,
    earlier: Option<mpsc::Receiver<Arc<Record>>>,
) -> Sse<impl Stream<Item = Result<Event, Infallible>> + Send + 'static> {
    let earlier = futures::stream::unfold(earlier, |rx| async move {
        let mut rx = rx?;
        let record = rx.recv().await?;
        Some((record, Some(rx)))
    });
    let replay = earlier.chain(futures::stream::iter(sub.replay));
    let live = futures::stream::unfold(sub.live, |rx| async move {
        let mut rx = rx?;
        let record = rx.recv().await?;
        Some((record, Some(rx)))
    });
    // Each id at most once and in order, whatever the sources overlap in, and on the store
    // none the client had.
    let mut last_id: Option<u64> = sub.floor;
    let stream = replay
        .chain(live)
        .filter(move |r| {
            let fresh = !r.id || last_id.is_none_or(|last| r.seq > last);
            if fresh && r.id {
                last_id = Some(r.seq);
            }
            std::future::ready(fresh)
        })
        .map(|r| {
            let event = Event::default().event(&r.event).data(&r.json);
            Ok::<_, Infallible>(if r.id {
                event.id(r.seq.to_string())
            } else {
                event
            })
        });
    Sse::new(stream).keep_alive(KeepAlive::new().interval(KEEP_ALIVE).text("keep-alive"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::build;

    fn text(i: usize) -> OmniMessage {
        build::user_text(format!("m{i}"), None)
    }

    fn seqs(records: &[Arc<Record>]) -> Vec<u64> {
        records.iter().map(|r| r.seq).collect()
    }

    #[test]
    fn a_parked_log_keeps_its_numbering_and_clients_but_not_its_ring() {
        let log = EventLog::new(8, RING_BYTES, 8);
        for i in 0..3 {
            log.push(&text(i));
        }
        let mut live = log.subscribe(None).live.unwrap();
        log.park();
        assert_eq!(log.last_seq(), 3);
        assert!(log.subscribe(Some(0)).replay.is_empty());
        log.push(&text(3));
        assert_eq!(live.try_recv().unwrap().seq, 4);
        assert_eq!(seqs(&log.subscribe(Some(0)).replay), [4]);
        // A hibernated session's next log goes on with the numbering.
        let next = EventLog::after(4, 8, RING_BYTES, 8);
        next.push(&text(4));
        assert_eq!(seqs(&next.subscribe(Some(0)).replay), [5]);
    }

    #[test]
    fn replays_after_the_given_id_from_a_bounded_ring() {
        let log = EventLog::new(3, RING_BYTES, 8);
        for i in 0..5 {
            log.push(&text(i));
        }
        assert_eq!(log.last_seq(), 5);
        assert_eq!(seqs(&log.subscribe(Some(3)).replay), [4, 5]);
        assert_eq!(seqs(&log.subscribe(Some(0)).replay), [3, 4, 5]);
        assert!(log.subscribe(None).replay.is_empty());
        assert_eq!(seqs(&log.subscribe(Some(5)).replay), Vec::<u64>::new());
        // An id from an earlier server run: everything kept.
        assert_eq!(seqs(&log.subscribe(Some(99)).replay), [3, 4, 5]);
        let r = &log.subscribe(Some(4)).replay[0];
        assert!(r.json.contains("\"text\":\"m4\""), "{}", r.json);
        assert_eq!(r.event, "text");
    }

    #[test]
    fn events_are_named_by_their_payload_type() {
        let meta = OmniMessage::session_meta(crate::message::SessionMeta::default());
        assert_eq!(event_name(&meta.to_json()), "session_meta");
        assert_eq!(event_name(&text(1).to_json()), "text");
        let begin = OmniMessage::event(crate::message::EventPayload::RequestBegin {});
        assert_eq!(event_name(&begin.to_json()), "request_begin");
        assert_eq!(event_name("{\"type\":\"x_msg\",\"payload\":{}}"), "x_msg");
        assert_eq!(event_name("not json"), "message");
    }

    #[test]
    fn the_ring_is_bounded_by_bytes_and_indexes_the_recorded_messages_it_drops() {
        let big = |i: usize| build::user_text(format!("{i}{}", "x".repeat(1000)), None);
        let partial = build::partial_text(
            crate::message::EventType::Delta,
            "y".repeat(1000),
            crate::message::StopReason::Completed,
        );
        let log = EventLog::new(100, 3500, 8);
        // Kept to hash: a message built again would carry another timestamp.
        let first = big(1);
        log.push(&first);
        log.push(&partial);
        for i in 3..=5 {
            log.push(&big(i));
        }
        // About 1.1 kB each: three fit.
        let sub = log.subscribe(Some(0));
        assert_eq!(seqs(&sub.replay), [3, 4, 5]);
        // The partial (never recorded) is not in the index; the recorded message is, with the
        // hash of the JSON the trace holds.
        let json = first.to_json();
        assert_eq!(
            sub.from_trace,
            [Gone {
                seq: 1,
                hash: json_hash(json.as_bytes())
            }]
        );
        assert!(log.subscribe(Some(1)).from_trace.is_empty());
        assert!(log.subscribe(None).from_trace.is_empty());
        // A message larger than the whole budget does not stay either.
        log.push(&build::user_text("z".repeat(5000), None));
        assert!(log.subscribe(Some(5)).replay.is_empty());
        assert_eq!(log.subscribe(Some(5)).from_trace.len(), 1);
    }

    #[tokio::test]
    async fn a_slow_client_is_dropped_without_slowing_the_others() {
        let log = EventLog::new(100, RING_BYTES, 2);
        let mut slow = log.subscribe(None).live.unwrap();
        let mut fast = log.subscribe(None).live.unwrap();
        let mut dropped = 0;
        for i in 0..5 {
            dropped += log.push(&text(i));
            assert_eq!(fast.recv().await.unwrap().seq, i as u64 + 1);
        }
        assert_eq!(dropped, 1);
        assert_eq!(log.clients(), 1);
        // The slow one gets what it had buffered, then its stream ends.
        assert_eq!(slow.recv().await.unwrap().seq, 1);
        assert_eq!(slow.recv().await.unwrap().seq, 2);
        assert!(slow.recv().await.is_none());
        // Reconnecting with its last id replays the rest.
        assert_eq!(seqs(&log.subscribe(Some(2)).replay), [3, 4, 5]);
    }

    #[test]
    fn a_disconnected_client_stops_counting() {
        let log = EventLog::new(10, RING_BYTES, 10);
        let a = log.subscribe(None).live;
        let b = log.subscribe(None).live;
        assert_eq!(log.clients(), 2);
        drop(a);
        assert_eq!(log.clients(), 1);
        drop(b);
        assert_eq!(log.clients(), 0);
    }

    #[tokio::test]
    async fn closing_ends_live_feeds() {
        let log = EventLog::new(10, RING_BYTES, 10);
        let mut rx = log.subscribe(None).live.unwrap();
        log.push(&text(0));
        log.close();
        assert_eq!(rx.recv().await.unwrap().seq, 1);
        assert!(rx.recv().await.is_none());
        let late = log.subscribe(Some(0));
        assert!(late.live.is_none());
        assert_eq!(seqs(&late.replay), [1]);
    }
}
