//! The Anthropic provider in real sessions against a loopback Messages API server: the headers
//! and body Rookery sends (the API's 400 rules), thinking and tool results sent back on the next
//! request (redacted thinking included), HTTP and in-stream errors through the session's retry
//! loop, and the provider's defaults and config errors.

use crate::common;
use crate::common::anthropic_mock;

use std::sync::Arc;

use anthropic_mock::rules::{check_request, fixture_events, joined};
use anthropic_mock::{Reply, Server, Writes, fixture};
use common::*;
use rookery::Host;
use rookery::message::{EventPayload, StopReason};
use rookery::model::anthropic::AnthropicModel;
use rookery::model::model_config::ModelConfig;
use rookery::model::{Model, ModelRequest};
use serde_json::json;

fn config(base_url: &str, var: &str) -> ModelConfig {
    ModelConfig {
        provider: "anthropic".into(),
        base_url: Some(base_url.into()),
        model: Some("claude-test".into()),
        api_key_env: Some(var.into()),
        ..ModelConfig::default()
    }
}

/// A unique variable holding `key`.
fn key_var(name: &str, key: &str) -> String {
    let var = format!("ROOKERY_TEST_ANTHROPIC_KEY_{name}");
    // SAFETY: each test uses its own variable name; nothing else reads it concurrently.
    unsafe { std::env::set_var(&var, key) };
    var
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thinking_and_tool_results_go_back_on_the_next_request() {
    let (_d, ws, home) = tempdirs();
    let server = Server::start(vec![
        Reply::Sse(fixture("pydantic-thinking-then-tool-use.sse"), Writes::One),
        Reply::Sse(
            fixture("pydantic-text-after-tool-result.sse"),
            Writes::Bytes,
        ),
    ])
    .await;
    let key = "sk-ant-shape-1234";
    let model = AnthropicModel::new(config(&server.base_url, &key_var("SHAPE", key))).unwrap();
    assert!(!format!("{model:?}").contains(key));
    let host = Host::start(&home).await.unwrap();
    let s = host
        .create_session(options(&ws, Arc::new(model)))
        .await
        .unwrap();
    let summary = s.run_task("How hot is it in Utrecht?").await.unwrap();
    assert_eq!(summary.status, StopReason::Completed, "{summary:?}");
    assert!(
        summary
            .final_text
            .as_deref()
            .is_some_and(|t| t.starts_with("It is currently 18°C (64°F) in Utrecht.")),
        "{summary:?}"
    );
    s.close().await.unwrap();
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    for r in &requests {
        check_request(r, key).unwrap_or_else(|e| panic!("{e}\n{:#}", r.body));
    }
    let first = &requests[0].body;
    assert_eq!(first["model"], "claude-test");
    assert_eq!(first["max_tokens"], 8192);
    assert_eq!(
        first["system"][0]["cache_control"],
        json!({"type": "ephemeral"})
    );
    assert!(first["tools"].as_array().is_some_and(|t| {
        t.iter()
            .all(|t| t["name"].is_string() && t["input_schema"]["type"] == "object")
    }));
    assert_eq!(
        first["messages"],
        json!([{"role": "user", "content": [{"type": "text", "text": "How hot is it in Utrecht?", "cache_control": {"type": "ephemeral"}}]}])
    );
    let events = fixture_events("pydantic-thinking-then-tool-use.sse");
    let messages = requests[1].body["messages"].as_array().unwrap().clone();
    assert_eq!(messages.len(), 3, "{messages:#?}");
    assert_eq!(
        messages[1]["content"],
        json!([
            {"type": "thinking", "thinking": joined(&events, "thinking_delta", "thinking"),
             "signature": joined(&events, "signature_delta", "signature")},
            {"type": "tool_use", "id": "toolu_01TUGHRCfso8VSw9ekt21nAR", "name": "get_temperature",
             "input": {"city": "Utrecht"}},
        ])
    );
    // The tool does not exist here: its error output is sent as an error result.
    let result = &messages[2]["content"][0];
    assert_eq!(result["tool_use_id"], "toolu_01TUGHRCfso8VSw9ekt21nAR");
    assert_eq!(result["is_error"], true, "{result}");
    assert_eq!(result["cache_control"], json!({"type": "ephemeral"}));
    let trace = std::fs::read_to_string(s.trace_path()).unwrap();
    assert!(!trace.contains(key));
    assert!(trace.contains("\"provider\":\"anthropic\",\"model_id\":\"claude-test\""));
}

fn request_ends(
    path: impl AsRef<std::path::Path>,
) -> Vec<(StopReason, Option<String>, Option<u64>)> {
    trace_records(path)
        .iter()
        .filter_map(|r| match r.as_event() {
            Some(EventPayload::RequestEnd {
                status,
                error_message,
                retry_in_ms,
                ..
            }) => Some((*status, error_message.clone(), *retry_in_ms)),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overloaded_errors_are_retried_with_the_same_messages() {
    let (_d, ws, home) = tempdirs();
    let overloaded =
        r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
    let server = Server::start(vec![
        Reply::Status(529, overloaded.into(), Some("0.05")),
        Reply::Sse(fixture("api-error-first-event.COMPOSITE.sse"), Writes::One),
        Reply::Status(
            429,
            r#"{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}"#.into(),
            None,
        ),
        Reply::Sse(fixture("mirascope-plain-text.sse"), Writes::Bytes),
    ])
    .await;
    let key = "sk-ant-retry-1234";
    let model = AnthropicModel::new(config(&server.base_url, &key_var("RETRY", key))).unwrap();
    let host = Host::start(&home).await.unwrap();
    let s = host
        .create_session(options(&ws, Arc::new(model)))
        .await
        .unwrap();
    let summary = s.run_task("What is 4200 + 42?").await.unwrap();
    assert_eq!(summary.status, StopReason::Completed, "{summary:?}");
    assert_eq!(summary.final_text.as_deref(), Some("4200 + 42 = 4242"));
    s.close().await.unwrap();
    let requests = server.requests();
    assert_eq!(requests.len(), 4);
    for r in &requests {
        check_request(r, key).unwrap();
        assert_eq!(
            r.raw_body, requests[0].raw_body,
            "a retry sends the same body"
        );
    }
    let ends = request_ends(s.trace_path());
    assert_eq!(
        ends,
        vec![
            (
                StopReason::Failed,
                Some("HTTP 529: Overloaded".into()),
                Some(50)
            ),
            (
                StopReason::Failed,
                Some("error in stream: api_error: Internal server error".into()),
                Some(0)
            ),
            (
                StopReason::Failed,
                Some("HTTP 429: slow down".into()),
                Some(0)
            ),
            (StopReason::Completed, None, None),
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_inside_an_open_block_is_retried() {
    let (_d, ws, home) = tempdirs();
    let server = Server::start(vec![
        Reply::Sse(fixture("overloaded-midstream.COMPOSITE.sse"), Writes::Bytes),
        Reply::Sse(fixture("pydantic-thinking-signature-text.sse"), Writes::One),
    ])
    .await;
    let model = AnthropicModel::new(config(&server.base_url, &key_var("MID", "sk-mid-1"))).unwrap();
    let host = Host::start(&home).await.unwrap();
    let s = host
        .create_session(options(&ws, Arc::new(model)))
        .await
        .unwrap();
    let summary = s.run_task("How do I cross the street?").await.unwrap();
    assert_eq!(summary.status, StopReason::Completed, "{summary:?}");
    assert!(
        summary
            .final_text
            .as_deref()
            .is_some_and(|t| t.ends_with("speed when crossing streets."))
    );
    s.close().await.unwrap();
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let (a, b) = (&requests[0].body["messages"], &requests[1].body["messages"]);
    // Same conversation; the session adds its note of the failed attempt after the prompt.
    assert_eq!(a[0]["content"][0]["text"], "How do I cross the street?");
    assert_eq!(b[0]["content"][0]["text"], "How do I cross the street?");
    assert_eq!(b.as_array().map(Vec::len), Some(1));
    // The retry is the request that failed, and differs from it only by PenguinHarness's
    // `[turn_retried]` block after the prompt: every other field and content block is the same.
    let (mut first, mut retry) = (requests[0].body.clone(), requests[1].body.clone());
    let retried_content = retry["messages"][0]["content"]
        .as_array_mut()
        .expect("content blocks");
    let note = retried_content.pop().expect("the retry note");
    assert!(
        note["text"]
            .as_str()
            .is_some_and(|t| t.starts_with("[turn_retried]\n") && t.ends_with("[/turn_retried]")),
        "{note}"
    );
    // The prompt-cache marker sits on the last block of the request, whichever it is.
    for body in [&mut first, &mut retry] {
        for block in body["messages"][0]["content"]
            .as_array_mut()
            .expect("content blocks")
        {
            block
                .as_object_mut()
                .expect("block")
                .remove("cache_control");
        }
    }
    assert_eq!(first, retry, "the retry must re-send the failed request");
    let ends = request_ends(s.trace_path());
    assert_eq!(ends[0].0, StopReason::Failed);
    assert_eq!(
        ends[0].1.as_deref(),
        Some("error in stream: overloaded_error: Overloaded")
    );
    assert_eq!(ends[1].0, StopReason::Completed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_and_bad_requests_are_not_retried() {
    for (code, body, status, message) in [
        (
            401,
            r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key sk-a-1"}}"#,
            StopReason::Auth,
            "HTTP 401: invalid x-api-key [redacted]",
        ),
        (
            400,
            r#"{"type":"error","error":{"type":"invalid_request_error","message":"messages: at least one message is required"}}"#,
            StopReason::Failed,
            "HTTP 400: messages: at least one message is required",
        ),
    ] {
        let (_d, ws, home) = tempdirs();
        let server = Server::start(vec![Reply::Status(code, body.into(), Some("1"))]).await;
        let model =
            AnthropicModel::new(config(&server.base_url, &key_var("AUTH", "sk-a-1"))).unwrap();
        let host = Host::start(&home).await.unwrap();
        let s = host
            .create_session(options(&ws, Arc::new(model)))
            .await
            .unwrap();
        let summary = s.run_task("hi").await.unwrap();
        s.close().await.unwrap();
        assert_eq!(summary.status, StopReason::Failed, "{summary:?}");
        assert_eq!(server.requests().len(), 1, "{code} is final");
        let ends = request_ends(s.trace_path());
        assert_eq!(ends, vec![(status, Some(message.to_string()), None)]);
    }
}

#[test]
fn defaults_and_config_errors() {
    // SAFETY: only this test reads this variable.
    unsafe { std::env::remove_var("ROOKERY_TEST_ANTHROPIC_NONE") };
    let cfg: ModelConfig = serde_yaml::from_str("provider: anthropic\nmodel: claude-x\n").unwrap();
    assert_eq!(cfg.api_key_env(), "ANTHROPIC_API_KEY");
    let model = AnthropicModel::new(cfg).unwrap();
    assert_eq!(model.url(), "https://api.anthropic.com/v1/messages");
    let info = model.info();
    assert_eq!(
        (info.provider.as_str(), info.model_id.as_str()),
        ("anthropic", "claude-x")
    );
    let request = ModelRequest {
        system_prompt: Arc::from(""),
        history: Arc::new(Vec::new()),
        tools: Arc::new(Vec::new()),
    };
    assert_eq!(model.body(&request)["max_tokens"], 8192);
    let err = |yaml: &str| {
        let cfg: ModelConfig = serde_yaml::from_str(yaml).unwrap();
        AnthropicModel::new(cfg)
            .err()
            .map(|e| rookery::cli::error::config_text(&e.into()))
            .unwrap_or_default()
    };
    assert_eq!(
        err(
            "provider: anthropic\nmodel: m\nmax_tokens: 2000\nthinking: {type: enabled, budget_tokens: 4000}\n"
        ),
        "model.thinking.budget_tokens (4000) must be less than max_tokens (2000)"
    );
    assert!(err("provider: anthropic\nmodel: m\nvision_model: x\n").contains("vision: true"));
    assert_eq!(
        err("provider: anthropic\n"),
        "--provider anthropic needs --model"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redacted_thinking_goes_back_unchanged_on_the_next_turn() {
    let (_d, ws, home) = tempdirs();
    let server = Server::start(vec![
        Reply::Sse(
            fixture("pydantic-redacted-thinking-text.sse"),
            Writes::Bytes,
        ),
        Reply::Sse(fixture("mirascope-plain-text.sse"), Writes::One),
    ])
    .await;
    let model =
        AnthropicModel::new(config(&server.base_url, &key_var("REDACTED", "sk-red-1"))).unwrap();
    let host = Host::start(&home).await.unwrap();
    let s = host
        .create_session(options(&ws, Arc::new(model)))
        .await
        .unwrap();
    let first = s.run_task("ANTHROPIC_MAGIC_STRING").await.unwrap();
    assert_eq!(first.status, StopReason::Completed, "{first:?}");
    let second = s.run_task("What is 4200 + 42?").await.unwrap();
    assert_eq!(second.status, StopReason::Completed, "{second:?}");
    s.close().await.unwrap();
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    check_request(&requests[1], "sk-red-1").unwrap();
    let recorded: Vec<String> = fixture_events("pydantic-redacted-thinking-text.sse")
        .iter()
        .filter(|e| e["content_block"]["type"] == "redacted_thinking")
        .map(|e| e["content_block"]["data"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(recorded.len(), 2);
    let assistant = &requests[1].body["messages"][1];
    assert_eq!(assistant["role"], "assistant");
    let blocks = assistant["content"].as_array().unwrap();
    assert_eq!(blocks.len(), 3, "{blocks:#?}");
    for (block, data) in blocks.iter().zip(&recorded) {
        assert_eq!(block, &json!({"type": "redacted_thinking", "data": data}));
    }
    assert_eq!(blocks[2]["type"], "text");
    assert_eq!(
        requests[1].body["messages"][2]["content"][0]["text"],
        "What is 4200 + 42?"
    );
}
