//! The background commands a session's records leave running: registered by `exec_command`
//! (`run_in_background`, or a foreground command that outlived its window) or by the openvaala
//! profile's `bash` (`status: running`), and not since reported over (a completion notice, an
//! `input_command` that saw the exit, `kill_command`, `command_evicted`, a later result header
//! with another status).
//!
//! It reads the texts the command tools write (`docs/tools.md`, `docs/tools-openvaala.md`) and
//! nothing else; it never touches a process.

use std::collections::HashMap;

use serde_json::Value;

use crate::message::{EventPayload, ModelPayload, OmniMessage, Payload, Role, Sender, StopReason};

/// A command the records leave running.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunningCommand {
    /// `proc-…` (penguin profile) or `cmd-…` (openvaala profile).
    pub id: String,
    /// The command's first line, clipped as the notices clip it.
    pub label: String,
}

/// The commands `records` leave running, in registration order.
pub fn running_commands(records: &[OmniMessage]) -> Vec<RunningCommand> {
    let mut calls: HashMap<&str, (&str, Value)> = HashMap::new();
    let mut running: Vec<RunningCommand> = Vec::new();
    for record in records.iter().filter(|r| !r.has_origin()) {
        match &record.payload {
            Payload::Model(ModelPayload::ToolCall {
                name,
                arguments,
                tool_call_id,
                stop_reason: StopReason::Completed,
                ..
            }) => {
                let args = serde_json::from_str(arguments).unwrap_or(Value::Null);
                calls.insert(tool_call_id, (name, args));
            }
            Payload::Model(ModelPayload::ToolCallOutput {
                tool_call_id,
                output,
                stop_reason,
                ..
            }) => {
                if let Some((name, args)) = calls.get(tool_call_id.as_str()) {
                    on_output(&mut running, name, args, output, *stop_reason);
                }
            }
            Payload::Model(ModelPayload::Text {
                role: Role::User,
                text,
                sender: Some(Sender::Harness),
                ..
            }) => {
                if let Some(id) = finished_command(text) {
                    running.retain(|c| c.id != id);
                }
            }
            Payload::Event(EventPayload::CommandEvicted { process_id, .. }) => {
                running.retain(|c| &c.id != process_id);
            }
            _ => {}
        }
    }
    running
}

fn str_arg<'a>(args: &'a Value, key: &str) -> &'a str {
    args.get(key).and_then(Value::as_str).unwrap_or("")
}

fn register(running: &mut Vec<RunningCommand>, id: &str, label: Option<&str>) {
    if let Some(known) = running.iter_mut().find(|c| c.id == id) {
        if let Some(label) = label {
            known.label = crate::actors::background_notice::label(label);
        }
        return;
    }
    running.push(RunningCommand {
        id: id.to_string(),
        label: crate::actors::background_notice::label(label.unwrap_or("")),
    });
}

fn on_output(
    running: &mut Vec<RunningCommand>,
    name: &str,
    args: &Value,
    output: &str,
    stop_reason: StopReason,
) {
    match name {
        "exec_command" => {
            let id = between(
                output,
                "[command running in background with process_id ",
                ";",
            )
            .or_else(|| between(output, "[process running with process_id ", ";"));
            if let Some(id) = id {
                register(running, id, Some(str_arg(args, "cmd")));
            }
        }
        "input_command" => {
            let id = str_arg(args, "process_id");
            let still = output.contains(&format!("[process still running with process_id {id}]"));
            // An interrupted poll ends only the poll: the command runs on.
            if !still && stop_reason != StopReason::Aborted {
                running.retain(|c| c.id != id);
            }
        }
        "kill_command" => {
            let id = str_arg(args, "process_id");
            running.retain(|c| c.id != id);
        }
        "bash" | "read_command_output" | "write_stdin" | "stop_command" => {
            let Some((id, status)) = header(output) else {
                return;
            };
            if status == "running" {
                let label = (name == "bash").then(|| str_arg(args, "command"));
                register(running, id, label);
            } else {
                running.retain(|c| c.id != id);
            }
        }
        _ => {}
    }
}

/// The text between `start` and the next `end` after it.
fn between<'a>(text: &'a str, start: &str, end: &str) -> Option<&'a str> {
    let rest = &text[text.find(start)? + start.len()..];
    let id = &rest[..rest.find(end)?];
    (!id.is_empty()).then_some(id)
}

/// `(command_id, status)` of an openvaala command result's header.
fn header(output: &str) -> Option<(&str, &str)> {
    let mut lines = output.lines();
    let id = lines.next()?.strip_prefix("command_id: ")?;
    let status = lines.next()?.strip_prefix("status: ")?;
    Some((id.trim(), status.trim()))
}

/// The id of the command a `[background_task_done]` notice reports.
fn finished_command(text: &str) -> Option<&str> {
    if !text.starts_with("[background_task_done]") {
        return None;
    }
    let block = &text[..text.find("[/background_task_done]")?];
    let mut lines = block.lines();
    lines.find(|l| *l == "kind: command")?;
    lines.next()?.strip_prefix("id: ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::actors::background_notice::{NoticeKind, notice};
    use crate::message::build::{tool_call, tool_call_output, user_text};

    fn out(id: &str, text: &str) -> OmniMessage {
        tool_call_output(id, text, vec![], StopReason::Completed)
    }

    fn bg(id: &str) -> String {
        format!(
            "[command running in background with process_id {id}; its completion will arrive as a user message — no need to poll. Use input_command to interact or kill_command to stop it]"
        )
    }

    fn ids(records: &[OmniMessage]) -> Vec<String> {
        running_commands(records)
            .into_iter()
            .map(|c| c.id)
            .collect()
    }

    #[test]
    fn registered_commands_run_until_reported_over() {
        let records = vec![
            tool_call("exec_command", r#"{"cmd":"sleep 1\nmore"}"#, "call_0"),
            out("call_0", &bg("proc-00000001")),
            tool_call("exec_command", r#"{"cmd":"make"}"#, "call_1"),
            out(
                "call_1",
                "partial\n[process running with process_id proc-00000002; use input_command to send input or poll for output]",
            ),
            tool_call("exec_command", r#"{"cmd":"true"}"#, "call_2"),
            out("call_2", ""),
            tool_call("exec_command", r#"{"cmd":"a"}"#, "call_3"),
            out("call_3", &bg("proc-00000003")),
            tool_call("exec_command", r#"{"cmd":"b"}"#, "call_4"),
            out("call_4", &bg("proc-00000004")),
            tool_call("exec_command", r#"{"cmd":"c"}"#, "call_5"),
            out("call_5", &bg("proc-00000005")),
        ];
        let running = running_commands(&records);
        assert_eq!(
            running[0],
            RunningCommand {
                id: "proc-00000001".into(),
                label: "sleep 1".into()
            }
        );
        assert_eq!(
            ids(&records),
            [
                "proc-00000001",
                "proc-00000002",
                "proc-00000003",
                "proc-00000004",
                "proc-00000005"
            ]
        );

        let mut later = records;
        later.extend([
            // A poll that found it running, then an interrupted one: still running.
            tool_call("input_command", r#"{"process_id":"proc-00000002"}"#, "call_6"),
            out(
                "call_6",
                "x\n[process still running with process_id proc-00000002]",
            ),
            tool_call("input_command", r#"{"process_id":"proc-00000002"}"#, "call_7"),
            tool_call_output("call_7", "[interrupted: tool aborted by user]", vec![], StopReason::Aborted),
            // A poll that saw the exit, a kill, a notice, an eviction: over.
            tool_call("input_command", r#"{"process_id":"proc-00000001"}"#, "call_8"),
            out("call_8", "done"),
            tool_call("kill_command", r#"{"process_id":"proc-00000003"}"#, "call_9"),
            out("call_9", "[process proc-00000003 killed (SIGTERM to the process group, SIGKILL after a grace period)]"),
            user_text(
                notice(NoticeKind::Command, "proc-00000004", false, "exit code 0", "b", ""),
                Some(Sender::Harness),
            ),
            OmniMessage::event(EventPayload::CommandEvicted {
                process_id: "proc-00000005".into(),
                status: "running".into(),
            }),
        ]);
        assert_eq!(ids(&later), ["proc-00000002"]);
    }

    #[test]
    fn openvaala_headers_say_running_or_over() {
        let head = |id: &str, status: &str| {
            format!("command_id: {id}\nstatus: {status}\nnext_cursor: 0\n\nout")
        };
        let records = vec![
            tool_call("bash", r#"{"command":"npm run dev"}"#, "call_0"),
            out("call_0", &head("cmd-0000000a", "running")),
            tool_call("bash", r#"{"command":"ls"}"#, "call_1"),
            out("call_1", &head("cmd-0000000b", "exited")),
            tool_call("bash", r#"{"command":"sleep 9"}"#, "call_2"),
            out("call_2", &head("cmd-0000000c", "running")),
            tool_call("stop_command", r#"{"command_id":"cmd-0000000c"}"#, "call_3"),
            out("call_3", &head("cmd-0000000c", "failed")),
        ];
        let running = running_commands(&records);
        assert_eq!(
            running,
            [RunningCommand {
                id: "cmd-0000000a".into(),
                label: "npm run dev".into()
            }]
        );
    }

    #[test]
    fn origin_tagged_records_are_a_child_s_not_ours() {
        let mut child = out("call_0", &bg("proc-0000000f"));
        child.origin = Some(vec!["session-child".into()]);
        let records = vec![tool_call("exec_command", r#"{"cmd":"x"}"#, "call_0"), child];
        assert!(ids(&records).is_empty());
    }
}
