//! The Anthropic provider in real sessions against a loopback Messages API server: the headers
//! and body Rookery sends (the API's 400 rules), thinking and tool results sent back on the next
//! request, HTTP and in-stream errors through the session's retry loop, and `rookery run
//! --provider anthropic` / a config `model:` section driving a tool call round trip.

mod anthropic_mock;
mod common;

use std::process::Stdio;
use std::sync::Arc;

use anthropic_mock::{Reply, Seen, Server, Writes, fixture};
use common::*;
use rookery::Host;
use rookery::message::{EventPayload, StopReason};
use rookery::model::anthropic::AnthropicModel;
use rookery::model::model_config::ModelConfig;
use rookery::model::{Model, ModelRequest};
use serde_json::{Value, json};

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

fn count_breakpoints(v: &Value) -> usize {
    match v {
        Value::Object(m) => {
            usize::from(m.contains_key("cache_control"))
                + m.values().map(count_breakpoints).sum::<usize>()
        }
        Value::Array(a) => a.iter().map(count_breakpoints).sum(),
        _ => 0,
    }
}

/// The request rules the Messages API answers with a 400 when broken.
fn check_request(seen: &Seen, key: &str) -> Result<(), String> {
    let h = |name: &str| seen.headers.get(name).map(String::as_str);
    if seen.path != "/v1/messages" {
        return Err(format!("path {}", seen.path));
    }
    if h("x-api-key") != Some(key) {
        return Err(format!("x-api-key {:?}", h("x-api-key")));
    }
    if h("anthropic-version") != Some("2023-06-01") {
        return Err(format!("anthropic-version {:?}", h("anthropic-version")));
    }
    if h("authorization").is_some() {
        return Err("an Authorization header was sent".into());
    }
    if !h("content-type").is_some_and(|c| c.starts_with("application/json")) {
        return Err(format!("content-type {:?}", h("content-type")));
    }
    let body = &seen.body;
    if body["stream"] != true || !body["max_tokens"].is_u64() || !body["model"].is_string() {
        return Err(format!("stream/max_tokens/model: {body}"));
    }
    if !body["system"].is_array() && !body["system"].is_null() {
        return Err("system is not top-level content".into());
    }
    let breakpoints = count_breakpoints(body);
    if breakpoints > 4 {
        return Err(format!("{breakpoints} cache breakpoints"));
    }
    let messages = body["messages"].as_array().ok_or("no messages")?;
    for (i, m) in messages.iter().enumerate() {
        let want = if i % 2 == 0 { "user" } else { "assistant" };
        if m["role"] != want {
            return Err(format!(
                "message {i} has role {}, expected {want}",
                m["role"]
            ));
        }
        let blocks = m["content"].as_array().ok_or("content is not blocks")?;
        if blocks.is_empty() {
            return Err(format!("message {i} is empty"));
        }
        let uses: Vec<&Value> = blocks.iter().filter(|b| b["type"] == "tool_use").collect();
        if let Some(first_use) = blocks.iter().position(|b| b["type"] == "tool_use")
            && blocks[first_use..]
                .iter()
                .any(|b| b["type"] == "thinking" || b["type"] == "redacted_thinking")
        {
            return Err(format!("message {i}: thinking after a tool_use"));
        }
        for u in &uses {
            if !u["input"].is_object() {
                return Err(format!("tool_use input is not an object: {u}"));
            }
        }
        if uses.is_empty() {
            continue;
        }
        let next = messages
            .get(i + 1)
            .and_then(|n| n["content"].as_array())
            .ok_or("tool_use without a next message")?;
        for (k, u) in uses.iter().enumerate() {
            let r = next.get(k).ok_or("missing tool_result")?;
            if r["type"] != "tool_result" || r["tool_use_id"] != u["id"] {
                return Err(format!(
                    "block {k} of message {} is not the result of {}",
                    i + 1,
                    u["id"]
                ));
            }
        }
    }
    Ok(())
}

/// The data payloads of a fixture, parsed.
fn fixture_events(name: &str) -> Vec<Value> {
    String::from_utf8(fixture(name))
        .unwrap()
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(|d| serde_json::from_str(d.trim()).unwrap())
        .collect()
}

fn joined(events: &[Value], delta_type: &str, field: &str) -> String {
    events
        .iter()
        .filter(|e| e["type"] == "content_block_delta" && e["delta"]["type"] == delta_type)
        .map(|e| e["delta"][field].as_str().unwrap_or("").to_string())
        .collect()
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

fn request_ends(path: &std::path::Path) -> Vec<(StopReason, Option<String>, Option<u64>)> {
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
    let model = AnthropicModel::new(cfg.clone()).unwrap();
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
            .map(|e| e.to_string())
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

const WRITE_CALL: &str = concat!(
    "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-test\",\"content\":[],\"stop_reason\":null,\"usage\":{\"input_tokens\":40,\"output_tokens\":1}}     }\n\n",
    "event: ping\ndata: {\"type\": \"ping\"}\n\n",
    "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_w1\",\"name\":\"write_file\",\"input\":{}}   }\n\n",
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"\"}}\n\n",
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"file_path\\\": \\\"out.txt\\\", \\\"con\"}}\n\n",
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"tent\\\": \\\"hello\\\\n\\\"}\"}}\n\n",
    "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0 }\n\n",
    "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":20}}\n\n",
    "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
);

const TEXT_ANSWER: &str = concat!(
    "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":70,\"output_tokens\":1}}}\n\n",
    "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"all done\"}}\n\n",
    "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
    "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":3}}\n\n",
    "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
);

async fn rookery(args: &[&str], envs: &[(&str, &str)]) -> (i32, String, String, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_rookery"));
    cmd.arg("run")
        .arg("--workspace")
        .arg(&ws)
        .arg("--home")
        .arg(dir.path().join("home"))
        .args(args)
        .env("HOME", dir.path())
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("OPENAI_API_KEY")
        .stdin(Stdio::null());
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let out = cmd.output().await.unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        dir,
    )
}

fn traces_text(dir: &std::path::Path) -> String {
    let mut text = String::new();
    for day in std::fs::read_dir(dir.join("home/traces")).unwrap() {
        for f in std::fs::read_dir(day.unwrap().path()).unwrap() {
            text.push_str(&std::fs::read_to_string(f.unwrap().path()).unwrap());
        }
    }
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rookery_run_with_provider_anthropic_round_trips_a_tool_call() {
    let server = Server::start(vec![
        Reply::Sse(WRITE_CALL.as_bytes().to_vec(), Writes::Bytes),
        Reply::Sse(TEXT_ANSWER.as_bytes().to_vec(), Writes::One),
    ])
    .await;
    let key = "sk-ant-cli-5678";
    let (code, stdout, stderr, dir) = rookery(
        &[
            "--provider",
            "anthropic",
            "--base-url",
            &server.base_url,
            "--model",
            "claude-cli",
            "write hello to out.txt",
        ],
        &[("ANTHROPIC_API_KEY", key)],
    )
    .await;
    assert_eq!(code, 0, "stdout: {stdout}\nstderr: {stderr}");
    assert!(stdout.contains("all done"), "{stdout}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("ws/out.txt")).unwrap(),
        "hello\n"
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    for r in &requests {
        check_request(r, key).unwrap_or_else(|e| panic!("{e}\n{:#}", r.body));
        assert_eq!(r.body["model"], "claude-cli");
    }
    let m = &requests[1].body["messages"];
    assert_eq!(
        m[1]["content"],
        json!([{"type": "tool_use", "id": "toolu_w1", "name": "write_file",
                "input": {"file_path": "out.txt", "content": "hello\n"}}])
    );
    assert_eq!(m[2]["content"][0]["tool_use_id"], "toolu_w1");
    assert!(m[2]["content"][0].get("is_error").is_none(), "{m:#}");
    let trace = traces_text(dir.path());
    assert!(!trace.contains(key));
    assert!(trace.contains("\"provider\":\"anthropic\",\"model_id\":\"claude-cli\""));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_model_section_sets_max_tokens_thinking_and_key_variable() {
    let server = Server::start(vec![Reply::Sse(
        fixture("vercel-thinking-multibyte.sse"),
        Writes::One,
    )])
    .await;
    let cfg_dir = tempfile::tempdir().unwrap();
    let cfg = cfg_dir.path().join("agent.yaml");
    std::fs::write(
        &cfg,
        format!(
            "model:\n  provider: anthropic\n  base_url: {}\n  model: claude-cfg\n  api_key_env: MY_CLAUDE_KEY\n  \
             max_tokens: 16000\n  thinking: {{type: enabled, budget_tokens: 4096}}\n",
            server.base_url
        ),
    )
    .unwrap();
    let (code, stdout, stderr, _dir) = rookery(
        &["--config", cfg.to_str().unwrap(), "divide 925 by 5"],
        &[("MY_CLAUDE_KEY", "sk-ant-cfg-1")],
    )
    .await;
    assert_eq!(code, 0, "stdout: {stdout}\nstderr: {stderr}");
    assert!(stdout.contains("925 ÷ 5 = 185"), "{stdout}");
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    check_request(&requests[0], "sk-ant-cfg-1").unwrap();
    let body = &requests[0].body;
    assert_eq!(body["model"], "claude-cfg");
    assert_eq!(body["max_tokens"], 16000);
    assert_eq!(
        body["thinking"],
        json!({"type": "enabled", "budget_tokens": 4096})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provider_anthropic_without_a_model_exits_2() {
    let (code, _, stderr, _d) = rookery(&["--provider", "anthropic", "hi"], &[]).await;
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("--provider anthropic needs --model"),
        "{stderr}"
    );
    let (code, _, stderr, _d) = rookery(
        &[
            "--provider",
            "anthropic",
            "--model",
            "m",
            "--base-url",
            "api.anthropic.com",
            "hi",
        ],
        &[],
    )
    .await;
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("--base-url must start with http://"),
        "{stderr}"
    );
}
