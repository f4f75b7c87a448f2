//! Structured output through the binary: `rookery run --output-schema FILE` with a scripted
//! model that first violates the schema then meets it (the model is told what failed, `--json`
//! prints `task_end` with the parsed `output`), one that never meets it (`failed` with
//! `output_invalid` after `--max-output-retries`), schemas refused before the task starts
//! (exit 2), the OpenAI-compatible request's `response_format`, and the same over HTTP
//! (`POST /v1/sessions/{id}/tasks {output_schema}`: 400 for a bad schema, `output` in the
//! trace's `task_end`).

use crate::common::cli::{self as support, Sandbox, json_lines, kind, read_records, s};
use crate::common::openai_mock::{Mock, Reply, split};

use serde_json::{Value, json};

const SCHEMA: &str = r#"{"type":"object","required":["answer"],"properties":{"answer":{"type":"integer"}},"additionalProperties":false}"#;

fn text_turns(texts: &[&str]) -> Value {
    json!({"turns": texts.iter().map(|t| json!({"text": t})).collect::<Vec<_>>()})
}

fn task_ends(records: &[Value]) -> Vec<&Value> {
    records.iter().filter(|r| kind(r) == "task_end").collect()
}

/// The user texts the harness sent (the schema feedback).
fn feedback(records: &[Value]) -> Vec<String> {
    records
        .iter()
        .filter(|r| kind(r) == "text" && r["payload"]["role"] == "user")
        .filter_map(|r| r["payload"]["text"].as_str())
        .filter(|t| t.contains("does not meet the required output schema"))
        .map(str::to_string)
        .collect()
}

#[test]
fn an_answer_that_violates_the_schema_is_sent_back_then_accepted() {
    let sb = Sandbox::new();
    let schema = sb.file("schema.json", SCHEMA);
    let script = sb.script(&text_turns(&[
        r#"{"answer": "forty-two"}"#,
        "Here it is:\n```json\n{\"answer\": 42}\n```",
        "this turn must never be played",
    ]));
    let out = sb.run(&[
        "--script",
        s(&script),
        "--json",
        "--output-schema",
        s(&schema),
        "What is the answer?",
    ]);
    out.expect_code(0);
    let lines = json_lines(&out);
    // The prompt line is the user's text, not the feedback recorded soon after it.
    assert_eq!(
        lines[1]["payload"]["text"], "What is the answer?",
        "{}",
        out.stdout
    );
    let told = feedback(&lines);
    assert_eq!(told.len(), 1, "one feedback message:\n{}", out.stdout);
    assert!(
        told[0].contains("/answer") && told[0].contains("integer"),
        "the feedback names what failed: {}",
        told[0]
    );
    let ends = task_ends(&lines);
    assert_eq!(ends.len(), 1, "{}", out.stdout);
    assert_eq!(ends[0]["payload"]["status"], "completed");
    assert_eq!(ends[0]["payload"]["output"], json!({"answer": 42}));
    assert!(!out.stdout.contains("must never be played"));
    // The trace has the same: the feedback, and the output on `task_end`.
    let records = read_records(&sb.trace());
    assert_eq!(feedback(&records).len(), 1);
    let ends = task_ends(&records);
    assert_eq!(ends[0]["payload"]["output"], json!({"answer": 42}));
}

#[test]
fn an_answer_that_never_meets_the_schema_fails_with_output_invalid() {
    let sb = Sandbox::new();
    let schema = sb.file("schema.json", SCHEMA);
    let script = sb.script(&text_turns(&[
        "no JSON here",
        r#"{"answer": 1, "extra": true}"#,
    ]));
    let out = sb.run(&[
        "--script",
        s(&script),
        "--json",
        "--output-schema",
        s(&schema),
        "--max-output-retries",
        "1",
        "What is the answer?",
    ]);
    out.expect_code(1);
    let records = read_records(&sb.trace());
    assert_eq!(feedback(&records).len(), 1, "exactly one retry");
    let reasons = support::abort_reasons(&records);
    assert_eq!(reasons.len(), 1, "{reasons:?}");
    assert!(
        reasons[0].starts_with("output_invalid: ") && reasons[0].contains("extra"),
        "the failure names the validation errors: {}",
        reasons[0]
    );
    let ends = task_ends(&records);
    assert_eq!(ends[0]["payload"]["status"], "failed");
    assert!(ends[0]["payload"].get("output").is_none());
}

#[test]
fn a_bad_schema_is_refused_before_the_task_starts() {
    let sb = Sandbox::new();
    let script = sb.script(&text_turns(&["{}"]));
    for (name, text, needle) in [
        ("not-json.json", "{", "not JSON"),
        ("bad.json", r#"{"type": 12}"#, "not a valid JSON Schema"),
        // A reference to another document is never fetched.
        (
            "remote.json",
            r#"{"$ref": "http://127.0.0.1:9/schema.json"}"#,
            "not a valid JSON Schema",
        ),
    ] {
        let schema = sb.file(name, text);
        let out = sb.run(&["--script", s(&script), "--output-schema", s(&schema), "go"]);
        out.expect_config_error(&["--output-schema", needle]);
    }
    let big = sb.file(
        "big.json",
        &format!("{{\"description\": \"{}\"}}", "x".repeat(70_000)),
    );
    let out = sb.run(&["--script", s(&script), "--output-schema", s(&big), "go"]);
    out.expect_config_error(&["--output-schema", "bytes"]);
    assert!(sb.trace_files().is_empty(), "no session started");
}

const JSON_ANSWER: &str = concat!(
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"{\\\"answer\\\": 7}\"},\"finish_reason\":null}]}\n\n",
    "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
    "data: [DONE]\n\n",
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_requests_carry_the_schema_as_response_format() {
    let mock = Mock::start(
        vec![Reply::Sse(split(JSON_ANSWER, 30))],
        Some("Bearer sk-schema".to_string()),
    )
    .await;
    let sb = Sandbox::new();
    let schema = sb.file("schema.json", SCHEMA);
    let mut cmd = sb.run_command(&[
        "--provider",
        "openai",
        "--base-url",
        &mock.base_url,
        "--model",
        "gpt-test",
        "--api-key-env",
        "ROOKERY_SCHEMA_KEY",
        "--json",
        "--output-schema",
        s(&schema),
        "answer",
    ]);
    cmd.env("ROOKERY_SCHEMA_KEY", "sk-schema");
    let out = tokio::task::spawn_blocking(move || {
        support::Running::spawn(cmd).wait(std::time::Duration::from_secs(120))
    })
    .await
    .unwrap();
    out.expect_code(0);
    let requests = mock.requests();
    assert_eq!(requests.len(), 1);
    let format = &requests[0]["response_format"];
    assert_eq!(format["type"], "json_schema", "{}", requests[0]);
    assert_eq!(format["json_schema"]["name"], "output");
    let sent: Value = serde_json::from_str(SCHEMA).unwrap();
    assert_eq!(format["json_schema"]["schema"], sent);
    let lines = json_lines(&out);
    assert_eq!(
        task_ends(&lines)[0]["payload"]["output"],
        json!({"answer": 7})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_takes_the_schema_with_the_task_and_refuses_a_bad_one() {
    use crate::common::serve::Server;
    use reqwest::StatusCode;

    let server = Server::start(&text_turns(&["nope", r#"{"answer": 5}"#]));
    let id = server.create(None).await;
    let tasks = format!("/v1/sessions/{id}/tasks");
    let sent: Value = serde_json::from_str(SCHEMA).unwrap();
    for (body, code) in [
        (
            json!({"text": "go", "output_schema": {"type": 12}}),
            "invalid_output_schema",
        ),
        (
            json!({"text": "go", "output_schema": {"$ref": "http://127.0.0.1:9/s.json"}}),
            "invalid_output_schema",
        ),
        (
            json!({"text": "go", "output_schema": sent, "max_output_retries": 99}),
            "invalid_output_schema",
        ),
        (
            json!({"text": "go", "max_output_retries": 1}),
            "invalid_request",
        ),
    ] {
        let (status, v) = server.call("POST", &tasks, Some(body.clone())).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body} → {v}");
        assert_eq!(v["error"]["code"], code, "{body} → {v}");
    }
    let (status, v) = server
        .call(
            "POST",
            &format!("/v1/sessions/{id}/steer"),
            Some(json!({"text": "go", "output_schema": sent})),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{v}");
    // Nothing started: the script's first turn is still the first answer.
    let (status, v) = server
        .call(
            "POST",
            &tasks,
            Some(json!({"text": "go", "output_schema": sent, "max_output_retries": 1})),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{v}");
    let after = v["events_after"].as_u64().unwrap();
    let events = server.events_until_task_end(&id, after).await;
    let records: Vec<Value> = events.into_iter().map(|(_, v)| v).collect();
    assert_eq!(feedback(&records).len(), 1, "{records:#?}");
    let end = &records.last().unwrap()["payload"];
    assert_eq!(end["status"], "completed", "{end}");
    assert_eq!(end["output"], json!({"answer": 5}));
}
