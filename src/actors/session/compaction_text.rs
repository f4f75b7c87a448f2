//! The texts of a compaction: the summary request's prompt and retry note, the summary's
//! extraction from a reply, the `[context_summary]` block the new context starts with, and the
//! plain-text form of tool outputs a `discard` compaction keeps.
//!
//! Pure functions; nothing here is traced, streamed or sent.

use crate::message::{ModelPayload, Role, Sender, StopReason};

/// The user text asking for the summary (after the outputs of finished calls).
pub(super) const SUMMARY_PROMPT: &str = "[compaction_request]\n\
The conversation so far is about to be replaced by a summary, because the context is getting too long. \
Write a summary that lets you continue the work without the earlier messages: the user's goals and \
instructions, what has been done so far (files read or changed, commands run and their results), what \
you learned, decisions taken, open problems and the next steps. Do not call any tool. Put the whole \
summary between [summary] and [/summary].\n[/compaction_request]";

/// Added to the request after a reply that made tool calls or had no summary.
pub(super) const RETRY_NOTE: &str = "[compaction_retry]\n\
Your previous reply was not usable: it called tools (no tool runs while the context is summarized) or \
had no summary between [summary] and [/summary]. Reply with the summary only, between [summary] and \
[/summary], and call no tool.\n[/compaction_retry]";

/// The output given to a tool call of a summary reply (the call is not run).
pub(super) const CALL_NOT_RUN: &str =
    "[compaction] tool calls are not run while the context is summarized";

/// The summary between the last `[summary]` and the `[/summary]` after it (the legacy
/// `<summary>…</summary>` form is accepted too), trimmed; `None` when missing or empty.
pub(super) fn extract_summary(reply: &str) -> Option<String> {
    for (open, close) in [("[summary]", "[/summary]"), ("<summary>", "</summary>")] {
        if let Some(start) = reply.rfind(open) {
            let body = &reply[start + open.len()..];
            if let Some(end) = body.find(close) {
                let text = body[..end].trim();
                if !text.is_empty() {
                    return Some(text.to_string());
                }
            }
        }
    }
    None
}

/// The first user text of a compacted context.
pub(super) fn context_summary(summary: &str) -> String {
    format!("[context_summary]\n{summary}\n[/context_summary]")
}

fn user_text(text: String, sender: Option<Sender>) -> ModelPayload {
    ModelPayload::Text {
        role: Role::User,
        text,
        sender,
        stop_reason: StopReason::Completed,
        fidelity: None,
    }
}

/// The pending input a `discard` compaction keeps: user messages as they are, tool outputs as
/// plain text (their calls are gone with the old context, so a provider would reject them).
pub(super) fn keep_for_discard(pending: Vec<ModelPayload>) -> Vec<ModelPayload> {
    pending
        .into_iter()
        .map(|m| match m {
            ModelPayload::ToolCallOutput {
                output,
                tool_call_id,
                stop_reason,
                ..
            } => user_text(
                format!(
                    "[tool_call_output id=\"{tool_call_id}\" status=\"{}\"]\n{output}\n[/tool_call_output]",
                    stop_reason_name(stop_reason)
                ),
                Some(Sender::Harness),
            ),
            other => other,
        })
        .collect()
}

fn stop_reason_name(s: StopReason) -> String {
    serde_json::to_value(s)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// A user text payload (the prompt, the note, the summary block).
pub(super) fn user(text: impl Into<String>) -> ModelPayload {
    user_text(text.into(), None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_is_taken_from_the_last_marked_block() {
        assert_eq!(
            extract_summary("intro [summary]\n old \n[/summary] then [summary] new [/summary]"),
            Some("new".to_string())
        );
        assert_eq!(
            extract_summary("<summary>legacy</summary>"),
            Some("legacy".into())
        );
        assert_eq!(extract_summary("no markers"), None);
        assert_eq!(extract_summary("[summary]   [/summary]"), None);
        assert_eq!(extract_summary("[summary] unterminated"), None);
        assert_eq!(
            context_summary("s"),
            "[context_summary]\ns\n[/context_summary]"
        );
    }

    #[test]
    fn discard_keeps_outputs_as_text() {
        let kept = keep_for_discard(vec![
            ModelPayload::ToolCallOutput {
                role: Role::User,
                output: "hi".into(),
                images: Vec::new(),
                tool_call_id: "call_3".into(),
                stop_reason: StopReason::Completed,
            },
            user("note"),
        ]);
        assert_eq!(
            kept,
            vec![
                user_text(
                    "[tool_call_output id=\"call_3\" status=\"completed\"]\nhi\n[/tool_call_output]"
                        .into(),
                    Some(Sender::Harness)
                ),
                user("note")
            ]
        );
    }
}
