//! The Messages API's request rules (what it answers with a 400) as a checker of the requests
//! the loopback server recorded, and readers of the recorded fixture events.

use serde_json::Value;

use super::{Seen, fixture};

pub fn count_breakpoints(v: &Value) -> usize {
    match v {
        Value::Object(m) => {
            usize::from(m.contains_key("cache_control"))
                + m.values().map(count_breakpoints).sum::<usize>()
        }
        Value::Array(a) => a.iter().map(count_breakpoints).sum(),
        _ => 0,
    }
}

/// The request rules the Messages API answers with a 400 when broken.
pub fn check_request(seen: &Seen, key: &str) -> Result<(), String> {
    let h = |name: &str| seen.headers.get(name).map(String::as_str);
    if seen.path != "/v1/messages" {
        return Err(format!("path {}", seen.path));
    }
    if h("x-api-key") != Some(key) {
        return Err(format!("x-api-key {:?}", h("x-api-key")));
    }
    if h("anthropic-version") != Some("2023-06-01") {
        return Err(format!("anthropic-version {:?}", h("anthropic-version")));
    }
    if h("authorization").is_some() {
        return Err("an Authorization header was sent".into());
    }
    if !h("content-type").is_some_and(|c| c.starts_with("application/json")) {
        return Err(format!("content-type {:?}", h("content-type")));
    }
    let body = &seen.body;
    if body["stream"] != true || !body["max_tokens"].is_u64() || !body["model"].is_string() {
        return Err(format!("stream/max_tokens/model: {body}"));
    }
    if !body["system"].is_array() && !body["system"].is_null() {
        return Err("system is not top-level content".into());
    }
    let breakpoints = count_breakpoints(body);
    if breakpoints > 4 {
        return Err(format!("{breakpoints} cache breakpoints"));
    }
    let messages = body["messages"].as_array().ok_or("no messages")?;
    for (i, m) in messages.iter().enumerate() {
        let want = if i % 2 == 0 { "user" } else { "assistant" };
        if m["role"] != want {
            return Err(format!(
                "message {i} has role {}, expected {want}",
                m["role"]
            ));
        }
        let blocks = m["content"].as_array().ok_or("content is not blocks")?;
        if blocks.is_empty() {
            return Err(format!("message {i} is empty"));
        }
        let uses: Vec<&Value> = blocks.iter().filter(|b| b["type"] == "tool_use").collect();
        if let Some(first_use) = blocks.iter().position(|b| b["type"] == "tool_use")
            && blocks[first_use..]
                .iter()
                .any(|b| b["type"] == "thinking" || b["type"] == "redacted_thinking")
        {
            return Err(format!("message {i}: thinking after a tool_use"));
        }
        for u in &uses {
            if !u["input"].is_object() {
                return Err(format!("tool_use input is not an object: {u}"));
            }
        }
        if uses.is_empty() {
            continue;
        }
        let next = messages
            .get(i + 1)
            .and_then(|n| n["content"].as_array())
            .ok_or("tool_use without a next message")?;
        for (k, u) in uses.iter().enumerate() {
            let r = next.get(k).ok_or("missing tool_result")?;
            if r["type"] != "tool_result" || r["tool_use_id"] != u["id"] {
                return Err(format!(
                    "block {k} of message {} is not the result of {}",
                    i + 1,
                    u["id"]
                ));
            }
        }
    }
    Ok(())
}

/// The data payloads of a fixture, parsed.
pub fn fixture_events(name: &str) -> Vec<Value> {
    String::from_utf8(fixture(name))
        .unwrap()
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(|d| serde_json::from_str(d.trim()).unwrap())
        .collect()
}

pub fn joined(events: &[Value], delta_type: &str, field: &str) -> String {
    events
        .iter()
        .filter(|e| e["type"] == "content_block_delta" && e["delta"]["type"] == delta_type)
        .map(|e| e["delta"][field].as_str().unwrap_or("").to_string())
        .collect()
}
