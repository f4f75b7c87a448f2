//! edit_file (stub, being written).
use std::path::Path;
use serde_json::{Map, Value};
use super::{ToolDefinitionConfig, ToolReply};

pub fn edit_file(_workspace: &Path, _args: &Map<String, Value>, _def: &ToolDefinitionConfig) -> ToolReply {
    ToolReply::fail("not yet")
}
