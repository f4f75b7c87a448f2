//! End-to-end tests of the connection limits of `rookery serve`, driving the built binary on
//! 127.0.0.1 with raw TCP sockets: `--header-timeout-ms` closes a connection that sends nothing,
//! half a request head, half an HTTP/2 preface, or idles between keep-alive requests, but never
//! an event stream; `--max-connections` answers the connection over the cap with 503 at once,
//! and the server serves again once connections go; SIGTERM still stops a server holding idle
//! connections.
//!
//! Each server gets its own temporary home, workspace and `$HOME`. Every wait is bounded, and
//! waits on the server closing a socket rather than on the clock.

use crate::common::serve as harness;

use std::time::{Duration, Instant};

use futures::StreamExt;
use harness::*;
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Well above the timeouts used here, well below a hung test.
const CLOSE_WAIT: Duration = Duration::from_secs(10);

fn addr(server: &Server) -> String {
    server.base.strip_prefix("http://").unwrap().to_string()
}

/// Reads until the server closes the connection (EOF or reset); what it sent, and when.
async fn read_until_closed(conn: &mut TcpStream) -> (Vec<u8>, Instant) {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match tokio::time::timeout(CLOSE_WAIT, conn.read(&mut buf)).await {
            Err(_) => panic!(
                "the server kept the connection open (got {:?})",
                String::from_utf8_lossy(&got)
            ),
            Ok(Ok(0)) | Ok(Err(_)) => return (got, Instant::now()),
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
        }
    }
}

/// A server whose connections must send a request head within 500 ms.
fn short_header_timeout() -> Server {
    Server::start_with(
        sandbox(&tool_then_text()),
        None,
        &["--header-timeout-ms", "500"],
    )
}

/// A client that opens a new connection for every request (the server closes idle ones).
fn fresh_client() -> reqwest::Client {
    reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_that_sends_nothing_is_closed() {
    let server = short_header_timeout();
    let opened = Instant::now();
    let mut conn = TcpStream::connect(addr(&server)).await.unwrap();
    let (got, closed) = read_until_closed(&mut conn).await;
    assert!(got.is_empty(), "{:?}", String::from_utf8_lossy(&got));
    assert!(
        closed - opened >= Duration::from_millis(450),
        "closed before the timeout: {:?}",
        closed - opened
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_a_request_head_or_preface_is_closed() {
    let server = short_header_timeout();
    let host = addr(&server);
    let half_head = format!("GET /healthz HTTP/1.1\r\nHost: {host}\r\nAccept: */*");
    // Half an HTTP/2 preface keeps the server guessing the protocol.
    for partial in [half_head.as_str(), "PRI * HTTP/2.0\r\n"] {
        let mut conn = TcpStream::connect(&host).await.unwrap();
        conn.write_all(partial.as_bytes()).await.unwrap();
        let (got, _) = read_until_closed(&mut conn).await;
        assert!(
            !String::from_utf8_lossy(&got).contains(" 200 "),
            "{partial:?} was answered: {:?}",
            String::from_utf8_lossy(&got)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_keep_alive_connection_is_closed() {
    let server = short_header_timeout();
    let host = addr(&server);
    let mut conn = TcpStream::connect(&host).await.unwrap();
    let request = format!("GET /healthz HTTP/1.1\r\nHost: {host}\r\n\r\n");
    conn.write_all(request.as_bytes()).await.unwrap();
    // The answer comes, then nothing more is asked: the server closes the connection.
    let (got, _) = read_until_closed(&mut conn).await;
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with("HTTP/1.1 200 "), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_over_the_cap_get_503_and_the_server_recovers() {
    let server = Server::start_with(
        sandbox(&tool_then_text()),
        None,
        &["--max-connections", "8", "--header-timeout-ms", "120000"],
    );
    let host = addr(&server);
    let mut idle = Vec::new();
    for _ in 0..8 {
        idle.push(TcpStream::connect(&host).await.unwrap());
    }
    // The server accepts in order: the ninth finds every place taken, and is answered without
    // having sent anything.
    let mut ninth = TcpStream::connect(&host).await.unwrap();
    let (got, _) = read_until_closed(&mut ninth).await;
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with("HTTP/1.1 503 "), "{text}");
    let body: Value = serde_json::from_str(text.split_once("\r\n\r\n").unwrap().1).unwrap();
    assert_eq!(body["error"]["code"], "too_many_connections");
    let deadline = Instant::now() + WAIT;
    while !server
        .stderr()
        .contains("refused 1 connection(s) with 503: 8 connections are open (--max-connections)")
    {
        assert!(Instant::now() < deadline, "no warning: {}", server.stderr());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The idle ones go; their places come back.
    drop(idle);
    let client = fresh_client();
    let deadline = Instant::now() + WAIT;
    loop {
        let answer = client.get(format!("{}/healthz", server.base)).send().await;
        if let Ok(r) = answer
            && r.status() == StatusCode::OK
        {
            break;
        }
        assert!(Instant::now() < deadline, "/healthz never answered again");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_stream_outlives_the_header_timeout() {
    let timeout = Duration::from_millis(300);
    let server = Server::start_with(
        sandbox(&tool_then_text()),
        None,
        &["--header-timeout-ms", "300"],
    );
    let token = server.token.clone().unwrap();
    let client = fresh_client();
    let created: Value = client
        .post(format!("{}/v1/sessions", server.base))
        .bearer_auth(&token)
        .json(&json!({"workspace": server.ws()}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = created["session_id"].as_str().unwrap().to_string();
    let events = client
        .get(format!("{}/v1/sessions/{id}/events", server.base))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(events.status(), StatusCode::OK);
    let started = Instant::now();
    let mut stream = events.bytes_stream();
    // Witnesses: idle connections the server closes one after another. Once they have taken
    // several timeouts (and the grace of an idle close) in all, the stream has been quiet
    // that long too (its keep-alives come every 15 s).
    let host = addr(&server);
    while started.elapsed() < timeout * 8 {
        let mut witness = TcpStream::connect(&host).await.unwrap();
        let (got, _) = read_until_closed(&mut witness).await;
        assert!(got.is_empty());
    }
    let (status, v) = server
        .send(
            client
                .post(format!("{}/v1/sessions/{id}/tasks", server.base))
                .bearer_auth(&token)
                .json(&json!({"text": "go"})),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{v}");
    // The same stream carries the task to its end.
    let mut seen = String::new();
    let deadline = tokio::time::Instant::now() + WAIT;
    while !seen.contains("\"task_end\"") {
        let chunk = tokio::time::timeout_at(deadline, stream.next())
            .await
            .expect("task_end in time")
            .expect("the event stream was cut")
            .expect("the event stream failed");
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
}

#[test]
fn sigterm_with_idle_connections_open_exits_promptly() {
    let mut server = Server::start_with(sandbox(&tool_then_text()), None, &[]);
    let host = addr(&server);
    let mut idle = Vec::new();
    for _ in 0..3 {
        idle.push(std::net::TcpStream::connect(&host).unwrap());
    }
    let half = format!("GET /healthz HTTP/1.1\r\nHost: {host}\r\n");
    std::io::Write::write_all(&mut idle[0], half.as_bytes()).unwrap();
    let sent = Instant::now();
    nix::sys::signal::kill(server.pid(), nix::sys::signal::Signal::SIGTERM).unwrap();
    let status = loop {
        if let Some(s) = server.child.try_wait().unwrap() {
            break s;
        }
        assert!(
            sent.elapsed() < Duration::from_secs(5),
            "no exit within 5 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status:?}: {}", server.stderr());
}
