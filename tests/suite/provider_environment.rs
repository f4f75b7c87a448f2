//! The providers' environment through the binary, against real loopback servers:
//! `OPENAI_BASE_URL` and `ANTHROPIC_BASE_URL` name the endpoint (the flag wins), `--base-url`
//! alone means an OpenAI-compatible server, `--provider openai` defaults to OpenAI's public
//! endpoint and a missing key for it gets one notice before the first request, and
//! `HTTPS_PROXY`/`NO_PROXY` are honoured (a loopback proxy records what it was asked).

use crate::common::anthropic_mock;
use crate::common::openai_mock::{Mock, Reply, split};

use std::process::Stdio;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

const TEXT_ANSWER: &str = concat!(
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"all done\"},\"finish_reason\":null}]}\n\n",
    "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
    "data: [DONE]\n\n",
);

const CLAUDE_ANSWER: &str = concat!(
    "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":70,\"output_tokens\":1}}}\n\n",
    "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"claude here\"}}\n\n",
    "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
    "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":3}}\n\n",
    "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
);

/// Every variable these tests set, removed from the inherited environment first.
const PROVIDER_VARS: &[&str] = &[
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "HTTPS_PROXY",
    "https_proxy",
    "HTTP_PROXY",
    "http_proxy",
    "ALL_PROXY",
    "all_proxy",
    "NO_PROXY",
    "no_proxy",
];

struct Ran {
    code: i32,
    stdout: String,
    stderr: String,
    _dir: tempfile::TempDir,
}

/// `rookery run --workspace W --home H <args>` with `envs` and no provider variable else.
async fn rookery(args: &[&str], envs: &[(&str, &str)]) -> Ran {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    // No reconnects: a refused request ends the task at once.
    let config = dir.path().join("agent.yaml");
    std::fs::write(&config, "retry:\n  max_retries: 0\n").unwrap();
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_rookery"));
    // A user config of the real $HOME must not change the test.
    cmd.env("ROOKERY_NO_CONFIG", "1");
    cmd.arg("run")
        .arg("--workspace")
        .arg(&ws)
        .arg("--home")
        .arg(dir.path().join("home"))
        .arg("--config")
        .arg(&config)
        .args(args)
        .env("HOME", dir.path())
        .stdin(Stdio::null());
    for var in PROVIDER_VARS {
        cmd.env_remove(var);
    }
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let out = cmd.output().await.unwrap();
    Ran {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        _dir: dir,
    }
}

/// A loopback HTTP proxy that refuses everything (403) and records each request line.
struct Proxy {
    url: String,
    seen: Arc<Mutex<Vec<String>>>,
}

impl Proxy {
    async fn start() -> Proxy {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        tokio::spawn(async move {
            while let Ok((mut sock, _)) = listener.accept().await {
                let log = log.clone();
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut buf = [0u8; 4096];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                        match sock.read(&mut buf).await {
                            Ok(0) | Err(_) => break,
                            Ok(n) => head.extend_from_slice(&buf[..n]),
                        }
                    }
                    let text = String::from_utf8_lossy(&head);
                    log.lock()
                        .unwrap()
                        .push(text.lines().next().unwrap_or("").to_string());
                    let _ = sock
                        .write_all(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                        .await;
                });
            }
        });
        Proxy { url, seen }
    }

    fn seen(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_base_url_names_the_endpoint_and_the_flag_wins() {
    let from_env = Mock::start(vec![Reply::Sse(split(TEXT_ANSWER, 30))], None).await;
    // No --provider, no --base-url: OPENAI_BASE_URL with --model means OpenAI's client.
    let ran = rookery(
        &["--model", "env-model", "hi"],
        &[("OPENAI_BASE_URL", &from_env.base_url)],
    )
    .await;
    assert_eq!(ran.code, 0, "{}\n{}", ran.stdout, ran.stderr);
    assert!(ran.stdout.contains("all done"), "{}", ran.stdout);
    assert_eq!(from_env.requests().len(), 1);
    assert_eq!(from_env.requests()[0]["model"], "env-model");
    // A local server needs no key: no notice.
    assert!(!ran.stderr.contains("note:"), "{}", ran.stderr);
    from_env.assert_clean();

    let from_flag = Mock::start(
        vec![Reply::Sse(split(TEXT_ANSWER, 30))],
        Some("Bearer sk-env-key".into()),
    )
    .await;
    let ran = rookery(
        &[
            "--provider",
            "openai",
            "--base-url",
            &from_flag.base_url,
            "--model",
            "m",
            "hi",
        ],
        &[
            ("OPENAI_BASE_URL", &from_env.base_url),
            ("OPENAI_API_KEY", "sk-env-key"),
        ],
    )
    .await;
    assert_eq!(ran.code, 0, "{}\n{}", ran.stdout, ran.stderr);
    assert_eq!(from_flag.requests().len(), 1, "the flag wins");
    assert_eq!(
        from_env.requests().len(),
        1,
        "nothing more went to the variable's URL"
    );
    from_flag.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn base_url_alone_means_an_openai_compatible_server() {
    let mock = Mock::start(vec![Reply::Sse(split(TEXT_ANSWER, 30))], None).await;
    let ran = rookery(
        &[
            "--json",
            "--base-url",
            &mock.base_url,
            "--model",
            "local",
            "hi",
        ],
        &[],
    )
    .await;
    assert_eq!(ran.code, 0, "{}\n{}", ran.stdout, ran.stderr);
    let meta: serde_json::Value = serde_json::from_str(ran.stdout.lines().next().unwrap()).unwrap();
    assert_eq!(meta["payload"]["provider"], "openai", "{meta}");
    assert_eq!(mock.requests().len(), 1);
    assert!(!ran.stderr.contains("note:"), "{}", ran.stderr);
    mock.assert_clean();
    // `--model` alone still says what it lacks.
    let ran = rookery(&["--model", "local", "hi"], &[]).await;
    assert_eq!(ran.code, 2, "{}", ran.stderr);
    assert!(
        ran.stderr.contains("--model needs --provider"),
        "{}",
        ran.stderr
    );
    let ran = rookery(&["--provider", "openai", "hi"], &[]).await;
    assert_eq!(ran.code, 2, "{}", ran.stderr);
    assert!(
        ran.stderr.contains("--provider openai needs --model"),
        "{}",
        ran.stderr
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_base_url_and_key_come_from_the_environment() {
    let server = anthropic_mock::Server::start(vec![anthropic_mock::Reply::Sse(
        CLAUDE_ANSWER.as_bytes().to_vec(),
        anthropic_mock::Writes::One,
    )])
    .await;
    let ran = rookery(
        &["--provider", "anthropic", "--model", "claude-env", "hi"],
        &[
            ("ANTHROPIC_BASE_URL", &server.base_url),
            ("ANTHROPIC_API_KEY", "sk-ant-env"),
        ],
    )
    .await;
    assert_eq!(ran.code, 0, "{}\n{}", ran.stdout, ran.stderr);
    assert!(ran.stdout.contains("claude here"), "{}", ran.stdout);
    let seen = server.requests();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].path, "/v1/messages");
    assert_eq!(seen[0].headers["x-api-key"], "sk-ant-env");
    assert_eq!(seen[0].body["model"], "claude-env");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_defaults_to_its_public_endpoint_with_a_notice_for_a_missing_key() {
    let proxy = Proxy::start().await;
    let ran = rookery(
        &["--provider", "openai", "--model", "gpt-test", "hi"],
        &[("HTTPS_PROXY", &proxy.url)],
    )
    .await;
    // The proxy refused the tunnel: the task failed, after one attempt.
    assert_eq!(ran.code, 1, "{}\n{}", ran.stdout, ran.stderr);
    assert_eq!(proxy.seen(), vec!["CONNECT api.openai.com:443 HTTP/1.1"]);
    let first = ran.stderr.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("rookery: note: $OPENAI_API_KEY is not set (or empty): requests to https://api.openai.com/v1 carry no API key"),
        "{}",
        ran.stderr
    );
    assert_eq!(ran.stderr.matches("note:").count(), 1, "{}", ran.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_proxy_variables_are_honoured_and_no_proxy_bypasses() {
    let proxy = Proxy::start().await;
    let mock = Mock::start(vec![Reply::Sse(split(TEXT_ANSWER, 30))], None).await;
    let args = ["--base-url", mock.base_url.as_str(), "--model", "m", "hi"];
    let through_proxy = [("HTTP_PROXY", proxy.url.as_str())];
    let ran = rookery(&args, &through_proxy).await;
    assert_eq!(ran.code, 1, "{}\n{}", ran.stdout, ran.stderr);
    let seen = proxy.seen();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert!(
        seen[0].starts_with(&format!("POST {}/chat/completions ", mock.base_url)),
        "{seen:?}"
    );
    assert!(mock.requests().is_empty());

    let bypass = [
        ("HTTP_PROXY", proxy.url.as_str()),
        ("NO_PROXY", "127.0.0.1"),
    ];
    let ran = rookery(&args, &bypass).await;
    assert_eq!(ran.code, 0, "{}\n{}", ran.stdout, ran.stderr);
    assert_eq!(proxy.seen().len(), 1, "NO_PROXY went around the proxy");
    assert_eq!(mock.requests().len(), 1);
    mock.assert_clean();
}
