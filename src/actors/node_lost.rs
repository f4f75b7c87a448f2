//! Failover records (`docs/protocol.md#failover`): what a node that takes over a session from a
//! holder that died (its lease ran out without a release) records before the session runs
//! anything: an output for every tool call left in flight (the resume placeholder), a
//! `task_end` (`failed`, reason `node_lost`) for the task the dead node was running, and a
//! `[background_task_done]` notice with status `lost` for every background command it had
//! running (`commands.rs`).
//!
//! Pure interpretation of the dead holder's records: it builds records and never writes them
//! (the resumed session does, through its trace, under the new epoch), and it never takes a
//! lease (the host and `store::lease` do).

use crate::message::{
    EventPayload, ModelPayload, OmniMessage, Payload, Role, Sender, StopReason, build,
};

mod commands;

pub use commands::{RunningCommand, running_commands};

/// The records a takeover appends, in order: one placeholder output per call of `unpaired`
/// (the calls of the whole trace without an output, in call order), the lost task's
/// `task_end` when `holder` (the dead holder's own records) ends inside a task, then one
/// `lost` notice per command `holder` left running. Empty when nothing was left behind.
pub fn takeover_records(
    unpaired: &[String],
    holder_node: &str,
    holder: &[OmniMessage],
) -> Vec<OmniMessage> {
    let mut records: Vec<OmniMessage> = unpaired
        .iter()
        .map(|id| OmniMessage::model(crate::trace::resume::placeholder(id)))
        .collect();
    if task_was_running(holder) {
        records.push(build::task_end_node_lost());
    }
    for command in running_commands(holder) {
        let text = super::background_notice::lost_notice(&command.id, &command.label, holder_node);
        records.push(build::user_text(text, Some(Sender::Harness)));
    }
    records
}

/// Whether `records` end inside a task: a task's prompt, its first request or its tool list
/// comes after the last `task_end` (a compaction's own request, e.g. a manual compaction of an
/// idle session, starts no task).
pub fn task_was_running(records: &[OmniMessage]) -> bool {
    let mut open = false;
    let mut in_compaction = false;
    for record in records.iter().filter(|r| !r.has_origin()) {
        match &record.payload {
            Payload::Event(EventPayload::TaskEnd { .. }) => open = false,
            Payload::Event(EventPayload::CompactionBegin { .. }) => in_compaction = true,
            Payload::Event(EventPayload::CompactionEnd { .. }) => in_compaction = false,
            Payload::Event(EventPayload::RequestBegin {} | EventPayload::ToolListReady { .. })
                if !in_compaction =>
            {
                open = true;
            }
            Payload::Model(ModelPayload::Text {
                role: Role::User,
                sender,
                ..
            }) if !in_compaction && *sender != Some(Sender::Harness) => open = true,
            Payload::Model(ModelPayload::ToolCall {
                stop_reason: StopReason::Completed,
                ..
            }) if !in_compaction => open = true,
            _ => {}
        }
    }
    open
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::build::{task_end, tool_call, tool_call_output, user_text};

    fn begin() -> OmniMessage {
        OmniMessage::event(EventPayload::RequestBegin {})
    }

    #[test]
    fn a_task_is_running_after_its_prompt_until_its_end() {
        assert!(!task_was_running(&[]));
        assert!(task_was_running(&[user_text("go", None)]));
        assert!(task_was_running(&[user_text("go", None), begin()]));
        assert!(!task_was_running(&[
            user_text("go", None),
            begin(),
            task_end(StopReason::Completed)
        ]));
        // A notice delivered while idle, or a manual compaction, starts no task.
        let notice = user_text("[background_task_done]\n…", Some(Sender::Harness));
        let compaction = |end: bool| {
            if end {
                OmniMessage::event(EventPayload::CompactionEnd {
                    reason: "manual".into(),
                    mode: "summarize".into(),
                    status: StopReason::Completed,
                    attempt: None,
                    error_message: None,
                })
            } else {
                OmniMessage::event(EventPayload::CompactionBegin {
                    reason: "manual".into(),
                    mode: "summarize".into(),
                    context: None,
                    turns: None,
                })
            }
        };
        assert!(!task_was_running(&[
            task_end(StopReason::Completed),
            notice,
            compaction(false),
            begin(),
            compaction(true),
        ]));
    }

    #[test]
    fn takeover_answers_calls_ends_the_task_and_loses_commands() {
        let args = r#"{"cmd":"sleep 600","run_in_background":true}"#;
        let holder = vec![
            user_text("go", None),
            begin(),
            tool_call("exec_command", args, "call_0"),
            tool_call_output(
                "call_0",
                "[command running in background with process_id proc-0000abcd; its completion will arrive as a user message — no need to poll. Use input_command to interact or kill_command to stop it]",
                vec![],
                StopReason::Completed,
            ),
            begin(),
            tool_call("exec_command", r#"{"cmd":"sleep 300"}"#, "call_1"),
        ];
        let records = takeover_records(&["call_1".to_string()], "node-a", &holder);
        let lines: Vec<String> = records.iter().map(|r| r.to_json()).collect();
        assert_eq!(lines.len(), 3, "{lines:#?}");
        assert!(
            lines[0].contains(r#""tool_call_id":"call_1""#),
            "{}",
            lines[0]
        );
        assert!(
            lines[0].contains("[interrupted: process exited before the tool finished]"),
            "{}",
            lines[0]
        );
        assert!(
            lines[1].contains(r#""type":"task_end","status":"failed","reason":"node_lost""#),
            "{}",
            lines[1]
        );
        assert!(lines[2].contains("status: lost"), "{}", lines[2]);
        assert!(lines[2].contains("proc-0000abcd"), "{}", lines[2]);
        assert!(lines[2].contains(r#""sender":"harness""#), "{}", lines[2]);

        // A holder that finished its task and had no command leaves nothing to record.
        let clean = vec![
            user_text("go", None),
            begin(),
            task_end(StopReason::Completed),
        ];
        assert!(takeover_records(&[], "node-a", &clean).is_empty());
    }
}
