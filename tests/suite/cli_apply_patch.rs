//! apply_patch through `rookery run` with the scripted model: it is in the default tool list,
//! patches of one turn on the same file (one of them through a symlink) all land in call
//! order, a failing patch changes nothing and says which file and hunk, and every call has
//! exactly one output.

use crate::common::cli as support;

use support::*;

use serde_json::json;
use std::os::unix::fs::symlink;

fn patch(body: &str) -> serde_json::Value {
    json!({"name": "apply_patch",
           "arguments": {"input": format!("*** Begin Patch\n{body}\n*** End Patch\n")}})
}

#[test]
fn patches_of_one_turn_through_the_binary() {
    let sb = Sandbox::new();
    let ws = sb.ws();
    std::fs::write(ws.join("notes.md"), "alpha\nbeta\ngamma\n").unwrap();
    std::fs::write(ws.join("keep.txt"), "untouched\n").unwrap();
    symlink("notes.md", ws.join("link.md")).unwrap();
    let script = sb.script(&json!({"turns": [
        {"tool_calls": [
            patch("*** Update File: notes.md\n@@\n-alpha\n+ALPHA\n*** Add File: made/new.txt\n+fresh"),
            patch("*** Update File: link.md\n@@\n-beta\n+BETA"),
            patch("*** Update File: keep.txt\n@@\n-untouched\n+changed\n*** Update File: notes.md\n@@\n-no such line\n+x"),
            patch("*** Update File: notes.md\n@@ BETA\n-gamma\n+GAMMA")
        ]},
        {"text": "done"}
    ]}));
    let out = sb.run(&["--script", s(&script), "patch it"]);
    out.expect_code(0);
    assert_eq!(
        std::fs::read_to_string(ws.join("notes.md")).unwrap(),
        "ALPHA\nBETA\nGAMMA\n"
    );
    assert!(
        std::fs::symlink_metadata(ws.join("link.md"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("made/new.txt")).unwrap(),
        "fresh\n"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("keep.txt")).unwrap(),
        "untouched\n"
    );

    let records = read_records(&sb.trace());
    check_pairing(&records, true);
    let tools = &of_kind(&records, "tool_list_ready")[0]["payload"]["tools"];
    let spec = tools
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "apply_patch")
        .expect("apply_patch is in the default tool list");
    assert_eq!(spec["parameters"]["required"], json!(["input"]));

    let text = |id: &str| {
        output_of(&records, id)["output"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(
        text("call_0"),
        "Success. Updated the following files:\nM notes.md\nA made/new.txt\n"
    );
    assert_eq!(
        text("call_1"),
        "Success. Updated the following files:\nM link.md\n"
    );
    assert_eq!(
        text("call_2"),
        "Failed to find expected lines in notes.md:\nno such line\n(hunk 1 of notes.md, at line 7 of the patch)\nNo file was changed."
    );
    assert_eq!(output_of(&records, "call_2")["stop_reason"], "failed");
    assert_eq!(
        text("call_3"),
        "Success. Updated the following files:\nM notes.md\n"
    );
}
