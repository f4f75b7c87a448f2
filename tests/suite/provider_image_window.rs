//! The 20-image window of a request through the real binary on both HTTP providers: after a
//! turn that read one image and a turn that read 20 more, the next request body the loopback
//! server receives carries only the 20 most recent images, and the oldest output says one was
//! removed.

use crate::common::{anthropic_mock, openai_mock};

use std::process::Stdio;

use serde_json::json;

/// Images read by the first turn and by the second.
const FIRST: usize = 1;
const SECOND: usize = 20;
const NOTE: &str = "[1 image(s) removed from this request: only the 20 most recent images are kept";

async fn rookery(
    dir: &tempfile::TempDir,
    config: &str,
    envs: &[(&str, &str)],
) -> (i32, String, String) {
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("img.png"), openai_mock::png(4, 3)).unwrap();
    let cfg = dir.path().join("agent.yaml");
    std::fs::write(&cfg, config).unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_rookery"));
    // A user config of the real $HOME must not change the test.
    cmd.env("ROOKERY_NO_CONFIG", "1");
    cmd.arg("run")
        .arg("--workspace")
        .arg(&ws)
        .arg("--home")
        .arg(dir.path().join("rookery"))
        .arg("--config")
        .arg(&cfg)
        .arg("look at the image")
        .env("HOME", &home)
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
    )
}

/// How many data-URL images an OpenAI-compatible request body carries.
fn images(body: &str) -> usize {
    body.matches("data:image/").count()
}

/// How many base64 image blocks an Anthropic request body carries.
fn image_blocks(body: &serde_json::Value) -> usize {
    body.to_string()
        .matches(r#""media_type":"image/png""#)
        .count()
}

/// `n` `read_image` calls of one OpenAI-compatible answer, ids `call_<turn>_<i>`.
fn openai_calls(turn: usize, n: usize) -> String {
    let mut sse = String::new();
    for i in 0..n {
        let chunk = json!({"choices": [{"index": 0, "delta": {"role": "assistant", "tool_calls": [{
            "index": i, "id": format!("call_{turn}_{i}"), "type": "function",
            "function": {"name": "read_image", "arguments": "{\"source\":\"img.png\"}"}}]},
            "finish_reason": null}]});
        sse.push_str(&format!("data: {chunk}\n\n"));
    }
    sse.push_str(
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n",
    );
    sse.push_str("data: [DONE]\n\n");
    sse
}

const OPENAI_TEXT: &str = concat!(
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"seen\"},\"finish_reason\":null}]}\n\n",
    "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
    "data: [DONE]\n\n",
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_requests_carry_only_the_20_most_recent_images() {
    use openai_mock::{Mock, Reply, split};
    let mock = Mock::start(
        vec![
            Reply::Sse(split(&openai_calls(1, FIRST), 200)),
            Reply::Sse(split(&openai_calls(2, SECOND), 200)),
            Reply::Sse(split(OPENAI_TEXT, 200)),
        ],
        None,
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let config = format!(
        "model:\n  provider: openai\n  base_url: {}\n  model: gpt-vision\n  api_key_env: ROOKERY_UNSET_KEY_VAR\n  vision: true\n",
        mock.base_url
    );
    let (code, stdout, stderr) = rookery(&dir, &config, &[]).await;
    assert_eq!(code, 0, "stdout: {stdout}\nstderr: {stderr}");
    mock.assert_clean();
    let requests = mock.requests();
    assert_eq!(requests.len(), 3);
    let bodies: Vec<String> = requests.iter().map(|r| r.to_string()).collect();
    assert_eq!(images(&bodies[1]), FIRST, "{}", bodies[1]);
    assert_eq!(images(&bodies[2]), 20, "the window holds 20 images");
    // The first turn's output lost its image and says so; the 20 later ones kept theirs.
    let messages = requests[2]["messages"].as_array().unwrap();
    let first = messages
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == "call_1_0")
        .unwrap();
    assert!(first.to_string().contains(NOTE), "{first}");
    assert_eq!(bodies[2].matches(NOTE).count(), 1, "{}", bodies[2]);
}

fn anthropic_calls(turn: usize, n: usize) -> Vec<u8> {
    let mut sse = String::from(
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":40,\"output_tokens\":1}}}\n\n",
    );
    for i in 0..n {
        let start = json!({"type": "content_block_start", "index": i, "content_block":
            {"type": "tool_use", "id": format!("toolu_{turn}_{i}"), "name": "read_image", "input": {}}});
        let delta = json!({"type": "content_block_delta", "index": i, "delta":
            {"type": "input_json_delta", "partial_json": "{\"source\": \"img.png\"}"}});
        let stop = json!({"type": "content_block_stop", "index": i});
        sse.push_str(&format!(
            "event: content_block_start\ndata: {start}\n\nevent: content_block_delta\ndata: {delta}\n\nevent: content_block_stop\ndata: {stop}\n\n"
        ));
    }
    sse.push_str("event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":20}}\n\n");
    sse.push_str("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n");
    sse.into_bytes()
}

const ANTHROPIC_TEXT: &str = concat!(
    "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":70,\"output_tokens\":1}}}\n\n",
    "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"seen\"}}\n\n",
    "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
    "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":3}}\n\n",
    "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_requests_carry_only_the_20_most_recent_images() {
    use anthropic_mock::{Reply, Server, Writes};
    let server = Server::start(vec![
        Reply::Sse(anthropic_calls(1, FIRST), Writes::One),
        Reply::Sse(anthropic_calls(2, SECOND), Writes::One),
        Reply::Sse(ANTHROPIC_TEXT.as_bytes().to_vec(), Writes::One),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let config = format!(
        "model:\n  provider: anthropic\n  base_url: {}\n  model: claude-test\n  api_key_env: ROOKERY_TEST_WINDOW_KEY\n  vision: true\n",
        server.base_url
    );
    let (code, stdout, stderr) =
        rookery(&dir, &config, &[("ROOKERY_TEST_WINDOW_KEY", "sk-ant-w")]).await;
    assert_eq!(code, 0, "stdout: {stdout}\nstderr: {stderr}");
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(
        image_blocks(&requests[1].body),
        FIRST,
        "{}",
        requests[1].body
    );
    assert_eq!(
        image_blocks(&requests[2].body),
        20,
        "the window holds 20 images"
    );
    let last = requests[2].body.to_string();
    assert_eq!(last.matches(NOTE).count(), 1, "{last}");
}
