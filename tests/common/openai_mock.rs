//! The axum mock of an OpenAI-compatible endpoint used by `openai_provider.rs`: scripted
//! replies (byte-exact SSE bodies written piece by piece, stalls, error statuses), request
//! recording, per-request checks (Authorization header, tool call pairing), and builders of
//! expected model events.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures::StreamExt;
use rookery::message::{EventType, ModelPayload, Role, StopReason};
use rookery::model::ModelEvent;
use serde_json::Value;

/// One scripted answer of the mock.
#[derive(Clone)]
pub enum Reply {
    /// An SSE body written piece by piece (each piece its own write, 2 ms apart).
    Sse(Vec<String>),
    /// Pieces, then the connection stays open with nothing more.
    Stall(Vec<String>),
    /// Status, JSON body, optional `Retry-After` value.
    Status(u16, String, Option<&'static str>),
    /// `308 Permanent Redirect` to this location.
    Redirect(String),
}

#[derive(Default)]
pub struct MockState {
    replies: Mutex<VecDeque<Reply>>,
    requests: Mutex<Vec<Value>>,
    problems: Mutex<Vec<String>>,
    /// `Some(v)`: every request must carry `Authorization: v`; `None`: none may.
    expect_auth: Mutex<Option<String>>,
    /// The `traceparent` header of each request, in arrival order.
    pub traceparents: Mutex<Vec<Option<String>>>,
}

pub struct Mock {
    pub state: Arc<MockState>,
    pub base_url: String,
}

impl Mock {
    pub async fn start(replies: Vec<Reply>, expect_auth: Option<String>) -> Mock {
        let state = Arc::new(MockState::default());
        *state.replies.lock().unwrap() = replies.into();
        *state.expect_auth.lock().unwrap() = expect_auth;
        let app = Router::new()
            .route("/v1/chat/completions", post(completions))
            .route("/img/{name}", get(image))
            .with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Mock {
            state,
            base_url: format!("http://{addr}/v1"),
        }
    }

    pub fn requests(&self) -> Vec<Value> {
        self.state.requests.lock().unwrap().clone()
    }

    pub fn assert_clean(&self) {
        let problems = self.state.problems.lock().unwrap();
        assert!(problems.is_empty(), "mock saw: {problems:#?}");
    }
}

/// Each assistant tool call is answered by exactly one `tool` message, right after its message.
pub fn check_pairing(body: &Value) -> Result<(), String> {
    let messages = body["messages"].as_array().ok_or("no messages")?;
    for (i, m) in messages.iter().enumerate() {
        if m["role"] == "tool" {
            let id = &m["tool_call_id"];
            let owner = messages[..i].iter().rev().find(|p| p["role"] != "tool");
            let ok = owner.is_some_and(|o| {
                o["role"] == "assistant"
                    && o["tool_calls"]
                        .as_array()
                        .is_some_and(|c| c.iter().any(|c| &c["id"] == id))
            });
            if !ok {
                return Err(format!("tool message {id} does not follow its call"));
            }
        }
        let Some(calls) = m["tool_calls"].as_array() else {
            continue;
        };
        for (k, call) in calls.iter().enumerate() {
            if call["type"] != "function" {
                return Err(format!("call without type function: {call}"));
            }
            let answers: Vec<&Value> = messages[i + 1..]
                .iter()
                .take_while(|n| n["role"] == "tool")
                .collect();
            let n = answers
                .iter()
                .filter(|a| a["tool_call_id"] == call["id"])
                .count();
            if n != 1 {
                return Err(format!("call {} has {n} tool messages", call["id"]));
            }
            if answers.get(k).map(|a| &a["tool_call_id"]) != Some(&call["id"]) {
                return Err(format!("tool messages not in call order at {}", call["id"]));
            }
        }
    }
    Ok(())
}

async fn completions(
    State(state): State<Arc<MockState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    state.traceparents.lock().unwrap().push(
        headers
            .get("traceparent")
            .map(|v| v.to_str().unwrap_or("<non-ascii>").to_string()),
    );
    let mut problems = Vec::new();
    let auth = headers
        .get("authorization")
        .map(|v| v.to_str().unwrap_or("<non-ascii>").to_string());
    let expected = state.expect_auth.lock().unwrap().clone();
    if auth != expected {
        problems.push(format!("authorization {auth:?}, expected {expected:?}"));
    }
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    if body["stream"] != true || body["stream_options"]["include_usage"] != true {
        problems.push(format!("not a streaming request: {body}"));
    }
    if let Err(e) = check_pairing(&body) {
        problems.push(e);
    }
    state.problems.lock().unwrap().extend(problems);
    state.requests.lock().unwrap().push(body);
    let reply = state.replies.lock().unwrap().pop_front();
    match reply {
        None => (StatusCode::INTERNAL_SERVER_ERROR, "mock: no reply left").into_response(),
        Some(Reply::Status(code, text, retry_after)) => {
            let mut response = Response::builder()
                .status(code)
                .header("content-type", "application/json");
            if let Some(r) = retry_after {
                response = response.header("retry-after", r);
            }
            response.body(Body::from(text)).unwrap()
        }
        Some(Reply::Redirect(location)) => Response::builder()
            .status(StatusCode::PERMANENT_REDIRECT)
            .header("location", location)
            .body(Body::empty())
            .unwrap(),
        Some(Reply::Sse(pieces)) => sse(pieces, false),
        Some(Reply::Stall(pieces)) => sse(pieces, true),
    }
}

fn sse(pieces: Vec<String>, stall: bool) -> Response {
    let body = futures::stream::iter(pieces)
        .then(|p| async move {
            tokio::time::sleep(Duration::from_millis(2)).await;
            Ok::<Bytes, std::convert::Infallible>(Bytes::from(p))
        })
        .chain(futures::stream::once(async move {
            if stall {
                futures::future::pending::<()>().await;
            }
            Ok(Bytes::new())
        }));
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(Body::from_stream(body))
        .unwrap()
}

async fn image(axum::extract::Path(name): axum::extract::Path<String>) -> Response {
    match name.as_str() {
        "red.png" => ([("content-type", "image/png")], png(4, 3)).into_response(),
        _ => (StatusCode::NOT_FOUND, "no such image").into_response(),
    }
}

pub fn png(w: u32, h: u32) -> Vec<u8> {
    let img = image::RgbImage::from_pixel(w, h, image::Rgb([200, 10, 10]));
    let mut out = std::io::Cursor::new(Vec::new());
    img.write_to(&mut out, image::ImageFormat::Png).unwrap();
    out.into_inner()
}

/// Splits a body into pieces of `n` bytes (so events straddle writes).
pub fn split(body: &str, n: usize) -> Vec<String> {
    body.as_bytes()
        .chunks(n)
        .map(|c| String::from_utf8_lossy(c).into_owned())
        .collect()
}

// Expected-event builders.

pub fn partial_text(e: EventType, t: &str) -> ModelEvent {
    ModelEvent::Partial(ModelPayload::PartialText {
        role: Role::Assistant,
        event_type: e,
        text: t.into(),
        stop_reason: StopReason::Completed,
    })
}

pub fn partial_thinking(e: EventType, t: &str) -> ModelEvent {
    ModelEvent::Partial(ModelPayload::PartialThinking {
        role: Role::Assistant,
        event_type: e,
        thinking: t.into(),
        stop_reason: StopReason::Completed,
    })
}

pub fn partial_call(e: EventType, name: &str, args: &str, id: &str) -> ModelEvent {
    ModelEvent::Partial(ModelPayload::PartialToolCall {
        role: Role::Assistant,
        event_type: e,
        name: name.into(),
        arguments: args.into(),
        tool_call_id: id.into(),
        stop_reason: StopReason::Completed,
    })
}

pub fn complete_call(name: &str, args: &str, id: &str) -> ModelEvent {
    ModelEvent::Complete(ModelPayload::ToolCall {
        role: Role::Assistant,
        name: name.into(),
        arguments: args.into(),
        tool_call_id: id.into(),
        stop_reason: StopReason::Completed,
        fidelity: None,
    })
}
