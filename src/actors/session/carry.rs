//! Carry-over texts of the turn loop: the `[turn_aborted]` flatten of an interrupted request, the
//! `[turn_retried]` transcript of failed attempts and the interrupted-tool placeholder.
//!
//! Pure functions over model payloads; nothing here is traced or streamed.

use crate::message::{ModelPayload, Role, StopReason};

/// Output given to a committed call that never produced one because the user aborted.
pub(super) const INTERRUPTED_PLACEHOLDER: &str = "[interrupted: tool aborted by user]";

/// A placeholder `tool_call_output` (aborted) for `tool_call_id`.
pub(super) fn placeholder(tool_call_id: &str) -> ModelPayload {
    ModelPayload::ToolCallOutput {
        role: Role::User,
        output: INTERRUPTED_PLACEHOLDER.to_string(),
        images: Vec::new(),
        tool_call_id: tool_call_id.to_string(),
        stop_reason: StopReason::Aborted,
    }
}

fn user_text(text: String) -> ModelPayload {
    ModelPayload::Text {
        role: Role::User,
        text,
        sender: None,
        stop_reason: StopReason::Completed,
        fidelity: None,
    }
}

/// Unwraps one level of an earlier `[tag]…[/tag]` block so blocks never nest.
fn unwrap_block<'a>(text: &'a str, tag: &str) -> &'a str {
    let open = format!("[{tag}]\n");
    let close = format!("\n[/{tag}]");
    text.strip_prefix(open.as_str())
        .and_then(|t| t.strip_suffix(close.as_str()))
        .unwrap_or(text)
}

fn transcribe(out: &mut String, msgs: &[ModelPayload], outputs: &[ModelPayload]) {
    for m in msgs {
        match m {
            ModelPayload::Thinking { thinking, .. } => {
                out.push_str(&format!("  [thinking]{thinking}[/thinking]\n"));
            }
            ModelPayload::Text { text, .. } => out.push_str(&format!("  [text]{text}[/text]\n")),
            ModelPayload::ToolCall {
                name,
                arguments,
                tool_call_id,
                ..
            } => out.push_str(&format!(
                "  [tool_call name=\"{name}\" id=\"{tool_call_id}\"]{arguments}[/tool_call]\n"
            )),
            _ => {}
        }
    }
    for o in outputs {
        if let ModelPayload::ToolCallOutput {
            output,
            tool_call_id,
            stop_reason,
            ..
        } = o
        {
            out.push_str(&format!(
                "  [tool_call_output id=\"{tool_call_id}\" status=\"{stop_reason}\"]{output}[/tool_call_output]\n"
            ));
        }
    }
}

/// Carry-over of a request aborted before its output was complete (case B): structured tool
/// outputs of the input are kept; every other input message and whatever the model produced is
/// flattened into one `[turn_aborted]` user text.
pub(super) fn flatten_aborted(
    input: &[ModelPayload],
    produced: &[ModelPayload],
    outputs: &[ModelPayload],
) -> Vec<ModelPayload> {
    let mut kept = Vec::new();
    let mut body = String::from("[turn_aborted]\n");
    for m in input {
        match m {
            ModelPayload::ToolCallOutput { .. } => kept.push(m.clone()),
            ModelPayload::Text { text, .. } => {
                let inner = unwrap_block(unwrap_block(text, "turn_aborted"), "turn_retried");
                body.push_str(&format!("  [user_input]{inner}[/user_input]\n"));
            }
            _ => {}
        }
    }
    transcribe(&mut body, produced, outputs);
    body.push_str("[/turn_aborted]");
    kept.push(user_text(body));
    kept
}

/// The `[turn_retried]` block describing what failed attempts produced, or `None` if nothing.
pub(super) fn retry_transcript(
    produced: &[ModelPayload],
    outputs: &[ModelPayload],
) -> Option<ModelPayload> {
    if produced.is_empty() && outputs.is_empty() {
        return None;
    }
    let mut body = String::from("[turn_retried]\n");
    transcribe(&mut body, produced, outputs);
    body.push_str("[/turn_retried]");
    Some(user_text(body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flatten_keeps_structured_outputs() {
        let input = vec![placeholder("call_0"), user_text("do it".into())];
        let produced = vec![ModelPayload::Text {
            role: Role::Assistant,
            text: "half".into(),
            sender: None,
            stop_reason: StopReason::Completed,
            fidelity: None,
        }];
        let out = flatten_aborted(&input, &produced, &[]);
        assert_eq!(out.len(), 2);
        assert!(
            matches!(&out[0], ModelPayload::ToolCallOutput { tool_call_id, .. } if tool_call_id == "call_0")
        );
        match &out[1] {
            ModelPayload::Text { text, .. } => {
                assert_eq!(
                    text,
                    "[turn_aborted]\n  [user_input]do it[/user_input]\n  [text]half[/text]\n[/turn_aborted]"
                );
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn empty_retry_has_no_transcript() {
        assert!(retry_transcript(&[], &[]).is_none());
    }
}
