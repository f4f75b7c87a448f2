//! The pairing check shared by the tests of the pairing guarantee: every completed `tool_call`
//! of a trace has exactly one `tool_call_output`, after it and before the first `abort` or
//! `task_end` that follows the calls; no output lacks its call.

use rookery::message::{EventPayload, ModelPayload, OmniMessage, StopReason};

/// `(envelope type, payload type)` names of the records, for messages.
fn names(recs: &[OmniMessage]) -> Vec<String> {
    recs.iter()
        .map(|r| {
            let v: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap_or_default();
            v["payload"]["type"].as_str().unwrap_or("?").to_string()
        })
        .collect()
}

/// Asserts the pairing of one task's trace; returns `(output, stop_reason)` in call order.
pub fn assert_trace_paired(recs: &[OmniMessage]) -> Vec<(String, StopReason)> {
    let end = recs
        .iter()
        .position(|r| {
            matches!(
                r.as_event(),
                Some(EventPayload::Abort { .. } | EventPayload::TaskEnd { .. })
            )
        })
        .unwrap_or(recs.len());
    let mut out = Vec::new();
    for (i, r) in recs.iter().enumerate() {
        let Some(ModelPayload::ToolCall {
            tool_call_id,
            stop_reason: StopReason::Completed,
            ..
        }) = r.as_model()
        else {
            continue;
        };
        let outputs: Vec<(usize, &ModelPayload)> = recs
            .iter()
            .enumerate()
            .filter_map(|(j, o)| match o.as_model() {
                Some(
                    p @ ModelPayload::ToolCallOutput {
                        tool_call_id: id, ..
                    },
                ) if id == tool_call_id => Some((j, p)),
                _ => None,
            })
            .collect();
        assert_eq!(outputs.len(), 1, "{tool_call_id}: {:?}", names(recs));
        let (j, p) = outputs[0];
        assert!(j > i && j < end, "{tool_call_id} at {j}: {:?}", names(recs));
        if let ModelPayload::ToolCallOutput {
            output,
            stop_reason,
            ..
        } = p
        {
            out.push((output.clone(), *stop_reason));
        }
    }
    let outputs = recs
        .iter()
        .filter(|r| matches!(r.as_model(), Some(ModelPayload::ToolCallOutput { .. })))
        .count();
    assert_eq!(outputs, out.len(), "an output without a call");
    out
}
