//! Calls that change an MCP server's state run one at a time: three `create_entities` calls of
//! one turn against the real `@modelcontextprotocol/server-memory` (npm, pinned; installed on
//! first use, see `tests/common/mcp.rs`), through the `rookery run` binary. The server reads and
//! rewrites its whole file per call, so overlapping calls lose entities; its read-only tools
//! (`readOnlyHint: true`) still run alongside each other.

use crate::common::mcp as support;

use serde_json::{Value, json};
use support::*;

fn call(name: &str, args: Value) -> Value {
    json!({"name": format!("mcp__memory__{name}"), "arguments": args})
}

fn entity(name: &str) -> Value {
    json!({"entities": [{"name": name, "entityType": "person", "observations": [format!("{name} was here")]}]})
}

#[test]
fn three_writes_of_one_turn_are_all_kept() {
    let index = memory();
    let sb = Sandbox::new();
    let file = sb.path("memory.jsonl");
    let mcp = json!({"mcpServers": {"memory": {
        "command": "node",
        "args": [index],
        "env": {"MEMORY_FILE_PATH": file}
    }}});
    let script = json!({"turns": [
        {"tool_calls": [
            call("create_entities", entity("ada")),
            call("create_entities", entity("grace")),
            call("create_entities", entity("linus"))
        ]},
        {"tool_calls": [
            call("read_graph", json!({})),
            call("search_nodes", json!({"query": "grace"}))
        ]},
        {"text": "done"}
    ]});
    let run = sb.start(&script, &mcp, &[]);
    let (code, lines) = run.finish();
    assert_eq!(code, 0, "{lines:#?}");
    let outputs: Vec<&Value> = of_kind(&lines, "tool_call_output");
    let ids: Vec<&str> = outputs
        .iter()
        .map(|v| payload(v)["tool_call_id"].as_str().unwrap_or(""))
        .collect();
    // The writes run one after another, so they end in call order; the two reads run
    // alongside each other and are traced as they end.
    assert_eq!(ids[..3], ["call_0", "call_1", "call_2"]);
    let mut reads = ids[3..].to_vec();
    reads.sort_unstable();
    assert_eq!(reads, ["call_3", "call_4"]);
    for o in &outputs {
        assert_eq!(payload(o)["stop_reason"], "completed", "{o}");
    }
    let text = std::fs::read_to_string(&file).expect("memory file");
    let mut names: Vec<String> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["type"] == "entity")
        .filter_map(|v| v["name"].as_str().map(str::to_string))
        .collect();
    names.sort();
    assert_eq!(names, ["ada", "grace", "linus"], "{text}");
    let graph = outputs
        .iter()
        .find(|o| payload(o)["tool_call_id"] == "call_3")
        .and_then(|o| payload(o)["output"].as_str())
        .unwrap_or("");
    for name in ["ada", "grace", "linus"] {
        assert!(graph.contains(name), "{graph}");
    }
}
