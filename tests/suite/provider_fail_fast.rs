//! A model server that is not there, through the binary with the default retry policy: a
//! refused port, an HTTP 501 HTML page and `https://` spoken to a plain-HTTP port each end the
//! task after one attempt with one message saying what was tried and what to check; once the
//! server has answered, the same 501 is retried as before. Attempts are counted by the loopback
//! server (and the trace's `request_begin` records), not by time.

use std::process::Stdio;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

const TEXT_ANSWER: &str = concat!(
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"",
    "listing\"},\"finish_reason\":null}]}\n\n",
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_x\",",
    "\"type\":\"function\",\"function\":{\"name\":\"read_file\",\"arguments\":",
    "\"{\\\"file_path\\\":\\\"a.txt\\\"}\"}}]},\"finish_reason\":null}]}\n\n",
    "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n",
    "data: [DONE]\n\n",
);

/// A 501 page as a web server that is not the API sends it.
fn html_501() -> String {
    let page = format!(
        "<!DOCTYPE html><html><head><title>501 Not Implemented</title></head><body><h1>Not Implemented</h1><p>{}</p></body></html>",
        "This server does not implement the requested method. ".repeat(40)
    );
    format!(
        "HTTP/1.1 501 Not Implemented\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{page}",
        page.len()
    )
}

fn sse_200() -> String {
    format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{TEXT_ANSWER}",
        TEXT_ANSWER.len()
    )
}

/// A plain-HTTP loopback server: counts connections, answers each request with the next
/// scripted reply (the last one again when they run out), then closes.
struct Server {
    port: u16,
    connections: Arc<Mutex<usize>>,
}

impl Server {
    async fn start(replies: Vec<String>) -> Server {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let connections = Arc::new(Mutex::new(0));
        let count = connections.clone();
        let replies = Arc::new(Mutex::new(replies));
        tokio::spawn(async move {
            while let Ok((mut sock, _)) = listener.accept().await {
                *count.lock().unwrap() += 1;
                let replies = replies.clone();
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut buf = [0u8; 8192];
                    // A TLS hello (0x16) is answered at once, as a web server answers garbage.
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.first() != Some(&0x16)
                    {
                        match sock.read(&mut buf).await {
                            Ok(0) | Err(_) => break,
                            Ok(n) => head.extend_from_slice(&buf[..n]),
                        }
                    }
                    let reply = {
                        let mut r = replies.lock().unwrap();
                        if r.len() > 1 {
                            r.remove(0)
                        } else {
                            r[0].clone()
                        }
                    };
                    let _ = sock.write_all(reply.as_bytes()).await;
                    let _ = sock.shutdown().await;
                });
            }
        });
        Server { port, connections }
    }

    fn connections(&self) -> usize {
        *self.connections.lock().unwrap()
    }
}

struct Ran {
    code: i32,
    stdout: String,
    stderr: String,
    requests: usize,
}

/// `rookery run --base-url URL --model m` with the default retry policy (5 retries, 2 s on).
async fn run(base_url: &str, config: Option<&str>) -> Ran {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("a.txt"), "a\n").unwrap();
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_rookery"));
    // A user config of the real $HOME must not change the test.
    cmd.env("ROOKERY_NO_CONFIG", "1");
    cmd.arg("run")
        .arg("--workspace")
        .arg(&ws)
        .arg("--home")
        .arg(dir.path().join("home"))
        .args(["--base-url", base_url, "--model", "m"]);
    if let Some(yaml) = config {
        let path = dir.path().join("agent.yaml");
        std::fs::write(&path, yaml).unwrap();
        cmd.arg("--config").arg(path);
    }
    cmd.arg("list the files")
        .env("HOME", dir.path())
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .env_remove("HTTPS_PROXY")
        .env_remove("HTTP_PROXY")
        .env_remove("ALL_PROXY")
        .env_remove("https_proxy")
        .env_remove("http_proxy")
        .env_remove("all_proxy")
        .stdin(Stdio::null());
    let out = cmd.output().await.unwrap();
    let traces = crate::common::cli::trace_files(&dir.path().join("home"));
    let trace: String = traces
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect();
    Ran {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        requests: trace.matches("\"type\":\"request_begin\"").count(),
    }
}

fn all(ran: &Ran) -> String {
    format!("{}\n{}", ran.stdout, ran.stderr)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_port_ends_the_task_after_one_attempt() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let ran = run(&format!("http://127.0.0.1:{port}/v1"), None).await;
    assert_eq!(ran.code, 1, "{}", all(&ran));
    assert_eq!(ran.requests, 1, "retried: {}", all(&ran));
    let text = all(&ran);
    assert!(
        text.contains(&format!("is a server listening at 127.0.0.1:{port}?")),
        "{text}"
    );
    assert!(
        text.contains(&format!("POST http://127.0.0.1:{port}/v1/chat/completions")),
        "{text}"
    );
    assert_eq!(text.matches("is a server listening").count(), 1, "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_html_501_ends_the_task_after_one_request_with_the_page_cut() {
    let server = Server::start(vec![html_501()]).await;
    let ran = run(&format!("http://127.0.0.1:{}/v1", server.port), None).await;
    assert_eq!(ran.code, 1, "{}", all(&ran));
    assert_eq!(server.connections(), 1, "{}", all(&ran));
    assert_eq!(ran.requests, 1, "{}", all(&ran));
    let text = all(&ran);
    assert!(
        text.contains("HTTP 501 with an HTML page from POST"),
        "{text}"
    );
    assert!(text.contains("check the base URL"), "{text}");
    // The page appears once, cut to a few hundred characters.
    assert_eq!(text.matches("Not Implemented").count(), 2, "{text}");
    let line = text
        .lines()
        .find(|l| l.contains("HTTP 501"))
        .unwrap_or_default();
    assert!(line.len() < 700, "{} chars: {line}", line.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_to_a_plain_http_port_says_use_http() {
    let server = Server::start(vec![
        "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_string(),
    ])
    .await;
    let ran = run(&format!("https://127.0.0.1:{}/v1", server.port), None).await;
    assert_eq!(ran.code, 1, "{}", all(&ran));
    assert_eq!(server.connections(), 1, "{}", all(&ran));
    assert_eq!(ran.requests, 1, "{}", all(&ran));
    let text = all(&ran);
    assert!(text.contains("this is an HTTP port: use http://"), "{text}");
    assert!(
        text.contains(&format!("base URL http://127.0.0.1:{}/v1", server.port)),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_good_answer_the_same_failure_is_retried() {
    // The first request is answered (a tool call); the next ones get the 501 page.
    let server = Server::start(vec![sse_200(), html_501()]).await;
    let config = "retry:\n  max_retries: 2\n  base_ms: 1\n  cap_ms: 1\n";
    let ran = run(
        &format!("http://127.0.0.1:{}/v1", server.port),
        Some(config),
    )
    .await;
    assert_eq!(ran.code, 1, "{}", all(&ran));
    // One good request, then the failing one and its two retries.
    assert_eq!(server.connections(), 4, "{}", all(&ran));
    assert_eq!(ran.requests, 4, "{}", all(&ran));
    assert!(!all(&ran).contains("not retried"), "{}", all(&ran));
}
