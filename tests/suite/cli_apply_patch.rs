//! apply_patch through `rookery run` with the scripted model: it is in the default tool list,
//! patches of one turn on the same file (one of them through a symlink) all land in call
//! order, a failing patch changes nothing and says which file and hunk, and every call has
//! exactly one output; a hunk is found in linear time, a timed-out patch stops at once and
//! writes nothing afterwards, and each line keeps its line ending.

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

/// A config giving apply_patch and write_file (the only tools) these timeouts.
fn timeouts(sb: &Sandbox, apply_ms: u64, write_ms: u64) -> std::path::PathBuf {
    sb.file(
        "agent.yaml",
        &format!(
            "tools:\n  builtin:\n    - name: apply_patch\n      timeoutMs: {apply_ms}\n    - name: write_file\n      timeoutMs: {write_ms}\n"
        ),
    )
}

fn text_of(records: &[serde_json::Value], id: &str) -> String {
    output_of(records, id)["output"]
        .as_str()
        .unwrap()
        .to_string()
}

/// The attack of issue 49: a 27 KB patch whose one hunk has 9,000 context lines, against a
/// file of 1.5 million equal lines. Tried position by position that is 13.5 billion line
/// comparisons (minutes); found in linear time it is applied well within the timeout.
#[test]
fn a_hunk_of_thousands_of_context_lines_is_found_in_linear_time() {
    let sb = Sandbox::new();
    let ws = sb.ws();
    let mut text = "a\n".repeat(1_500_000);
    text.push_str("end\n");
    std::fs::write(ws.join("big.txt"), &text).unwrap();
    let mut body = String::from("*** Update File: big.txt\n@@\n");
    body.push_str(&" a\n".repeat(9_000));
    body.push_str("-end\n+END");
    let script = sb.script(&json!({"turns": [
        {"tool_calls": [patch(&body)]},
        {"text": "done"}
    ]}));
    let config = timeouts(&sb, 25_000, 25_000);
    let out = sb.run(&["--script", s(&script), "--config", s(&config), "patch it"]);
    out.expect_code(0);
    let records = read_records(&sb.trace());
    check_pairing(&records, true);
    assert_eq!(
        text_of(&records, "call_0"),
        "Success. Updated the following files:\nM big.txt\n"
    );
    let after = std::fs::read_to_string(ws.join("big.txt")).unwrap();
    assert_eq!(after.len(), text.len());
    assert!(after.ends_with("a\nEND\n"));
}

/// A patch whose matching costs billions of steps even in linear time (1,023 hunks, each
/// found only by the third rung after the finer ones searched the 2 million lines below
/// it) times out after 1 s. The call stops at once: it answers that nothing was written, its
/// file's lock is free for the next turn's write_file (which would otherwise wait out its
/// own timeout behind the still-running search), and the file is what write_file wrote, not
/// a late patch.
#[test]
fn a_timed_out_patch_stops_at_once_and_never_writes_afterwards() {
    let sb = Sandbox::new();
    let ws = sb.ws();
    let keys = 1_023;
    let mut text = String::new();
    for i in 0..keys {
        text.push_str(&format!("k{i}\n"));
    }
    text.push_str("START\n");
    for i in 0..keys {
        text.push_str(&format!(" k{i}\n"));
    }
    text.push_str(&"a\n".repeat(2_000_000));
    assert!(text.len() <= 4 * 1024 * 1024);
    std::fs::write(ws.join("big.txt"), &text).unwrap();
    let mut body = String::from("*** Update File: big.txt\n@@\n-START\n+START2");
    for i in 0..keys {
        body.push_str(&format!("\n@@\n-k{i}\n+K{i}"));
    }
    let script = sb.script(&json!({"turns": [
        {"tool_calls": [patch(&body)]},
        {"tool_calls": [{"name": "write_file",
                         "arguments": {"file_path": "big.txt", "content": "replaced\n"}}]},
        {"text": "done"}
    ]}));
    let config = timeouts(&sb, 1_000, 15_000);
    let out = sb.run(&["--script", s(&script), "--config", s(&config), "patch it"]);
    out.expect_code(0);
    let records = read_records(&sb.trace());
    check_pairing(&records, true);
    assert_eq!(output_of(&records, "call_0")["stop_reason"], "failed");
    assert_eq!(
        text_of(&records, "call_0"),
        "apply_patch stopped: the call was cancelled before any file was written\nNo file was changed.\n[tool timeout: exceeded 1000ms]"
    );
    assert_eq!(output_of(&records, "call_1")["stop_reason"], "completed");
    assert_eq!(
        std::fs::read_to_string(ws.join("big.txt")).unwrap(),
        "replaced\n"
    );
    let names: Vec<String> = std::fs::read_dir(&ws)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, vec!["big.txt".to_string()]);
}

/// A CRLF file stays CRLF: the context lines keep their endings and the added lines take
/// their neighbours' (a mixed file keeps each line's own).
#[test]
fn each_line_keeps_its_line_ending_through_the_binary() {
    let sb = Sandbox::new();
    let ws = sb.ws();
    std::fs::write(ws.join("win.txt"), "one\r\ntwo\r\nthree\r\n").unwrap();
    std::fs::write(ws.join("mixed.txt"), "a\nb\r\nc\n").unwrap();
    let script = sb.script(&json!({"turns": [
        {"tool_calls": [
            patch("*** Update File: win.txt\n@@\n one\n-two\n+TWO\n+2b\n three"),
            patch("*** Update File: mixed.txt\n@@\n a\n b\n-c\n+C")
        ]},
        {"text": "done"}
    ]}));
    let out = sb.run(&["--script", s(&script), "patch it"]);
    out.expect_code(0);
    let records = read_records(&sb.trace());
    check_pairing(&records, true);
    for id in ["call_0", "call_1"] {
        assert_eq!(output_of(&records, id)["stop_reason"], "completed");
    }
    assert_eq!(
        std::fs::read(ws.join("win.txt")).unwrap(),
        b"one\r\nTWO\r\n2b\r\nthree\r\n"
    );
    assert_eq!(
        std::fs::read(ws.join("mixed.txt")).unwrap(),
        b"a\nb\r\nC\r\n"
    );
}
