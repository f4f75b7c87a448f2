//! The OpenAI-compatible provider against an axum mock server on 127.0.0.1:0 that answers with
//! byte-exact SSE bodies (split over several writes): streaming, parallel tool calls, usage,
//! error classification through the session's retry loop, timeouts, malformed chunks, the
//! Authorization header, and describe_image / read_image over HTTP.

use crate::common;
use crate::common::openai_mock;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use futures::StreamExt;
use openai_mock::{
    Mock, Reply, complete_call, partial_call, partial_text, partial_thinking, png, split,
};
use rookery::approval::AllowAllApprover;
use rookery::message::{EventPayload, EventType, ModelPayload, Role, StopReason, Usage};
use rookery::model::model_config::ModelConfig;
use rookery::model::openai::OpenAiModel;
use rookery::model::{Model, ModelEvent, ModelOutcome, ModelRequest, ModelSessionContext};
use rookery::tools::profile::penguin::default_definition;
use rookery::tools::profile::penguin::describe_image::DescribeImageTool;
use rookery::tools::profile::penguin::image_tools;
use rookery::tools::profile::penguin::read_image::ReadImageTool;
use rookery::tools::{Tool, ToolContext, ToolResult};
use rookery::{Host, SessionOptions};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// A unique variable holding `key`; the returned name goes into `api_key_env`.
fn key_var(name: &str, key: &str) -> String {
    let var = format!("ROOKERY_TEST_KEY_{name}");
    // SAFETY: each test uses its own variable name; nothing else reads it concurrently.
    unsafe { std::env::set_var(&var, key) };
    var
}

fn config(mock: &Mock, var: &str) -> ModelConfig {
    let mut cfg = ModelConfig::openai(&mock.base_url, "gpt-test");
    cfg.api_key_env = Some(var.to_string());
    cfg
}

const TEXT_ANSWER: &str = concat!(
    "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}]}\n\n",
    "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"all \"},\"finish_reason\":null}]}\n\n",
    "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"done\"},\"finish_reason\":null}]}\n\n",
    "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
    "data: {\"id\":\"c1\",\"choices\":[],\"usage\":{\"prompt_tokens\":50,\"completion_tokens\":2,\"total_tokens\":52}}\n\n",
    "data: [DONE]\n\n",
);

const WRITE_CALL: &str = concat!(
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"index\":0,\"id\":\"call_w1\",\"type\":\"function\",\"function\":{\"name\":\"write_file\",\"arguments\":\"\"}}]},\"finish_reason\":null}]}\n\n",
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"file_path\\\":\"}}]},\"finish_reason\":null}]}\n\n",
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"\\\"out.txt\\\",\\\"content\\\":\"}}]},\"finish_reason\":null}]}\n\n",
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"\\\"hello\\\\n\\\"}\"}}]},\"finish_reason\":null}]}\n\n",
    "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n",
    "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":40,\"completion_tokens\":20,\"total_tokens\":60}}\n\n",
    "data: [DONE]\n\n",
);

async fn collect(model: &OpenAiModel, request: ModelRequest) -> Vec<ModelEvent> {
    let mut session = model.open(&ModelSessionContext::default());
    tokio::time::timeout(
        Duration::from_secs(10),
        session.stream(request).collect::<Vec<_>>(),
    )
    .await
    .expect("stream ends")
}

fn user_request(text: &str) -> ModelRequest {
    ModelRequest {
        system_prompt: Arc::from("be brief"),
        history: Arc::new(vec![ModelPayload::Text {
            role: Role::User,
            text: text.to_string(),
            sender: None,
            stop_reason: StopReason::Completed,
            fidelity: None,
        }]),
        tools: Arc::new(vec![default_definition("write_file").unwrap().model_spec()]),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_reasoning_text_and_two_parallel_tool_calls() {
    let body = concat!(
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"reasoning_content\":\"Let me \"},\"finish_reason\":null}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"think.\"},\"finish_reason\":null}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Two \"},\"finish_reason\":null}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"files.\"},\"finish_reason\":null}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_a\",\"type\":\"function\",\"function\":{\"name\":\"write_file\",\"arguments\":\"\"}}]},\"finish_reason\":null}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"file_\"}}]},\"finish_reason\":null}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"path\\\":\\\"a\"}}]},\"finish_reason\":null}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"\\\"}\"}}]},\"finish_reason\":null}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1,\"id\":\"call_b\",\"type\":\"function\",\"function\":{\"name\":\"read_file\",\"arguments\":\"{\\\"fi\"}}]},\"finish_reason\":null}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1,\"function\":{\"arguments\":\"le_path\\\":\"}}]},\"finish_reason\":null}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1,\"function\":{\"arguments\":\"\\\"b\\\"}\"}}]},\"finish_reason\":null}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n",
        "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":100,\"completion_tokens\":30,\"total_tokens\":130,\"prompt_tokens_details\":{\"cached_tokens\":64}}}\n\n",
        "data: [DONE]\n\n",
    );
    let mock = Mock::start(
        vec![Reply::Sse(split(body, 37))],
        Some("Bearer sk-stream-1".into()),
    )
    .await;
    let model = OpenAiModel::new(config(&mock, &key_var("STREAM", "sk-stream-1"))).unwrap();
    let events = collect(&model, user_request("make two files")).await;
    let mut thinking_fidelity = serde_json::Map::new();
    thinking_fidelity.insert("reasoning_field".into(), json!("reasoning_content"));
    let expected = vec![
        partial_thinking(EventType::Start, ""),
        partial_thinking(EventType::Delta, "Let me "),
        partial_thinking(EventType::Delta, "think."),
        partial_thinking(EventType::Stop, ""),
        ModelEvent::Complete(ModelPayload::Thinking {
            role: Role::Assistant,
            thinking: "Let me think.".into(),
            stop_reason: StopReason::Completed,
            fidelity: Some(thinking_fidelity),
        }),
        partial_text(EventType::Start, ""),
        partial_text(EventType::Delta, "Two "),
        partial_text(EventType::Delta, "files."),
        partial_text(EventType::Stop, ""),
        ModelEvent::Complete(ModelPayload::Text {
            role: Role::Assistant,
            text: "Two files.".into(),
            sender: None,
            stop_reason: StopReason::Completed,
            fidelity: None,
        }),
        partial_call(EventType::Start, "write_file", "", "call_a"),
        partial_call(EventType::Delta, "write_file", "{\"file_", "call_a"),
        partial_call(EventType::Delta, "write_file", "path\":\"a", "call_a"),
        partial_call(EventType::Delta, "write_file", "\"}", "call_a"),
        partial_call(EventType::Stop, "write_file", "", "call_a"),
        partial_call(EventType::Start, "read_file", "", "call_b"),
        partial_call(EventType::Delta, "read_file", "{\"fi", "call_b"),
        partial_call(EventType::Delta, "read_file", "le_path\":", "call_b"),
        partial_call(EventType::Delta, "read_file", "\"b\"}", "call_b"),
        partial_call(EventType::Stop, "read_file", "", "call_b"),
        complete_call("write_file", "{\"file_path\":\"a\"}", "call_a"),
        complete_call("read_file", "{\"file_path\":\"b\"}", "call_b"),
        ModelEvent::Usage(Usage {
            cache_read: 64,
            cache_write: 0,
            output: 30,
            total: 130,
        }),
        ModelEvent::End(ModelOutcome::completed()),
    ];
    assert_eq!(events, expected);
    let requests = mock.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(
        requests[0]["messages"],
        json!([{"role": "system", "content": "be brief"}, {"role": "user", "content": "make two files"}])
    );
    assert_eq!(requests[0]["model"], "gpt-test");
    assert_eq!(requests[0]["tools"][0]["type"], "function");
    assert_eq!(requests[0]["tools"][0]["function"]["name"], "write_file");
    mock.assert_clean();
    assert_eq!(model.info().provider, "openai");
    assert_eq!(model.info().context_window, json!(128000));
    let debug = format!("{model:?}");
    assert!(!debug.contains("sk-stream-1"), "{debug}");
}

fn host_options(ws: &std::path::Path, model: Arc<dyn Model>) -> SessionOptions {
    let mut o = SessionOptions::new(ws, model);
    o.approver = Arc::new(AllowAllApprover);
    o.config.retry = fast_retry(5);
    o
}

fn request_ends(path: impl AsRef<std::path::Path>) -> Vec<(StopReason, Option<String>)> {
    trace_records(path)
        .iter()
        .filter_map(|r| match r.as_event() {
            Some(EventPayload::RequestEnd {
                status,
                error_message,
                ..
            }) => Some((*status, error_message.clone())),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_error_then_success_runs_the_tool_once() {
    let (_d, ws, home) = tempdirs();
    let mock = Mock::start(
        vec![
            Reply::Status(429, "slow down".into(), Some("0.05")),
            Reply::Status(
                500,
                r#"{"error":{"message":"upstream overloaded"}}"#.into(),
                None,
            ),
            Reply::Sse(split(WRITE_CALL, 50)),
            Reply::Sse(split(TEXT_ANSWER, 64)),
        ],
        Some("Bearer sk-retry".into()),
    )
    .await;
    let model = OpenAiModel::new(config(&mock, &key_var("RETRY", "sk-retry"))).unwrap();
    let host = Host::start(&home).await.unwrap();
    let s = host
        .create_session(host_options(&ws, Arc::new(model)))
        .await
        .unwrap();
    let summary = s.run_task("write hello to out.txt").await.unwrap();
    assert_eq!(summary.status, StopReason::Completed, "{summary:?}");
    assert_eq!(summary.final_text.as_deref(), Some("all done"));
    assert_eq!(summary.tool_calls, 1);
    assert_eq!(
        std::fs::read_to_string(ws.join("out.txt")).unwrap(),
        "hello\n"
    );
    s.close().await.unwrap();
    let requests = mock.requests();
    assert_eq!(requests.len(), 4);
    let last = &requests[3]["messages"];
    let tools: Vec<&Value> = last
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .collect();
    assert_eq!(tools.len(), 1, "{last:#}");
    assert_eq!(tools[0]["tool_call_id"], "call_w1");
    let assistant = last
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "assistant")
        .unwrap();
    assert_eq!(assistant["content"], Value::Null);
    assert_eq!(
        assistant["tool_calls"],
        json!([{"id": "call_w1", "type": "function", "function": {"name": "write_file",
            "arguments": "{\"file_path\":\"out.txt\",\"content\":\"hello\\n\"}"}}])
    );
    let ends = request_ends(s.trace_path());
    assert_eq!(
        ends[0],
        (StopReason::Failed, Some("HTTP 429: slow down".into()))
    );
    assert_eq!(
        ends[1],
        (
            StopReason::Failed,
            Some("HTTP 500: upstream overloaded".into())
        )
    );
    assert_eq!(ends.len(), 4);
    // Retry-After (0.05 s) outweighs the zero backoff; the 500 had none.
    let waits: Vec<Option<u64>> = trace_records(s.trace_path())
        .iter()
        .filter_map(|r| match r.as_event() {
            Some(EventPayload::RequestEnd { retry_in_ms, .. }) => Some(*retry_in_ms),
            _ => None,
        })
        .collect();
    assert_eq!(waits, vec![Some(50), Some(0), None, None]);
    mock.assert_clean();
}

/// Runs one task against a single reply; also returns the trace text.
async fn run_failing(reply: Reply, name: &str) -> (rookery::TaskSummary, Mock, String) {
    let (_d, ws, home) = tempdirs();
    let key = format!("sk-{name}");
    let mock = Mock::start(vec![reply], Some(format!("Bearer {key}"))).await;
    let model = OpenAiModel::new(config(&mock, &key_var(name, &key))).unwrap();
    let host = Host::start(&home).await.unwrap();
    let s = host
        .create_session(host_options(&ws, Arc::new(model)))
        .await
        .unwrap();
    let summary = s.run_task("hi").await.unwrap();
    s.close().await.unwrap();
    let trace = std::fs::read_to_string(s.trace_path()).unwrap();
    assert!(!trace.contains(&key), "{trace}");
    (summary, mock, trace)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unauthorized_fails_after_exactly_one_request() {
    let body = r#"{"error":{"message":"Incorrect API key provided: sk-AUTH","type":"invalid_request_error"}}"#;
    let (summary, mock, trace) = run_failing(Reply::Status(401, body.into(), None), "AUTH").await;
    assert_eq!(summary.status, StopReason::Failed);
    assert_eq!(mock.requests().len(), 1);
    assert_eq!(
        summary.abort_reason.as_deref(),
        Some("llm request error: HTTP 401: Incorrect API key provided: [redacted]")
    );
    assert!(
        trace.contains(r#""type":"request_end","status":"auth""#),
        "{trace}"
    );
    mock.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_request_is_permanent_with_the_server_message() {
    let body = r#"{"error":{"message":"Invalid schema for function 'write_file'","code":null}}"#;
    let (summary, mock, trace) =
        run_failing(Reply::Status(400, body.into(), Some("5")), "BADREQ").await;
    assert_eq!(summary.status, StopReason::Failed);
    assert_eq!(mock.requests().len(), 1);
    assert_eq!(
        summary.abort_reason.as_deref(),
        Some("llm request error: HTTP 400: Invalid schema for function 'write_file'")
    );
    // Permanent: no retry even though the server sent Retry-After.
    assert!(!trace.contains("retry_in_ms"), "{trace}");
    mock.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_http_endpoint_redirecting_to_https_fails_once_saying_what_to_change() {
    let to = "https://127.0.0.1:9/v1/chat/completions";
    let (summary, mock, _trace) = run_failing(Reply::Redirect(to.into()), "REDIRECT").await;
    assert_eq!(summary.status, StopReason::Failed);
    // Permanent: asking again would be redirected again.
    assert_eq!(mock.requests().len(), 1);
    let reason = summary.abort_reason.unwrap_or_default();
    assert!(
        reason.contains(&format!("the endpoint redirected to {to}"))
            && reason.contains("set base_url to the https URL"),
        "{reason}"
    );
    mock.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_stream_times_out_and_is_retried() {
    let (_d, ws, home) = tempdirs();
    let stalled = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"par\"},\"finish_reason\":null}]}\n\n";
    let mock = Mock::start(
        vec![
            Reply::Stall(vec![stalled.into()]),
            Reply::Sse(split(TEXT_ANSWER, 100)),
        ],
        Some("Bearer sk-stall".into()),
    )
    .await;
    let mut cfg = config(&mock, &key_var("STALL", "sk-stall"));
    cfg.idle_timeout_ms = Some(300);
    let host = Host::start(&home).await.unwrap();
    let model = Arc::new(OpenAiModel::new(cfg).unwrap());
    let s = host.create_session(host_options(&ws, model)).await.unwrap();
    let summary = s.run_task("hi").await.unwrap();
    assert_eq!(summary.status, StopReason::Completed, "{summary:?}");
    assert_eq!(summary.final_text.as_deref(), Some("all done"));
    s.close().await.unwrap();
    assert_eq!(mock.requests().len(), 2);
    let ends = request_ends(s.trace_path());
    assert_eq!(
        ends,
        vec![
            (
                StopReason::Timeout,
                Some("no data from the model for 300 ms".into())
            ),
            (StopReason::Completed, None)
        ]
    );
    mock.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_chunk_is_malformed_and_retried() {
    let (_d, ws, home) = tempdirs();
    let garbage =
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\ndata: {not json\n\n";
    let truncated = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"b\"},\"finish_reason\":null}]}\n\n";
    let mock = Mock::start(
        vec![
            Reply::Sse(vec![garbage.into()]),
            Reply::Sse(vec![truncated.into()]),
            Reply::Sse(split(TEXT_ANSWER, 100)),
        ],
        None,
    )
    .await;
    // No such variable: no Authorization header may be sent.
    let cfg = config(&mock, "ROOKERY_TEST_KEY_NEVER_SET_4711");
    let host = Host::start(&home).await.unwrap();
    let model = Arc::new(OpenAiModel::new(cfg).unwrap());
    let s = host.create_session(host_options(&ws, model)).await.unwrap();
    let summary = s.run_task("hi").await.unwrap();
    assert_eq!(summary.status, StopReason::Completed, "{summary:?}");
    s.close().await.unwrap();
    assert_eq!(mock.requests().len(), 3);
    let ends = request_ends(s.trace_path());
    assert_eq!(ends.len(), 3);
    assert_eq!(ends[0].0, StopReason::Malformed);
    assert!(
        ends[0]
            .1
            .as_deref()
            .unwrap()
            .starts_with("unparseable chunk (key must be a string"),
        "{ends:?}"
    );
    assert_eq!(
        ends[1],
        (
            StopReason::Malformed,
            Some("stream ended without a finish_reason".into())
        )
    );
    assert_eq!(ends[2], (StopReason::Completed, None));
    mock.assert_clean();
}

fn tool_ctx(
    ws: &std::path::Path,
    name: &str,
) -> (ToolContext, tokio::sync::mpsc::UnboundedReceiver<String>) {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let def = Arc::new(default_definition(name).unwrap());
    let ctx = ToolContext::new(
        ws.to_path_buf(),
        "call_t".into(),
        def,
        CancellationToken::new(),
        tx,
    );
    (ctx, rx)
}

async fn run_tool(
    tool: &dyn Tool,
    ws: &std::path::Path,
    name: &str,
    args: Value,
) -> (String, ToolResult) {
    let (ctx, mut rx) = tool_ctx(ws, name);
    let result = tool.call(ctx, args.as_object().unwrap().clone()).await;
    let mut text = String::new();
    while let Ok(piece) = rx.try_recv() {
        text.push_str(&piece);
    }
    (text, result)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_image_asks_the_vision_model_once() {
    let answer = concat!(
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"A red \"},\"finish_reason\":null}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"rectangle.\"},\"finish_reason\":\"stop\"}]}\n\n",
        "data: [DONE]\n\n",
    );
    let empty = "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";
    let mock = Mock::start(
        vec![
            Reply::Sse(split(answer, 40)),
            Reply::Sse(vec![empty.into()]),
            Reply::Status(
                404,
                r#"{"error":{"message":"model vis-1 not found"}}"#.into(),
                None,
            ),
        ],
        Some("Bearer sk-vision".into()),
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    let bytes = png(4, 3);
    std::fs::write(ws.join("red.png"), &bytes).unwrap();
    let mut cfg = config(&mock, &key_var("VISION", "sk-vision"));
    cfg.vision_model = Some("vis-1".into());
    let tools = image_tools(&cfg);
    assert_eq!(tools.len(), 1);
    assert_eq!(tools[0].0.name, "describe_image");
    let tool = tools[0].1.clone();

    let header = format!("image/png, {} B — described by vis-1:\n", bytes.len());
    let (text, result) = run_tool(
        tool.as_ref(),
        ws,
        "describe_image",
        json!({"source": "red.png"}),
    )
    .await;
    assert_eq!(text, format!("{header}A red rectangle."));
    assert_eq!(result, ToolResult::completed());
    let req = &mock.requests()[0];
    assert_eq!(req["model"], "vis-1");
    let expected_url = format!(
        "data:image/png;base64,{}",
        base64::Engine::encode(&base64::engine::general_purpose::STANDARD, &bytes)
    );
    assert_eq!(
        req["messages"],
        json!([{"role": "user", "content": [
            {"type": "text", "text": "Describe this image in detail, including any visible text, numbers, UI elements and layout."},
            {"type": "image_url", "image_url": {"url": expected_url}}]}])
    );

    let (text, result) = run_tool(
        tool.as_ref(),
        ws,
        "describe_image",
        json!({"source": "red.png", "prompt": "What color?"}),
    )
    .await;
    assert_eq!(text, format!("{header}[vision model returned no text]"));
    assert_eq!(result, ToolResult::completed());
    assert_eq!(
        mock.requests()[1]["messages"][0]["content"][0]["text"],
        "What color?"
    );

    let (text, result) = run_tool(
        tool.as_ref(),
        ws,
        "describe_image",
        json!({"source": "red.png"}),
    )
    .await;
    assert_eq!(
        text,
        format!("{header}Vision model (vis-1) request failed: HTTP 404: model vis-1 not found")
    );
    assert_eq!(result, ToolResult::failed());
    assert_eq!(mock.requests().len(), 3);

    let (text, result) = run_tool(
        tool.as_ref(),
        ws,
        "describe_image",
        json!({"source": "nope.png"}),
    )
    .await;
    assert_eq!(
        text,
        "Failed to read image \"nope.png\": No such file or directory (os error 2)"
    );
    assert_eq!(result, ToolResult::failed());
    assert_eq!(mock.requests().len(), 3);

    let none = DescribeImageTool::new(None);
    let (text, result) = run_tool(&none, ws, "describe_image", json!({"source": "red.png"})).await;
    assert_eq!(
        text,
        rookery::tools::profile::penguin::describe_image::NO_VISION_MODEL
    );
    assert_eq!(result, ToolResult::failed());
    mock.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_image_downloads_urls_and_vision_models_get_it() {
    let mock = Mock::start(vec![], None).await;
    let dir = tempfile::tempdir().unwrap();
    let root = mock.base_url.trim_end_matches("/v1").to_string();
    let url = format!("{root}/img/red.png");
    let (text, result) = run_tool(
        &ReadImageTool,
        dir.path(),
        "read_image",
        json!({"source": url}),
    )
    .await;
    let bytes = png(4, 3);
    assert_eq!(text, format!("image/png, {} B", bytes.len()));
    assert_eq!(
        result.images,
        vec![format!(
            "data:image/png;base64,{}",
            base64::Engine::encode(&base64::engine::general_purpose::STANDARD, &bytes)
        )]
    );
    let missing = format!("{root}/img/gone.png");
    let (text, result) = run_tool(
        &ReadImageTool,
        dir.path(),
        "read_image",
        json!({"source": missing}),
    )
    .await;
    assert_eq!(
        text,
        format!("Failed to download image \"{missing}\": HTTP 404")
    );
    assert_eq!(result, ToolResult::failed());

    let mut cfg = ModelConfig::openai(&mock.base_url, "gpt-4o");
    cfg.vision = true;
    let tools = image_tools(&cfg);
    assert_eq!(
        tools.iter().map(|t| t.0.name.as_str()).collect::<Vec<_>>(),
        vec!["read_image"]
    );
}
