//! The registry a session assembles from tool definitions (`tools::definition`) and bindings:
//! which tools the model sees, with which limits. Each profile fills it
//! (`tools::profile::penguin::assemble`, `tools::profile::assemble`); the registry knows no
//! profile and no tool.
//!
//! The registry only maps names to definitions and bindings ([`ToolBinding`]: a local
//! implementation or the session service that serves the tool); binding a call to a service is
//! the session's job, running it the close-out's (`close_out`).

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;

use super::Tool;
use super::binding::{RegisteredTool, ServiceKind, ToolBinding, ToolWrapper};

mod entry;
pub use super::definition::{ForModel, Permission, ToolDefinitionConfig};
pub use entry::{BuiltinEntry, ToolOverride};

/// Why a `tools.builtin` list cannot be assembled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolListError {
    /// A name no builtin has.
    #[error("unknown tool \"{name}\" in tools.builtin (known tools: {known})")]
    UnknownTool {
        /// The name as configured.
        name: String,
        /// The builtin names, comma-separated.
        known: String,
    },
    /// A builtin this build has no implementation of.
    #[error("tool \"{0}\" is not available in this build of rookery")]
    UnavailableTool(String),
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

    /// The registered tool `name`, if any.
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

    /// The permission of the tool `name`, if registered.
    pub fn permission(&self, name: &str) -> Option<Permission> {
        self.by_name.get(name).map(|t| t.definition.permission)
    }

    /// The tools' names, in registration order.
    pub fn names(&self) -> Vec<String> {
        self.order.as_ref().clone()
    }

    /// How many tools are registered.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// True when no tool is registered.
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
