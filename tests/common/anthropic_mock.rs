//! A loopback server of Anthropic's Messages API for the Anthropic provider tests: raw HTTP/1.1
//! on 127.0.0.1:0, answering each `POST /v1/messages` with the next scripted reply (a recorded
//! SSE body written in one write or one byte per write, or an error status with `retry-after`),
//! recording every request's headers and JSON body; plus the fixture files and a checker of
//! the streamed segment discipline.

pub mod rules;

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use rookery::message::{EventType, ModelPayload};
use rookery::model::ModelEvent;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// How a reply body is written.
#[derive(Clone, Copy, Debug)]
pub enum Writes {
    One,
    Bytes,
}

/// One scripted answer.
#[derive(Clone)]
pub enum Reply {
    /// `200 text/event-stream`, this body, then the connection closes.
    Sse(Vec<u8>, Writes),
    /// A status with a JSON body and optional `retry-after`.
    Status(u16, String, Option<&'static str>),
}

/// One request as received.
#[derive(Clone, Debug)]
pub struct Seen {
    pub path: String,
    pub headers: HashMap<String, String>,
    pub raw_body: Vec<u8>,
    pub body: Value,
}

#[derive(Default)]
struct State {
    replies: Mutex<VecDeque<Reply>>,
    seen: Mutex<Vec<Seen>>,
}

pub struct Server {
    state: Arc<State>,
    pub base_url: String,
}

impl Server {
    pub async fn start(replies: Vec<Reply>) -> Server {
        let state = Arc::new(State::default());
        *state.replies.lock().unwrap() = replies.into();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let st = state.clone();
        tokio::spawn(async move {
            loop {
                let Ok((sock, _)) = listener.accept().await else {
                    return;
                };
                let st = st.clone();
                tokio::spawn(async move {
                    let _ = serve(sock, st).await;
                });
            }
        });
        Server {
            state,
            base_url: format!("http://{addr}/v1"),
        }
    }

    pub fn requests(&self) -> Vec<Seen> {
        self.state.seen.lock().unwrap().clone()
    }
}

async fn serve(mut sock: TcpStream, state: Arc<State>) -> std::io::Result<()> {
    sock.set_nodelay(true)?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        let n = sock.read(&mut chunk).await?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let path = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .unwrap_or("")
        .to_string();
    let mut headers = HashMap::new();
    for line in lines {
        if let Some((k, v)) = line.split_once(':') {
            headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
        }
    }
    let length: usize = headers
        .get("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut body = buf[head_end..].to_vec();
    while body.len() < length {
        let n = sock.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    let json = serde_json::from_slice(&body).unwrap_or(Value::Null);
    state.seen.lock().unwrap().push(Seen {
        path: path.clone(),
        headers,
        raw_body: body,
        body: json,
    });
    let reply = if path == "/v1/messages" {
        state.replies.lock().unwrap().pop_front()
    } else {
        None
    };
    match reply {
        None => {
            let text =
                r#"{"type":"error","error":{"type":"not_found_error","message":"no reply left"}}"#;
            let head = format!(
                "HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                text.len()
            );
            sock.write_all(head.as_bytes()).await?;
            sock.write_all(text.as_bytes()).await?;
        }
        Some(Reply::Status(code, text, retry_after)) => {
            let mut head = format!(
                "HTTP/1.1 {code} Error\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n",
                text.len()
            );
            if let Some(r) = retry_after {
                head.push_str(&format!("retry-after: {r}\r\n"));
            }
            head.push_str("\r\n");
            sock.write_all(head.as_bytes()).await?;
            sock.write_all(text.as_bytes()).await?;
        }
        Some(Reply::Sse(bytes, writes)) => {
            sock.write_all(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\nconnection: close\r\n\r\n",
            )
            .await?;
            match writes {
                Writes::One => sock.write_all(&bytes).await?,
                Writes::Bytes => {
                    for b in bytes {
                        sock.write_all(&[b]).await?;
                        sock.flush().await?;
                    }
                }
            }
        }
    }
    sock.flush().await?;
    sock.shutdown().await
}

/// The bytes of `tests/fixtures/anthropic/NAME`.
pub fn fixture(name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/anthropic")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every partial segment is `start → delta* → stop`, followed at once by its complete message
/// whose content is the concatenation of the deltas.
pub fn check_segments(events: &[ModelEvent]) -> Result<(), String> {
    let mut open: Option<(&'static str, String)> = None;
    let mut expect_complete: Option<(&'static str, String)> = None;
    for (i, e) in events.iter().enumerate() {
        if let Some((kind, content)) = expect_complete.take() {
            let got = match e {
                ModelEvent::Complete(ModelPayload::Text { text, .. }) => ("text", text.clone()),
                ModelEvent::Complete(ModelPayload::Thinking { thinking, .. }) => {
                    ("thinking", thinking.clone())
                }
                ModelEvent::Complete(ModelPayload::ToolCall { arguments, .. }) => {
                    ("tool_call", arguments.clone())
                }
                other => return Err(format!("event {i}: {other:?} after a {kind} stop")),
            };
            if got != (kind, content.clone()) {
                return Err(format!("event {i}: complete {got:?} != deltas {content:?}"));
            }
            continue;
        }
        let (kind, phase, piece) = match e {
            ModelEvent::Partial(ModelPayload::PartialText {
                event_type, text, ..
            }) => ("text", *event_type, text.clone()),
            ModelEvent::Partial(ModelPayload::PartialThinking {
                event_type,
                thinking,
                ..
            }) => ("thinking", *event_type, thinking.clone()),
            ModelEvent::Partial(ModelPayload::PartialToolCall {
                event_type,
                arguments,
                ..
            }) => ("tool_call", *event_type, arguments.clone()),
            ModelEvent::Complete(ModelPayload::InlineThinking { .. }) if open.is_none() => {
                continue;
            }
            ModelEvent::Complete(c) => return Err(format!("event {i}: {c:?} without a segment")),
            // A failed stream may end inside a segment (the attempt is discarded).
            ModelEvent::End(o) if o.status != rookery::message::StopReason::Completed => {
                return Ok(());
            }
            ModelEvent::Usage(_) | ModelEvent::End(_) => {
                if open.is_some() {
                    return Err(format!("event {i}: {e:?} inside an open segment"));
                }
                continue;
            }
            ModelEvent::Partial(p) => return Err(format!("event {i}: unexpected {p:?}")),
        };
        match (phase, &mut open) {
            (EventType::Start, None) if piece.is_empty() => open = Some((kind, String::new())),
            (EventType::Delta, Some((k, acc))) if *k == kind => acc.push_str(&piece),
            (EventType::Stop, Some((k, _))) if *k == kind && piece.is_empty() => {
                expect_complete = open.take();
            }
            _ => return Err(format!("event {i}: {phase:?} {kind} out of order")),
        }
    }
    if open.is_some() || expect_complete.is_some() {
        return Err("a segment was left open".to_string());
    }
    Ok(())
}
