//! The OpenAI-compatible client against servers that behave as documented but unkindly: a
//! finished answer on a connection that stays open (with and without a usage chunk), keep-alive
//! comments longer than the idle timeout, one huge event, output beyond the size cap, an HTML
//! page answered with 200, cache-write usage, and request fields passed through from the config.
//! Bodies are recorded streams of `tests/fixtures/providers/`, edited as each test says.

use crate::common::replay::harness;
use crate::common::replay::server;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use harness::replay;
use rookery::message::StopReason;
use rookery::model::model_config::ModelConfig;
use server::{Piece, Script, Writes};

fn fixture(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/providers")
        .join(name);
    std::fs::read_to_string(path).unwrap()
}

/// A recording without its `data: [DONE]` event, served on a connection that stays open.
fn held_open_without_done(name: &str) -> Script {
    let body = fixture(name);
    assert!(body.contains("data: [DONE]\n\n"), "{name}");
    let mut script = Script::sse(
        body.replace("data: [DONE]\n\n", "").into_bytes(),
        Writes::One,
    );
    script.hold_open = true;
    script
}

fn sse_event(chunk: &serde_json::Value) -> String {
    format!("data: {chunk}\n\n")
}

/// One text answer whose content is `pieces`, then a finish chunk and a usage chunk.
fn text_stream(pieces: impl IntoIterator<Item = String>) -> String {
    let mut body = String::new();
    for piece in pieces {
        body.push_str(&sse_event(&serde_json::json!(
            {"choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": null}]}
        )));
    }
    body.push_str(
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
    );
    body.push_str("data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":4,\"total_tokens\":7}}\n\n");
    body.push_str("data: [DONE]\n\n");
    body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_answer_is_kept_when_the_connection_stays_open() {
    // finish_reason, then the usage chunk (OpenAI), or usage in a later chunk (OpenRouter); no
    // [DONE], no close. The idle timeout (30 s) must not be what ends the request.
    for (name, text, usage) in [
        (
            "openai-gpt4o-text.sse",
            "I'm unable to provide real-time weather updates.",
            [0, 0, 30, 44],
        ),
        (
            "openrouter-gptoss-usage-after-finish.sse",
            "There are **47** files.",
            [0, 0, 49, 7056],
        ),
    ] {
        let (seen, server) = replay(held_open_without_done(name), |_| {}).await;
        assert_eq!(seen.statuses, vec!["completed"], "{name}: {seen:?}");
        assert!(seen.texts[0].starts_with(text), "{name}: {:?}", seen.texts);
        assert_eq!(seen.usage, Some(usage), "{name}");
        assert_eq!(server.requests().len(), 1);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finish_without_usage_completes_after_a_short_grace() {
    // Ollama sends no usage chunk although the request asks for one.
    let (seen, _server) = replay(
        held_open_without_done("ollama-qwen25coder-text.sse"),
        |_| {},
    )
    .await;
    assert_eq!(seen.statuses, vec!["completed"], "{seen:?}");
    assert_eq!(seen.texts, vec!["My name is Neo Vim."]);
    assert_eq!(seen.usage, Some([0, 0, 0, 0]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keep_alive_comments_reset_the_idle_timer() {
    // OpenRouter's documented keep-alive, every 100 ms for 3 s, with a 1.5 s idle timeout.
    let mut pieces = Vec::new();
    for _ in 0..30 {
        pieces.push(Piece::Bytes(b": OPENROUTER PROCESSING\n\n".to_vec()));
        pieces.push(Piece::Pause(Duration::from_millis(100)));
    }
    pieces.push(Piece::Bytes(
        fixture("openrouter-gptoss-usage-after-finish.sse").into_bytes(),
    ));
    let script = Script {
        content_type: "text/event-stream",
        pieces,
        writes: Writes::One,
        hold_open: false,
    };
    let (seen, _server) = replay(script, |cfg| cfg.idle_timeout_ms = Some(1500)).await;
    assert_eq!(seen.statuses, vec!["completed"], "{seen:?}");
    assert_eq!(seen.texts, vec!["There are **47** files."]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_big_event_is_parsed_whole() {
    let n = 16 * 1024 * 1024;
    let body = text_stream([
        "a".repeat(n / 2),
        "é".repeat(n / 4), // 2 bytes each: n/2 bytes
    ]);
    let big = body.lines().next().unwrap().len();
    assert!(big > n / 2);
    let started = Instant::now();
    let (seen, _server) = replay(Script::sse(body.into_bytes(), Writes::One), |cfg| {
        cfg.max_response_bytes = Some(32 * 1024 * 1024)
    })
    .await;
    println!("16 MiB of text in two events: {:?}", started.elapsed());
    assert_eq!(seen.statuses, vec!["completed"], "{:?}", seen.error);
    assert_eq!(seen.texts.len(), 1);
    assert_eq!(seen.texts[0].len(), n);
    assert_eq!(seen.texts[0].chars().count(), n / 2 + n / 4);
    assert_eq!(seen.usage, Some([0, 0, 4, 7]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_beyond_the_cap_fails_malformed() {
    // 60 KB deltas, 2.4 MB in all, against a 1 MiB cap from the config.
    let body = text_stream((0..40).map(|_| "z".repeat(60_000)));
    let (seen, server) = replay(Script::sse(body.into_bytes(), Writes::One), |cfg| {
        cfg.max_response_bytes = Some(1024 * 1024)
    })
    .await;
    assert_eq!(seen.status, Some(StopReason::Malformed), "{seen:?}");
    assert_eq!(
        seen.error.as_deref(),
        Some(
            "the response is larger than max_response_bytes (1048576 bytes of text, thinking and tool arguments)"
        )
    );
    assert!(seen.texts.is_empty());
    assert_eq!(seen.statuses, vec!["malformed", "completed"], "retried");
    assert_eq!(server.requests().len(), 2);
    // The default cap is 8 MiB; one event far beyond it is refused before it is whole.
    let body = text_stream(["q".repeat(48 * 1024 * 1024)]);
    let (seen, _server) = replay(Script::sse(body.into_bytes(), Writes::One), |_| {}).await;
    assert_eq!(seen.status, Some(StopReason::Malformed), "{:?}", seen.error);
    assert_eq!(
        seen.error.as_deref(),
        Some(
            "one event of the stream is larger than 34603008 bytes (max_response_bytes is 8388608)"
        )
    );
    // Just over the default cap, in one event the framer accepts.
    let body = text_stream(["r".repeat(8 * 1024 * 1024 + 1)]);
    let (seen, _server) = replay(Script::sse(body.into_bytes(), Writes::One), |_| {}).await;
    assert_eq!(seen.status, Some(StopReason::Malformed), "{:?}", seen.error);
    assert!(
        seen.error
            .as_deref()
            .is_some_and(|e| e.contains("larger than max_response_bytes (8388608 bytes")),
        "{:?}",
        seen.error
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_html_page_with_200_names_its_content_type() {
    let page = "<!DOCTYPE html>\n<html><head><title>Welcome to nginx!</title></head>\n<body><h1>Welcome to nginx!</h1></body></html>\n";
    let script = Script {
        content_type: "text/html; charset=utf-8",
        pieces: vec![Piece::Bytes(page.as_bytes().to_vec())],
        writes: Writes::One,
        hold_open: false,
    };
    let (seen, _server) = replay(script, |_| {}).await;
    assert_eq!(seen.status, Some(StopReason::Malformed));
    let error = seen.error.unwrap_or_default();
    assert!(
        error.starts_with(
            "the server answered HTTP 200 with Content-Type \"text/html; charset=utf-8\", not an event stream: <!DOCTYPE html>"
        ),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_creation_usage_is_cache_write() {
    // OpenRouter's documented usage (`prompt_tokens_details.cache_write_tokens`) and LiteLLM's
    // Anthropic-style `cache_creation_input_tokens`, on a recorded OpenAI stream.
    let recorded = fixture("openai-gpt4o-text.sse");
    let usage_line = recorded
        .lines()
        .find(|l| l.contains("\"usage\":{"))
        .unwrap()
        .to_string();
    for (usage, want) in [
        (
            r#"{"prompt_tokens":1200,"completion_tokens":30,"total_tokens":1230,"prompt_tokens_details":{"cached_tokens":800,"cache_write_tokens":400}}"#,
            [800, 400, 30, 1230],
        ),
        (
            r#"{"prompt_tokens":14,"completion_tokens":30,"total_tokens":44,"cache_creation_input_tokens":2048,"cache_read_input_tokens":0}"#,
            [0, 2048, 30, 44],
        ),
    ] {
        let edited = format!("data: {{\"id\":\"x\",\"choices\":[],\"usage\":{usage}}}");
        let body = recorded.replace(&usage_line, &edited);
        let (seen, _server) = replay(Script::sse(body.into_bytes(), Writes::One), |_| {}).await;
        assert_eq!(seen.statuses, vec!["completed"]);
        assert_eq!(seen.usage, Some(want), "{usage}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_fields_from_the_config_pass_through() {
    let body = fixture("openai-gpt4o-text.sse").into_bytes();
    let (seen, server) = replay(Script::sse(body, Writes::One), |cfg| {
        let yaml = format!(
            "provider: openai\nbase_url: {}\nmodel: gpt-5\napi_key_env: ROOKERY_REPLAY_UNSET_KEY\n\
             reasoning_effort: high\nverbosity: low\nmax_completion_tokens: 4000\n\
             parallel_tool_calls: false\nservice_tier: flex\nprompt_cache_key: rookery-1\n\
             extra:\n  provider: {{order: [anthropic]}}\n",
            cfg.base_url.as_deref().unwrap_or_default()
        );
        *cfg = serde_yaml::from_str::<ModelConfig>(&yaml).unwrap();
    })
    .await;
    assert_eq!(seen.statuses, vec!["completed"]);
    let body = &server.requests()[0];
    assert_eq!(body["model"], "gpt-5");
    assert_eq!(body["reasoning_effort"], "high");
    assert_eq!(body["verbosity"], "low");
    assert_eq!(body["max_completion_tokens"], 4000);
    assert_eq!(body["parallel_tool_calls"], false);
    assert_eq!(body["service_tier"], "flex");
    assert_eq!(body["prompt_cache_key"], "rookery-1");
    assert_eq!(
        body["provider"],
        serde_json::json!({"order": ["anthropic"]})
    );
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"]["include_usage"], true);
}
