//! Claude Code's view of a call, for hooks from a Claude Code settings file (`--hooks FILE`,
//! `--settings FILE`): `tool_input` with Claude Code's argument names beside Rookery's,
//! `tool_response` with Claude Code's result fields beside Rookery's, and a hook's
//! `updatedInput` in Claude Code's shape mapped back to the tool's own arguments.
//!
//! Pure JSON in, JSON out: it runs nothing, knows no session, and takes the names from the
//! tool's definition (`ClaudeCodeName`), never from a table of its own.

use serde_json::{Map, Value};

use crate::tools::definition::ClaudeCodeName;

/// The first file a patch names (`*** Add File:`, `*** Update File:`, `*** Delete File:`).
fn first_patch_path(patch: &str) -> Option<&str> {
    patch.lines().find_map(|l| {
        let l = l.trim_start();
        ["*** Add File: ", "*** Update File: ", "*** Delete File: "]
            .iter()
            .find_map(|p| l.strip_prefix(p))
            .map(str::trim)
    })
}

/// `tool_input` as Claude Code spells it: the tool's own arguments plus Claude Code's names
/// of them (`command` for `cmd`, `file_path` for `path`, the first file of a patch as
/// `file_path`). Arguments that are not an object are returned unchanged.
pub fn tool_input(cc: &ClaudeCodeName, args: &Value) -> Value {
    let Value::Object(own) = args else {
        return args.clone();
    };
    let mut out = own.clone();
    for (theirs, ours) in cc.fields {
        if let Some(v) = own.get(*ours) {
            out.entry(theirs.to_string()).or_insert_with(|| v.clone());
        }
    }
    if cc.name == "MultiEdit"
        && !out.contains_key("file_path")
        && let Some(path) = own
            .get("input")
            .and_then(Value::as_str)
            .and_then(first_patch_path)
    {
        out.insert("file_path".into(), Value::String(path.to_string()));
    }
    Value::Object(out)
}

/// `tool_response` as Claude Code spells it, beside Rookery's `output` and `stop_reason`:
/// `stdout`, `stderr` (empty: Rookery merges the streams), `interrupted` for `Bash`;
/// `filePath` and `success` for `Write`, `Edit`, `MultiEdit`; `file.filePath` and
/// `file.content` for `Read`. `input` is the call's `tool_input` in this view.
pub fn tool_response(cc: &ClaudeCodeName, input: &Value, output: &str, stop_reason: &str) -> Value {
    let mut r = Map::new();
    r.insert("output".into(), output.into());
    r.insert("stop_reason".into(), stop_reason.into());
    let file_path = input.get("file_path").cloned().unwrap_or(Value::Null);
    match cc.name {
        "Bash" => {
            r.insert("stdout".into(), output.into());
            r.insert("stderr".into(), "".into());
            r.insert(
                "interrupted".into(),
                matches!(stop_reason, "aborted" | "timeout").into(),
            );
            r.insert("isImage".into(), false.into());
        }
        "Write" | "Edit" | "MultiEdit" => {
            r.insert("filePath".into(), file_path);
            r.insert("success".into(), (stop_reason == "completed").into());
        }
        "Read" => {
            let mut file = Map::new();
            file.insert("filePath".into(), file_path);
            file.insert("content".into(), output.into());
            r.insert("type".into(), "text".into());
            r.insert("file".into(), Value::Object(file));
        }
        _ => {}
    }
    Value::Object(r)
}

/// A hook's `updatedInput` in this view, as the tool's own arguments. A Claude Code name the
/// hook changed (its value differs from what the hook was sent) sets the tool's argument; the
/// names the view added are dropped, so the tool gets only arguments it knows.
pub fn updated_input(
    cc: &ClaudeCodeName,
    args: &Value,
    updated: &Map<String, Value>,
) -> Map<String, Value> {
    let sent = tool_input(cc, args);
    let own = args.as_object();
    let mut out = updated.clone();
    for (theirs, ours) in cc.fields {
        if let Some(v) = updated.get(*theirs)
            && sent.get(*theirs) != Some(v)
        {
            out.insert(ours.to_string(), v.clone());
        }
    }
    if let Value::Object(sent) = &sent {
        for key in sent.keys() {
            if !own.is_some_and(|o| o.contains_key(key)) {
                out.remove(key);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const BASH: ClaudeCodeName = ClaudeCodeName {
        name: "Bash",
        fields: &[("command", "cmd")],
    };

    #[test]
    fn shell_input_and_response() {
        let args = json!({"cmd": "ls", "description": "list"});
        let v = tool_input(&BASH, &args);
        assert_eq!(v["command"], "ls");
        assert_eq!(v["cmd"], "ls");
        let r = tool_response(&BASH, &v, "a\n", "timeout");
        assert_eq!(r["stdout"], "a\n");
        assert_eq!(r["stderr"], "");
        assert_eq!(r["interrupted"], true);
        assert_eq!(r["output"], "a\n");
    }

    #[test]
    fn updated_input_maps_back() {
        let args = json!({"cmd": "ls", "description": "list"});
        // A hook that edits Claude Code's field.
        let new = json!({"cmd": "ls", "command": "ls -la", "description": "list"});
        let out = updated_input(&BASH, &args, new.as_object().unwrap());
        assert_eq!(
            Value::Object(out),
            json!({"cmd": "ls -la", "description": "list"})
        );
        // Only Claude Code's fields.
        let new = json!({"command": "pwd"});
        let out = updated_input(&BASH, &args, new.as_object().unwrap());
        assert_eq!(Value::Object(out), json!({"cmd": "pwd"}));
        // A hook that edits Rookery's field keeps it.
        let new = json!({"cmd": "echo", "command": "ls", "description": "list"});
        let out = updated_input(&BASH, &args, new.as_object().unwrap());
        assert_eq!(
            Value::Object(out),
            json!({"cmd": "echo", "description": "list"})
        );
    }

    #[test]
    fn a_patch_names_its_first_file() {
        let cc = ClaudeCodeName {
            name: "MultiEdit",
            fields: &[],
        };
        let args = json!({"input": "*** Begin Patch\n*** Update File: src/a.rs\n@@\n-a\n+b\n*** End Patch"});
        let v = tool_input(&cc, &args);
        assert_eq!(v["file_path"], "src/a.rs");
        let r = tool_response(&cc, &v, "done", "completed");
        assert_eq!(r["filePath"], "src/a.rs");
        assert_eq!(r["success"], true);
        let back = updated_input(&cc, &args, v.as_object().unwrap());
        assert_eq!(Value::Object(back), args);
    }
}
