//! The entries of a config's `tools.builtin` list: a bare tool name, or a definition whose
//! fields override the default one. Parsing only; the registry applies them. An unknown key in
//! a definition is an error naming the key and the tool (never silently ignored).

use serde::Deserialize;
use serde_json::Value;

use super::{ForModel, Permission};

/// An entry of `tools.builtin`: a bare name, or a definition whose fields override the default.
/// An unknown key in a definition is an error naming the key and the tool.
#[derive(Debug, Clone, PartialEq)]
pub enum BuiltinEntry {
    /// A builtin by name, with its default definition.
    Name(String),
    /// A builtin whose given fields override its default definition.
    Override(ToolOverride),
}

/// The keys a `tools.builtin` definition may have.
const OVERRIDE_KEYS: [&str; 8] = [
    "name",
    "description",
    "parameters",
    "permission",
    "forModel",
    "timeoutMs",
    "maxOutputLength",
    "call_description",
];

impl<'de> Deserialize<'de> for BuiltinEntry {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let map = match Value::deserialize(d)? {
            Value::String(name) => return Ok(BuiltinEntry::Name(name)),
            Value::Object(map) => map,
            _ => {
                return Err(D::Error::custom(
                    "a tools.builtin entry is a tool name or a definition with a `name`",
                ));
            }
        };
        let tool = match map.get("name") {
            Some(Value::String(n)) => n.clone(),
            _ => {
                return Err(D::Error::custom(
                    "a tools.builtin definition needs a `name`",
                ));
            }
        };
        if let Some(key) = map.keys().find(|k| !OVERRIDE_KEYS.contains(&k.as_str())) {
            return Err(D::Error::custom(format!(
                "unknown key \"{key}\" in the tools.builtin entry of \"{tool}\" (known keys: {})",
                OVERRIDE_KEYS.join(", ")
            )));
        }
        serde_json::from_value(Value::Object(map))
            .map(BuiltinEntry::Override)
            .map_err(|e| D::Error::custom(format!("tools.builtin entry of \"{tool}\": {e}")))
    }
}

/// Fields of a `tools.builtin` object entry; only `name` is required.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ToolOverride {
    /// The builtin's name.
    pub name: String,
    /// Replaces the description.
    pub description: Option<String>,
    /// Replaces the arguments' JSON Schema.
    pub parameters: Option<Value>,
    /// Replaces the permission.
    pub permission: Option<Permission>,
    /// Replaces which models the tool is offered to.
    #[serde(rename = "forModel")]
    pub for_model: Option<ForModel>,
    /// Replaces the per-call timeout (`<= 0`: none).
    #[serde(rename = "timeoutMs")]
    pub timeout_ms: Option<i64>,
    /// Replaces the output cap in characters (`<= 0`: none).
    #[serde(rename = "maxOutputLength")]
    pub max_output_length: Option<i64>,
    /// Replaces whether the schema keeps its `description` property.
    pub call_description: Option<bool>,
}

impl ToolOverride {
    /// Applies the fields this entry sets to `def`.
    pub fn apply(&self, def: &mut super::ToolDefinitionConfig) {
        if let Some(v) = &self.description {
            def.description = v.clone();
        }
        if let Some(v) = &self.parameters {
            def.parameters = v.clone();
        }
        if let Some(v) = self.permission {
            def.permission = v;
        }
        if let Some(v) = self.for_model {
            def.for_model = Some(v);
        }
        if let Some(v) = self.timeout_ms {
            def.timeout_ms = v;
        }
        if let Some(v) = self.max_output_length {
            def.max_output_length = v;
        }
        if let Some(v) = self.call_description {
            def.call_description = v;
        }
    }
}
