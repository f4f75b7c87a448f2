//! `rookery run` against an OpenAI-compatible server on 127.0.0.1: the provider flags, the
//! config's `model:` section, the API key from an environment variable, and a 401 that ends the
//! run after one request.

use crate::common::openai_mock;

use std::process::Stdio;

use openai_mock::{Mock, Reply, split};

const WRITE_CALL: &str = concat!(
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"index\":0,\"id\":\"call_w1\",\"type\":\"function\",\"function\":{\"name\":\"write_file\",\"arguments\":\"\"}}]},\"finish_reason\":null}]}\n\n",
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"file_path\\\":\\\"out.txt\\\",\\\"content\\\":\\\"hello\\\\n\\\"}\"}}]},\"finish_reason\":null}]}\n\n",
    "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n",
    "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":40,\"completion_tokens\":20,\"total_tokens\":60}}\n\n",
    "data: [DONE]\n\n",
);

const TEXT_ANSWER: &str = concat!(
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"all done\"},\"finish_reason\":null}]}\n\n",
    "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
    "data: [DONE]\n\n",
);

async fn rookery(args: &[&str], envs: &[(&str, &str)]) -> (i32, String, String, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_rookery"));
    // A user config of the real $HOME must not change the test.
    cmd.env("ROOKERY_NO_CONFIG", "1");
    cmd.arg("run")
        .arg("--workspace")
        .arg(&ws)
        .arg("--home")
        .arg(dir.path().join("home"))
        .args(args)
        .env("HOME", dir.path())
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_with_provider_flags_drives_the_loop_with_a_bearer_key() {
    let mock = Mock::start(
        vec![
            Reply::Sse(split(WRITE_CALL, 40)),
            Reply::Sse(split(TEXT_ANSWER, 30)),
        ],
        Some("Bearer sk-cli-test".to_string()),
    )
    .await;
    let (code, stdout, stderr, dir) = rookery(
        &[
            "--provider",
            "openai",
            "--base-url",
            &mock.base_url,
            "--model",
            "gpt-test",
            "--api-key-env",
            "ROOKERY_CLI_KEY",
            "write it",
        ],
        &[("ROOKERY_CLI_KEY", "sk-cli-test")],
    )
    .await;
    assert_eq!(code, 0, "stdout: {stdout}\nstderr: {stderr}");
    assert!(stdout.contains("all done"));
    assert_eq!(
        std::fs::read_to_string(dir.path().join("ws/out.txt")).unwrap(),
        "hello\n"
    );
    assert_eq!(mock.requests().len(), 2);
    assert_eq!(mock.requests()[0]["model"], "gpt-test");
    mock.assert_clean();
    // The key never reaches the trace.
    let traces = dir.path().join("home/traces");
    for day in std::fs::read_dir(traces).unwrap() {
        for f in std::fs::read_dir(day.unwrap().path()).unwrap() {
            let text = std::fs::read_to_string(f.unwrap().path()).unwrap();
            assert!(!text.contains("sk-cli-test"));
            assert!(
                text.contains("\"provider\":\"openai\",\"model_id\":\"gpt-test\""),
                "{text}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_model_section_and_401() {
    let mock = Mock::start(
        vec![Reply::Status(
            401,
            r#"{"error":{"message":"bad key"}}"#.into(),
            None,
        )],
        None,
    )
    .await;
    let cfg_dir = tempfile::tempdir().unwrap();
    let cfg = cfg_dir.path().join("agent.yaml");
    std::fs::write(
        &cfg,
        format!(
            "model:\n  provider: openai\n  base_url: {}\n  model: from-config\n  api_key_env: ROOKERY_UNSET_KEY_VAR\n  temperature: 0.2\n",
            mock.base_url
        ),
    )
    .unwrap();
    let (code, _stdout, stderr, _dir) =
        rookery(&["--config", cfg.to_str().unwrap(), "hi"], &[]).await;
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(mock.requests().len(), 1, "auth errors are final");
    assert_eq!(mock.requests()[0]["model"], "from-config");
    assert_eq!(mock.requests()[0]["temperature"], 0.2);
    mock.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provider_flag_errors_exit_2() {
    // OpenAI's endpoint is the default; the model is not.
    let (code, _, stderr, _d) = rookery(&["--provider", "openai", "hi"], &[]).await;
    assert_eq!(code, 2);
    assert!(
        stderr.contains("--provider openai needs --model"),
        "{stderr}"
    );
    let (code, _, stderr, _d) =
        rookery(&["--script", "x.json", "--provider", "openai", "hi"], &[]).await;
    assert_eq!(code, 2);
    assert!(stderr.contains("either --script or --provider"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_model_section_may_leave_base_url_to_the_flag() {
    let mock = Mock::start(vec![Reply::Sse(split(TEXT_ANSWER, 30))], None).await;
    let cfg_dir = tempfile::tempdir().unwrap();
    let cfg = cfg_dir.path().join("agent.yaml");
    std::fs::write(
        &cfg,
        "model:\n  provider: vllm\n  model: qwen\n  api_key_env: ROOKERY_UNSET_KEY_VAR\n  reasoning_effort: low\n",
    )
    .unwrap();
    let config = cfg.to_str().unwrap();
    let (code, stdout, stderr, _dir) = rookery(
        &["--config", config, "--base-url", &mock.base_url, "hi"],
        &[],
    )
    .await;
    assert_eq!(code, 0, "stdout: {stdout}\nstderr: {stderr}");
    assert!(stdout.contains("all done"), "{stdout}");
    let requests = mock.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0]["model"], "qwen");
    assert_eq!(requests[0]["reasoning_effort"], "low");
    mock.assert_clean();
    // Without the flag the merged model still needs a base URL.
    let (code, _, stderr, _dir) = rookery(&["--config", config, "hi"], &[]).await;
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("--provider vllm needs --base-url and --model"),
        "{stderr}"
    );
}

/// A config file whose content is wrong is named in the error (`invalid config <file>: …`), for
/// its YAML, `tools.max_parallel`, the `model:`, `models:` and `agents:` sections; a wrong
/// `compaction:` keeps its own text.
#[tokio::test]
async fn config_file_content_errors_name_the_file() {
    let cfg_dir = tempfile::tempdir().unwrap();
    let cfg = cfg_dir.path().join("agent.yaml");
    let path = cfg.display().to_string();
    let cases = [
        (
            "tools:\n  max_parallel: 0\n",
            format!(
                "invalid config {path}: tools.max_parallel must be a whole number of at least 1 (got 0)"
            ),
        ),
        (
            "model:\n  provider: vllm\n  base_url: ftp://x\n",
            format!(
                "invalid config {path}: model.base_url must start with http:// or https:// (got \"ftp://x\")"
            ),
        ),
        (
            "model:\n  provider: vllm\n  context_window: 0\n",
            format!("invalid config {path}: model.context_window must be at least 1"),
        ),
        (
            "models:\n  small:\n    provider: vllm\n    idle_timeout_ms: 0\n",
            format!(
                "invalid config {path}: models.small: model.idle_timeout_ms must be at least 1"
            ),
        ),
        (
            "agents:\n  helper:\n    tools: [nope]\n",
            format!("invalid config {path}: agents.helper.tools: unknown tool \"nope\""),
        ),
        (
            "compaction:\n  max_context: 0\n",
            "compaction.max_context must be a whole number of at least 1 (got 0)".to_string(),
        ),
    ];
    for (yaml, expected) in cases {
        std::fs::write(&cfg, yaml).unwrap();
        let (code, _, stderr, _dir) = rookery(&["--config", &path, "hi"], &[]).await;
        assert_eq!(code, 2, "{yaml}: {stderr}");
        let line = format!("rookery: {expected}");
        assert!(stderr.lines().any(|l| l == line), "{yaml}: {stderr}");
    }
    std::fs::write(&cfg, "tools: [unclosed\n").unwrap();
    let (code, _, stderr, _dir) = rookery(&["--config", &path, "hi"], &[]).await;
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains(&format!("rookery: invalid config {path}: ")),
        "{stderr}"
    );
}
