//! The definitions (descriptions and parameter schemas) of the openvaala profile's tools, as in
//! `docs/tools-openvaala.md`, with the argument a shell tool's command text is in (read by the
//! command policy). Texts only: no implementation lives here.

use serde_json::{Value, json};

use crate::tools::definition::CommandArgument;
use crate::tools::profile::penguin::default_definition;
use crate::tools::registry::{Permission, ToolDefinitionConfig};

fn schema(props: Value, required: &[&str]) -> Value {
    json!({"type": "object", "properties": props, "required": required})
}

/// Longest wait of a command tool, in seconds; the call's own timeout is above it.
const WAIT_CAP_S: i64 = 600;

/// The definition of an openvaala tool by name (`None`: not a tool of the profile).
pub fn openvaala_definition(name: &str) -> Option<ToolDefinitionConfig> {
    use Permission::{Read, ReadWrite};
    let d = |desc: &str, params: Value, perm: Permission, timeout_ms: i64| {
        let mut def = ToolDefinitionConfig::new(name, desc, params, perm);
        def.timeout_ms = timeout_ms;
        // The tools bound their own results to 65,536 bytes.
        def.max_output_length = 0;
        def
    };
    let command_id = json!({"type": "string", "description": "The command's id (cmd-xxxxxxxx)."});
    let command_timeout = (WAIT_CAP_S + 60) * 1000;
    let def = match name {
        "read_file" => d(
            "Read a file of the workspace. Returns numbered lines (the line number, a tab, the line), at most 64 KB of whole lines per call, and says where to continue. PNG, JPEG, GIF and WebP files come back as images. AGENTS.md files between the workspace root and the file's directory are brought along the first time.",
            schema(
                json!({
                    "path": {"type": "string", "description": "Path relative to the workspace, or absolute inside it."},
                    "offset": {"type": "integer", "description": "1-based line to start at (default 1)."},
                    "limit": {"type": "integer", "description": "How many lines to read, 1 to 2000 (default 200)."}
                }),
                &["path"],
            ),
            Read,
            60_000,
        )
        .known_as("Read", &[("file_path", "path")]),
        "apply_patch" => {
            let mut def = default_definition("apply_patch")?;
            def.max_output_length = 0;
            def
        }
        "bash" => d(
            "Run a bash command in the workspace. Returns after wait_seconds (or as soon as the command ends) with its command_id, status, exit code and the first page of its output (stdout and stderr merged); a command still running keeps running: read more with read_command_output. A non-zero exit code is a normal result.",
            schema(
                json!({
                    "command": {"type": "string", "description": "The bash command."},
                    "cwd": {"type": "string", "description": "Working directory, relative to the workspace or absolute inside it (default .)."},
                    "wait_seconds": {"type": "number", "description": "How long to wait for the command to end before returning (default 10)."},
                    "timeout_seconds": {"type": "number", "description": "Stop the command and everything it started after this long (default 600; 0 = no limit)."},
                    "interactive": {"type": "boolean", "description": "Run in a pseudo-terminal so write_stdin works (default false)."},
                    "sandbox_permissions": crate::tools::escalation::arg_schema(),
                    "justification": crate::tools::escalation::justification_schema()
                }),
                &["command"],
            ),
            ReadWrite,
            command_timeout,
        )
        .running(CommandArgument::Command("command"))
        .known_as("Bash", &[]),
        "read_command_output" => d(
            "Read a command's output from a cursor: 0, or the next_cursor of the previous result. Waits up to wait_seconds for output past the cursor or the command's end. Pages are at most 64 KB; each command keeps its last 1 MiB.",
            schema(
                json!({
                    "command_id": command_id,
                    "cursor": {"type": "integer", "description": "Byte offset to read from (default 0)."},
                    "wait_seconds": {"type": "number", "description": "How long to wait for new output (default 10)."}
                }),
                &["command_id"],
            ),
            Read,
            command_timeout,
        )
        .known_as("BashOutput", &[("bash_id", "command_id")]),
        "write_stdin" => d(
            "Write characters to an interactive command's terminal (no newline is added: include \\n to end a line). Returns the output that follows.",
            schema(
                json!({
                    "command_id": command_id,
                    "chars": {"type": "string", "description": "The characters to write."},
                    "wait_seconds": {"type": "number", "description": "How long to wait for output after writing (default 2)."}
                }),
                &["command_id", "chars"],
            ),
            ReadWrite,
            command_timeout,
        )
        .running(CommandArgument::Stdin("chars")),
        "stop_command" => d(
            "Stop a command and every process it started.",
            schema(json!({"command_id": command_id}), &["command_id"]),
            ReadWrite,
            30_000,
        )
        .known_as("KillShell", &[("shell_id", "command_id")]),
        "list_commands" => d(
            "List this session's commands with their status and exit code.",
            schema(json!({}), &[]),
            Read,
            30_000,
        ),
        _ => return None,
    };
    Some(def)
}
