//! Webhooks of `rookery serve`, through the built binary and a real receiver on 127.0.0.1 in
//! the test: a receiver that answers 500 twice gets the same signed `task_end` a third time
//! (the test checks the HMAC itself); a receiver that never answers holds no session up and is
//! timed out, retried and counted; an approval that starts waiting is posted; a session's own
//! URL is refused for an origin the server does not allow; a missing secret refuses the start.
//!
//! Every server gets its own temporary home, workspace and `$HOME`. Every wait is bounded.

use crate::common::serve as harness;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode as AxumStatus};
use harness::*;
use hmac::{KeyInit, Mac};
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::sync::mpsc;

const SECRET: &str = "whsec-test-3f9a1c";
const SECRET_VAR: &str = "TEST_ROOKERY_WEBHOOK_SECRET";

/// One request the receiver saw.
struct Seen {
    headers: HeaderMap,
    body: Bytes,
}

/// A webhook receiver on 127.0.0.1: answers 500 to its first `fail_first` requests and 200
/// after, or never answers at all with `hang`.
struct Receiver {
    origin: String,
    seen: mpsc::UnboundedReceiver<Seen>,
}

impl Receiver {
    async fn start(fail_first: usize, hang: bool) -> Receiver {
        let (tx, seen) = mpsc::unbounded_channel();
        let count = Arc::new(AtomicUsize::new(0));
        let app = axum::Router::new().route(
            "/hook",
            axum::routing::post(move |headers: HeaderMap, body: Bytes| {
                let tx = tx.clone();
                let count = count.clone();
                async move {
                    let n = count.fetch_add(1, Ordering::SeqCst);
                    let _ = tx.send(Seen { headers, body });
                    if hang {
                        std::future::pending::<()>().await;
                    }
                    if n < fail_first {
                        AxumStatus::INTERNAL_SERVER_ERROR
                    } else {
                        AxumStatus::OK
                    }
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let origin = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        Receiver { origin, seen }
    }

    fn url(&self) -> String {
        format!("{}/hook", self.origin)
    }

    /// The next request, within [`WAIT`].
    async fn next(&mut self) -> Seen {
        tokio::time::timeout(WAIT, self.seen.recv())
            .await
            .expect("a webhook request in time")
            .expect("receiver open")
    }

    /// The next request whose body has `type` `kind` (others are skipped).
    async fn next_of(&mut self, kind: &str) -> (Seen, Value) {
        loop {
            let seen = self.next().await;
            let body = verify(&seen);
            if body["type"] == kind {
                return (seen, body);
            }
        }
    }
}

fn from_hex(s: &str) -> Vec<u8> {
    assert!(s.len() == 64, "v1 is not 32 bytes of hex: {s}");
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

/// Checks `Rookery-Signature: t=<unix>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>` as a
/// receiver would (a recent `t`, a constant-time compare) and returns the parsed body.
fn verify(seen: &Seen) -> Value {
    let header = seen.headers["rookery-signature"].to_str().unwrap();
    let (t, v1) = header
        .strip_prefix("t=")
        .and_then(|rest| rest.split_once(",v1="))
        .unwrap_or_else(|| panic!("bad Rookery-Signature {header:?}"));
    let t: u64 = t.parse().unwrap();
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    assert!(now.abs_diff(t) < 300, "stale t={t} (now {now})");
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(SECRET.as_bytes()).unwrap();
    mac.update(format!("{t}.").as_bytes());
    mac.update(&seen.body);
    mac.verify_slice(&from_hex(v1))
        .unwrap_or_else(|_| panic!("signature does not verify: {header}"));
    assert_eq!(seen.headers["content-type"], "application/json");
    serde_json::from_slice(&seen.body).unwrap()
}

fn start(script: &Value, extra: &[&str]) -> Server {
    let mut args = vec!["--webhook-secret-env", SECRET_VAR];
    args.extend(extra);
    Server::start_env(sandbox(script), None, &args, None, &[(SECRET_VAR, SECRET)])
}

fn text_only() -> Value {
    json!({"turns": [{"text": "one"}, {"text": "two"}, {"text": "three"}]})
}

/// Polls `/metrics` until `series` is `want`.
async fn metric_becomes(server: &Server, series: &str, want: u64) {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let got = server.metric(series).await;
        if got == want {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{series} stayed {got}, not {want}:\n{}",
            server.metrics_text().await
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receiver_failing_twice_gets_the_signed_task_end_on_the_third_attempt() {
    let mut rx = Receiver::start(2, false).await;
    let url = rx.url();
    let server = start(
        &text_only(),
        &["--webhook", &url, "--webhook-backoff-ms", "50"],
    );
    let id = server.create(None).await;
    let after = server.task(&id, "hello").await;
    server.events_until_task_end(&id, after).await;
    let attempts = [rx.next().await, rx.next().await, rx.next().await];
    let bodies: Vec<Value> = attempts.iter().map(verify).collect();
    for (i, (seen, body)) in attempts.iter().zip(&bodies).enumerate() {
        // The same delivery, byte for byte, numbered by attempt.
        assert_eq!(seen.body, attempts[0].body, "attempt {}", i + 1);
        assert_eq!(seen.headers["rookery-attempt"], (i + 1).to_string());
        assert_eq!(
            seen.headers["rookery-delivery"],
            body["delivery_id"].as_str().unwrap()
        );
    }
    let body = &bodies[0];
    assert_eq!(body["type"], "task_end", "{body}");
    assert_eq!(body["session_id"], id.as_str());
    assert_eq!(body["status"], "completed");
    assert!(body["delivery_id"].as_str().unwrap().starts_with("wh-"));
    metric_becomes(
        &server,
        "rookery_webhook_deliveries_total{result=\"delivered\"}",
        1,
    )
    .await;
    assert_eq!(
        server.metric("rookery_webhook_attempts_failed_total").await,
        2
    );
    assert_eq!(
        server
            .metric("rookery_webhook_deliveries_total{result=\"failed\"}")
            .await,
        0
    );
    // Delivered: no fourth attempt, and the next task is a new delivery.
    let after = server.task(&id, "again").await;
    server.events_until_task_end(&id, after).await;
    let (next, body) = rx.next_of("task_end").await;
    assert_eq!(next.headers["rookery-attempt"], "1");
    assert_ne!(body["delivery_id"], bodies[0]["delivery_id"]);
    assert!(
        server.stderr().contains("attempt 1 failed: answered 500"),
        "{}",
        server.stderr()
    );
    assert!(
        !server.stderr().contains(SECRET),
        "the secret reached the log"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receiver_that_never_answers_holds_no_session_up() {
    let mut rx = Receiver::start(0, true).await;
    let url = rx.url();
    // An attempt may take a minute, far longer than any wait here: a session waiting on the
    // delivery would miss its task_end.
    let server = start(
        &text_only(),
        &["--webhook", &url, "--webhook-timeout-ms", "60000"],
    );
    let id = server.create(None).await;
    for text in ["first", "second", "third"] {
        let after = server.task(&id, text).await;
        let events = server.events_until_task_end(&id, after).await;
        assert_eq!(events.last().unwrap().1["payload"]["status"], "completed");
        let (_, body) = rx.next_of("task_end").await;
        assert_eq!(body["session_id"], id.as_str());
    }
    assert_eq!(server.status_of(&id).await, "idle");
    // Three deliveries hang at once: none answered, none given up yet.
    assert_eq!(
        server
            .metric("rookery_webhook_deliveries_total{result=\"delivered\"}")
            .await,
        0
    );
    assert_eq!(
        server.metric("rookery_webhook_attempts_failed_total").await,
        0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receiver_that_never_answers_is_timed_out_retried_and_counted() {
    let mut rx = Receiver::start(0, true).await;
    let url = rx.url();
    let server = start(
        &text_only(),
        &[
            "--webhook",
            &url,
            "--webhook-timeout-ms",
            "300",
            "--webhook-retries",
            "2",
            "--webhook-backoff-ms",
            "50",
        ],
    );
    let id = server.create(None).await;
    let after = server.task(&id, "hello").await;
    server.events_until_task_end(&id, after).await;
    let first = rx.next().await;
    for n in 2..=3 {
        let again = rx.next().await;
        assert_eq!(again.body, first.body);
        assert_eq!(again.headers["rookery-attempt"], n.to_string());
    }
    metric_becomes(
        &server,
        "rookery_webhook_deliveries_total{result=\"failed\"}",
        1,
    )
    .await;
    assert_eq!(
        server.metric("rookery_webhook_attempts_failed_total").await,
        3
    );
    let err = server.stderr();
    assert!(
        err.contains("given up after 3 attempts: timed out"),
        "{err}"
    );
    // The session was never held: it takes the next task at once.
    let after = server.task(&id, "again").await;
    server.events_until_task_end(&id, after).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_that_starts_waiting_is_posted() {
    let mut rx = Receiver::start(0, false).await;
    let url = rx.url();
    let server = start(&tool_then_text(), &["--webhook", &url]);
    let id = server.create(Some("always-ask")).await;
    let after = server.task(&id, "read a").await;
    // The webhook alone says an approval waits: no polling of the approvals API first.
    let (_, body) = rx.next_of("approval_waiting").await;
    assert_eq!(body["session_id"], id.as_str());
    assert_eq!(body["name"], "read_file");
    assert_eq!(body["tool_call_id"], "call_0");
    assert_eq!(body["origin"], json!([]));
    let args: Value = serde_json::from_str(body["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(args["file_path"], "a.txt");
    let approval_id = body["approval_id"].as_str().unwrap();
    let (status, v) = server
        .call(
            "POST",
            &format!("/v1/sessions/{id}/approvals/{approval_id}"),
            Some(json!({"decision": "allow"})),
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{v}");
    server.events_until_task_end(&id, after).await;
    let (_, end) = rx.next_of("task_end").await;
    assert_eq!(end["status"], "completed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_url_needs_an_allowed_origin() {
    let mut allowed = Receiver::start(0, false).await;
    let other = Receiver::start(0, false).await;
    let server = start(&text_only(), &["--webhook-allow", &allowed.origin]);
    let ws = server.ws();
    let create = |webhook: String| {
        let server = &server;
        let body = json!({"workspace": ws, "webhook": webhook});
        async move { server.call("POST", "/v1/sessions", Some(body)).await }
    };
    let (status, v) = create(other.url()).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{v}");
    assert_eq!(v["error"]["code"], "webhook_not_allowed", "{v}");
    let msg = v["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains(&other.origin) && msg.contains(&allowed.origin),
        "{msg}"
    );
    let (status, v) = create("ftp://127.0.0.1/hook".into()).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{v}");
    assert_eq!(v["error"]["code"], "invalid_webhook", "{v}");
    // The allowed origin gets that session's events (the server has no --webhook of its own).
    let (status, v) = create(allowed.url()).await;
    assert_eq!(status, StatusCode::CREATED, "{v}");
    let id = v["session_id"].as_str().unwrap().to_string();
    let after = server.task(&id, "hello").await;
    server.events_until_task_end(&id, after).await;
    let (_, body) = allowed.next_of("task_end").await;
    assert_eq!(body["session_id"], id.as_str());

    // A server without webhook flags takes no session URL at all.
    let plain = Server::start(&text_only());
    let body = json!({"workspace": plain.ws(), "webhook": allowed.url()});
    let (status, v) = plain.call("POST", "/v1/sessions", Some(body)).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{v}");
    assert_eq!(v["error"]["code"], "webhook_not_allowed", "{v}");
}

#[test]
fn a_webhook_without_its_secret_refuses_to_start() {
    use crate::common::cli::Running;
    use std::process::Stdio;
    let dir = sandbox(&text_only());
    let home = dir.path().join("home");
    let serve = |secret: Option<&str>, extra: &[&str]| {
        let mut args = vec![
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--home",
            home.to_str().unwrap(),
        ];
        args.extend(extra);
        let mut c = command(dir.path(), &args);
        c.env_remove(SECRET_VAR);
        if let Some(s) = secret {
            c.env(SECRET_VAR, s);
        }
        c.stdout(Stdio::piped()).stderr(Stdio::piped());
        Running::spawn(c).wait(WAIT)
    };
    let with_var = [
        "--webhook",
        "http://127.0.0.1:9/hook",
        "--webhook-secret-env",
        SECRET_VAR,
    ];
    for secret in [None, Some("")] {
        let out = serve(secret, &with_var);
        assert_eq!(out.code, Some(2), "{}", out.stderr);
        assert!(
            out.stderr.contains(&format!(
                "--webhook-secret-env {SECRET_VAR}: the environment variable {SECRET_VAR} is not set or empty"
            )),
            "{}",
            out.stderr
        );
    }
    let out = serve(None, &["--webhook", "http://127.0.0.1:9/hook"]);
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(
        out.stderr
            .contains("--webhook needs --webhook-secret-env VAR"),
        "{}",
        out.stderr
    );
    let out = serve(
        Some(SECRET),
        &[
            "--webhook-secret-env",
            SECRET_VAR,
            "--webhook-allow",
            "http://127.0.0.1:9/x",
        ],
    );
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(out.stderr.contains("with no path"), "{}", out.stderr);
}
