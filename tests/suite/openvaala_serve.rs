//! The tool profile through `rookery serve`: `tools_profile` in `POST /v1/sessions` (and its
//! 400 naming an unknown profile), `--tools-profile` as the server's default that the API field
//! overrides, the profile recorded in `session_meta`, and a resumed session keeping it.

use crate::common::serve as harness;

use harness::*;
use reqwest::StatusCode;
use serde_json::{Value, json};

fn script() -> Value {
    json!({"turns": [
        {"tool_calls": [{"name": "bash", "arguments": {"command": "echo served"}}]},
        {"text": "done"},
        {"tool_calls": [{"name": "bash", "arguments": {"command": "echo resumed"}}]},
        {"text": "done again"}
    ]})
}

/// The `tool_profile` of the trace's first `session_meta` and the tool names of its first
/// `tool_list_ready`.
async fn profile_and_tools(server: &Server, id: &str) -> (String, Vec<String>) {
    settled_trace(&server.trace(id)).await;
    let text = std::fs::read_to_string(server.trace(id)).unwrap();
    let records: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let meta = records
        .iter()
        .find(|r| r["type"] == "session_meta")
        .expect("session_meta");
    let tools = records
        .iter()
        .find(|r| r["payload"]["type"] == "tool_list_ready")
        .expect("tool_list_ready");
    let names = tools["payload"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    (
        meta["payload"]["tool_profile"]
            .as_str()
            .unwrap_or("")
            .to_string(),
        names,
    )
}

async fn create(server: &Server, profile: Option<&str>) -> (StatusCode, Value) {
    let mut body = json!({"workspace": server.ws()});
    if let Some(p) = profile {
        body["tools_profile"] = json!(p);
    }
    server.call("POST", "/v1/sessions", Some(body)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_field_picks_the_profile_and_an_unknown_one_is_400() {
    let server = Server::start(&script());
    let (s, v) = create(&server, Some("openvaala")).await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    let id = v["session_id"].as_str().unwrap().to_string();
    server.task(&id, "go").await;
    let (profile, tools) = profile_and_tools(&server, &id).await;
    assert_eq!(profile, "openvaala");
    assert_eq!(
        tools,
        [
            "read_file",
            "apply_patch",
            "bash",
            "read_command_output",
            "write_stdin",
            "stop_command",
            "list_commands",
            "spawn_agent",
            "send_message",
            "wait_agent",
            "interrupt_agent",
            "list_agents",
            "read_session_history"
        ]
    );
    let events = std::fs::read_to_string(server.trace(&id)).unwrap();
    assert!(events.contains("status: exited\\nexit_code: 0"), "{events}");

    let (s, v) = create(&server, Some("vaala")).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
    assert_eq!(v["error"]["code"], "invalid_tools_profile");
    let message = v["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("unknown tool profile \"vaala\""),
        "{message}"
    );

    // Without the field: the server's default, penguin.
    let (_, v) = create(&server, None).await;
    let id = v["session_id"].as_str().unwrap().to_string();
    server.task(&id, "go").await;
    let (profile, tools) = profile_and_tools(&server, &id).await;
    assert_eq!(profile, "penguin");
    assert!(tools.contains(&"exec_command".to_string()), "{tools:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_flag_sets_the_default_the_field_overrides_and_resume_keeps_it() {
    let server = Server::start_with(sandbox(&script()), None, &["--tools-profile", "openvaala"]);
    let (_, v) = create(&server, None).await;
    let id = v["session_id"].as_str().unwrap().to_string();
    server.task(&id, "go").await;
    assert_eq!(profile_and_tools(&server, &id).await.0, "openvaala");

    let (_, v) = create(&server, Some("penguin")).await;
    let other = v["session_id"].as_str().unwrap().to_string();
    server.task(&other, "go").await;
    assert_eq!(profile_and_tools(&server, &other).await.0, "penguin");

    // Closed and resumed through the API without the field: it keeps its recorded penguin
    // profile over the server's openvaala default, so its next `bash` call is an unknown tool.
    let (s, _) = server
        .call("DELETE", &format!("/v1/sessions/{other}"), None)
        .await;
    assert!(s.is_success());
    let (s, v) = server
        .call("POST", &format!("/v1/sessions/{other}/resume"), None)
        .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    server.task(&other, "again").await;
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let text = std::fs::read_to_string(server.trace(&other)).unwrap();
        if text.contains("done again") {
            assert!(!text.contains("status: exited"), "{text}");
            assert!(text.contains("Unknown tool: bash"), "{text}");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{text}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}
