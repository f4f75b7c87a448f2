use std::sync::Arc;

use serde_json::{Value, json};

use super::*;

fn text(role: Role, t: &str) -> ModelPayload {
    ModelPayload::Text {
        role,
        text: t.into(),
        sender: None,
        stop_reason: StopReason::Completed,
        fidelity: None,
    }
}

fn call(id: &str, name: &str, args: &str) -> ModelPayload {
    ModelPayload::ToolCall {
        role: Role::Assistant,
        name: name.into(),
        arguments: args.into(),
        tool_call_id: id.into(),
        stop_reason: StopReason::Completed,
        fidelity: None,
    }
}

fn output(id: &str, out: &str, status: StopReason, images: &[&str]) -> ModelPayload {
    ModelPayload::ToolCallOutput {
        role: Role::User,
        output: out.into(),
        images: images.iter().map(|s| s.to_string()).collect(),
        tool_call_id: id.into(),
        stop_reason: status,
    }
}

fn thinking(t: &str, signature: &str) -> ModelPayload {
    let mut f = Fidelity::new();
    f.insert(FIDELITY_KEY.into(), json!({"signature": signature}));
    ModelPayload::Thinking {
        role: Role::Assistant,
        thinking: t.into(),
        stop_reason: StopReason::Completed,
        fidelity: Some(f),
    }
}

fn redacted(data: &str) -> ModelPayload {
    ModelPayload::InlineThinking {
        role: Role::Assistant,
        data: data.into(),
        mime_type: REDACTED_THINKING_MIME.into(),
        stop_reason: StopReason::Completed,
        fidelity: None,
    }
}

fn request(history: Vec<ModelPayload>) -> ModelRequest {
    ModelRequest {
        system_prompt: Arc::from("sys"),
        history: Arc::new(history),
        tools: Arc::new(vec![
            json!({"name": "exec_command", "description": "run", "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}}}),
            json!({"name": "bare"}),
        ]),
    }
}

fn extra() -> Map<String, Value> {
    checked_extra(&Map::new()).unwrap()
}

fn count_breakpoints(v: &Value) -> usize {
    match v {
        Value::Object(m) => {
            usize::from(m.contains_key("cache_control"))
                + m.values().map(count_breakpoints).sum::<usize>()
        }
        Value::Array(a) => a.iter().map(count_breakpoints).sum(),
        _ => 0,
    }
}

#[test]
fn a_tool_round_trip_maps_to_messages() {
    let history = vec![
        text(Role::User, "list and fail"),
        thinking("I should run two commands.", "sig-1"),
        redacted("opaque=="),
        text(Role::Assistant, "Running."),
        call("toolu_a", "exec_command", r#"{"cmd":"ls"}"#),
        call("toolu_b#2", "exec_command", r#"{"cmd":"false"}"#),
        output("toolu_b#2", "exit 1", StopReason::Failed, &[]),
        output("toolu_a", "a.txt", StopReason::Completed, &[]),
        text(Role::User, "and then?"),
    ];
    let body = build_body("claude-x", &request(history), true, &extra());
    assert_eq!(body["model"], "claude-x");
    assert_eq!(body["stream"], true);
    assert_eq!(body["max_tokens"], 8192);
    assert_eq!(
        body["system"],
        json!([{"type": "text", "text": "sys", "cache_control": {"type": "ephemeral"}}])
    );
    assert_eq!(
        body["tools"],
        json!([
            {"name": "exec_command", "description": "run", "input_schema": {"type": "object", "properties": {"cmd": {"type": "string"}}}},
            {"name": "bare", "input_schema": {"type": "object", "properties": {}}},
        ])
    );
    assert_eq!(
        body["messages"],
        json!([
            {"role": "user", "content": [{"type": "text", "text": "list and fail"}]},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "I should run two commands.", "signature": "sig-1"},
                {"type": "redacted_thinking", "data": "opaque=="},
                {"type": "text", "text": "Running."},
                {"type": "tool_use", "id": "toolu_a", "name": "exec_command", "input": {"cmd": "ls"}},
                {"type": "tool_use", "id": "toolu_b_2", "name": "exec_command", "input": {"cmd": "false"}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_a", "content": [{"type": "text", "text": "a.txt"}]},
                {"type": "tool_result", "tool_use_id": "toolu_b_2", "content": [{"type": "text", "text": "exit 1"}], "is_error": true},
                {"type": "text", "text": "and then?", "cache_control": {"type": "ephemeral"}},
            ]},
        ])
    );
    assert_eq!(count_breakpoints(&body), 2);
}

#[test]
fn images_missing_outputs_and_odd_arguments() {
    let history = vec![
        text(Role::User, "look"),
        ModelPayload::ImageUrl {
            role: Role::User,
            image_url: "data:image/png;base64,AAAA".into(),
            stop_reason: StopReason::Completed,
        },
        call("c1", "exec_command", ""),
        call("c2", "exec_command", "not json"),
        output("c1", "", StopReason::Completed, &["https://x.test/a.png"]),
    ];
    let body = build_body("m", &request(history.clone()), true, &extra());
    let m = &body["messages"];
    assert_eq!(
        m[0]["content"][1],
        json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}})
    );
    assert_eq!(m[1]["content"][0]["input"], json!({}));
    assert_eq!(
        m[1]["content"][1]["input"],
        json!({"_raw_arguments": "not json"})
    );
    assert_eq!(
        m[2]["content"][0],
        json!({"type": "tool_result", "tool_use_id": "c1", "content": [{"type": "image", "source": {"type": "url", "url": "https://x.test/a.png"}}]})
    );
    assert_eq!(m[2]["content"][1]["tool_use_id"], "c2");
    assert_eq!(m[2]["content"][1]["is_error"], true);
    assert_eq!(
        m[2]["content"][1]["cache_control"],
        json!({"type": "ephemeral"})
    );
    // Without vision images become a note.
    let body = build_body("m", &request(history), false, &extra());
    assert_eq!(body["messages"][0]["content"][1]["text"], IMAGE_OMITTED);
}

#[test]
fn foreign_thinking_is_not_sent_and_breakpoints_skip_thinking() {
    let foreign = ModelPayload::Thinking {
        role: Role::Assistant,
        thinking: "from another provider".into(),
        stop_reason: StopReason::Completed,
        fidelity: None,
    };
    let history = vec![
        text(Role::User, "q"),
        foreign,
        text(Role::Assistant, "a"),
        thinking("t", "s"),
    ];
    let mut req = request(history);
    req.system_prompt = Arc::from("");
    let body = build_body("m", &req, true, &extra());
    assert!(body.get("system").is_none());
    assert_eq!(
        body["messages"][1]["content"],
        json!([
            {"type": "text", "text": "a", "cache_control": {"type": "ephemeral"}},
            {"type": "thinking", "thinking": "t", "signature": "s"},
        ])
    );
    assert_eq!(count_breakpoints(&body), 1);
}

#[test]
fn extra_fields_are_checked() {
    let map = |v: Value| v.as_object().cloned().unwrap_or_default();
    let ok = checked_extra(&map(json!({"max_tokens": 4096, "thinking": {"type": "enabled", "budget_tokens": 2048}, "temperature": 1})))
        .unwrap();
    let body = build_body("m", &request(vec![text(Role::User, "x")]), true, &ok);
    assert_eq!(body["max_tokens"], 4096);
    assert_eq!(
        body["thinking"],
        json!({"type": "enabled", "budget_tokens": 2048})
    );
    assert_eq!(body["temperature"], 1);
    let stop = checked_extra(&map(json!({"stop": "END"}))).unwrap();
    assert_eq!(
        Value::Object(stop),
        json!({"max_tokens": 8192, "stop_sequences": ["END"]})
    );
    let err = |v: Value| checked_extra(&map(v)).unwrap_err().to_string();
    assert_eq!(
        err(json!({"thinking": {"type": "enabled", "budget_tokens": 9000}})),
        "model.thinking.budget_tokens (9000) must be less than max_tokens (8192)"
    );
    assert_eq!(
        err(json!({"thinking": {"type": "enabled", "budget_tokens": 100}})),
        "model.thinking.budget_tokens must be at least 1024"
    );
    assert!(err(json!({"thinking": {"type": "on"}})).starts_with("model.thinking must be"));
    assert_eq!(
        err(json!({"max_tokens": 0})),
        "model.max_tokens must be a positive integer"
    );
    assert_eq!(
        err(json!({"system": "x"})),
        "model.extra.system cannot be set: rookery sets it"
    );
}
