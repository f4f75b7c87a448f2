//! What a tool is to the model and the close-out: `ToolDefinitionConfig` (name, schema,
//! permission, limits) and its `Permission`/`ForModel` fields, with the spec the model sees.
//! Data only: it knows no registry and no tool's code; each profile's definitions are in
//! `tools/profile/<profile>/`. The registry, the bindings and the tools import it from here.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// `r` tools only read; `rw` tools may change the workspace or run programs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Permission {
    /// Only reads (`r`).
    #[serde(rename = "r")]
    Read,
    /// May change the workspace or run programs (`rw`).
    #[serde(rename = "rw")]
    ReadWrite,
}

/// Which models a tool is offered to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ForModel {
    /// Only to models that take images.
    Vision,
    /// Only to models that do not take images.
    TextOnly,
}

/// One tool's definition, as in PenguinHarness's `tools.builtin` entries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDefinitionConfig {
    /// The tool's name, unique in a session.
    pub name: String,
    /// What the model is told the tool does.
    pub description: String,
    /// JSON Schema of the arguments object.
    pub parameters: Value,
    /// Whether it only reads (decides approval under `read-only`).
    pub permission: Permission,
    /// Which models it is offered to (`None`: all).
    #[serde(rename = "forModel", default, skip_serializing_if = "Option::is_none")]
    pub for_model: Option<ForModel>,
    /// Per-call timeout; `<= 0` disables it.
    #[serde(rename = "timeoutMs")]
    pub timeout_ms: i64,
    /// Output cap in characters; `<= 0` disables it.
    #[serde(rename = "maxOutputLength")]
    pub max_output_length: i64,
    /// `false` strips the `description` property from the schema at assembly.
    #[serde(default = "yes")]
    pub call_description: bool,
    /// The argument that carries shell text, for a shell tool: what the command policy checks
    /// (`approval/command_policy.rs`). Declared by the tool's own definition; not config.
    #[serde(skip)]
    pub command_argument: Option<CommandArgument>,
    /// Claude Code's name for this tool (`Bash`, `Read`, …), which hook matchers and permission
    /// rules also take. Declared by the tool's own definition; not config.
    #[serde(skip)]
    pub claude_code: Option<ClaudeCodeName>,
    /// A shared resource every call of this tool changes (an MCP server's state, for its tools
    /// not annotated `readOnlyHint: true`): calls holding one run one after another, in call
    /// order (`path_locks.rs`). Declared by whoever builds the definition; not config.
    #[serde(skip)]
    pub exclusive: Option<String>,
}

/// Claude Code's name for a tool and the arguments it spells differently.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClaudeCodeName {
    /// `Bash`, `Read`, `Write`, `Edit`, `MultiEdit`, `Task`, `BashOutput`, `KillShell`.
    pub name: &'static str,
    /// (Claude Code's argument, this tool's argument) pairs that carry the same value.
    pub fields: &'static [(&'static str, &'static str)],
}

/// The argument of a shell tool whose text the command policy checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommandArgument {
    /// A command line the tool runs (penguin's `exec_command.cmd`, openvaala's `bash.command`).
    Command(&'static str),
    /// Text the tool writes to a running command's stdin (`input_command.chars`,
    /// `write_stdin.chars`): a lone Ctrl-C there is an interrupt, not a command.
    Stdin(&'static str),
}

impl CommandArgument {
    /// The argument's name.
    pub fn name(self) -> &'static str {
        match self {
            CommandArgument::Command(name) | CommandArgument::Stdin(name) => name,
        }
    }
}

fn yes() -> bool {
    true
}

impl ToolDefinitionConfig {
    /// A definition with the default limits (120 s timeout, 16000 chars).
    pub fn new(name: &str, description: &str, parameters: Value, permission: Permission) -> Self {
        ToolDefinitionConfig {
            name: name.to_string(),
            description: description.to_string(),
            parameters,
            permission,
            for_model: None,
            timeout_ms: 120_000,
            max_output_length: 16_000,
            call_description: true,
            command_argument: None,
            claude_code: None,
            exclusive: None,
        }
    }

    /// This definition, known to Claude Code as `name` (its `fields` renamed as listed).
    pub fn known_as(
        mut self,
        name: &'static str,
        fields: &'static [(&'static str, &'static str)],
    ) -> Self {
        self.claude_code = Some(ClaudeCodeName { name, fields });
        self
    }

    /// Claude Code's name for this tool, if it has one.
    pub fn claude_code_name(&self) -> Option<&'static str> {
        self.claude_code.map(|c| c.name)
    }

    /// This definition, declaring `argument` as the shell text its calls run.
    pub fn running(mut self, argument: CommandArgument) -> Self {
        self.command_argument = Some(argument);
        self
    }

    /// `{name, description, parameters}` as the model sees it.
    pub fn model_spec(&self) -> Value {
        let mut parameters = self.parameters.clone();
        if !self.call_description {
            strip_description_param(&mut parameters);
        }
        json!({"name": self.name, "description": self.description, "parameters": parameters})
    }
}

fn strip_description_param(schema: &mut Value) {
    if let Some(props) = schema.get_mut("properties").and_then(Value::as_object_mut) {
        props.remove("description");
    }
    if let Some(req) = schema.get_mut("required").and_then(Value::as_array_mut) {
        req.retain(|v| v != "description");
    }
}
