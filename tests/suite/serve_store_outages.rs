//! `rookery serve --store` when things go wrong, on a real Postgres the tests start, through
//! the built binary: the database going away answers 503 `store_unavailable` and nothing is
//! lost once it is back; a wake whose workspace is missing on this node is 409
//! `workspace_missing`; a lost lease ends the session's streams with `session_moved`. The
//! server and the store readers are `serve_store.rs`'s.

use crate::common::serve as harness;

use eventsource_stream::Eventsource;
use futures::StreamExt;
use harness::*;
use reqwest::StatusCode;
use serde_json::{Value, json};

use super::serve_store::{
    listed, query, serve, start_postgres, stored_trace, value, wait_lease, wait_task_ends,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn while_the_store_is_down_requests_answer_503_and_nothing_is_lost() {
    let mut pg = start_postgres();
    let script = json!({"turns": [{"text": "one"}, {"text": "two"}, {"text": "three"}]});
    // A lease long enough to outlive the database's restart on a loaded machine.
    let server = serve(
        &pg,
        &script,
        &[
            "--lease-ttl",
            "120",
            "--sse-ring-bytes",
            "512",
            "--idle-hibernate",
            "0",
            "--max-resident",
            "1",
        ],
    );
    // Hibernated (its lease given up) by the next create: waking it needs the store.
    let sleeper = server.create(None).await;
    let id = server.create(None).await;
    wait_lease(&pg, &sleeper, "released", |o, _| o.is_none()).await;
    let after = server.task(&id, "first").await;
    server.events_until_task_end(&id, after).await;
    wait_task_ends(&pg, &id, 1).await;

    tokio::task::block_in_place(|| pg.stop());
    let unavailable = |(s, v): (StatusCode, Value), what: &str| {
        assert_eq!(s, StatusCode::SERVICE_UNAVAILABLE, "{what}: {v}");
        assert_eq!(v["error"]["code"], "store_unavailable", "{what}: {v}");
    };
    let ws = server.ws();
    unavailable(
        server
            .call("POST", "/v1/sessions", Some(json!({"workspace": ws})))
            .await,
        "create",
    );
    unavailable(server.call("GET", "/v1/sessions", None).await, "list");
    unavailable(
        server
            .call(
                "POST",
                &format!("/v1/sessions/{id}/tasks"),
                Some(json!({"text": "second"})),
            )
            .await,
        "task",
    );
    // A replay from the start needs the store (the ring keeps 512 bytes).
    let resp = server
        .req(reqwest::Method::GET, &format!("/v1/sessions/{id}/events"))
        .header("Last-Event-ID", "0")
        .send()
        .await
        .unwrap();
    let status = resp.status();
    let body: Value = resp.json().await.unwrap();
    unavailable((status, body), "replay");
    unavailable(
        server
            .call("GET", &format!("/v1/sessions/{sleeper}"), None)
            .await,
        "wake",
    );

    tokio::task::block_in_place(|| pg.launch());
    // Everything goes on: the session takes its next task, a create and the list work.
    let after = server.task(&id, "second").await;
    let events = server.events_until_task_end(&id, after).await;
    assert!(
        events.iter().any(|(_, v)| v["payload"]["text"] == "two"),
        "{events:?}"
    );
    wait_task_ends(&pg, &id, 2).await;
    let stored = stored_trace(&pg, &id);
    assert!(
        stored.contains("\"first\"") && stored.contains("\"second\""),
        "{stored}"
    );
    let seqs = query(
        &pg,
        &format!("SELECT count(*), max(seq) + 1 FROM trace_records WHERE session_id = '{id}'"),
    );
    assert_eq!(seqs[0][0], seqs[0][1], "no gap in seq: {seqs:?}");
    // The hibernated session wakes, under its next epoch.
    let (s, v) = server
        .call("GET", &format!("/v1/sessions/{sleeper}"), None)
        .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    wait_lease(&pg, &sleeper, "woken", |o, e| o.is_some() && e == 2).await;
    let other = server.create(None).await;
    let list = listed(&server).await;
    for want in [&id, &sleeper, &other] {
        assert!(list.iter().any(|(i, _)| i == want), "{want}: {list:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wake_whose_workspace_is_missing_here_is_409_naming_the_node() {
    let pg = start_postgres();
    let script = json!({"turns": [{"text": "one"}]});
    let server = serve(
        &pg,
        &script,
        &["--idle-hibernate", "0", "--max-resident", "1"],
    );
    let gone = server.ws().join("gone");
    std::fs::create_dir(&gone).unwrap();
    let (s, v) = server
        .call("POST", "/v1/sessions", Some(json!({"workspace": gone})))
        .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    let id = v["session_id"].as_str().unwrap().to_string();
    let (owner, _) = wait_lease(&pg, &id, "held", |o, _| o.is_some()).await;
    let node = owner.unwrap();
    // Hibernated by the next create, then its workspace disappears.
    server.create(None).await;
    wait_lease(&pg, &id, "released", |o, _| o.is_none()).await;
    std::fs::remove_dir(&gone).unwrap();

    let (s, v) = server
        .call("GET", &format!("/v1/sessions/{id}"), None)
        .await;
    assert_eq!(s, StatusCode::CONFLICT, "{v}");
    assert_eq!(v["error"]["code"], "workspace_missing", "{v}");
    assert_eq!(v["error"]["node"], node.as_str(), "{v}");
    assert!(
        v["error"]["message"].as_str().unwrap().contains(&node),
        "{v}"
    );
    // No lease was taken for it.
    let (owner, epoch) = wait_lease(&pg, &id, "untouched", |_, _| true).await;
    assert_eq!((owner, epoch), (None, 1));

    // A create in a missing workspace is a 400.
    let (s, v) = server
        .call("POST", "/v1/sessions", Some(json!({"workspace": gone})))
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_lease_ends_the_streams_with_session_moved_and_rm_waits_for_it() {
    let pg = start_postgres();
    let script = json!({"turns": [{"text": "one"}]});
    // Renewed every second: the move is noticed at once.
    let server = serve(&pg, &script, &["--lease-ttl", "3"]);
    let id = server.create(None).await;
    let after = server.task(&id, "first").await;
    server.events_until_task_end(&id, after).await;
    let resp = server
        .req(reqwest::Method::GET, &format!("/v1/sessions/{id}/events"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let mut stream = resp.bytes_stream().eventsource();

    // Another node takes the lease (as a takeover after an expiry would).
    query(
        &pg,
        &format!(
            "UPDATE sessions SET epoch = epoch + 1, owner_node = 'node-elsewhere', \
             lease_expiry = now() + interval '300 seconds' WHERE id = '{id}'"
        ),
    );
    let deadline = tokio::time::Instant::now() + WAIT;
    let moved = loop {
        let ev = tokio::time::timeout_at(deadline, stream.next())
            .await
            .expect("session_moved in time")
            .expect("the stream open until session_moved")
            .expect("valid SSE");
        let v: Value = serde_json::from_str(&ev.data).unwrap();
        if payload_type(&v) == "session_moved" {
            break (ev, v);
        }
    };
    assert_eq!(moved.0.event, "session_moved");
    assert_eq!(moved.1["payload"]["node"], "node-elsewhere", "{}", moved.1);
    let end = tokio::time::timeout_at(deadline, stream.next())
        .await
        .expect("the stream ends after session_moved");
    assert!(end.is_none(), "more after session_moved: {end:?}");
    // This node no longer serves it: the lease is the other node's.
    let (s, v) = server
        .call("GET", &format!("/v1/sessions/{id}"), None)
        .await;
    assert_eq!(s, StatusCode::CONFLICT, "{v}");
    assert_eq!(v["error"]["code"], "session_locked", "{v}");

    // `sessions rm` on the store is refused while the lease runs, done once it has expired.
    let url = pg.url();
    let rm = |yes: bool| {
        let mut args = vec!["sessions", "rm", "--store", url.as_str(), id.as_str()];
        if yes {
            args.push("--yes");
        }
        tokio::task::block_in_place(|| command(server.dir.path(), &args).output().unwrap())
    };
    let refused = rm(true);
    assert_eq!(refused.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("in use by node node-elsewhere"), "{stderr}");
    query(
        &pg,
        &format!(
            "UPDATE sessions SET lease_expiry = now() - interval '1 second' WHERE id = '{id}'"
        ),
    );
    let unasked = rm(false);
    assert_eq!(unasked.status.code(), Some(2), "no terminal to ask on");
    let done = rm(true);
    assert!(
        done.status.success(),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    assert_eq!(
        value(
            &pg,
            &format!("SELECT count(*) FROM trace_records WHERE session_id = '{id}'")
        ),
        Some("0".into())
    );
    assert_eq!(
        value(
            &pg,
            &format!("SELECT count(*) FROM sessions WHERE id = '{id}'")
        ),
        Some("0".into())
    );
}
