//! `rookery serve` started with no model flag resumes a session known only on disk with what its
//! trace recorded: provider, base URL, model, key variable name, config file and approval mode
//! for a provider session (against the OpenAI mock), the script and its position for a scripted
//! one. A server started with another model overrides the recorded one and records that. A
//! server without a model refuses new sessions with a clear error, and a bad `config` type
//! says what `config` is.

use crate::common::openai_mock;
use crate::common::serve as harness;

use std::io::{BufRead, BufReader};
use std::process::Stdio;

use harness::*;
use openai_mock::{Mock, Reply, split};
use reqwest::StatusCode;
use rookery::message::Payload;
use serde_json::{Value, json};
use tempfile::TempDir;

const KEY_VAR: &str = "ROOKERY_REOPEN_TEST_KEY";
const KEY: &str = "sk-reopen-test-key";

fn text_answer(text: &str) -> String {
    format!(
        "data: {}\n\ndata: {}\n\ndata: [DONE]\n\n",
        json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": text}, "finish_reason": null}]}),
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    )
}

/// `rookery serve --listen 127.0.0.1:0 --home <dir>/home <extra>` with the key variable set.
fn serve(dir: TempDir, extra: &[&str]) -> Server {
    let p = dir.path();
    let home = p.join("home");
    let mut args = vec![
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--home",
        home.to_str().unwrap(),
    ];
    args.extend(extra);
    let stderr = std::fs::File::create(p.join("stderr.txt")).unwrap();
    let mut child = command(p, &args)
        .env(KEY_VAR, KEY)
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .expect("spawn rookery serve");
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).expect("first stdout line");
    let base = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| {
            panic!(
                "unexpected first line {line:?}; stderr: {}",
                std::fs::read_to_string(p.join("stderr.txt")).unwrap_or_default()
            )
        })
        .to_string();
    Server {
        child,
        _stdout: stdout,
        base,
        client: reqwest::Client::new(),
        token: Some(read_token_file(&home)),
        dir,
    }
}

/// The `session_meta` records of a trace, root ones only.
fn metas(path: &std::path::Path) -> Vec<rookery::message::SessionMeta> {
    rookery::trace::reader::read_trace(path)
        .unwrap()
        .records
        .into_iter()
        .filter(|r| !r.has_origin())
        .filter_map(|r| match r.payload {
            Payload::SessionMeta(m) => Some(*m),
            _ => None,
        })
        .collect()
}

fn assistant_texts(events: &[(u64, Value)]) -> Vec<String> {
    events
        .iter()
        .filter(|(_, v)| v["payload"]["type"] == "text" && v["payload"]["role"] == "assistant")
        .filter_map(|(_, v)| v["payload"]["text"].as_str().map(str::to_string))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_session_resumes_with_no_flags() {
    let mock = Mock::start(
        vec![
            Reply::Sse(split(&text_answer("first answer"), 25)),
            Reply::Sse(split(&text_answer("second answer"), 25)),
        ],
        Some(format!("Bearer {KEY}")),
    )
    .await;
    let dir = sandbox(&json!({"turns": []}));
    let cfg = dir.path().join("agent.yaml");
    std::fs::write(&cfg, "system_prompt: You are the reopened agent.\n").unwrap();
    let server = serve(
        dir,
        &[
            "--provider",
            "openai",
            "--base-url",
            &mock.base_url,
            "--model",
            "reopen-model",
            "--api-key-env",
            KEY_VAR,
            "--config",
            cfg.to_str().unwrap(),
        ],
    );
    let id = server.create(Some("read-only")).await;
    let after = server.task(&id, "first question").await;
    let events = server.events_until_task_end(&id, after).await;
    assert_eq!(assistant_texts(&events), ["first answer"]);
    settled_trace(&server.trace(&id)).await;
    let recorded = metas(&server.trace(&id));
    assert_eq!(recorded.len(), 1);
    assert_eq!(recorded[0].launch.api_key_env.as_deref(), Some(KEY_VAR));
    assert_eq!(
        recorded[0].launch.base_url.as_deref(),
        Some(mock.base_url.as_str())
    );
    let dir = server.kill9();

    // No model flag at all: the session comes back with everything it recorded.
    let server = serve(dir, &[]);
    let (status, v) = server
        .call(
            "POST",
            &format!("/v1/sessions/{id}/resume"),
            Some(json!({})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{v}");
    let (status, v) = server
        .call("GET", &format!("/v1/sessions/{id}"), None)
        .await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(v["approval_mode"], "read-only", "{v}");
    let after = server.task(&id, "second question").await;
    let events = server.events_until_task_end(&id, after).await;
    assert_eq!(assistant_texts(&events), ["second answer"]);

    let requests = mock.requests();
    assert_eq!(requests.len(), 2);
    let second = &requests[1];
    assert_eq!(second["model"], "reopen-model");
    let messages = second["messages"].as_array().unwrap();
    assert_eq!(messages[0]["role"], "system");
    assert_eq!(messages[0]["content"], "You are the reopened agent.");
    let said: Vec<&str> = messages
        .iter()
        .filter_map(|m| m["content"].as_str())
        .collect();
    assert!(
        said.contains(&"first question") && said.contains(&"first answer"),
        "the history comes back: {said:?}"
    );
    mock.assert_clean(); // both requests carried the key from the recorded variable
    // Nothing was overridden, so nothing new is recorded.
    assert_eq!(metas(&server.trace(&id)).len(), 1);

    // Without a model the server cannot create sessions; it says so.
    let (status, v) = server
        .call(
            "POST",
            "/v1/sessions",
            Some(json!({"workspace": server.ws()})),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    assert_eq!(v["error"]["code"], "no_model", "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scripted_session_resumes_with_no_flags_and_continues_its_script() {
    let server = Server::start(&json!({"turns": [{"text": "turn one"}, {"text": "turn two"}]}));
    let id = server.create(None).await;
    let after = server.task(&id, "one").await;
    let events = server.events_until_task_end(&id, after).await;
    assert_eq!(assistant_texts(&events), ["turn one"]);
    settled_trace(&server.trace(&id)).await;
    let dir = server.kill9();

    let server = serve(dir, &[]);
    assert!(
        server.stderr().contains("no model configured"),
        "{}",
        server.stderr()
    );
    // Implicit resume: the first request naming the session reopens it.
    let after = server.task(&id, "two").await;
    let events = server.events_until_task_end(&id, after).await;
    assert_eq!(assistant_texts(&events), ["turn two"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_model_overrides_the_recorded_one_and_is_recorded() {
    let server = Server::start(&json!({"turns": [{"text": "from the first script"}]}));
    let id = server.create(None).await;
    let after = server.task(&id, "one").await;
    server.events_until_task_end(&id, after).await;
    settled_trace(&server.trace(&id)).await;
    let dir = server.kill9();

    let other = dir.path().join("other.json");
    std::fs::write(
        &other,
        json!({"turns": [{"text": "other, turn one"}, {"text": "other, turn two"}]}).to_string(),
    )
    .unwrap();
    let server = serve(dir, &["--script", other.to_str().unwrap()]);
    let after = server.task(&id, "two").await;
    let events = server.events_until_task_end(&id, after).await;
    // The session's position carries over: its second request plays the second turn.
    assert_eq!(assistant_texts(&events), ["other, turn two"]);
    settled_trace(&server.trace(&id)).await;
    let recorded = metas(&server.trace(&id));
    assert_eq!(recorded.len(), 2, "the override appends a session_meta");
    assert_eq!(
        recorded[1].launch.script.as_deref(),
        Some(other.to_str().unwrap())
    );
    assert_eq!(
        recorded[1].launch.reopened_with.as_deref(),
        Some(&["model".to_string()][..])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_that_is_neither_object_nor_name_says_what_config_is() {
    let server = Server::start(&json!({"turns": []}));
    let (status, v) = server
        .call(
            "POST",
            "/v1/sessions",
            Some(json!({"workspace": server.ws(), "config": 5})),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{v}");
    let message = v["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("the session's agent config") && message.contains("--config-dir"),
        "{message}"
    );
}

/// A created session survives a `kill -9` of the server right after the `201`: its
/// `session_meta` is in the trace file before the answer, so the next server resumes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_killed_with_its_server_right_after_creation_resumes() {
    let server = Server::start(&json!({"turns": [{"text": "after the crash"}]}));
    let ids = [
        server.create(None).await,
        server.create(None).await,
        server.create(None).await,
    ];
    let dir = server.kill9();
    let server = Server::start_in(dir, None);
    for id in &ids {
        assert_eq!(server.status_of(id).await, "idle", "{id}");
    }
    let after = server.task(&ids[0], "go on").await;
    let events = server.events_until_task_end(&ids[0], after).await;
    assert_eq!(assistant_texts(&events), ["after the crash"]);
}
