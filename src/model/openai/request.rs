//! The request body of the OpenAI-compatible provider: `ModelRequest` → `chat/completions` JSON
//! (system prompt, user texts and images, assistant messages with `tool_calls`, one `tool`
//! message per call id in call order, tool schemas, the configured extra fields).
//!
//! It owns the body; the history → messages mapping and the replay of opaque `fidelity` fields
//! are `history`'s. It never sends anything and never sees the API key.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::model::ModelRequest;

mod history;
mod wire_message;
use history::messages;
pub(super) use history::{Fresh, messages_from, system_message};
pub(super) use wire_message::WireMessage;

/// Body keys Rookery sets itself; `extra` may not override them.
pub use crate::model::model_config::RESERVED_BODY_KEYS;

/// What a text-only model sees instead of an image.
pub const IMAGE_OMITTED: &str = "[image omitted: this model does not accept images]";

/// The JSON body of one streamed request.
pub fn build_body(
    model: &str,
    request: &ModelRequest,
    vision: bool,
    extra: &Map<String, Value>,
) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    body.insert("messages".into(), Value::Array(messages(request, vision)));
    body.insert("stream".into(), json!(true));
    body.insert("stream_options".into(), json!({"include_usage": true}));
    if !request.tools.is_empty() {
        let tools = request
            .tools
            .iter()
            .map(|spec| json!({"type": "function", "function": spec}))
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    for (key, value) in extra {
        if !RESERVED_BODY_KEYS.contains(&key.as_str()) {
            body.insert(key.clone(), value.clone());
        }
    }
    Value::Object(body)
}

/// The `tools` array of a body (`[{"type":"function","function":spec}, …]`) as JSON text:
/// computed once per tool list and spliced into every body by [`encode_body`].
pub fn tools_json(tools: &[Value]) -> String {
    #[derive(serde::Serialize)]
    struct Wrapped<'a> {
        r#type: &'static str,
        function: &'a Value,
    }
    let wrapped: Vec<Wrapped<'_>> = tools
        .iter()
        .map(|function| Wrapped {
            r#type: "function",
            function,
        })
        .collect();
    serde_json::to_string(&wrapped).unwrap_or_else(|_| "[]".to_string())
}

/// The serialized body of one streamed request: [`build_body`] without `tools`, with
/// `tools_json` (from [`tools_json`]) spliced in when the request has tools. Same JSON value,
/// without copying the tool schemas into every body.
pub fn encode_body(
    model: &str,
    request: &ModelRequest,
    vision: bool,
    extra: &Map<String, Value>,
    tools_json: &str,
) -> Vec<u8> {
    let no_tools = ModelRequest {
        system_prompt: request.system_prompt.clone(),
        history: request.history.clone(),
        tools: Arc::new(Vec::new()),
    };
    let body = build_body(model, &no_tools, vision, extra);
    let mut out = serde_json::to_vec(&body).unwrap_or_else(|_| b"{}".to_vec());
    if !request.tools.is_empty() && out.last() == Some(&b'}') {
        out.pop();
        if out.len() > 1 {
            out.push(b',');
        }
        out.extend_from_slice(b"\"tools\":");
        out.extend_from_slice(tools_json.as_bytes());
        out.push(b'}');
    }
    out
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::message::{ModelPayload, Role, StopReason};

    fn user(text: &str) -> ModelPayload {
        ModelPayload::Text {
            role: Role::User,
            text: text.into(),
            sender: None,
            stop_reason: StopReason::Completed,
            fidelity: None,
        }
    }

    fn assistant(text: &str) -> ModelPayload {
        ModelPayload::Text {
            role: Role::Assistant,
            text: text.into(),
            sender: None,
            stop_reason: StopReason::Completed,
            fidelity: None,
        }
    }

    fn call(id: &str, args: &str, fidelity: Option<Value>) -> ModelPayload {
        ModelPayload::ToolCall {
            role: Role::Assistant,
            name: "read_file".into(),
            arguments: args.into(),
            tool_call_id: id.into(),
            stop_reason: StopReason::Completed,
            fidelity: fidelity.and_then(|f| f.as_object().cloned()),
        }
    }

    fn output(id: &str, text: &str, images: &[&str]) -> ModelPayload {
        ModelPayload::ToolCallOutput {
            role: Role::User,
            output: text.into(),
            images: images.iter().map(|s| s.to_string()).collect(),
            tool_call_id: id.into(),
            stop_reason: StopReason::Completed,
        }
    }

    fn body(history: Vec<ModelPayload>, vision: bool) -> Value {
        let request = ModelRequest {
            system_prompt: Arc::from(""),
            history: Arc::new(history),
            tools: Arc::new(Vec::new()),
        };
        let extra = json!({"temperature": 0.2, "model": "ignored"});
        build_body(
            "m",
            &request,
            vision,
            extra.as_object().unwrap_or(&Map::new()),
        )
    }

    #[test]
    fn a_turn_is_one_assistant_message_with_its_tool_messages_in_call_order() {
        let thinking = ModelPayload::Thinking {
            role: Role::Assistant,
            thinking: "plan".into(),
            stop_reason: StopReason::Completed,
            fidelity: json!({"reasoning_field": "reasoning_content"})
                .as_object()
                .cloned(),
        };
        let b = body(
            vec![
                user("go"),
                thinking,
                assistant("reading"),
                call(
                    "a#2",
                    r#"{"file_path":"x"}"#,
                    Some(json!({"tool_call_extra": {"extra_content": {"sig": "s"}}})),
                ),
                call(
                    "b",
                    "{bad json",
                    Some(json!({"message_extra": {"reasoning_details": [1]}})),
                ),
                output("b", "B out", &[]),
                output("a#2", "A out", &[]),
                assistant("done"),
            ],
            false,
        );
        assert_eq!(
            b,
            json!({
                "model": "m",
                "messages": [
                    {"role": "user", "content": "go"},
                    {"role": "assistant", "content": "reading", "tool_calls": [
                        {"id": "a", "type": "function", "function": {"name": "read_file", "arguments": "{\"file_path\":\"x\"}"},
                         "extra_content": {"sig": "s"}},
                        {"id": "b", "type": "function", "function": {"name": "read_file", "arguments": "{bad json"}}],
                     "reasoning_content": "plan", "reasoning_details": [1]},
                    {"role": "tool", "tool_call_id": "a", "content": "A out"},
                    {"role": "tool", "tool_call_id": "b", "content": "B out"},
                    {"role": "assistant", "content": "done"}
                ],
                "stream": true,
                "stream_options": {"include_usage": true},
                "temperature": 0.2
            })
        );
    }

    #[test]
    fn images_for_vision_models_and_placeholders_otherwise() {
        let history = vec![
            user("look"),
            ModelPayload::ImageUrl {
                role: Role::User,
                image_url: "https://x/y.png".into(),
                stop_reason: StopReason::Completed,
            },
            call("c1", "{}", None),
            output("c1", "image/png, 3 B", &["data:image/png;base64,AAA"]),
            user("next"),
        ];
        assert_eq!(
            body(history.clone(), true)["messages"],
            json!([
                {"role": "user", "content": [
                    {"type": "text", "text": "look"},
                    {"type": "image_url", "image_url": {"url": "https://x/y.png"}}]},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "image/png, 3 B"},
                {"role": "user", "content": [
                    {"type": "text", "text": "[images returned by tool call c1]"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAA"}},
                    {"type": "text", "text": "next"}]}
            ])
        );
        assert_eq!(
            body(history, false)["messages"][0]["content"][1],
            json!({"type": "text", "text": IMAGE_OMITTED})
        );
    }

    #[test]
    fn unpaired_calls_and_outputs_still_make_a_valid_request() {
        let b = body(
            vec![
                call("c1", "{}", None),
                call("c2", "{}", None),
                output("c2", "two", &[]),
                output("zz", "lost", &[]),
            ],
            false,
        );
        assert_eq!(
            b["messages"],
            json!([
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}},
                    {"id": "c2", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "[no output recorded for this call]"},
                {"role": "tool", "tool_call_id": "c2", "content": "two"},
                {"role": "user", "content": "[tool output for zz]\nlost"}
            ])
        );
        // Thinking of another provider is not sent; a thinking-only turn is dropped.
        let b = body(
            vec![
                user("q"),
                ModelPayload::Thinking {
                    role: Role::Assistant,
                    thinking: "t".into(),
                    stop_reason: StopReason::Completed,
                    fidelity: None,
                },
                user("r"),
            ],
            false,
        );
        assert_eq!(
            b["messages"],
            json!([{"role": "user", "content": "q"}, {"role": "user", "content": "r"}])
        );
    }

    #[test]
    fn system_prompt_and_tools() {
        let request = ModelRequest {
            system_prompt: Arc::from("sys"),
            history: Arc::new(vec![user("hi")]),
            tools: Arc::new(vec![
                json!({"name": "t", "description": "d", "parameters": {"type": "object"}}),
            ]),
        };
        let b = build_body("m", &request, false, &Map::new());
        assert_eq!(
            b["messages"][0],
            json!({"role": "system", "content": "sys"})
        );
        assert_eq!(
            b["tools"],
            json!([{"type": "function", "function": {"name": "t", "description": "d", "parameters": {"type": "object"}}}])
        );
    }

    /// A history that takes every path of the mapping (replayed fields, reasoning, images,
    /// attachments, unpaired and repeated outputs, text that needs escaping), with the exact
    /// body bytes the mapping wrote when it built `serde_json::Value`s.
    #[test]
    fn a_rich_history_keeps_its_exact_bytes() {
        let history: Vec<ModelPayload> = serde_json::from_value(json!([
            {"type": "text", "role": "user", "text": "look \"here\"\n\u{1}"},
            {"type": "image_url", "role": "user", "image_url": "https://x/a.png"},
            {"type": "inline_data", "role": "user", "data": "AA==", "mime_type": "image/png"},
            {"type": "inline_data", "role": "user", "data": "AA==", "mime_type": "application/pdf"},
            {"type": "thinking", "role": "assistant", "thinking": "hm",
             "fidelity": {"reasoning_field": "reasoning_content", "message_extra": {"role": "no", "vendor": 1}}},
            {"type": "thinking", "role": "assistant", "thinking": " more",
             "fidelity": {"reasoning_field": "reasoning_content"}},
            {"type": "text", "role": "assistant", "text": "I'll "},
            {"type": "text", "role": "assistant", "text": "read"},
            {"type": "tool_call", "role": "assistant", "name": "read_file", "arguments": "{\"path\":\"a\"}",
             "tool_call_id": "c1#2", "fidelity": {"tool_call_extra": {"id": "no", "sig": "s"}}},
            {"type": "tool_call", "role": "assistant", "name": "read_file", "arguments": "{}",
             "tool_call_id": "c2"},
            {"type": "tool_call", "role": "assistant", "name": "read_file", "arguments": "{}",
             "tool_call_id": "c3"},
            {"type": "tool_call_output", "role": "user", "output": "two\t\"2\"", "images": [],
             "tool_call_id": "c2"},
            {"type": "tool_call_output", "role": "user", "output": "one", "images": ["data:image/png;base64,BB=="],
             "tool_call_id": "c1#2"},
            {"type": "tool_call_output", "role": "user", "output": "again", "images": [],
             "tool_call_id": "c2"},
            {"type": "tool_call", "role": "assistant", "name": "read_file", "arguments": "{}",
             "tool_call_id": "c4"},
            {"type": "tool_call_output", "role": "user", "output": "four", "images": [],
             "tool_call_id": "c4"},
            {"type": "tool_call_output", "role": "user", "output": "stray", "images": [],
             "tool_call_id": "zz"},
            {"type": "thinking", "role": "assistant", "thinking": "from elsewhere"},
            {"type": "text", "role": "assistant", "text": "done"},
        ]))
        .unwrap();
        let with_vision = r#"{"model":"m","messages":[{"role":"system","content":"be \"brief\""},{"role":"user","content":[{"type":"text","text":"look \"here\"\n\u0001"},{"type":"image_url","image_url":{"url":"https://x/a.png"}},{"type":"image_url","image_url":{"url":"data:image/png;base64,AA=="}},{"type":"text","text":"[attachment of type application/pdf omitted]"}]},{"role":"assistant","content":"I'll read","tool_calls":[{"id":"c1","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"a\"}"},"sig":"s"},{"id":"c2","type":"function","function":{"name":"read_file","arguments":"{}"}},{"id":"c3","type":"function","function":{"name":"read_file","arguments":"{}"}}],"reasoning_content":"hm more","vendor":1},{"role":"tool","tool_call_id":"c1","content":"one"},{"role":"tool","tool_call_id":"c2","content":"two\t\"2\""},{"role":"tool","tool_call_id":"c3","content":"[no output recorded for this call]"},{"role":"user","content":[{"type":"text","text":"[tool output for c2]\nagain"},{"type":"text","text":"[images returned by tool call c1]"},{"type":"image_url","image_url":{"url":"data:image/png;base64,BB=="}}]},{"role":"assistant","content":null,"tool_calls":[{"id":"c4","type":"function","function":{"name":"read_file","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c4","content":"four"},{"role":"user","content":"[tool output for zz]\nstray"},{"role":"assistant","content":"done"}],"stream":true,"stream_options":{"include_usage":true}}"#;
        let without = r#"{"model":"m","messages":[{"role":"system","content":"be \"brief\""},{"role":"user","content":[{"type":"text","text":"look \"here\"\n\u0001"},{"type":"text","text":"[image omitted: this model does not accept images]"},{"type":"text","text":"[image omitted: this model does not accept images]"},{"type":"text","text":"[attachment of type application/pdf omitted]"}]},{"role":"assistant","content":"I'll read","tool_calls":[{"id":"c1","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"a\"}"},"sig":"s"},{"id":"c2","type":"function","function":{"name":"read_file","arguments":"{}"}},{"id":"c3","type":"function","function":{"name":"read_file","arguments":"{}"}}],"reasoning_content":"hm more","vendor":1},{"role":"tool","tool_call_id":"c1","content":"one"},{"role":"tool","tool_call_id":"c2","content":"two\t\"2\""},{"role":"tool","tool_call_id":"c3","content":"[no output recorded for this call]"},{"role":"user","content":"[tool output for c2]\nagain"},{"role":"assistant","content":null,"tool_calls":[{"id":"c4","type":"function","function":{"name":"read_file","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c4","content":"four"},{"role":"user","content":"[tool output for zz]\nstray"},{"role":"assistant","content":"done"}],"stream":true,"stream_options":{"include_usage":true}}"#;
        for (vision, expected) in [(true, with_vision), (false, without)] {
            let request = ModelRequest {
                system_prompt: Arc::from("be \"brief\""),
                history: Arc::new(history.clone()),
                tools: Arc::new(Vec::new()),
            };
            let bytes = encode_body("m", &request, vision, &Map::new(), "[]");
            assert_eq!(String::from_utf8_lossy(&bytes), expected, "vision {vision}");
        }
    }
}
