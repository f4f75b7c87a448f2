//! The serialized end of a request body (`],"stream":true,…,"tools":[…]}`), shared by every
//! session of one model.
//!
//! The tail holds the tool schemas (several kilobytes), and the sessions of a host almost
//! always offer the same tools, each session through its own list. Serializing and keeping a
//! tail per session cost a copy of the schemas per session; here a tool list equal to one seen
//! before (by content, not only by pointer) gets the same bytes. A few recent lists are kept,
//! so sessions with other tools (subagents, MCP servers) do not evict each other's tail.
//!
//! It only serializes: it never sends anything and never sees the API key.

use std::sync::Arc;

use bytes::Bytes;
use serde_json::{Map, Value};

use super::request::{self, RESERVED_BODY_KEYS};
use crate::message::tool_list::PerToolList;

/// The tails of one model's bodies, by tool list.
#[derive(Debug)]
pub(super) struct SharedTails {
    /// The model's extra request fields (fixed for the model's life).
    extra: Map<String, Value>,
    tails: PerToolList<Bytes>,
}

impl SharedTails {
    pub(super) fn new(extra: Map<String, Value>) -> SharedTails {
        SharedTails {
            extra,
            tails: PerToolList::new(),
        }
    }

    /// The tail for `tools`: the kept bytes of an equal list, or serialized now and kept.
    pub(super) fn get(&self, tools: &Arc<Vec<Value>>) -> Bytes {
        self.tails.get(tools, || {
            let json = (!tools.is_empty()).then(|| request::tools_json(tools));
            tail(&self.extra, json.as_deref())
        })
    }
}

/// Everything after the messages, in the order `encode_body` writes it.
fn tail(extra: &Map<String, Value>, tools_json: Option<&str>) -> Bytes {
    let mut out = br#"],"stream":true,"stream_options":{"include_usage":true}"#.to_vec();
    for (key, value) in extra {
        if RESERVED_BODY_KEYS.contains(&key.as_str()) {
            continue;
        }
        out.push(b',');
        out.extend_from_slice(json_text(key).as_bytes());
        out.push(b':');
        out.extend_from_slice(json_text(value).as_bytes());
    }
    if let Some(tools) = tools_json {
        out.extend_from_slice(b",\"tools\":");
        out.extend_from_slice(tools.as_bytes());
    }
    out.push(b'}');
    // Exactly its length: it is kept for the model's life.
    Bytes::copy_from_slice(&out)
}

fn json_text<T: serde::Serialize + ?Sized>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| "null".to_string())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::message::tool_list::KEPT_LISTS;

    fn list(name: &str) -> Arc<Vec<Value>> {
        Arc::new(vec![
            json!({"name": name, "description": "d", "parameters": {"type": "object"}}),
        ])
    }

    #[test]
    fn equal_lists_share_one_tail() {
        let tails = SharedTails::new(Map::new());
        let a = tails.get(&list("read_file"));
        // Another session's list: another allocation, the same content.
        let b = tails.get(&list("read_file"));
        assert_eq!(a, b);
        assert_eq!(a.as_ptr(), b.as_ptr(), "one copy of the bytes");
        let other = tails.get(&list("write_file"));
        assert_ne!(other, a);
        assert!(String::from_utf8_lossy(&other).contains("\"write_file\""));
    }

    #[test]
    fn the_tail_is_what_encode_body_writes_after_the_messages() {
        let extra = json!({"temperature": 0.2, "model": "ignored", "top_p": {"x": [1]}});
        let extra = extra.as_object().cloned().unwrap_or_default();
        let tails = SharedTails::new(extra.clone());
        for tools in [list("read_file"), Arc::new(Vec::new())] {
            let request = crate::model::ModelRequest {
                system_prompt: Arc::from(""),
                history: Arc::new(Vec::new()),
                tools: tools.clone(),
            };
            let json = request::tools_json(&tools);
            let body = request::encode_body("m", &request, false, &extra, &json);
            let head = br#"{"model":"m","messages":["#;
            let mut want = head.to_vec();
            want.extend_from_slice(&tails.get(&tools));
            assert_eq!(
                String::from_utf8_lossy(&body),
                String::from_utf8_lossy(&want)
            );
        }
    }

    #[test]
    fn a_few_lists_are_kept_and_the_oldest_goes() {
        let tails = SharedTails::new(Map::new());
        let first = list("t0");
        let kept = tails.get(&first);
        for i in 1..KEPT_LISTS {
            tails.get(&list(&format!("t{i}")));
        }
        assert_eq!(tails.get(&first).as_ptr(), kept.as_ptr(), "still kept");
        for i in KEPT_LISTS..2 * KEPT_LISTS {
            tails.get(&list(&format!("t{i}")));
        }
        assert_ne!(
            tails.get(&first).as_ptr(),
            kept.as_ptr(),
            "evicted, built again"
        );
        assert_eq!(tails.get(&first), kept);
    }
}
