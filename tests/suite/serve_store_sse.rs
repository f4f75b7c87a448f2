//! SSE event ids on the store (`serve --store`), through two real `rookery serve` processes
//! on one real Postgres: every recorded event goes out under its `trace_records.seq`, what is
//! not stored (partials) without an `id:` field, and a client that reconnects to the other
//! node with `Last-Event-ID` from the middle gets every stored event after it exactly once,
//! then the next task live with the ids going on; and a client that follows a session moving
//! A → B → A → B by hibernation (its stream ends with `session_moved` when another node wakes
//! the session, it reconnects with its last id) gets every stored record once, in order.

use crate::common::postgres::TestPostgres;
use crate::common::serve as harness;

use std::time::{Duration, Instant};

use futures::StreamExt;
use harness::*;
use reqwest::StatusCode;
use serde_json::{Value, json};

/// One SSE event as sent: its `id:` field if it had one, and its data.
#[derive(Debug, Clone)]
struct Sent {
    id: Option<i64>,
    data: Value,
}

/// The raw `text/event-stream` of a response, event by event (the `id:` field read as sent:
/// a client library would carry the last one over to an event without it).
struct Events {
    body: futures::stream::BoxStream<'static, reqwest::Result<Vec<u8>>>,
    buf: String,
}

impl Events {
    async fn open(server: &Server, id: &str, last_event_id: Option<&str>) -> reqwest::Response {
        let mut req = server.req(reqwest::Method::GET, &format!("/v1/sessions/{id}/events"));
        if let Some(last) = last_event_id {
            req = req.header("Last-Event-ID", last);
        }
        req.send().await.unwrap()
    }

    fn new(resp: reqwest::Response) -> Events {
        assert_eq!(resp.status(), StatusCode::OK);
        Events {
            body: resp.bytes_stream().map(|c| c.map(|b| b.to_vec())).boxed(),
            buf: String::new(),
        }
    }

    /// The next event (keep-alive comments skipped), within [`WAIT`].
    async fn next(&mut self) -> Sent {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            if let Some(end) = self.buf.find("\n\n") {
                let block: String = self.buf.drain(..end + 2).collect();
                let mut id = None;
                let mut data = None;
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("id:") {
                        id = Some(v.trim().parse().expect("a numeric id"));
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data = Some(serde_json::from_str(v.trim_start()).unwrap());
                    }
                }
                if let Some(data) = data {
                    return Sent { id, data };
                }
                continue;
            }
            let chunk = tokio::time::timeout_at(deadline, self.body.next())
                .await
                .expect("the next event in time")
                .expect("the stream open")
                .unwrap();
            self.buf.push_str(&String::from_utf8(chunk).unwrap());
        }
    }

    /// Events up to `session_moved` (left out), which must end the stream; and the node it
    /// names.
    async fn until_moved(&mut self) -> (Vec<Sent>, String) {
        let mut out = Vec::new();
        loop {
            let ev = self.next().await;
            if ev.data["payload"]["type"] == "session_moved" {
                assert_eq!(ev.id, None, "session_moved is not stored");
                let node = ev.data["payload"]["node"].as_str().expect("a node");
                self.ended().await;
                return (out, node.to_string());
            }
            out.push(ev);
        }
    }

    /// Waits for the end of the stream, with no event before it.
    async fn ended(&mut self) {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            assert!(
                !self.buf.contains("data:"),
                "more after the end: {}",
                self.buf
            );
            let chunk = tokio::time::timeout_at(deadline, self.body.next())
                .await
                .expect("the stream ends in time");
            match chunk {
                None => return,
                Some(chunk) => self
                    .buf
                    .push_str(&String::from_utf8(chunk.unwrap()).unwrap()),
            }
        }
    }

    /// Events up to and including the session's own `task_end`.
    async fn until_task_end(&mut self) -> Vec<Sent> {
        let mut out = Vec::new();
        loop {
            let ev = self.next().await;
            let end = is_task_end(&ev.data);
            out.push(ev);
            if end {
                return out;
            }
        }
    }
}

fn is_task_end(v: &Value) -> bool {
    v["payload"]["type"] == "task_end" && v.get("origin").is_none()
}

fn is_partial(v: &Value) -> bool {
    v["payload"]["type"]
        .as_str()
        .is_some_and(|t| t.starts_with("partial_"))
}

/// `(seq, record JSON)` of session `id`'s stored records after `after`, in order.
fn stored_after(pg: &TestPostgres, id: &str, after: i64) -> Vec<(i64, Value)> {
    let rows = tokio::task::block_in_place(|| {
        pg.query(&format!(
            "SELECT seq::text, convert_from(record, 'UTF8') FROM trace_records \
             WHERE session_id = '{id}' AND seq > {after} ORDER BY trace_records.seq"
        ))
    });
    rows.into_iter()
        .map(|r| {
            let seq = r[0].as_deref().unwrap().parse().unwrap();
            (seq, serde_json::from_str(r[1].as_deref().unwrap()).unwrap())
        })
        .collect()
}

/// Waits until `id`'s stored records include `n` root `task_end`s.
async fn wait_stored_task_ends(pg: &TestPostgres, id: &str, n: usize) {
    let deadline = Instant::now() + WAIT;
    loop {
        let ends = stored_after(pg, id, -1)
            .iter()
            .filter(|(_, v)| is_task_end(v))
            .count();
        if ends >= n {
            return;
        }
        assert!(Instant::now() < deadline, "task {n} of {id} never stored");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Every event with an id is the stored record of that `seq`; the others are partials.
fn check_ids(events: &[Sent], stored: &[(i64, Value)]) {
    let by_seq: std::collections::HashMap<i64, &Value> =
        stored.iter().map(|(s, v)| (*s, v)).collect();
    for ev in events {
        match ev.id {
            Some(seq) => assert_eq!(
                by_seq.get(&seq).copied(),
                Some(&ev.data),
                "event {seq} is not the stored record {seq}"
            ),
            None => assert!(
                is_partial(&ev.data),
                "a stored event without id: {}",
                ev.data
            ),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn event_ids_are_the_stores_seq_and_a_reconnect_to_another_node_misses_nothing() {
    let pg = tokio::task::block_in_place(TestPostgres::start);
    let script = json!({"turns": [
        {"text": "one from A"},
        {"text": "two from A"},
        {"text": "three from B"},
    ]});
    let a = super::serve_store::serve(&pg, &script, &[]);
    // The same script: a resumed session goes on after the turns it played.
    let b = super::serve_store::serve(&pg, &script, &[]);

    // On A: two tasks, each streamed live with the store's seq as its ids.
    let id = a.create(None).await;
    let mut on_a = Vec::new();
    for text in ["first", "second"] {
        let after = a.task(&id, text).await;
        let mut events = Events::new(Events::open(&a, &id, Some(&after.to_string())).await);
        on_a.extend(events.until_task_end().await);
    }
    wait_stored_task_ends(&pg, &id, 2).await;
    check_ids(&on_a, &stored_after(&pg, &id, -1));
    let ids: Vec<i64> = on_a.iter().filter_map(|e| e.id).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "in order: {ids:?}");
    assert!(
        on_a.iter().any(|e| e.id.is_none() && is_partial(&e.data)),
        "partials are sent (without id)"
    );
    // A non-numeric `Last-Event-ID` is refused as with files.
    let bad = Events::open(&a, &id, Some("x7")).await;
    assert_eq!(bad.status(), StatusCode::BAD_REQUEST);

    // A stops gracefully: its sessions close and give their leases up.
    nix::sys::signal::kill(a.pid(), nix::sys::signal::Signal::SIGTERM).unwrap();
    let mut a = a;
    let exited = tokio::task::block_in_place(|| a.child.wait()).unwrap();
    assert!(exited.success(), "A stopped: {exited:?}");
    let held = tokio::task::block_in_place(|| {
        pg.query(&format!(
            "SELECT owner_node FROM sessions WHERE id = '{id}'"
        ))
    });
    assert_eq!(held[0][0], None, "A gave the lease up");

    // On B, from the middle of what A stored: B wakes the session and sends every stored
    // event after that id, once, then the next task live.
    let stored = stored_after(&pg, &id, -1);
    let mid = stored[stored.len() / 2].0;
    let before_b = stored.last().unwrap().0;
    let mut events = Events::new(Events::open(&b, &id, Some(&mid.to_string())).await);
    let mut on_b = Vec::new();
    while on_b
        .last()
        .and_then(|e: &Sent| e.id)
        .is_none_or(|s| s < before_b)
    {
        on_b.push(events.next().await);
    }
    let after = b.task(&id, "third").await;
    assert!(
        after >= before_b as u64,
        "the task's events come after {after}"
    );
    on_b.extend(events.until_task_end().await);
    wait_stored_task_ends(&pg, &id, 3).await;
    // Whatever was committed after the task_end (its own records) follows on the stream.
    let last = stored_after(&pg, &id, -1).last().unwrap().0;
    while on_b.iter().filter_map(|e| e.id).max() < Some(last) {
        on_b.push(events.next().await);
    }
    let stored_now = stored_after(&pg, &id, mid);
    check_ids(&on_b, &stored_now);
    let got: Vec<i64> = on_b.iter().filter_map(|e| e.id).collect();
    let want: Vec<i64> = stored_now.iter().map(|(s, _)| *s).collect();
    assert_eq!(got, want, "every stored event after {mid}, once, in order");
    assert!(
        on_b.iter()
            .any(|e| e.data["payload"]["text"] == "three from B"),
        "the task on B streamed live"
    );
}

/// [`check_ids`] for a stream across hibernations: each id is its stored record, and what has
/// none (partials, `session_hibernated`, `session_resumed`) is no stored record.
fn check_woken_ids(events: &[Sent], stored: &[(i64, Value)]) {
    let numbered: Vec<Sent> = events.iter().filter(|e| e.id.is_some()).cloned().collect();
    check_ids(&numbered, stored);
    for ev in events.iter().filter(|e| e.id.is_none()) {
        assert!(
            stored.iter().all(|(_, v)| *v != ev.data),
            "a stored record sent without its id: {}",
            ev.data
        );
    }
}

/// Waits until nobody holds `id`'s lease, last taken under `epoch` (it hibernated).
async fn wait_parked(pg: &TestPostgres, id: &str, epoch: i64) {
    super::serve_store::wait_lease(pg, id, "hibernated", |owner, e| {
        owner.is_none() && e == epoch
    })
    .await;
}

/// Reads `client` onto `got` until it has sent the stored record `last`.
async fn read_to(client: &mut Events, got: &mut Vec<Sent>, last: i64) {
    while got.iter().filter_map(|e| e.id).max() < Some(last) {
        got.push(client.next().await);
    }
}

/// The client's stream again, at `server`, from the last id it got.
async fn reconnect(server: &Server, id: &str, got: &[Sent]) -> Events {
    let last = got.iter().filter_map(|e| e.id).max().expect("an id so far");
    Events::new(Events::open(server, id, Some(&last.to_string())).await)
}

/// The last stored `seq` of `id`.
fn last_stored(pg: &TestPostgres, id: &str) -> i64 {
    stored_after(pg, id, -1).last().expect("stored records").0
}

/// The node holding `id`'s lease once it holds it under `epoch`.
async fn holder(pg: &TestPostgres, id: &str, epoch: i64) -> String {
    let (owner, _) =
        super::serve_store::wait_lease(pg, id, "taken", |owner, e| owner.is_some() && e == epoch)
            .await;
    owner.expect("a holder")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_follows_a_session_across_nodes_and_gets_every_record_once_in_order() {
    let pg = tokio::task::block_in_place(TestPostgres::start);
    let script = json!({"turns": [
        {"text": "one on A"},
        {"text": "two on B"},
        {"text": "three on A"},
        {"text": "four on B"},
    ]});
    // One resident session per node: a second one hibernates the first.
    let flags = ["--idle-hibernate", "0", "--max-resident", "1"];
    let a = super::serve_store::serve(&pg, &script, &flags);
    let b = super::serve_store::serve(&pg, &script, &flags);

    // On A: a task, streamed to a client from its `events_after`.
    let id = a.create(None).await;
    let from = a.task(&id, "first").await;
    let mut client = Events::new(Events::open(&a, &id, Some(&from.to_string())).await);
    let mut got = client.until_task_end().await;
    wait_stored_task_ends(&pg, &id, 1).await;
    // Another session on A hibernates it there (its lease given up); the client stays.
    a.create(None).await;
    wait_parked(&pg, &id, 1).await;

    // B wakes it for a task: A ends the client's stream with `session_moved` naming B, and the
    // client goes on at B from its last id.
    b.task(&id, "second").await;
    let on_b = holder(&pg, &id, 2).await;
    let (more, node) = client.until_moved().await;
    got.extend(more);
    assert_eq!(node, on_b);
    let mut client = reconnect(&b, &id, &got).await;
    wait_stored_task_ends(&pg, &id, 2).await;
    read_to(&mut client, &mut got, last_stored(&pg, &id)).await;
    // B hibernates it with the client connected; A wakes it: the same again, the other way.
    b.create(None).await;
    wait_parked(&pg, &id, 2).await;
    a.task(&id, "third").await;
    let on_a = holder(&pg, &id, 3).await;
    let (more, node) = client.until_moved().await;
    got.extend(more);
    assert_eq!(node, on_a);
    let mut client = reconnect(&a, &id, &got).await;
    wait_stored_task_ends(&pg, &id, 3).await;
    read_to(&mut client, &mut got, last_stored(&pg, &id)).await;

    // Every stored record after `from`, once and in order, ids up by exactly one.
    let ids: Vec<i64> = got.iter().filter_map(|e| e.id).collect();
    let stored = stored_after(&pg, &id, from as i64);
    let want: Vec<i64> = stored
        .iter()
        .map(|(s, _)| *s)
        .take_while(|s| *s <= *ids.last().unwrap())
        .collect();
    assert_eq!(
        ids, want,
        "every stored record after {from}, once, in order"
    );
    assert!(
        ids.windows(2).all(|w| w[1] == w[0] + 1),
        "ids go up by one: {ids:?}"
    );
    check_woken_ids(&got, &stored);
    let epochs = tokio::task::block_in_place(|| {
        pg.query(&format!(
            "SELECT DISTINCT epoch::text FROM trace_records WHERE session_id = '{id}' \
             ORDER BY 1"
        ))
    });
    assert_eq!(epochs.len(), 3, "written on A, B, then A: {epochs:?}");
    let texts: Vec<&Value> = got
        .iter()
        .filter(|e| e.id.is_some())
        .map(|e| &e.data["payload"]["text"])
        .filter(|t| t.is_string())
        .collect();
    for text in ["one on A", "two on B", "three on A"] {
        assert!(
            texts.iter().any(|t| *t == text),
            "{text} missing: {texts:?}"
        );
    }

    // A hibernates it (the client stays on A) and B wakes it from an entry that kept only its
    // numbering (B ended its stream): the client is told, and a client that comes to B later,
    // from `from`, gets the store's ids.
    a.create(None).await;
    wait_parked(&pg, &id, 3).await;
    let after = b.task(&id, "fourth").await;
    let (_, node) = client.until_moved().await;
    assert_eq!(node, on_b);
    wait_stored_task_ends(&pg, &id, 4).await;
    let stored = stored_after(&pg, &id, from as i64);
    let last = stored.last().unwrap().0;
    assert!(after < last as u64, "the task's events come after {after}");
    let mut later_client = Events::new(Events::open(&b, &id, Some(&from.to_string())).await);
    let mut later: Vec<Sent> = Vec::new();
    read_to(&mut later_client, &mut later, last).await;
    let ids: Vec<i64> = later.iter().filter_map(|e| e.id).collect();
    let want: Vec<i64> = stored.iter().map(|(s, _)| *s).collect();
    assert_eq!(
        ids, want,
        "every stored record after {from}, once, in order"
    );
    check_woken_ids(&later, &stored);
    assert!(
        later
            .iter()
            .any(|e| e.id.is_some() && e.data["payload"]["text"] == "four on B"),
        "the task on B is in its stream"
    );
}
