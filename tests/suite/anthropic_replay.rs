//! The Anthropic provider replaying the 20 recorded Messages API streams of
//! `tests/fixtures/anthropic/` from a loopback server, byte for byte, once in one write and once
//! one byte per write: text, thinking (with its signature), redacted thinking, tool calls (ids,
//! names, inputs), usage and the request's status must be what the bytes say.

use crate::common::anthropic_mock;
use crate::common::user_text_request;

use std::time::Duration;

use anthropic_mock::{Reply, Server, Writes, check_segments, fixture};
use futures::StreamExt;
use rookery::message::{ModelPayload, StopReason, Usage};
use rookery::model::anthropic::AnthropicModel;
use rookery::model::anthropic::request::REDACTED_THINKING_MIME;
use rookery::model::model_config::ModelConfig;
use rookery::model::{Model, ModelEvent, ModelOutcome, ModelSessionContext};
use serde_json::{Value, json};

/// What one replayed stream produced.
#[derive(Debug, Default)]
struct Replayed {
    text: String,
    texts: usize,
    thinking: String,
    signature_len: usize,
    redacted: Vec<String>,
    calls: Vec<(String, String, Value)>,
    usage: Option<Usage>,
    outcome: Option<ModelOutcome>,
}

fn config(base_url: &str) -> ModelConfig {
    ModelConfig {
        provider: "anthropic".into(),
        base_url: Some(base_url.into()),
        model: Some("claude-test".into()),
        api_key_env: Some("ROOKERY_TEST_ANTHROPIC_REPLAY_UNSET".into()),
        idle_timeout_ms: Some(30_000),
        ..ModelConfig::default()
    }
}

async fn replay(name: &str, writes: Writes) -> Replayed {
    let server = Server::start(vec![Reply::Sse(fixture(name), writes)]).await;
    let model = AnthropicModel::new(config(&server.base_url)).unwrap();
    let mut session = model.open(&ModelSessionContext::default());
    let events: Vec<ModelEvent> = tokio::time::timeout(
        Duration::from_secs(60),
        session.stream(user_text_request("hello")).collect(),
    )
    .await
    .unwrap_or_else(|_| panic!("{name}: the stream did not end"));
    assert_eq!(server.requests().len(), 1, "{name}");
    check_segments(&events).unwrap_or_else(|e| panic!("{name} ({writes:?}): {e}"));
    let ends = events
        .iter()
        .filter(|e| matches!(e, ModelEvent::End(_)))
        .count();
    assert_eq!(ends, 1, "{name}: exactly one End");
    assert!(matches!(events.last(), Some(ModelEvent::End(_))), "{name}");
    let mut r = Replayed::default();
    for e in events {
        match e {
            ModelEvent::Complete(ModelPayload::Text { text, .. }) => {
                r.texts += 1;
                r.text.push_str(&text);
            }
            ModelEvent::Complete(ModelPayload::Thinking {
                thinking, fidelity, ..
            }) => {
                r.thinking.push_str(&thinking);
                let sig = fidelity
                    .as_ref()
                    .and_then(|f| f.get("anthropic"))
                    .and_then(|a| a.get("signature"))
                    .and_then(Value::as_str)
                    .unwrap_or("");
                r.signature_len += sig.len();
            }
            ModelEvent::Complete(ModelPayload::InlineThinking {
                data, mime_type, ..
            }) => {
                assert_eq!(mime_type, REDACTED_THINKING_MIME);
                r.redacted.push(data);
            }
            ModelEvent::Complete(ModelPayload::ToolCall {
                name,
                arguments,
                tool_call_id,
                ..
            }) => {
                let args: Value = serde_json::from_str(&arguments)
                    .unwrap_or_else(|e| panic!("{name}: arguments {arguments:?}: {e}"));
                r.calls.push((tool_call_id, name, args));
            }
            ModelEvent::Usage(u) => r.usage = Some(u),
            ModelEvent::End(o) => r.outcome = Some(o),
            _ => {}
        }
    }
    r
}

fn usage(input: u64, cache_write: u64, cache_read: u64, output: u64) -> Option<Usage> {
    Some(Usage {
        cache_read,
        cache_write,
        output,
        total: input + cache_write + cache_read + output,
    })
}

fn completed(r: &Replayed, name: &str) {
    let o = r.outcome.as_ref().unwrap();
    assert_eq!(o.status, StopReason::Completed, "{name}: {o:?}");
}

fn call(id: &str, name: &str, args: Value) -> (String, String, Value) {
    (id.to_string(), name.to_string(), args)
}

/// Replays `name` both ways and runs `check` on each result.
async fn both(name: &str, check: impl Fn(&Replayed)) {
    for writes in [Writes::One, Writes::Bytes] {
        let r = replay(name, writes).await;
        check(&r);
    }
}

macro_rules! replay_test {
    ($test:ident, $file:literal, |$r:ident| $body:block) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $test() {
            both($file, |$r: &Replayed| $body).await;
        }
    };
}

replay_test!(mirascope_plain_text, "mirascope-plain-text.sse", |r| {
    completed(r, "plain");
    assert_eq!(r.text, "4200 + 42 = 4242");
    assert_eq!(r.usage, usage(17, 0, 0, 15));
    assert!(r.calls.is_empty() && r.thinking.is_empty());
});

replay_test!(vercel_text, "vercel-text.sse", |r| {
    completed(r, "vercel-text");
    assert_eq!(r.text.chars().count(), 108);
    assert!(
        r.text
            .starts_with("Hello! I'm doing well, thank you for asking.")
    );
    assert!(r.text.ends_with("anything I can help you with?"));
    assert_eq!(r.usage, usage(12, 0, 0, 30));
});

replay_test!(
    vercel_message_delta_input_tokens,
    "vercel-message-delta-input-tokens.sse",
    |r| {
        completed(r, "gateway");
        assert_eq!(r.text, "pong");
        // 43 in message_start, 61 in message_delta: the last one counts.
        assert_eq!(r.usage, usage(61, 0, 0, 2));
    }
);

replay_test!(
    pydantic_thinking_signature_text,
    "pydantic-thinking-signature-text.sse",
    |r| {
        completed(r, "thinking-signature");
        assert_eq!(r.thinking.chars().count(), 202);
        assert!(
            r.thinking
                .starts_with("This is a straightforward question about")
        );
        assert_eq!(r.signature_len, 504);
        assert_eq!(r.text.chars().count(), 1021);
        assert!(
            r.text
                .starts_with("Here are the basic steps for safely crossing the street:")
        );
        assert!(r.text.ends_with("speed when crossing streets."));
        assert_eq!(r.usage, usage(43, 0, 0, 282));
    }
);

replay_test!(
    vercel_thinking_multibyte,
    "vercel-thinking-multibyte.sse",
    |r| {
        completed(r, "multibyte");
        assert_eq!(r.text, "925 ÷ 5 = 185");
        assert_eq!(r.thinking.chars().count(), 75);
        assert!(
            r.thinking
                .starts_with("The previous result was 925. Now I need ")
        );
        assert!(r.thinking.contains('÷'));
        assert_eq!(r.signature_len, 332);
        assert_eq!(r.usage, usage(69, 0, 0, 53));
    }
);

replay_test!(
    pydantic_redacted_thinking_text,
    "pydantic-redacted-thinking-text.sse",
    |r| {
        completed(r, "redacted");
        assert_eq!(r.redacted.len(), 2);
        assert!(r.redacted.iter().all(|d| d.len() > 100), "{:?}", r.redacted);
        assert!(r.thinking.is_empty());
        assert_eq!(r.text.chars().count(), 359);
        assert!(r.text.ends_with("a legitimate task or question?"));
        assert_eq!(r.usage, usage(92, 0, 0, 189));
    }
);

replay_test!(
    pydantic_single_tool_use,
    "pydantic-single-tool-use.sse",
    |r| {
        completed(r, "single-tool");
        assert_eq!(
            r.calls,
            vec![call(
                "toolu_015czvgRAN7XL7DZXTBbSXiP",
                "str_replace_based_edit_tool",
                json!({"command": "view", "path": "/tmp/example.py"})
            )]
        );
        assert_eq!(r.texts, 0);
        assert_eq!(r.usage, usage(1270, 0, 0, 82));
    }
);

replay_test!(
    pydantic_thinking_then_tool_use,
    "pydantic-thinking-then-tool-use.sse",
    |r| {
        completed(r, "thinking-tool");
        assert_eq!(r.thinking.chars().count(), 179);
        assert_eq!(r.signature_len, 576);
        assert_eq!(
            r.calls,
            vec![call(
                "toolu_01TUGHRCfso8VSw9ekt21nAR",
                "get_temperature",
                json!({"city": "Utrecht"})
            )]
        );
        assert_eq!(r.usage, usage(597, 0, 0, 101));
    }
);

replay_test!(
    pydantic_text_after_tool_result,
    "pydantic-text-after-tool-result.sse",
    |r| {
        completed(r, "after-tool");
        assert!(
            r.text
                .starts_with("It is currently 18°C (64°F) in Utrecht.")
        );
        assert_eq!(r.text.chars().count(), 76);
        assert_eq!(r.usage, usage(713, 0, 0, 26));
    }
);

replay_test!(
    anthropic_sdk_python_tool_use,
    "anthropic-sdk-python-tool-use.sse",
    |r| {
        // The last event (message_stop) has no terminating blank line: message_delta counts.
        completed(r, "sdk-python");
        assert_eq!(r.text, "I'll check the current weather in Paris for you.");
        assert_eq!(
            r.calls,
            vec![call(
                "toolu_01NRLabsLyVHZPKxbKvkfSMn",
                "get_weather",
                json!({"location": "Paris"})
            )]
        );
        assert_eq!(r.usage, usage(377, 0, 0, 65));
    }
);

replay_test!(vercel_tool_no_args, "vercel-tool-no-args.sse", |r| {
    completed(r, "no-args");
    assert_eq!(r.text, "I'll update the issue list for you.");
    assert_eq!(
        r.calls,
        vec![call(
            "toolu_01QE1WLsSVp5hy5Q3GmGTmjP",
            "updateIssueList",
            json!({})
        )]
    );
    assert_eq!(r.usage, usage(565, 0, 0, 48));
});

replay_test!(
    vercel_quoted_tool_input,
    "vercel-quoted-tool-input.sse",
    |r| {
        completed(r, "quoted");
        let description = "Today you post every run to Strava, but Strava does not answer the question: \"What should I do next after this run?\". It is a great log, but it is not adaptive.";
        assert_eq!(
            r.calls,
            vec![call(
                "toolu_01Cr31vcGoeeRgi3Eo5Ds8qN",
                "website_update",
                json!({"website_path": "/home/user/pace-landing", "tasks": [{"description": description, "type": "feature", "passes": false}]})
            )]
        );
        assert_eq!(r.usage, usage(912, 0, 0, 118));
    }
);

replay_test!(
    mirascope_parallel_tool_use,
    "mirascope-parallel-tool-use.sse",
    |r| {
        completed(r, "parallel");
        assert_eq!(
            r.text,
            "I'll retrieve the secrets for both passwords you provided."
        );
        assert_eq!(
            r.calls,
            vec![
                call(
                    "toolu_015cUijgET79LXjgeYQerN2h",
                    "secret_retrieval_tool",
                    json!({"password": "mellon"})
                ),
                call(
                    "toolu_01XZTimPexA7h3EVKesnKt5T",
                    "secret_retrieval_tool",
                    json!({"password": "radiance"})
                ),
            ]
        );
        assert_eq!(r.usage, usage(416, 0, 0, 109));
    }
);

replay_test!(
    vercel_three_parallel_tool_use,
    "vercel-three-parallel-tool-use.sse",
    |r| {
        completed(r, "three");
        let queries: Vec<_> = r
            .calls
            .iter()
            .map(|(_, n, a)| (n.as_str(), a["query"].as_str().unwrap_or("")))
            .collect();
        assert_eq!(
            queries,
            vec![
                ("searchDocs", "alpha"),
                ("searchDocs", "beta"),
                ("searchDocs", "gamma")
            ]
        );
        assert_eq!(r.calls[0].0, "toolu_01LtEf4h1QW7KCKLsYMuhTNB");
        assert_eq!(r.calls[1].0, "toolu_016tfZE7otAFSBjhc67wu189");
        assert_eq!(r.calls[2].0, "toolu_01XkU35z8BVWqqc9tijDuLrA");
        assert_eq!(r.texts, 0);
        assert_eq!(r.usage, usage(798, 0, 0, 110));
    }
);

replay_test!(mirascope_max_tokens, "mirascope-max-tokens.sse", |r| {
    completed(r, "max-tokens");
    assert_eq!(r.text.chars().count(), 150);
    assert!(r.text.ends_with("8. Delaware\n9"));
    assert_eq!(r.usage, usage(15, 0, 0, 50));
});

replay_test!(vercel_cache_read, "vercel-cache-read.sse", |r| {
    completed(r, "cache-read");
    assert_eq!(r.text, "OK");
    assert_eq!(r.usage, usage(3, 0, 18639, 1));
});

replay_test!(vercel_cache_write, "vercel-cache-write.sse", |r| {
    completed(r, "cache-write");
    assert_eq!(r.text, "OK");
    assert_eq!(r.usage, usage(3, 18639, 0, 1));
});

replay_test!(
    vercel_server_tools_prompt_cache,
    "vercel-server-tools-prompt-cache.sse",
    |r| {
        completed(r, "server-tools");
        assert!(r.calls.is_empty(), "server tools are not client calls");
        assert_eq!(
            r.text,
            "The sum of the squares of the numbers 1 through 12 is **650**."
        );
        assert_eq!(r.usage, usage(6, 3337, 6289, 198));
    }
);

replay_test!(
    overloaded_midstream,
    "overloaded-midstream.COMPOSITE.sse",
    |r| {
        let o = r.outcome.as_ref().unwrap();
        assert_eq!(o.status, StopReason::Failed);
        assert!(!o.permanent, "overloaded is retried");
        let m = o.error_message.as_deref().unwrap_or("");
        assert!(
            m.contains("overloaded_error") && m.contains("Overloaded"),
            "{m}"
        );
        assert_eq!(r.usage, None, "no usage for a failed request");
        // The thinking block closed before the error; the open text block never completes.
        assert_eq!(r.thinking.chars().count(), 202);
        assert_eq!(r.texts, 0);
    }
);

replay_test!(
    api_error_first_event,
    "api-error-first-event.COMPOSITE.sse",
    |r| {
        let o = r.outcome.as_ref().unwrap();
        assert_eq!(o.status, StopReason::Failed);
        assert!(!o.permanent, "api_error is retried");
        let m = o.error_message.as_deref().unwrap_or("");
        assert!(
            m.contains("api_error") && m.contains("Internal server error"),
            "{m}"
        );
        assert_eq!(r.usage, None);
        assert!(r.text.is_empty() && r.calls.is_empty());
    }
);
