//! Secrets stay out of commands and traces, through the built binary: `env` inside
//! `exec_command` shows neither the provider key, nor the serve token, nor an AWS secret, nor a
//! configured `strip_env` match (but a `pass_env` exception), and no case variant of the key or
//! the token reaches the trace, the streamed transcript, the model or the logs — not even when
//! the provider echoes `bearer sk-…` lowercased in an error, nor when the model streams the key
//! split across two chunks (`--json --partials` and the SSE stream).

use crate::common::openai_mock;
use crate::common::serve as harness;

use std::process::Stdio;

use openai_mock::{Mock, Reply, split};
use serde_json::{Value, json};

const KEY: &str = "sk-Rookery-Test-Key-4242";
const AWS: &str = "aws-Secret-Value-9090";

/// An SSE body with one `exec_command` call.
fn exec_call(cmd: &str) -> String {
    let args = json!({"cmd": cmd, "description": "Show the environment"}).to_string();
    let first = json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": null,
        "tool_calls": [{"index": 0, "id": "call_env", "type": "function",
                        "function": {"name": "exec_command", "arguments": args}}]},
        "finish_reason": null}]});
    let end = json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]});
    format!("data: {first}\n\ndata: {end}\n\ndata: [DONE]\n\n")
}

/// Every case variant of `needle` is absent from `text`.
fn assert_absent(text: &str, needle: &str, what: &str) {
    assert!(
        !text.to_lowercase().contains(&needle.to_lowercase()),
        "{what} holds a case variant of {needle}:\n{text}"
    );
}

fn all_traces(home: &std::path::Path) -> String {
    let mut out = String::new();
    for day in std::fs::read_dir(home.join("traces")).unwrap() {
        for f in std::fs::read_dir(day.unwrap().path()).unwrap() {
            out.push_str(&std::fs::read_to_string(f.unwrap().path()).unwrap());
        }
    }
    out
}

/// The output of the one tool call in a trace.
fn tool_output(trace: &str) -> String {
    trace
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|r| r["payload"]["type"] == "tool_call_output")
        .map(|r| {
            r["payload"]["output"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_see_no_secret_and_no_key_variant_reaches_the_trace() {
    // The command also prints the key in capitals (the model wrote it into the call).
    let cmd = format!("env; echo leaked {}", KEY.to_uppercase());
    let echoed = format!(
        r#"{{"error":{{"message":"invalid header: bearer {}"}}}}"#,
        KEY.to_lowercase()
    );
    let mock = Mock::start(
        vec![
            Reply::Sse(split(&exec_call(&cmd), 50)),
            Reply::Status(400, echoed, None),
        ],
        Some(format!("Bearer {KEY}")),
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let cfg = dir.path().join("agent.yaml");
    std::fs::write(
        &cfg,
        "commands:\n  strip_env: [\"extra_*\"]\n  pass_env: [GITHUB_TOKEN, ROOKERY_TEST_KEY]\n",
    )
    .unwrap();
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_rookery"))
        .env("ROOKERY_NO_CONFIG", "1")
        .args(["run", "--workspace"])
        .arg(&ws)
        .arg("--home")
        .arg(dir.path().join("home"))
        .arg("--config")
        .arg(&cfg)
        .args(["--provider", "openai", "--base-url", &mock.base_url])
        .args(["--model", "gpt-test", "--api-key-env", "ROOKERY_TEST_KEY"])
        .args(["--json", "show me"])
        .env("HOME", dir.path())
        .env("RUST_LOG", "rookery=debug")
        .env_remove("OPENAI_API_KEY")
        .env("ROOKERY_TEST_KEY", KEY)
        .env("INNOCENT_LOOKING", KEY)
        .env("AWS_SECRET_ACCESS_KEY", AWS)
        .env("AWS_SESSION_TOKEN", "aws-session-1234")
        .env("Db_Password", "hunter2-long")
        .env("EXTRA_PRIVATE", "stripped-by-config")
        .env("GITHUB_TOKEN", "ghp-passed-through")
        .env("ROOKERY_VISIBLE", "visible-value")
        .stdin(Stdio::null())
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(1),
        "the 400 fails the task: {stderr}"
    );
    mock.assert_clean();

    let trace = all_traces(&dir.path().join("home"));
    let env = tool_output(&trace);
    assert!(env.contains("ROOKERY_VISIBLE=visible-value"), "{env}");
    assert!(
        env.contains("GITHUB_TOKEN=ghp-passed-through"),
        "pass_env: {env}"
    );
    for name in [
        "ROOKERY_TEST_KEY=",
        "INNOCENT_LOOKING=",
        "AWS_SECRET_ACCESS_KEY=",
        "AWS_SESSION_TOKEN=",
        "Db_Password=",
        "EXTRA_PRIVATE=",
    ] {
        assert!(!env.contains(name), "{name} reached the command:\n{env}");
    }
    assert_absent(&env, AWS, "the command output");
    assert!(env.contains("leaked [redacted]"), "{env}");
    // The provider's echo (lowercased key) is scrubbed too.
    assert!(
        trace.contains("invalid header: bearer [redacted]"),
        "{trace}"
    );
    assert_absent(&trace, KEY, "the trace");
    assert_absent(&stdout, KEY, "the streamed messages");
    assert_absent(&stderr, KEY, "the logs");
    // The model got the scrubbed output.
    let requests = mock.requests();
    assert_eq!(requests.len(), 2);
    let sent = requests[1].to_string();
    assert!(sent.contains("leaked [redacted]"), "{sent}");
    let sent_outputs: Vec<String> = requests[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].to_string())
        .collect();
    for o in sent_outputs {
        assert_absent(&o, KEY, "a tool output sent to the model");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn served_commands_never_see_the_token_and_it_is_scrubbed() {
    let token = "Serve-Token-abcdef-0123456789";
    let script = json!({"turns": [
        {"tool_calls": [{"name": "exec_command", "arguments": {
            "cmd": format!("env; echo token {}", token.to_lowercase()),
            "description": "Show the environment"}}]},
        {"text": "done"}
    ]});
    let server = harness::Server::start_in(harness::sandbox(&script), Some(token));
    let id = server.create(Some("allow-all")).await;
    let after = server.task(&id, "show me").await;
    let events = server.events_until_task_end(&id, after).await;
    let streamed: String = events.iter().map(|(_, v)| v.to_string()).collect();
    assert_absent(&streamed, token, "the event stream");
    let records = harness::settled_trace(&server.trace(&id)).await;
    let trace: String = records.iter().map(|r| r.to_json() + "\n").collect();
    let env = tool_output(&trace);
    assert!(env.contains("PATH="), "{env}");
    assert!(!env.contains("TEST_ROOKERY_TOKEN="), "{env}");
    assert!(env.contains("token [redacted]"), "{env}");
    assert_absent(&trace, token, "the trace");
    assert_absent(&server.stderr(), token, "the logs");
}

/// An SSE body whose text arrives in `pieces`, one delta each.
fn text_in_pieces(pieces: &[&str]) -> String {
    let mut body = String::new();
    for p in pieces {
        let chunk =
            json!({"choices": [{"index": 0, "delta": {"content": p}, "finish_reason": null}]});
        body.push_str(&format!("data: {chunk}\n\n"));
    }
    let end = json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]});
    body.push_str(&format!("data: {end}\n\ndata: [DONE]\n\n"));
    body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_split_across_streamed_chunks_never_reaches_the_partials() {
    // The key is cut in two deltas (in another case), then comes whole in a third.
    let pieces = [
        "Your key is sk-rookery-TE",
        "ST-key-4242, and again ",
        "SK-ROOKERY-TEST-KEY-4242.",
    ];
    let mock = Mock::start(
        vec![Reply::Sse(vec![text_in_pieces(&pieces)])],
        Some(format!("Bearer {KEY}")),
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_rookery"))
        .env("ROOKERY_NO_CONFIG", "1")
        .args(["run", "--workspace"])
        .arg(&ws)
        .arg("--home")
        .arg(dir.path().join("home"))
        .args(["--provider", "openai", "--base-url", &mock.base_url])
        .args(["--model", "gpt-test", "--api-key-env", "ROOKERY_TEST_KEY"])
        .args(["--json", "--partials", "what is my key?"])
        .env("HOME", dir.path())
        .env_remove("OPENAI_API_KEY")
        .env("ROOKERY_TEST_KEY", KEY)
        .stdin(Stdio::null())
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    mock.assert_clean();
    // Neither half of the split key is streamed.
    assert_absent(&stdout, "sk-rookery-te", "the streamed partials");
    assert_absent(&stdout, "st-key-4242", "the streamed partials");
    let lines: Vec<Value> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let deltas: String = lines
        .iter()
        .filter(|v| v["payload"]["type"] == "partial_text")
        .filter_map(|v| v["payload"]["text"].as_str())
        .collect();
    assert_eq!(deltas, "Your key is [redacted], and again [redacted].");
    // The complete message says the same.
    assert!(
        lines.iter().any(|v| v["payload"]["type"] == "text"
            && v["payload"]["text"] == "Your key is [redacted], and again [redacted]."),
        "{stdout}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_split_across_streamed_chunks_never_reaches_the_event_stream() {
    use std::io::BufRead;
    let pieces = ["Served: sk-ROOKERY-t", "est-KEY-4242 done"];
    let mock = Mock::start(
        vec![Reply::Sse(vec![text_in_pieces(&pieces)])],
        Some(format!("Bearer {KEY}")),
    )
    .await;
    let dir = harness::sandbox(&json!({"turns": []}));
    let home = dir.path().join("home");
    let mut child = harness::command(
        dir.path(),
        &[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--home",
            home.to_str().unwrap(),
        ],
    )
    .args(["--provider", "openai", "--base-url", &mock.base_url])
    .args(["--model", "gpt-test", "--api-key-env", "ROOKERY_TEST_KEY"])
    .env_remove("OPENAI_API_KEY")
    .env("ROOKERY_TEST_KEY", KEY)
    .stdout(Stdio::piped())
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    let base = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap()
        .to_string();
    let server = harness::Server {
        child,
        _stdout: stdout,
        base,
        client: reqwest::Client::new(),
        token: Some(harness::read_token_file(&home)),
        dir,
    };
    let id = server.create(None).await;
    let after = server.task(&id, "what is my key?").await;
    let events = server.events_until_task_end(&id, after).await;
    let streamed: String = events.iter().map(|(_, v)| v.to_string() + "\n").collect();
    assert_absent(&streamed, "sk-rookery-t", "the event stream");
    assert_absent(&streamed, "est-key-4242", "the event stream");
    let deltas: String = events
        .iter()
        .filter(|(_, v)| v["payload"]["type"] == "partial_text")
        .filter_map(|(_, v)| v["payload"]["text"].as_str())
        .collect();
    assert_eq!(deltas, "Served: [redacted] done");
    mock.assert_clean();
}
