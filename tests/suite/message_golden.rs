//! Golden JSON lines: every payload kind serializes to exactly the reference shape and parses
//! back to the same message; unknown payloads survive a round trip verbatim.

use rookery::message::OmniMessage;

const GOLDEN: &[&str] = &[
    r#"{"timestamp":"2026-07-18T03:10:22.531Z","type":"session_meta","payload":{"session_id":"session-2026-07-18-11-10-22-3f8a1c2d","provider":"scripted","model_id":"scripted","model_context_window":1000000,"system_prompt":"p","agent_state":"/w","workspace":"/w"}}"#,
    r#"{"timestamp":"2026-07-18T03:10:22.531Z","type":"session_meta","payload":{"session_id":"s","provider":"p","model_id":"m","model_context_window":"1M","system_prompt":"","agent_state":"/w","workspace":"/w","source":"subagent"}}"#,
    r#"{"timestamp":"2026-07-18T03:10:22.531Z","type":"model_msg","payload":{"type":"text","role":"user","text":"hi","stop_reason":"completed"}}"#,
    r#"{"timestamp":"2026-07-18T03:10:22.531Z","type":"model_msg","payload":{"type":"text","role":"user","text":"x","sender":"harness","stop_reason":"completed"}}"#,
    r#"{"timestamp":"2026-07-18T03:10:22.531Z","type":"model_msg","payload":{"type":"text","role":"assistant","text":"ok","stop_reason":"completed","fidelity":{"sig":"abc"}}}"#,
    r#"{"timestamp":"2026-07-18T03:10:22.531Z","type":"model_msg","payload":{"type":"image_url","role":"user","image_url":"data:image/png;base64,AA==","stop_reason":"completed"}}"#,
    r#"{"timestamp":"2026-07-18T03:10:22.531Z","type":"model_msg","payload":{"type":"inline_data","role":"user","data":"AA==","mime_type":"image/png","stop_reason":"completed"}}"#,
    r#"{"timestamp":"2026-07-18T03:10:22.531Z","type":"model_msg","payload":{"type":"thinking","role":"assistant","thinking":"hmm","stop_reason":"completed"}}"#,
    r#"{"timestamp":"2026-07-18T03:10:22.531Z","type":"model_msg","payload":{"type":"inline_thinking","role":"assistant","data":"AA==","mime_type":"x/y","stop_reason":"completed"}}"#,
    r#"{"timestamp":"2026-07-18T03:10:22.531Z","type":"model_msg","payload":{"type":"tool_call","role":"assistant","name":"exec_command","arguments":"{\"cmd\":\"ls\"}","tool_call_id":"call_0","stop_reason":"completed"}}"#,
    r#"{"timestamp":"2026-07-18T03:10:22.531Z","type":"model_msg","payload":{"type":"tool_call_output","role":"user","output":"a","tool_call_id":"call_0","stop_reason":"completed"}}"#,
    r#"{"timestamp":"2026-07-18T03:10:22.531Z","type":"model_msg","payload":{"type":"tool_call_output","role":"user","output":"a","images":["data:image/png;base64,AA=="],"tool_call_id":"call_0","stop_reason":"completed"}}"#,
    r#"{"timestamp":"2026-07-18T03:10:22.531Z","type":"model_msg","payload":{"type":"partial_text","role":"assistant","event_type":"delta","text":"o","stop_reason":"completed"}}"#,
    r#"{"timestamp":"2026-07-18T03:10:22.531Z","type":"model_msg","payload":{"type":"partial_thinking","role":"assistant","event_type":"start","thinking":"","stop_reason":"completed"}}"#,
    r#"{"timestamp":"2026-07-18T03:10:22.531Z","type":"model_msg","payload":{"type":"partial_tool_call","role":"assistant","event_type":"delta","name":"read_file","arguments":"{\"fi","tool_call_id":"call_1","stop_reason":"completed"}}"#,
    r#"{"timestamp":"2026-07-18T03:10:22.531Z","type":"model_msg","payload":{"type":"partial_tool_call_output","role":"user","event_type":"stop","output":"","tool_call_id":"call_1","stop_reason":"failed"}}"#,
    r#"{"timestamp":"2026-07-18T03:10:22.531Z","type":"event_msg","payload":{"type":"request_begin"}}"#,
    r#"{"timestamp":"2026-07-18T03:10:22.531Z","type":"event_msg","payload":{"type":"request_end","status":"completed"}}"#,
    r#"{"timestamp":"2026-07-18T03:10:22.531Z","type":"event_msg","payload":{"type":"request_end","status":"timeout","error_message":"idle","attempt":2,"retry_in_ms":4000}}"#,
    r#"{"timestamp":"2026-07-18T03:10:22.531Z","type":"event_msg","payload":{"type":"approval_decision","decision":"forbidden","tool_call_id":"call_0"}}"#,
    r#"{"timestamp":"2026-07-18T03:10:22.531Z","type":"event_msg","payload":{"type":"abort","reason":null}}"#,
    r#"{"timestamp":"2026-07-18T03:10:22.531Z","type":"event_msg","payload":{"type":"abort","reason":"aborted by user"}}"#,
    r#"{"timestamp":"2026-07-18T03:10:22.531Z","type":"event_msg","payload":{"type":"token_usage","session":{"cache_read":0,"cache_write":0,"output":5,"total":15},"request":{"cache_read":0,"cache_write":0,"output":5,"total":15}}}"#,
    r#"{"timestamp":"2026-07-18T03:10:22.531Z","type":"event_msg","payload":{"type":"compaction_begin","reason":"context","mode":"summarize","context":123456,"turns":17}}"#,
    r#"{"timestamp":"2026-07-18T03:10:22.531Z","type":"event_msg","payload":{"type":"compaction_end","reason":"context","mode":"summarize","status":"failed","attempt":3,"error_message":"x"}}"#,
    r#"{"timestamp":"2026-07-18T03:10:22.531Z","type":"event_msg","payload":{"type":"subagent","session_id":"session-x"}}"#,
    r#"{"timestamp":"2026-07-18T03:10:22.531Z","type":"event_msg","payload":{"type":"tool_list_ready","tools":[{"name":"read_file","description":"d","parameters":{}}]}}"#,
    r#"{"timestamp":"2026-07-18T03:10:22.531Z","type":"event_msg","payload":{"type":"mcp_connect_begin","servers":["fs"]}}"#,
    r#"{"timestamp":"2026-07-18T03:10:22.531Z","type":"event_msg","payload":{"type":"mcp_connect_end","status":"completed","results":[{"server":"fs"}]}}"#,
    r#"{"timestamp":"2026-07-18T03:10:22.531Z","type":"event_msg","payload":{"type":"goal_finished","outcome":"complete","rounds":3,"tokens_used":12345}}"#,
    r#"{"timestamp":"2026-07-18T03:10:22.531Z","type":"event_msg","payload":{"type":"command_evicted","process_id":"proc-12ab34cd","status":"running"}}"#,
    r#"{"timestamp":"2026-07-18T03:10:22.531Z","type":"event_msg","payload":{"type":"task_end","status":"aborted"}}"#,
    r#"{"timestamp":"2026-07-18T03:10:22.531Z","type":"model_msg","payload":{"type":"text","role":"user","text":"from child","stop_reason":"completed"},"origin":["session-a","session-b"]}"#,
];

#[test]
fn every_payload_matches_its_golden_line() {
    for line in GOLDEN {
        let msg = OmniMessage::from_json(line).unwrap_or_else(|e| panic!("{line}: {e}"));
        assert!(
            !matches!(msg.payload, rookery::message::Payload::Unknown { .. }),
            "parsed as unknown: {line}"
        );
        assert_eq!(&msg.to_json(), line);
    }
}

#[test]
fn unknown_payloads_are_kept_verbatim() {
    let lines = [
        r#"{"timestamp":"t","type":"event_msg","payload":{"type":"future_event","x":[1,2]}}"#,
        r#"{"timestamp":"t","type":"model_msg","payload":{"type":"audio","role":"user","data":"AA=="}}"#,
        r#"{"timestamp":"t","type":"some_new_kind","payload":{"a":1}}"#,
    ];
    for line in lines {
        let msg = OmniMessage::from_json(line).unwrap_or_else(|e| panic!("{line}: {e}"));
        assert!(matches!(
            msg.payload,
            rookery::message::Payload::Unknown { .. }
        ));
        assert_eq!(msg.to_json(), line);
    }
}

#[test]
fn origin_prepends_and_blocks_recording() {
    let msg = rookery::message::build::user_text("x", None);
    assert!(msg.is_recordable());
    let fwd = msg.with_origin("inner").with_origin("outer");
    assert_eq!(
        fwd.origin,
        Some(vec!["outer".to_string(), "inner".to_string()])
    );
    assert!(!fwd.is_recordable());
    let partial = rookery::message::build::partial_text(
        rookery::message::EventType::Delta,
        "x",
        rookery::message::StopReason::Completed,
    );
    assert!(!partial.is_recordable());
}
