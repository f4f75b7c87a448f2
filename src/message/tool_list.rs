//! The tool list of a `tool_list_ready` event: the session's own list, shared and not copied,
//! and serialized once per list, however many sessions and records announce it (every session
//! of a host offers the same list, and each writes it at its first task). Also the one cache of
//! what is derived from a tool list ([`PerToolList`]), which the request bodies' tails use too.
//!
//! It only serializes; it decides nothing about when the list is announced.

use std::sync::{Arc, Mutex};

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;
use serde_json::value::RawValue;

/// Tool lists a [`PerToolList`] keeps; the least recently used goes first.
pub(crate) const KEPT_LISTS: usize = 8;

/// Values derived from tool lists, kept for the few most recently used lists. A list equal to a
/// kept one, the same `Arc` or another with the same content, gets the kept value: the sessions
/// of a host offer the same tools, each through its own list or a shared one. Holding the lists
/// keeps their addresses from being reused while they are kept.
#[derive(Debug)]
pub(crate) struct PerToolList<V> {
    /// Most recently used first.
    entries: Mutex<Vec<(Arc<Vec<Value>>, V)>>,
}

impl<V: Clone> PerToolList<V> {
    pub(crate) const fn new() -> Self {
        PerToolList {
            entries: Mutex::new(Vec::new()),
        }
    }

    /// The value kept for `tools`, or `make()` kept now.
    pub(crate) fn get(&self, tools: &Arc<Vec<Value>>, make: impl FnOnce() -> V) -> V {
        let mut entries = match self.entries.lock() {
            Ok(e) => e,
            Err(poisoned) => poisoned.into_inner(),
        };
        let found = entries
            .iter()
            .position(|(list, _)| Arc::ptr_eq(list, tools))
            .or_else(|| entries.iter().position(|(list, _)| **list == **tools));
        let entry = match found {
            Some(at) => entries.remove(at),
            None => (tools.clone(), make()),
        };
        let value = entry.1.clone();
        entries.insert(0, entry);
        entries.truncate(KEPT_LISTS);
        value
    }
}

/// The tool specs (`{name, description, parameters}`) a `tool_list_ready` announces.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ToolList(Arc<Vec<Value>>);

impl ToolList {
    /// The tool specs, in order.
    pub fn as_slice(&self) -> &[Value] {
        &self.0
    }
}

/// A list shared with its owner (no copy is made).
impl From<Arc<Vec<Value>>> for ToolList {
    fn from(tools: Arc<Vec<Value>>) -> Self {
        ToolList(tools)
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

/// The JSON of `tools`, serialized once per list (`None`: it cannot be serialized).
fn json_of(tools: &Arc<Vec<Value>>) -> Option<Arc<RawValue>> {
    static KEPT_JSON: PerToolList<Option<Arc<RawValue>>> = PerToolList::new();
    KEPT_JSON.get(tools, || {
        let text = serde_json::to_string(tools.as_ref()).ok()?;
        RawValue::from_string(text).ok().map(Arc::from)
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// The kept JSON is the list's own serialization, for the first and every later record, and
    /// a list of other content is serialized anew.
    #[test]
    fn a_kept_list_serializes_as_the_list_itself() {
        let tools = Arc::new(vec![
            json!({"name": "read_file", "description": "a \"quoted\"\ttab", "parameters": {"type": "object", "b": 1, "a": 2}}),
            json!({"name": "exec_command"}),
        ]);
        let want = serde_json::to_string(tools.as_ref()).unwrap();
        let list = ToolList::from(tools.clone());
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
