//! Stream tokens across a cluster (`docs/guide/cluster.md`): three real `rookery serve` nodes
//! on one real Postgres (started by the test). A token issued by A for session S opens S's
//! events on B with no bearer token (B checks it, then forwards the stream to A, which checks it
//! too) and the stream carries a live task's events; the same token is refused (401) for
//! session T, on another route, altered or forged; a token issued by C with a short TTL opens S'
//! events on B at first and is refused once it expired; no node logs a token. With `--auth`,
//! each node finds the token's principal in its own credentials: a listed principal's token
//! opens on every node; a JWT subject's opens on a node that verifies JWTs and is refused by one
//! that does not.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::cluster::{CLUSTER_TOKEN, TOKEN, node_with, runtime, texts};
use crate::common::postgres::TestPostgres;
use crate::common::serve::{Server, WAIT, read_events};

/// The short TTL of node C's tokens, in milliseconds.
const SHORT_TTL_MS: u64 = 3000;

/// A token for session `id`, asked of `server` (which forwards to the owner, which issues it).
async fn stream_token(server: &Server, id: &str) -> String {
    let (s, v) = server
        .call("POST", &format!("/v1/sessions/{id}/stream_token"), None)
        .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let token = v["stream_token"].as_str().unwrap().to_string();
    assert!(
        token.starts_with("stc_"),
        "a cluster's signed token: {token}"
    );
    token
}

/// `GET path` at `server` with no bearer token: the answer.
async fn anonymous(server: &Server, path: &str) -> reqwest::Response {
    tokio::time::timeout(
        WAIT,
        reqwest::Client::new()
            .get(format!("{}{path}", server.base))
            .header("Last-Event-ID", "0")
            .send(),
    )
    .await
    .expect("an answer in time")
    .expect("request")
}

/// The status and the error code of `GET path` at `server` with no bearer token (no code when
/// it opened a stream, which is then closed).
async fn refused(server: &Server, path: &str) -> (StatusCode, Value) {
    let resp = anonymous(server, path).await;
    let status = resp.status();
    if status == StatusCode::OK {
        return (status, Value::Null);
    }
    let body = resp.json::<Value>().await.unwrap_or(Value::Null);
    (status, body["error"]["code"].clone())
}

#[test]
fn a_stream_token_from_any_node_opens_its_session_on_every_node() {
    let pg = TestPostgres::start();
    runtime().block_on(tokens_across_nodes(&pg));
}

async fn tokens_across_nodes(pg: &TestPostgres) {
    let script = json!({"turns": [{"text": "streamed through b"}]});
    // With the access log on: no token may be printed.
    let log = [("RUST_LOG", "info")];
    let a = node_with(&pg.url(), "a", &script, Some(TOKEN), &[], &log);
    let b = node_with(&pg.url(), "b", &script, Some(TOKEN), &[], &log);
    let short = SHORT_TTL_MS.to_string();
    let c = node_with(
        &pg.url(),
        "c",
        &script,
        Some(TOKEN),
        &["--stream-token-ttl-ms", &short],
        &log,
    );
    let s = a.create(None).await;
    let t = a.create(None).await;
    let token = stream_token(&a, &s).await;

    // Issued by A, opened on B with no bearer token: B forwards the stream to A, the owner.
    let resp = anonymous(&b, &format!("/v1/sessions/{s}/events?stream_token={token}")).await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    assert_eq!(resp.headers()["rookery-node"], "a");
    a.task(&s, "go").await;
    let events: Vec<Value> = read_events(resp, |_, v| {
        v["payload"]["type"] == "task_end" && v.get("origin").is_none()
    })
    .await
    .into_iter()
    .map(|(_, v)| v)
    .collect();
    assert_eq!(texts(&events), vec!["streamed through b"]);
    assert_eq!(events.last().unwrap()["payload"]["status"], "completed");
    // Usable again on the issuing node and on a third one (an EventSource reconnecting).
    for n in [&a, &c] {
        let resp = anonymous(n, &format!("/v1/sessions/{s}/events?stream_token={token}")).await;
        assert_eq!(resp.status(), StatusCode::OK, "at {}", n.base);
    }

    // For another session, on another route, altered, forged: 401 on B.
    let (body, tag) = token.split_once('.').unwrap();
    let flipped = |text: &str, at: usize| {
        let mut bytes = text.as_bytes().to_vec();
        bytes[at] = if bytes[at] == b'A' { b'B' } else { b'A' };
        String::from_utf8(bytes).unwrap()
    };
    for path in [
        format!("/v1/sessions/{t}/events?stream_token={token}"),
        format!("/v1/sessions/{s}?stream_token={token}"),
        format!("/v1/sessions?stream_token={token}"),
        format!(
            "/v1/sessions/{s}/events?stream_token={}.{tag}",
            flipped(body, 10)
        ),
        format!(
            "/v1/sessions/{s}/events?stream_token={body}.{}",
            flipped(tag, 3)
        ),
        format!("/v1/sessions/{s}/events?stream_token={token}x"),
        format!("/v1/sessions/{s}/events?stream_token=st_{}", "0".repeat(64)),
        format!("/v1/sessions/{s}/events"),
    ] {
        assert_eq!(
            refused(&b, &path).await,
            (StatusCode::UNAUTHORIZED, json!("unauthorized")),
            "{path}"
        );
    }
    // T's own token opens T on B (the refusal above was the session's, not B's).
    let token_t = stream_token(&b, &t).await;
    let resp = anonymous(
        &b,
        &format!("/v1/sessions/{t}/events?stream_token={token_t}"),
    )
    .await;
    assert_eq!(resp.status(), StatusCode::OK);
    drop(resp);

    // A session of C's: C issues with its short TTL; B accepts the token, then refuses it once
    // it expired.
    let e = c.create(None).await;
    let issued = Instant::now();
    let token = stream_token(&c, &e).await;
    let path = format!("/v1/sessions/{e}/events?stream_token={token}");
    let first = anonymous(&b, &path).await.status();
    assert!(
        first == StatusCode::OK || issued.elapsed() >= Duration::from_millis(SHORT_TTL_MS),
        "{first}"
    );
    let deadline = Instant::now() + WAIT;
    loop {
        let (status, code) = refused(&b, &path).await;
        if status == StatusCode::UNAUTHORIZED {
            assert_eq!(code, "unauthorized");
            assert!(
                issued.elapsed() >= Duration::from_millis(SHORT_TTL_MS - 500),
                "refused before it expired"
            );
            break;
        }
        assert_eq!(status, StatusCode::OK);
        assert!(Instant::now() < deadline, "the token never expired");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    for n in [&a, &b, &c] {
        let log = n.stderr();
        assert!(log.contains("/events"), "the access log is on:\n{log}");
        assert!(!log.contains("stc_"), "a stream token is in a log:\n{log}");
        assert!(
            !log.contains(CLUSTER_TOKEN),
            "the cluster token is in a log"
        );
    }
}

/// The secret of the nodes' `--jwt-hs256-secret-env`.
const JWT_SECRET: &str = "cluster-jwt-secret-0123456789abcdef";

/// An HS256 JWT for subject `sub` with role `user`.
fn jwt(sub: &str) -> String {
    let exp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 600;
    let key = jsonwebtoken::EncodingKey::from_secret(JWT_SECRET.as_bytes()).unwrap();
    jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        &json!({"sub": sub, "role": "user", "exp": exp}),
        &key,
    )
    .unwrap()
}

/// `POST path` at `server` with `bearer`: the status and body.
async fn post(
    server: &Server,
    bearer: &str,
    path: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let mut r = server
        .client
        .post(format!("{}{path}", server.base))
        .bearer_auth(bearer);
    if let Some(b) = body {
        r = r.json(&b);
    }
    server.send(r).await
}

/// A session of `bearer`'s principal on `server` and a stream token for it.
async fn session_and_token(server: &Server, bearer: &str) -> (String, String) {
    let (status, v) = post(
        server,
        bearer,
        "/v1/sessions",
        Some(json!({"workspace": server.ws()})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{v}");
    let id = v["session_id"].as_str().unwrap().to_string();
    let (status, v) = post(
        server,
        bearer,
        &format!("/v1/sessions/{id}/stream_token"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{v}");
    (id, v["stream_token"].as_str().unwrap().to_string())
}

#[test]
fn each_node_finds_a_stream_tokens_principal_in_its_own_credentials() {
    let pg = TestPostgres::start();
    runtime().block_on(principals_across_nodes(&pg));
}

async fn principals_across_nodes(pg: &TestPostgres) {
    use rookery::server::token_hash::TokenHash;
    let files = tempfile::tempdir().unwrap();
    let auth = files.path().join("auth.yaml");
    std::fs::write(
        &auth,
        format!(
            "principals:\n  - name: alice\n    role: user\n    token_sha256: [\"{}\"]\n",
            TokenHash::of("alice-token")
        ),
    )
    .unwrap();
    let auth = auth.to_str().unwrap();
    let script = json!({"turns": []});
    let with_jwt = ["--auth", auth, "--jwt-hs256-secret-env", "TEST_JWT_SECRET"];
    let env = [("TEST_JWT_SECRET", JWT_SECRET)];
    let a = node_with(&pg.url(), "a", &script, None, &with_jwt, &env);
    let b = node_with(&pg.url(), "b", &script, None, &with_jwt, &env);
    // C has the same auth file but verifies no JWT.
    let c = node_with(&pg.url(), "c", &script, None, &["--auth", auth], &[]);

    // A listed principal's token opens its session on every node, also C.
    let (s, token) = session_and_token(&a, "alice-token").await;
    for n in [&a, &b, &c] {
        let resp = anonymous(n, &format!("/v1/sessions/{s}/events?stream_token={token}")).await;
        assert_eq!(resp.status(), StatusCode::OK, "at {}", n.base);
        assert_eq!(resp.headers()["rookery-node"], "a");
    }

    // A JWT subject's: B, which verifies JWTs, finds the subject; C could not have
    // authenticated it and refuses the token.
    let (j, token) = session_and_token(&a, &jwt("carol")).await;
    let path = format!("/v1/sessions/{j}/events?stream_token={token}");
    let resp = anonymous(&b, &path).await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(resp.headers()["rookery-node"], "a");
    drop(resp);
    assert_eq!(
        refused(&c, &path).await,
        (StatusCode::UNAUTHORIZED, json!("unauthorized"))
    );
}
