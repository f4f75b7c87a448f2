//! Configured agents and models: a scripted parent spawns children on a named agent / model of
//! its config, served by a loopback OpenAI-compatible mock; `reasoning_effort` arrives as a
//! top-level request field; unknown names are errors the model reads.

use crate::common;
use crate::common::openai_mock;

use common::*;
use openai_mock::{Mock, Reply};
use rookery::Host;
use rookery::config::AgentConfig;
use rookery::message::StopReason;
use rookery::tools::profile::ToolProfile;
use serde_json::{Value, json};

const TEXT_ANSWER: &str = concat!(
    "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"child says hi\"},\"finish_reason\":null}]}\n\n",
    "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
    "data: [DONE]\n\n",
);

fn config(base_url: &str) -> AgentConfig {
    AgentConfig::from_yaml(&format!(
        "models:\n  fast:\n    provider: openai\n    base_url: {base_url}\n    model: mini\n    api_key_env: ROOKERY_TEST_UNSET_KEY_VAR\nagents:\n  reader:\n    system_prompt: only read\n    tools: [read_file]\n    model: fast\n"
    ))
    .unwrap()
}

fn call(name: &str, args: Value) -> Value {
    json!({"name": name, "arguments": args})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spawn_agent_uses_the_configured_agent_model_and_reasoning_effort() {
    let mock = Mock::start(vec![Reply::Sse(vec![TEXT_ANSWER.to_string()])], None).await;
    let (_d, ws, home) = tempdirs();
    let model = Recording::new(scripted(json!({"turns": [
        {"tool_calls": [call("spawn_agent", json!({"task_name": "r", "message": "read it", "agent_name": "reader", "reasoning_effort": "high"}))]},
        {"tool_calls": [call("wait_agent", json!({"timeout_seconds": 30}))]},
        {"tool_calls": [
            call("spawn_agent", json!({"task_name": "x", "message": "m", "model": "huge"})),
            call("spawn_agent", json!({"task_name": "x", "message": "m", "agent_name": "writer"}))]},
        {"text": "done"}]})));
    let mut o = options(&ws, model.clone());
    o.config = config(&mock.base_url);
    o.config.retry = fast_retry(0);
    o.config.set_profile(ToolProfile::OpenVaala).unwrap();
    let host = Host::start(&home).await.unwrap();
    let s = host.create_session(o).await.unwrap();
    assert_eq!(
        s.run_task("go").await.unwrap().status,
        StopReason::Completed
    );
    let reqs = model.requests();
    let spawned = &outputs(&reqs[1])[0].0;
    assert!(
        spawned.contains("agent: reader\nmodel: openai/mini"),
        "{spawned}"
    );
    let report = &reqs[2];
    assert!(
        format!("{report:?}").contains("child says hi"),
        "the report carries the child's answer"
    );
    let errs = outputs(&reqs[3]);
    assert_eq!(
        errs[2],
        (
            "[spawn_agent error: unknown model \"huge\" (configured models: fast (openai/mini); or give provider/model of one of them)]".to_string(),
            StopReason::Failed
        )
    );
    assert_eq!(
        errs[3].0,
        "[spawn_agent error: unknown agent \"writer\" (configured agents: reader)]"
    );
    let body = &mock.requests()[0];
    assert_eq!(body["model"], "mini");
    assert_eq!(body["reasoning_effort"], "high");
    assert_eq!(body["messages"][0]["content"], "only read");
    let mut tools: Vec<String> = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_string())
        .collect();
    tools.sort();
    assert_eq!(tools, vec!["read_file", "send_message", "wait_agent"]);
    mock.assert_clean();
    s.close().await.unwrap();
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_subagent_takes_provider_and_model_id_of_a_configured_model() {
    let mock = Mock::start(vec![Reply::Sse(vec![TEXT_ANSWER.to_string()])], None).await;
    let (_d, ws, home) = tempdirs();
    let model = Recording::new(scripted(json!({"turns": [
        {"tool_calls": [call("run_subagent", json!({"description": "d", "prompt": "hello", "provider": "openai", "model_id": "mini", "thinking_level": "low"}))]},
        {"tool_calls": [
            call("run_subagent", json!({"description": "d", "prompt": "p", "provider": "openai"})),
            call("run_subagent", json!({"description": "d", "prompt": "p", "provider": "openai", "model_id": "gpt-9"})),
            call("run_subagent", json!({"description": "d", "prompt": "p", "agent_id": "ghost"}))]},
        {"text": "done"}]})));
    let mut o = options(&ws, model.clone());
    o.config = config(&mock.base_url);
    o.config.retry = fast_retry(0);
    let host = Host::start(&home).await.unwrap();
    let s = host.create_session(o).await.unwrap();
    assert_eq!(
        s.run_task("go").await.unwrap().status,
        StopReason::Completed
    );
    let reqs = model.requests();
    assert_eq!(outputs(&reqs[1])[0].0, "child says hi");
    let errs = outputs(&reqs[2]);
    assert!(
        errs[1]
            .0
            .contains("`model_id` and `provider` must be given together"),
        "{errs:?}"
    );
    assert!(
        errs[2]
            .0
            .starts_with("[run_subagent error: unknown model \"openai/gpt-9\""),
        "{errs:?}"
    );
    assert_eq!(
        errs[3].0,
        "[run_subagent error: subagent error: agent \"ghost\" does not exist or is not accessible]"
    );
    let body = &mock.requests()[0];
    assert_eq!(
        (body["model"].clone(), body["reasoning_effort"].clone()),
        (json!("mini"), json!("low"))
    );
    mock.assert_clean();
    s.close().await.unwrap();
    host.shutdown().await;
}

#[test]
fn an_agent_naming_an_unknown_model_or_tool_is_a_config_error() {
    let e = AgentConfig::from_yaml("agents:\n  a:\n    model: nope\n")
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(e.contains("agents.a.model: unknown model \"nope\""), "{e}");
    let e = AgentConfig::from_yaml("agents:\n  a:\n    tools: [read_fiel]\n")
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        e.contains("agents.a.tools: unknown tool \"read_fiel\""),
        "{e}"
    );
}
