//! The default definition of each penguin builtin tool (`docs/tools.md#default-tool-table`) and
//! the table's order: data only, including the argument a shell tool's command text is in (read
//! by the command policy). It knows no tool's code and no registry; how each builtin runs is
//! `bindings.rs`'s, and the profile assembles the registry from both.

use serde_json::{Value, json};

use crate::tools::definition::{CommandArgument, ForModel, Permission, ToolDefinitionConfig};

const DESCRIPTION_PROP: &str =
    "One short user-facing sentence saying what this call does. Emit it first.";

fn schema(props: Value, required: &[&str]) -> Value {
    json!({"type": "object", "properties": props, "required": required})
}

/// The default definition of a builtin tool by name (`docs/tools.md#default-tool-table`).
pub fn default_definition(name: &str) -> Option<ToolDefinitionConfig> {
    let d = |n: &str, desc: &str, params: Value, perm: Permission, timeout: i64, max: i64| {
        let mut def = ToolDefinitionConfig::new(n, desc, params, perm);
        def.timeout_ms = timeout;
        def.max_output_length = max;
        def
    };
    use Permission::{Read, ReadWrite};
    let def = match name {
        "read_file" => d(
            "read_file",
            "Read a text file. Returns lines in cat -n format (line numbers, a tab, the content). Use offset (1-based) and limit to page through long files.",
            schema(
                json!({
                    "file_path": {"type": "string", "description": "Absolute path, or relative to the workspace."},
                    "offset": {"type": "number", "description": "1-based line to start at (default 1)."},
                    "limit": {"type": "number", "description": "How many lines to read (default 2000)."}
                }),
                &["file_path"],
            ),
            Read,
            30_000,
            64_000,
        )
        .known_as("Read", &[]),
        "edit_file" => d(
            "edit_file",
            "Replace exact text in an existing file. old_string must match exactly once unless replace_all is true. Returns a unified diff of the change.",
            schema(
                json!({
                    "file_path": {"type": "string", "description": "Absolute path, or relative to the workspace."},
                    "old_string": {"type": "string", "description": "The exact text to replace."},
                    "new_string": {"type": "string", "description": "The replacement text."},
                    "replace_all": {"type": "boolean", "description": "Replace every occurrence (default false)."}
                }),
                &["file_path", "old_string", "new_string"],
            ),
            ReadWrite,
            30_000,
            16_000,
        )
        .known_as("Edit", &[]),
        "write_file" => d(
            "write_file",
            "Create or overwrite a file with the given content. Missing parent directories are created.",
            schema(
                json!({
                    "file_path": {"type": "string", "description": "Absolute path, or relative to the workspace."},
                    "content": {"type": "string", "description": "The full new content of the file."}
                }),
                &["file_path", "content"],
            ),
            ReadWrite,
            30_000,
            16_000,
        )
        .known_as("Write", &[]),
        "apply_patch" => d(
            "apply_patch",
            "Apply a patch to files of the workspace, all or nothing. The input starts with '*** Begin Patch' and ends with '*** End Patch'; in between, sections '*** Add File: <path>' (every line starts with +), '*** Delete File: <path>', or '*** Update File: <path>' (optionally followed by '*** Move to: <new path>') with hunks that start with '@@' (optionally '@@ <a line to find first>') and lines starting with ' ' (context), '-' (removed) or '+' (added). Add and Move never overwrite an existing file.",
            schema(
                json!({
                    "input": {"type": "string", "description": "The whole patch text, from '*** Begin Patch' to '*** End Patch'."}
                }),
                &["input"],
            ),
            ReadWrite,
            30_000,
            16_000,
        )
        .known_as("MultiEdit", &[]),
        "exec_command" => d(
            "exec_command",
            "Run a shell command (bash -lc) in the workspace. Output streams back; a command still running after yield_time_ms keeps running in the background with a process_id.",
            schema(
                json!({
                    "description": {"type": "string", "description": DESCRIPTION_PROP},
                    "cmd": {"type": "string", "description": "The shell command."},
                    "workdir": {"type": "string", "description": "Working directory (default: the workspace)."},
                    "yield_time_ms": {"type": "number", "description": "How long to wait for output before returning (default 60000)."},
                    "run_in_background": {"type": "boolean", "description": "Return at once; a completion notice arrives later."},
                    "tty": {"type": "boolean", "description": "Run under a pseudo-terminal (default false)."},
                    "sandbox_permissions": crate::tools::escalation::arg_schema(),
                    "justification": crate::tools::escalation::justification_schema()
                }),
                &["description", "cmd"],
            ),
            ReadWrite,
            120_000,
            16_000,
        )
        .running(CommandArgument::Command("cmd"))
        .known_as("Bash", &[("command", "cmd")]),
        "input_command" => d(
            "input_command",
            "Send input to a running command (or poll it with empty chars). Send \"\\u0003\" alone to interrupt it.",
            schema(
                json!({
                    "description": {"type": "string", "description": DESCRIPTION_PROP},
                    "process_id": {"type": "string", "description": "The process_id of the command."},
                    "chars": {"type": "string", "description": "Text to write to stdin (default empty: poll)."},
                    "yield_time_ms": {"type": "number", "description": "How long to collect output."}
                }),
                &["description", "process_id"],
            ),
            ReadWrite,
            130_000,
            16_000,
        )
        .running(CommandArgument::Stdin("chars")),
        "kill_command" => d(
            "kill_command",
            "Stop a background command and its process group.",
            schema(
                json!({
                    "description": {"type": "string", "description": DESCRIPTION_PROP},
                    "process_id": {"type": "string", "description": "The process_id of the command."}
                }),
                &["description", "process_id"],
            ),
            ReadWrite,
            30_000,
            16_000,
        )
        .known_as("KillShell", &[("shell_id", "process_id")]),
        "run_subagent" => d(
            "run_subagent",
            "Start a subagent with its own session on a prompt and collect its answer.",
            schema(
                json!({
                    "description": {"type": "string", "description": DESCRIPTION_PROP},
                    "prompt": {"type": "string", "description": "The task for the subagent."},
                    "yield_time_ms": {"type": "number", "description": "How long to wait (default 300000)."},
                    "run_in_background": {"type": "boolean", "description": "Return at once; a completion notice arrives later."},
                    "agent_id": {"type": "string", "description": "A configured agent (agents: in the config); default: this session's."},
                    "provider": {"type": "string", "description": "With model_id: the child's model (a configured one); default: this session's."},
                    "model_id": {"type": "string", "description": "With provider: the child's model."},
                    "thinking_level": {"type": "string", "enum": ["low", "medium", "high", "xhigh", "max"], "description": "Sent as reasoning_effort to OpenAI-compatible providers."}
                }),
                &["description", "prompt"],
            ),
            ReadWrite,
            600_000,
            16_000,
        )
        .known_as("Task", &[]),
        "input_subagent" => d(
            "input_subagent",
            "Poll a subagent or send it a follow-up prompt.",
            schema(
                json!({
                    "description": {"type": "string", "description": DESCRIPTION_PROP},
                    "subagent_id": {"type": "string", "description": "The subagent_id."},
                    "prompt": {"type": "string", "description": "Follow-up prompt (default empty: poll)."},
                    "mode": {"type": "string", "enum": ["normal", "steer"], "description": "normal (default): the prompt starts a new round of an idle subagent; steer: it joins the running round."},
                    "yield_time_ms": {"type": "number", "description": "How long to wait."}
                }),
                &["description", "subagent_id"],
            ),
            ReadWrite,
            600_000,
            16_000,
        ),
        "kill_subagent" => d(
            "kill_subagent",
            "Stop a subagent and remove it.",
            schema(
                json!({
                    "description": {"type": "string", "description": DESCRIPTION_PROP},
                    "subagent_id": {"type": "string", "description": "The subagent_id."}
                }),
                &["description", "subagent_id"],
            ),
            ReadWrite,
            30_000,
            16_000,
        ),
        "list_commands" => d(
            "list_commands",
            "List this session's background commands: process_id, running or exited (with how it ended), seconds since last use, and the command's first line.",
            schema(json!({}), &[]),
            Read,
            30_000,
            16_000,
        ),
        "list_subagents" => d(
            "list_subagents",
            "List this session's subagents: id, running or idle, turns and token use so far, and the first line of each prompt.",
            schema(json!({}), &[]),
            Read,
            30_000,
            16_000,
        ),
        "read_image" => {
            let mut def = d(
                "read_image",
                "Read an image (local path or http(s) URL) and attach it to the conversation.",
                schema(
                    json!({"source": {"type": "string", "description": "Path or URL of the image."}}),
                    &["source"],
                ),
                Read,
                60_000,
                16_000,
            );
            def.for_model = Some(ForModel::Vision);
            def
        }
        "describe_image" => {
            let mut def = d(
                "describe_image",
                "Have a vision model describe an image (local path or http(s) URL).",
                schema(
                    json!({
                        "source": {"type": "string", "description": "Path or URL of the image."},
                        "prompt": {"type": "string", "description": "What to ask about the image."}
                    }),
                    &["source"],
                ),
                Read,
                90_000,
                16_000,
            );
            def.for_model = Some(ForModel::TextOnly);
            def
        }
        _ => return None,
    };
    Some(def)
}

/// Names of the builtin table (`docs/tools.md#default-tool-table`), in its order.
pub const BUILTIN_NAMES: [&str; 14] = [
    "read_file",
    "edit_file",
    "write_file",
    "apply_patch",
    "exec_command",
    "input_command",
    "kill_command",
    "list_commands",
    "run_subagent",
    "input_subagent",
    "kill_subagent",
    "list_subagents",
    "read_image",
    "describe_image",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_table_limits() {
        let r = default_definition("read_file").map(|d| (d.timeout_ms, d.max_output_length));
        assert_eq!(r, Some((30_000, 64_000)));
        let i = default_definition("input_command").map(|d| d.timeout_ms);
        assert_eq!(i, Some(130_000));
        assert!(
            BUILTIN_NAMES
                .iter()
                .all(|n| default_definition(n).is_some())
        );
    }

    #[test]
    fn call_description_false_strips_property() {
        let mut def = default_definition("exec_command").unwrap_or_else(|| unreachable!());
        def.call_description = false;
        let spec = def.model_spec();
        assert!(
            spec["parameters"]["properties"]
                .get("description")
                .is_none()
        );
        assert_eq!(spec["parameters"]["required"], json!(["cmd"]));
    }
}
