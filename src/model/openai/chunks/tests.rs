//! Unit tests of the chunk parser: exact events for each delta kind, opaque fields, id
//! disambiguation and every malformed ending.

use super::*;

fn parser() -> ChunkParser {
    ChunkParser::new(Arc::new(Mutex::new(CallIds::default())))
}

/// Feeds every line; returns the events and the outcome of the last line.
fn run(p: &mut ChunkParser, lines: &[&str]) -> (Vec<ModelEvent>, Fed) {
    let mut out = Vec::new();
    let mut fed = Fed::More;
    for line in lines {
        fed = p.feed(line, &mut out);
        if matches!(fed, Fed::End(_)) {
            break;
        }
    }
    (out, fed)
}

fn completes(events: &[ModelEvent]) -> Vec<ModelPayload> {
    events
        .iter()
        .filter_map(|e| match e {
            ModelEvent::Complete(p) => Some(p.clone()),
            _ => None,
        })
        .collect()
}

fn end_message(fed: &Fed) -> (StopReason, String) {
    match fed {
        Fed::End(o) => (o.status, o.error_message.clone().unwrap_or_default()),
        Fed::More => panic!("no end"),
    }
}

#[test]
fn outbound_ids_lose_only_a_numeric_suffix() {
    assert_eq!(outbound_id("call_1#2"), "call_1");
    assert_eq!(outbound_id("call_1#x"), "call_1#x");
    assert_eq!(outbound_id("call#"), "call#");
    assert_eq!(outbound_id("#3"), "#3");
    assert_eq!(outbound_id("plain"), "plain");
}

#[test]
fn repeated_and_missing_ids_are_made_unique() {
    let ids = Arc::new(Mutex::new(CallIds::default()));
    let mut p = ChunkParser::new(ids.clone());
    let (events, fed) = run(
        &mut p,
        &[
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"get","function":{"name":"a","arguments":"{}"}},{"index":1,"id":"get","function":{"name":"b","arguments":"{}"}},{"index":2,"function":{"name":"c","arguments":"{}"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
            "[DONE]",
        ],
    );
    assert_eq!(fed, Fed::End(ModelOutcome::completed()));
    let ids_seen: Vec<String> = completes(&events)
        .into_iter()
        .map(|p| match p {
            ModelPayload::ToolCall { tool_call_id, .. } => tool_call_id,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(ids_seen, vec!["get", "get#2", "call_rk1"]);
    // The next request of the same session keeps counting.
    let mut p = ChunkParser::new(ids);
    let (events, _) = run(
        &mut p,
        &[
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"get","function":{"name":"a"}}]},"finish_reason":"tool_calls"}]}"#,
        ],
    );
    assert!(
        matches!(&completes(&events)[0], ModelPayload::ToolCall { tool_call_id, arguments, .. }
        if tool_call_id == "get#3" && arguments.is_empty())
    );
}

#[test]
fn reasoning_field_and_opaque_fields_are_kept_in_fidelity() {
    let mut p = parser();
    let (events, fed) = run(
        &mut p,
        &[
            r#"{"choices":[{"index":0,"delta":{"reasoning":"hm","reasoning_details":[{"type":"reasoning.text","text":"hm"}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"reasoning_details":[{"type":"reasoning.encrypted","data":"xyz"}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"},"extra_content":{"google":{"thought_signature":"sig=="}}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":7,"completion_tokens":3,"prompt_cache_hit_tokens":5}}"#,
            "[DONE]",
        ],
    );
    assert_eq!(fed, Fed::End(ModelOutcome::completed()));
    let c = completes(&events);
    assert_eq!(
        c[0],
        ModelPayload::Thinking {
            role: Role::Assistant,
            thinking: "hm".into(),
            stop_reason: StopReason::Completed,
            fidelity: json!({"reasoning_field": "reasoning"}).as_object().cloned(),
        }
    );
    let ModelPayload::ToolCall {
        fidelity,
        arguments,
        ..
    } = &c[1]
    else {
        panic!("{c:?}")
    };
    assert_eq!(arguments, "{\"a\":1}");
    assert_eq!(
        Value::Object(fidelity.clone().unwrap()),
        json!({
            "tool_call_extra": {"extra_content": {"google": {"thought_signature": "sig=="}}},
            "message_extra": {"reasoning_details": [
                {"type": "reasoning.text", "text": "hm"},
                {"type": "reasoning.encrypted", "data": "xyz"}]}
        })
    );
    assert_eq!(
        events[events.len() - 1],
        ModelEvent::Usage(Usage {
            cache_read: 5,
            cache_write: 0,
            output: 3,
            total: 10
        })
    );
}

#[test]
fn text_after_a_tool_call_and_refusals_are_text_segments() {
    let mut p = parser();
    let (events, _) = run(
        &mut p,
        &[
            r#"{"choices":[{"index":0,"delta":{"refusal":"no"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"f","arguments":"{}"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"after"},"finish_reason":"stop"}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"ignored after finish"}}]}"#,
            "[DONE]",
        ],
    );
    let kinds: Vec<String> = events
        .iter()
        .map(|e| match e {
            ModelEvent::Partial(p) | ModelEvent::Complete(p) => {
                serde_json::to_value(p).unwrap()["type"]
                    .as_str()
                    .unwrap()
                    .to_string()
                    + match p {
                        ModelPayload::PartialText { event_type, .. }
                        | ModelPayload::PartialToolCall { event_type, .. } => match event_type {
                            EventType::Start => ":start",
                            EventType::Delta => ":delta",
                            EventType::Stop => ":stop",
                        },
                        _ => "",
                    }
            }
            ModelEvent::Usage(_) => "usage".into(),
            ModelEvent::End(_) => "end".into(),
        })
        .collect();
    assert_eq!(
        kinds,
        vec![
            "partial_text:start",
            "partial_text:delta",
            "partial_text:stop",
            "text",
            "partial_tool_call:start",
            "partial_tool_call:delta",
            "partial_tool_call:stop",
            "partial_text:start",
            "partial_text:delta",
            "partial_text:stop",
            "text",
            "tool_call",
        ]
    );
    let texts: Vec<String> = completes(&events)
        .into_iter()
        .filter_map(|p| match p {
            ModelPayload::Text { text, .. } => Some(text),
            _ => None,
        })
        .collect();
    assert_eq!(texts, vec!["no", "after"]);
}

#[test]
fn malformed_and_failed_endings() {
    let cases: [(&[&str], StopReason, &str); 6] = [
        (
            &["[DONE]"],
            StopReason::Malformed,
            "stream ended without a finish_reason",
        ),
        (
            &["[1,2]"],
            StopReason::Malformed,
            "chunk is not a JSON object: [1,2]",
        ),
        (
            &["{\"choices\":"],
            StopReason::Malformed,
            "unparseable chunk (EOF while parsing a value at line 1 column 11): {\"choices\":",
        ),
        (
            &[r#"{"choices":[{"index":0,"delta":{"tool_calls":{"index":0}}}]}"#],
            StopReason::Malformed,
            "delta.tool_calls is not an array",
        ),
        (
            &[
                r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c9","function":{"arguments":"{}"}}]},"finish_reason":"tool_calls"}]}"#,
            ],
            StopReason::Malformed,
            "tool call 0 (c9) has no function name",
        ),
        (
            &[r#"{"error":{"message":"rate limited mid-stream","code":429}}"#],
            StopReason::Failed,
            "error in stream: rate limited mid-stream",
        ),
    ];
    for (lines, status, message) in cases {
        let (_, fed) = run(&mut parser(), lines);
        assert_eq!(
            end_message(&fed),
            (status, message.to_string()),
            "{lines:?}"
        );
    }
    // End of body: completed only after a finish reason.
    let mut p = parser();
    let mut out = Vec::new();
    assert_eq!(
        p.feed(
            r#"{"choices":[{"index":0,"delta":{"content":"x"}}]}"#,
            &mut out
        ),
        Fed::More
    );
    assert_eq!(p.eof(&mut out).status, StopReason::Malformed);
    let mut p = parser();
    p.feed(
        r#"{"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":"length"}]}"#,
        &mut out,
    );
    assert_eq!(p.eof(&mut out), ModelOutcome::completed());
    // Keep-alive objects, other choices and empty data are ignored.
    let mut p = parser();
    let (events, fed) = run(
        &mut p,
        &[
            "",
            r#"{"object":"keepalive"}"#,
            r#"{"choices":[{"index":1,"delta":{"content":"other"}}]}"#,
        ],
    );
    assert!(events.is_empty());
    assert_eq!(fed, Fed::More);
}

#[test]
fn clip_counts_characters() {
    assert_eq!(clip("héllo", 2), "hé…");
    assert_eq!(clip("abc", 3), "abc");
}
