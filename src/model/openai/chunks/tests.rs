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

fn texts_and_thinking(events: &[ModelEvent]) -> (Vec<String>, Vec<(String, Option<Fidelity>)>) {
    let mut texts = Vec::new();
    let mut thinking = Vec::new();
    for p in completes(events) {
        match p {
            ModelPayload::Text { text, .. } => texts.push(text),
            ModelPayload::Thinking {
                thinking: t,
                fidelity,
                ..
            } => thinking.push((t, fidelity)),
            _ => {}
        }
    }
    (texts, thinking)
}

#[test]
fn content_arrays_give_thinking_and_text_in_order() {
    // Mistral (magistral): thinking parts with nested text parts, then a text part.
    let mut p = parser();
    let (events, fed) = run(
        &mut p,
        &[
            r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":[{"type":"thinking","thinking":[{"type":"text","text":"2+2"}]}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":[{"type":"thinking","thinking":[{"type":"text","text":" is 4"}],"closed":true},{"type":"text","text":"3"}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":[{"type":"text","text":"91"}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":[{"type":"thinking","thinking":"plain string"},{"type":"image_url","image_url":"x"}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":""},"finish_reason":"stop"}]}"#,
            "[DONE]",
        ],
    );
    assert_eq!(fed, Fed::End(ModelOutcome::completed()));
    let (texts, thinking) = texts_and_thinking(&events);
    assert_eq!(texts, vec!["391"]);
    // Thinking from content parts has no delta field to be sent back under.
    assert_eq!(
        thinking,
        vec![
            ("2+2 is 4".to_string(), None),
            ("plain string".to_string(), None)
        ]
    );
}

#[test]
fn parallel_calls_all_at_index_0_are_told_apart_by_id() {
    // Ollama: each call whole in its own chunk, distinct ids, all index 0.
    let mut p = parser();
    let (events, fed) = run(
        &mut p,
        &[
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"id":"call_a","index":0,"type":"function","function":{"name":"run","arguments":"{\"command\":\"ls\"}"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"id":"call_b","index":0,"type":"function","function":{"name":"run","arguments":"{\"command\":"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"ls -l\"}"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
            "[DONE]",
        ],
    );
    assert_eq!(fed, Fed::End(ModelOutcome::completed()));
    let calls: Vec<(String, String)> = completes(&events)
        .into_iter()
        .filter_map(|p| match p {
            ModelPayload::ToolCall {
                arguments,
                tool_call_id,
                ..
            } => Some((tool_call_id, arguments)),
            _ => None,
        })
        .collect();
    assert_eq!(
        calls,
        vec![
            ("call_a".to_string(), r#"{"command":"ls"}"#.to_string()),
            ("call_b".to_string(), r#"{"command":"ls -l"}"#.to_string()),
        ]
    );
}

#[test]
fn bare_error_objects_and_finish_reason_error_fail() {
    let (_, fed) = run(
        &mut parser(),
        &[
            r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}"#,
            r#"{"object":"error","message":"CUDA out of memory","code":500}"#,
        ],
    );
    assert_eq!(
        end_message(&fed),
        (
            StopReason::Failed,
            "error in stream: CUDA out of memory".to_string()
        )
    );
    let (_, fed) = run(
        &mut parser(),
        &[r#"{"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":"error"}]}"#],
    );
    assert_eq!(
        end_message(&fed),
        (
            StopReason::Failed,
            "error in stream: the server ended the answer with finish_reason \"error\"".to_string()
        )
    );
}

#[test]
fn settled_once_usage_follows_the_finish_reason() {
    let mut p = parser();
    let mut out = Vec::new();
    // Usage on every chunk before the finish (Envoy, Bedrock gateways) does not settle it.
    p.feed(
        r#"{"choices":[{"index":0,"delta":{"content":"a"}}],"usage":{"prompt_tokens":8,"total_tokens":8}}"#,
        &mut out,
    );
    assert!(!p.finished() && !p.settled());
    p.feed(
        r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
        &mut out,
    );
    assert!(p.finished() && !p.settled());
    p.feed(
        r#"{"choices":[],"usage":{"prompt_tokens":8,"completion_tokens":2,"total_tokens":10}}"#,
        &mut out,
    );
    assert!(p.settled());
    assert_eq!(p.complete(&mut out), ModelOutcome::completed());
    assert_eq!(
        out.last(),
        Some(&ModelEvent::Usage(Usage {
            cache_read: 0,
            cache_write: 0,
            output: 2,
            total: 10
        }))
    );
    // Usage in the finish chunk itself settles it.
    let mut p = parser();
    p.feed(
        r#"{"choices":[{"index":0,"delta":{"content":"a"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1}}"#,
        &mut out,
    );
    assert!(p.settled());
}

#[test]
fn the_size_cap_counts_text_thinking_and_arguments() {
    // 4 + 3 + 2 bytes fit in 10; two more do not.
    let mut p = parser().with_limit(10);
    let (_, fed) = run(
        &mut p,
        &[
            r#"{"choices":[{"index":0,"delta":{"reasoning_content":"abcd"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"efg"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"f","arguments":"{}"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"xy"}}]}}]}"#,
        ],
    );
    assert_eq!(
        end_message(&fed),
        (
            StopReason::Malformed,
            "the response is larger than max_response_bytes (10 bytes of text, thinking and tool arguments)"
                .to_string()
        )
    );
}
