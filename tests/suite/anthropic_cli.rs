//! `rookery run --provider anthropic` and a config `model: {provider: anthropic, …}` section
//! against a loopback Messages API server: a tool call round trip through the real binary, the
//! default key variable, max_tokens / thinking from the config, and flag errors.

use crate::common::anthropic_mock;

use std::process::Stdio;

use anthropic_mock::rules::check_request;
use anthropic_mock::{Reply, Server, Writes, fixture};
use serde_json::json;

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
    // A user config of the real $HOME must not change the test.
    cmd.env("ROOKERY_NO_CONFIG", "1");
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
