//! A tiny loopback OpenAI-compatible streaming server that plays the standard workload's model
//! rule (`rookery bench --serve-mock`): `POST …/chat/completions` with `stream: true` is answered
//! with the standard Chat Completions chunks — one tool call while fewer than K `tool` messages
//! are in the request, else the text `Done: ran {t} tool calls.` — then usage and `[DONE]`.
//!
//! It exists to measure the HTTP path of the runtime; it checks nothing and keeps no state.

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

use super::Workload;
use super::model::done_text;

#[derive(Debug, Clone, Copy)]
struct Rule {
    workload: Workload,
    turns: usize,
}

fn chunk(delta: Value, finish: Option<&str>) -> String {
    let body = json!({
        "id": "chatcmpl-bench",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "bench",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    });
    format!("data: {body}\n\n")
}

/// The SSE body answering a request that holds `t` tool results.
pub fn sse_body(workload: Workload, turns: usize, t: usize) -> String {
    let mut out = String::with_capacity(1024);
    let finish = if t < turns {
        let name = workload.tool_name();
        out.push_str(&chunk(
            json!({"role": "assistant", "content": null, "tool_calls": [{
                "index": 0, "id": format!("call_{t}"), "type": "function",
                "function": {"name": name, "arguments": ""}}]}),
            None,
        ));
        out.push_str(&chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": workload.arguments()}}]}),
            None,
        ));
        "tool_calls"
    } else {
        out.push_str(&chunk(
            json!({"role": "assistant", "content": done_text(t)}),
            None,
        ));
        "stop"
    };
    out.push_str(&chunk(json!({}), Some(finish)));
    let usage = json!({"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 0,
        "model": "bench", "choices": [],
        "usage": {"prompt_tokens": 100, "completion_tokens": 12, "total_tokens": 112}});
    out.push_str(&format!("data: {usage}\n\ndata: [DONE]\n\n"));
    out
}

/// The part of a request the rule reads (every other field is skipped, not built).
#[derive(serde::Deserialize)]
struct Request<'a> {
    #[serde(borrow, default)]
    messages: Vec<Message<'a>>,
}

#[derive(serde::Deserialize)]
struct Message<'a> {
    #[serde(borrow, default)]
    role: std::borrow::Cow<'a, str>,
}

async fn completions(State(rule): State<Arc<Rule>>, body: axum::body::Bytes) -> Response {
    let Ok(req) = serde_json::from_slice::<Request<'_>>(&body) else {
        return (StatusCode::BAD_REQUEST, "request body is not JSON").into_response();
    };
    let t = req.messages.iter().filter(|m| m.role == "tool").count();
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Body::from(sse_body(rule.workload, rule.turns, t)))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

/// Binds `listen`, returns the base URL to pass as `--base-url` and the server future.
pub async fn bind(
    listen: &str,
    workload: Workload,
    turns: usize,
) -> std::io::Result<(
    String,
    impl std::future::Future<Output = std::io::Result<()>>,
)> {
    let rule = Arc::new(Rule { workload, turns });
    let app = Router::new()
        .route("/v1/chat/completions", post(completions))
        .route("/chat/completions", post(completions))
        .with_state(rule);
    let listener = tokio::net::TcpListener::bind(listen).await?;
    let addr = listener.local_addr()?;
    Ok((format!("http://{addr}/v1"), async move {
        axum::serve(listener, app).await
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_follow_the_rule() {
        let call = sse_body(Workload::Read, 2, 1);
        assert!(call.contains(r#""id":"call_1""#), "{call}");
        assert!(call.contains(r#""name":"read_file""#));
        assert!(call.contains(r#"{\"file_path\":\"bench-input.txt\"}"#));
        assert!(call.contains(r#""finish_reason":"tool_calls""#));
        assert!(call.ends_with("data: [DONE]\n\n"));
        let done = sse_body(Workload::Exec, 2, 2);
        assert!(done.contains("Done: ran 2 tool calls."));
        assert!(done.contains(r#""finish_reason":"stop""#));
    }
}
