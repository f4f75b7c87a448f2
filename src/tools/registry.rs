//! Tool definitions (`ToolDefinitionConfig`), the default table (`docs/tools.md#default-tool-table`), and the
//! registry a session assembles from it: which tools the model sees, with which limits.
//!
//! The registry only maps names to definitions and bindings ([`ToolBinding`]: a local
//! implementation or the session service that serves the tool); binding a call to a service is
//! the session's job, running it the close-out's (`close_out`).

use std::collections::HashMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::binding::{RegisteredTool, ServiceKind, ToolBinding, ToolWrapper};
use super::{BlockingTool, Tool};
use crate::error::ConfigError;

mod entry;
pub use entry::{BuiltinEntry, ToolOverride};

/// `r` tools only read; `rw` tools may change the workspace or run programs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Permission {
    #[serde(rename = "r")]
    Read,
    #[serde(rename = "rw")]
    ReadWrite,
}

/// Which models a tool is offered to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ForModel {
    Vision,
    TextOnly,
}

/// One tool's definition, as in PenguinHarness's `tools.builtin` entries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDefinitionConfig {
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments object.
    pub parameters: Value,
    pub permission: Permission,
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
        }
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
        ),
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
        ),
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
        ),
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
        ),
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
                    "tty": {"type": "boolean", "description": "Run under a pseudo-terminal (default false)."}
                }),
                &["description", "cmd"],
            ),
            ReadWrite,
            120_000,
            16_000,
        ),
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
        ),
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
        ),
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
        ),
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

/// How a builtin runs, when this build has it: the file tools are local, the command and
/// subagent tools are served by the session's supervisors.
pub fn builtin_binding(name: &str) -> Option<ToolBinding> {
    let local = |tool: Arc<dyn Tool>| Some(ToolBinding::Local(tool));
    match name {
        "read_file" => local(Arc::new(BlockingTool::with_quick(
            super::read_file::read_file,
            super::read_file::is_small_file,
        ))),
        "edit_file" => local(Arc::new(
            BlockingTool::new(super::edit_file::edit_file)
                .writing(super::path_locks::file_path_keys),
        )),
        "write_file" => local(Arc::new(
            BlockingTool::new(super::write_file::write_file)
                .writing(super::path_locks::file_path_keys),
        )),
        "apply_patch" => local(Arc::new(
            BlockingTool::new(super::apply_patch::apply_patch)
                .writing(super::apply_patch::write_keys),
        )),
        "exec_command" | "input_command" | "kill_command" | "list_commands" => {
            Some(ToolBinding::Service(ServiceKind::Commands))
        }
        "run_subagent" | "input_subagent" | "kill_subagent" | "list_subagents" => {
            Some(ToolBinding::Service(ServiceKind::Subagents))
        }
        _ => None,
    }
}

/// The tools of a session, in the order the model sees them.
#[derive(Clone, Default)]
pub struct ToolRegistry {
    /// Shared by clones until one of them changes (sessions of one config share it).
    order: Arc<Vec<String>>,
    by_name: Arc<HashMap<String, RegisteredTool>>,
    /// `model_specs()` computed once and shared by every clone (reset by any change), so the
    /// sessions of one config share one copy of the tool JSON.
    specs: Arc<std::sync::OnceLock<Arc<Vec<Value>>>>,
}

impl ToolRegistry {
    /// An empty registry (no tools).
    pub fn empty() -> Self {
        Self::default()
    }

    /// Every builtin this build implements, with the default definitions.
    pub fn builtin() -> Self {
        let mut reg = Self::empty();
        for name in BUILTIN_NAMES {
            if let (Some(def), Some(binding)) = (default_definition(name), builtin_binding(name)) {
                reg.register_binding(def, binding);
            }
        }
        reg
    }

    /// The list of a config's `tools.builtin`, replacing the default list wholesale.
    /// An unknown or unavailable name is an error naming it.
    pub fn from_entries(entries: &[BuiltinEntry]) -> Result<Self, ConfigError> {
        Self::assemble(Some(entries), Vec::new())
    }

    /// The tools of a session: the default list (`entries: None`) or a config's `tools.builtin`,
    /// with the model's image tool from `image_tools` (`read_image` for vision models, else
    /// `describe_image`). A configured image tool the model does not use is left out.
    pub fn assemble(
        entries: Option<&[BuiltinEntry]>,
        image_tools: Vec<(ToolDefinitionConfig, Arc<dyn Tool>)>,
    ) -> Result<Self, ConfigError> {
        let Some(entries) = entries else {
            let mut reg = Self::builtin();
            for (def, tool) in image_tools {
                reg.register(def, tool);
            }
            return Ok(reg);
        };
        let mut reg = Self::empty();
        for entry in entries {
            let (name, ov) = match entry {
                BuiltinEntry::Name(n) => (n.as_str(), None),
                BuiltinEntry::Override(o) => (o.name.as_str(), Some(o)),
            };
            let known = default_definition(name).ok_or_else(|| ConfigError::UnknownTool {
                name: name.to_string(),
                known: BUILTIN_NAMES.join(", "),
            })?;
            let (mut def, binding) = if known.for_model.is_some() {
                match image_tools.iter().find(|(d, _)| d.name == name) {
                    Some((d, t)) => (d.clone(), ToolBinding::Local(t.clone())),
                    None => continue,
                }
            } else {
                let binding = builtin_binding(name)
                    .ok_or_else(|| ConfigError::UnavailableTool(name.to_string()))?;
                (known, binding)
            };
            if let Some(o) = ov {
                if let Some(v) = &o.description {
                    def.description = v.clone();
                }
                if let Some(v) = &o.parameters {
                    def.parameters = v.clone();
                }
                if let Some(v) = o.permission {
                    def.permission = v;
                }
                if let Some(v) = o.for_model {
                    def.for_model = Some(v);
                }
                if let Some(v) = o.timeout_ms {
                    def.timeout_ms = v;
                }
                if let Some(v) = o.max_output_length {
                    def.max_output_length = v;
                }
                if let Some(v) = o.call_description {
                    def.call_description = v;
                }
            }
            reg.register_binding(def, binding);
        }
        Ok(reg)
    }

    /// Adds (or replaces) a local tool. Library users register their own tools this way.
    pub fn register(&mut self, definition: ToolDefinitionConfig, tool: Arc<dyn Tool>) {
        self.register_binding(definition, ToolBinding::Local(tool));
    }

    /// Adds (or replaces) a tool served by the session's service of `kind`.
    pub fn register_service(&mut self, definition: ToolDefinitionConfig, kind: ServiceKind) {
        self.register_binding(definition, ToolBinding::Service(kind));
    }

    /// Adds (or replaces) a tool with its binding.
    pub fn register_binding(&mut self, definition: ToolDefinitionConfig, binding: ToolBinding) {
        self.specs = Arc::default();
        let name = definition.name.clone();
        if !self.by_name.contains_key(&name) {
            Arc::make_mut(&mut self.order).push(name.clone());
        }
        Arc::make_mut(&mut self.by_name).insert(
            name,
            RegisteredTool {
                definition: Arc::new(definition),
                binding,
                wrappers: Vec::new(),
            },
        );
    }

    /// Swaps the implementation of a registered tool for a local one, keeping its definition
    /// (and the shared specs); false when no tool has that name.
    pub fn replace_implementation(&mut self, name: &str, tool: Arc<dyn Tool>) -> bool {
        self.update(name, |t| {
            t.binding = ToolBinding::Local(tool);
            t.wrappers.clear();
        })
    }

    /// Wraps the implementation of a registered tool each time it is bound (local or served),
    /// keeping its definition; false when no tool has that name.
    pub fn wrap(&mut self, name: &str, wrapper: ToolWrapper) -> bool {
        self.update(name, |t| t.wrappers.push(wrapper))
    }

    fn update(&mut self, name: &str, change: impl FnOnce(&mut RegisteredTool)) -> bool {
        if !self.by_name.contains_key(name) {
            return false;
        }
        match Arc::make_mut(&mut self.by_name).get_mut(name) {
            Some(t) => {
                change(t);
                true
            }
            None => false,
        }
    }

    /// Removes a tool by name; true when it was there.
    pub fn remove(&mut self, name: &str) -> bool {
        self.specs = Arc::default();
        if !self.by_name.contains_key(name) {
            return false;
        }
        Arc::make_mut(&mut self.order).retain(|n| n != name);
        Arc::make_mut(&mut self.by_name).remove(name).is_some()
    }

    pub fn get(&self, name: &str) -> Option<&RegisteredTool> {
        self.by_name.get(name)
    }

    /// The service kind `name` is bound to, if it is a service-bound tool.
    pub fn service_of(&self, name: &str) -> Option<&ServiceKind> {
        self.by_name.get(name).and_then(|t| t.binding.service())
    }

    /// Whether any tool is served by `kind`.
    pub fn uses(&self, kind: &ServiceKind) -> bool {
        self.by_name
            .values()
            .any(|t| t.binding.service() == Some(kind))
    }

    /// The names of the tools served by `kind`, in order.
    pub fn bound_to(&self, kind: &ServiceKind) -> Vec<String> {
        self.order
            .iter()
            .filter(|n| self.service_of(n) == Some(kind))
            .cloned()
            .collect()
    }

    pub fn permission(&self, name: &str) -> Option<Permission> {
        self.by_name.get(name).map(|t| t.definition.permission)
    }

    pub fn names(&self) -> Vec<String> {
        self.order.as_ref().clone()
    }

    pub fn len(&self) -> usize {
        self.order.len()
    }

    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// `{name, description, parameters}` of every tool, in order (for the model and
    /// `tool_list_ready`).
    pub fn model_specs(&self) -> Vec<Value> {
        self.shared_model_specs().as_ref().clone()
    }

    /// [`Self::model_specs`], computed once and shared with every clone of this registry.
    pub fn shared_model_specs(&self) -> Arc<Vec<Value>> {
        self.specs
            .get_or_init(|| Arc::new(self.compute_specs()))
            .clone()
    }

    fn compute_specs(&self) -> Vec<Value> {
        self.order
            .iter()
            .filter_map(|n| self.by_name.get(n))
            .map(|t| t.definition.model_spec())
            .collect()
    }
}

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

    #[test]
    fn unknown_name_is_an_error_naming_it() {
        let err = ToolRegistry::from_entries(&[BuiltinEntry::Name("reed_file".into())])
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("reed_file"), "{err}");
    }

    #[test]
    fn the_registry_answers_which_service_serves_a_tool() {
        let reg = ToolRegistry::builtin();
        assert_eq!(
            reg.bound_to(&ServiceKind::Commands),
            [
                "exec_command",
                "input_command",
                "kill_command",
                "list_commands"
            ]
        );
        assert_eq!(
            reg.bound_to(&ServiceKind::Subagents),
            [
                "run_subagent",
                "input_subagent",
                "kill_subagent",
                "list_subagents"
            ]
        );
        assert_eq!(reg.service_of("read_file"), None);
        assert!(reg.uses(&ServiceKind::Commands));
        let files = ToolRegistry::from_entries(&[BuiltinEntry::Name("read_file".into())])
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(!files.uses(&ServiceKind::Commands));
        assert!(!files.uses(&ServiceKind::Subagents));
    }
}
