//! What a tool is to the model and the close-out: `ToolDefinitionConfig` (name, schema,
//! permission, limits) and its `Permission`/`ForModel` fields, with the spec the model sees.
//! Data only: it knows no registry and no tool's code; each profile's definitions are in
//! `tools/profile/<profile>/`. The registry, the bindings and the tools import it from here.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

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
