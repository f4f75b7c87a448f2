//! The replay server of the provider tests: a raw HTTP/1.1 server on 127.0.0.1:0 that answers
//! the first `POST …/chat/completions` with a scripted body (recorded bytes, byte for byte, in one
//! write or one byte per write, with optional pauses, then a close or a connection held open),
//! and every later request with a short text answer. It records each request body. No HTTP
//! framework: what is written is exactly the script.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The answer to every request after the first one.
pub const LATER_ANSWER: &str = concat!(
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"replay done\"},\"finish_reason\":null}]}\n\n",
    "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
    "data: [DONE]\n\n",
);

/// How the recorded body is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Writes {
    /// The whole body in one write.
    One,
    /// One byte per write (every event, line end and UTF-8 sequence straddles writes).
    Bytewise,
}

/// One piece of the first response body.
#[derive(Clone, Debug)]
pub enum Piece {
    Bytes(Vec<u8>),
    /// Nothing is written for this long.
    Pause(Duration),
}

/// The first response.
#[derive(Clone, Debug)]
pub struct Script {
    pub content_type: &'static str,
    pub pieces: Vec<Piece>,
    pub writes: Writes,
    /// After the body the connection stays open (until the client closes it).
    pub hold_open: bool,
}

impl Script {
    /// An event stream of `body`, closed after it.
    pub fn sse(body: Vec<u8>, writes: Writes) -> Script {
        Script {
            content_type: "text/event-stream",
            pieces: vec![Piece::Bytes(body)],
            writes,
            hold_open: false,
        }
    }
}

pub struct Replay {
    pub base_url: String,
    requests: Arc<Mutex<Vec<Value>>>,
}

impl Replay {
    /// Serves `script` to the first request.
    pub async fn start(script: Script) -> Replay {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let seen = requests.clone();
        let script = Arc::new(script);
        tokio::spawn(async move {
            loop {
                let Ok((socket, _)) = listener.accept().await else {
                    return;
                };
                let seen = seen.clone();
                let script = script.clone();
                tokio::spawn(async move {
                    serve(socket, seen, script).await;
                });
            }
        });
        Replay {
            base_url: format!("http://{addr}/v1"),
            requests,
        }
    }

    pub fn requests(&self) -> Vec<Value> {
        self.requests.lock().unwrap().clone()
    }
}

/// Reads one request (headers, then `Content-Length` bytes); `None` on a closed connection.
pub async fn read_request(socket: &mut TcpStream) -> Option<Vec<u8>> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let header_end = loop {
        if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..header_end]).to_ascii_lowercase();
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    while buf.len() < header_end + length {
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    Some(buf[header_end..header_end + length].to_vec())
}

async fn serve(mut socket: TcpStream, seen: Arc<Mutex<Vec<Value>>>, script: Arc<Script>) {
    let _ = socket.set_nodelay(true);
    let Some(request) = read_request(&mut socket).await else {
        return;
    };
    let first = {
        let mut seen = seen.lock().unwrap();
        seen.push(serde_json::from_slice(&request).unwrap_or(Value::Null));
        seen.len() == 1
    };
    let later = Script::sse(LATER_ANSWER.as_bytes().to_vec(), Writes::One);
    let script = if first { script.as_ref() } else { &later };
    let head = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: {}\r\ncache-control: no-cache\r\nconnection: close\r\n\r\n",
        script.content_type
    );
    if socket.write_all(head.as_bytes()).await.is_err() {
        return;
    }
    for piece in &script.pieces {
        match piece {
            Piece::Pause(d) => tokio::time::sleep(*d).await,
            Piece::Bytes(body) => match script.writes {
                Writes::One => {
                    if socket.write_all(body).await.is_err() {
                        return;
                    }
                }
                Writes::Bytewise => {
                    for byte in body {
                        if socket.write_all(std::slice::from_ref(byte)).await.is_err() {
                            return;
                        }
                    }
                }
            },
        }
    }
    if script.hold_open {
        // Until the client hangs up.
        let mut sink = [0u8; 1024];
        while let Ok(n) = socket.read(&mut sink).await {
            if n == 0 {
                break;
            }
        }
        return;
    }
    let _ = socket.shutdown().await;
}
