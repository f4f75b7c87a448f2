//! The tool list of a `tool_list_ready` event: the session's own list, shared and not copied,
//! and serialized once per list, however many sessions and records announce it (every session
//! of a host offers the same list, and each writes it at its first task).
//!
//! It only serializes; it decides nothing about when the list is announced.

use std::sync::{Arc, Mutex};

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;
use serde_json::value::RawValue;

/// Lists whose JSON is kept; the least recently used goes first.
const KEPT: usize = 8;

/// A kept list (held, so its address is not reused) and its JSON.
type KeptJson = (Arc<Vec<Value>>, Arc<RawValue>);

/// The tool specs (`{name, description, parameters}`) a `tool_list_ready` announces.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ToolList(Arc<Vec<Value>>);

impl ToolList {
    /// A list shared with its owner (no copy is made).
    pub fn shared(tools: Arc<Vec<Value>>) -> Self {
        ToolList(tools)
    }

    pub fn as_slice(&self) -> &[Value] {
        &self.0
    }
}

impl From<Vec<Value>> for ToolList {
    fn from(tools: Vec<Value>) -> Self {
        ToolList(Arc::new(tools))
    }
}

impl Serialize for ToolList {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match json_of(&self.0) {
            Some(raw) => raw.serialize(serializer),
            None => self.0.serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for ToolList {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Vec::<Value>::deserialize(deserializer).map(ToolList::from)
    }
}

/// The JSON of `tools`: kept for the list itself (by pointer: the cache holds the list, so
/// its address is not reused while it is kept), else serialized now and kept.
fn json_of(tools: &Arc<Vec<Value>>) -> Option<Arc<RawValue>> {
    static KEPT_JSON: Mutex<Vec<KeptJson>> = Mutex::new(Vec::new());
    let mut kept = match KEPT_JSON.lock() {
        Ok(k) => k,
        Err(poisoned) => poisoned.into_inner(),
    };
    let entry = match kept.iter().position(|(list, _)| Arc::ptr_eq(list, tools)) {
        Some(at) => kept.remove(at),
        None => {
            let text = serde_json::to_string(tools.as_ref()).ok()?;
            let raw: Arc<RawValue> = RawValue::from_string(text).ok()?.into();
            (tools.clone(), raw)
        }
    };
    let raw = entry.1.clone();
    kept.insert(0, entry);
    kept.truncate(KEPT);
    Some(raw)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// The kept JSON is the list's own serialization, for the first and every later record, and
    /// a changed list (another `Arc`) is serialized anew.
    #[test]
    fn a_kept_list_serializes_as_the_list_itself() {
        let tools = Arc::new(vec![
            json!({"name": "read_file", "description": "a \"quoted\"\ttab", "parameters": {"type": "object", "b": 1, "a": 2}}),
            json!({"name": "exec_command"}),
        ]);
        let want = serde_json::to_string(tools.as_ref()).unwrap();
        let list = ToolList::shared(tools.clone());
        for _ in 0..3 {
            assert_eq!(serde_json::to_string(&list).unwrap(), want);
            assert_eq!(
                serde_json::to_value(&list).unwrap(),
                Value::Array(tools.to_vec())
            );
        }
        let other = ToolList::from(vec![json!({"name": "other"})]);
        assert_eq!(
            serde_json::to_string(&other).unwrap(),
            r#"[{"name":"other"}]"#
        );
        let back: ToolList = serde_json::from_str(&want).unwrap();
        assert_eq!(back, list);
    }
}
