use super::*;

fn feed_all(events: &[&str]) -> (Vec<ModelEvent>, ModelOutcome) {
    let mut p = EventParser::new(Arc::default(), 1 << 20);
    let mut out = Vec::new();
    for e in events {
        if let Fed::End(o) = p.feed(e, &mut out) {
            return (out, o);
        }
    }
    let o = p.eof(&mut out);
    (out, o)
}

const START: &str =
    r#"{"type":"message_start","message":{"usage":{"input_tokens":10,"output_tokens":1}}}"#;
const DELTA: &str =
    r#"{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":7}}"#;

#[test]
fn a_stream_without_message_stop_completes_after_message_delta() {
    let (out, o) = feed_all(&[
        START,
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
        r#"{"type": "ping"}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}"#,
        r#"{"type":"content_block_stop","index":0}"#,
        r#"{"type":"brand_new_event","x":1}"#,
        DELTA,
    ]);
    assert_eq!(o, ModelOutcome::completed());
    assert!(out.contains(&ModelEvent::Usage(Usage {
        cache_read: 0,
        cache_write: 0,
        output: 7,
        total: 17
    })));
}

#[test]
fn broken_streams_are_malformed() {
    let cases: [(&[&str], &str); 6] = [
        (&[], "stream ended before message_start"),
        (&[START], "stream ended without a stop_reason"),
        (
            &[
                START,
                r#"{"type":"content_block_delta","index":3,"delta":{"type":"text_delta","text":"x"}}"#,
            ],
            "delta for content block 3, which never started",
        ),
        (
            &[
                START,
                r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"f","input":{}}}"#,
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"a\":"}}"#,
                r#"{"type":"content_block_stop","index":0}"#,
            ],
            "input of tool_use 0 (f) is not valid JSON",
        ),
        (
            &[
                START,
                r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{}"}}"#,
            ],
            "delta of type \"input_json_delta\" does not fit content block 0",
        ),
        (&["<html>"], "unparseable event"),
    ];
    for (events, want) in cases {
        let (_, o) = feed_all(events);
        assert_eq!(o.status, StopReason::Malformed, "{events:?}");
        let m = o.error_message.unwrap_or_default();
        assert!(m.starts_with(want), "{m}");
    }
}

#[test]
fn stream_errors_are_classified() {
    let err = |kind: &str| {
        let e = format!(r#"{{"type":"error","error":{{"type":"{kind}","message":"m"}}}}"#);
        let (_, o) = feed_all(&[START, &e]);
        (o.status, o.permanent)
    };
    assert_eq!(err("overloaded_error"), (StopReason::Failed, false));
    assert_eq!(err("api_error"), (StopReason::Failed, false));
    assert_eq!(err("rate_limit_error"), (StopReason::Failed, false));
    assert_eq!(err("authentication_error"), (StopReason::Auth, false));
    assert_eq!(err("invalid_request_error"), (StopReason::Failed, true));
}

#[test]
fn repeated_tool_ids_are_made_unique() {
    let tool = |i: u32| {
        format!(
            r#"{{"type":"content_block_start","index":{i},"content_block":{{"type":"tool_use","id":"toolu_x","name":"f","input":{{}}}}}}"#
        )
    };
    let stop = |i: u32| format!(r#"{{"type":"content_block_stop","index":{i}}}"#);
    let (t0, s0, t1, s1) = (tool(0), stop(0), tool(1), stop(1));
    let (out, o) = feed_all(&[START, &t0, &s0, &t1, &s1, DELTA]);
    assert_eq!(o, ModelOutcome::completed());
    let ids: Vec<&str> = out
        .iter()
        .filter_map(|e| match e {
            ModelEvent::Complete(ModelPayload::ToolCall {
                tool_call_id,
                arguments,
                ..
            }) => {
                assert_eq!(arguments, "{}");
                Some(tool_call_id.as_str())
            }
            _ => None,
        })
        .collect();
    assert_eq!(ids, ["toolu_x", "toolu_x_2"]);
}

#[test]
fn the_response_size_is_capped() {
    let mut p = EventParser::new(Arc::default(), 10);
    let mut out = Vec::new();
    assert_eq!(p.feed(START, &mut out), Fed::More);
    let start =
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#;
    assert_eq!(p.feed(start, &mut out), Fed::More);
    let delta = r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"0123456789"}}"#;
    match p.feed(delta, &mut out) {
        Fed::End(o) => {
            assert_eq!(o.status, StopReason::Malformed);
            assert_eq!(
                o.error_message.as_deref(),
                Some("the response exceeds 10 bytes of text, thinking and tool input")
            );
        }
        Fed::More => panic!("not capped"),
    }
}
