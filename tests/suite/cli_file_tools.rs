//! The file tools through `rookery run`: parallel edits of one file (one of them through a
//! symlink) all land, a FIFO and a hard link to a secret store are refused, and the secret's
//! content appears nowhere in the output or the trace; a line longer than read_file's scan cap
//! gets PenguinHarness's guidance.

use crate::common::cli as support;

use support::*;

use serde_json::json;
use std::os::unix::fs::{FileTypeExt, symlink};

#[test]
fn one_turn_of_file_calls_through_the_binary() {
    for round in 0..3 {
        let sb = Sandbox::new();
        let ws = sb.ws();
        std::fs::write(ws.join("notes.md"), "alpha\nbeta\ngamma\n").unwrap();
        symlink("notes.md", ws.join("link.md")).unwrap();
        nix::unistd::mkfifo(
            &ws.join("pipe"),
            nix::sys::stat::Mode::from_bits_truncate(0o600),
        )
        .unwrap();
        std::fs::create_dir(ws.join("cfg")).unwrap();
        std::fs::write(
            ws.join("cfg/.project_config.toml"),
            "token = \"s3cr3t-t0ken\"\n",
        )
        .unwrap();
        std::fs::hard_link(ws.join("cfg/.project_config.toml"), ws.join("plain.toml")).unwrap();
        let edit = |path: &str, old: &str, new: &str| {
            json!({"name": "edit_file",
                   "arguments": {"file_path": path, "old_string": old, "new_string": new}})
        };
        let script = sb.script(&json!({"turns": [
            {"tool_calls": [
                edit("notes.md", "alpha", "ALPHA"),
                edit("link.md", "beta", "BETA"),
                edit("notes.md", "gamma", "GAMMA"),
                {"name": "write_file", "arguments": {"file_path": "pipe", "content": "x"}},
                {"name": "read_file", "arguments": {"file_path": "plain.toml"}},
                {"name": "write_file", "arguments": {"file_path": "plain.toml", "content": "y"}}
            ]},
            {"text": "done"}
        ]}));
        let out = sb.run(&["--script", s(&script), "edit"]);
        out.expect_code(0);
        assert_eq!(
            std::fs::read_to_string(ws.join("notes.md")).unwrap(),
            "ALPHA\nBETA\nGAMMA\n",
            "round {round}"
        );
        assert!(
            std::fs::symlink_metadata(ws.join("link.md"))
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert!(
            std::fs::symlink_metadata(ws.join("pipe"))
                .unwrap()
                .file_type()
                .is_fifo()
        );
        assert_eq!(
            std::fs::read_to_string(ws.join("plain.toml")).unwrap(),
            "token = \"s3cr3t-t0ken\"\n"
        );

        let trace = sb.trace();
        let records = read_records(&trace);
        check_pairing(&records, true);
        for id in ["call_0", "call_1", "call_2"] {
            let text = output_of(&records, id)["output"]
                .as_str()
                .unwrap()
                .to_string();
            assert!(text.starts_with("Replaced 1 occurrence in "), "{text}");
        }
        assert_eq!(
            output_of(&records, "call_3")["output"],
            "Cannot write \"pipe\": it is a FIFO (named pipe), not a regular file."
        );
        for (id, verb) in [("call_4", "read"), ("call_5", "write")] {
            assert_eq!(
                output_of(&records, id)["output"],
                format!(
                    "Refusing to {verb} \"plain.toml\": .project_config.toml holds the user's secrets and must never enter the conversation."
                )
            );
        }
        let whole = std::fs::read_to_string(&trace).unwrap();
        assert!(!whole.contains("s3cr3t"), "the secret reached the trace");
        assert!(!out.stdout.contains("s3cr3t") && !out.stderr.contains("s3cr3t"));
    }
}

/// A window line still open at read_file's 8 MiB scan cap: the call fails with the guidance
/// (`Stopped after scanning 8 MB …` and a `sed -n` hint), as PenguinHarness's does, instead of
/// completing with a cut line.
#[test]
fn a_line_past_the_scan_cap_fails_with_guidance_through_the_binary() {
    let sb = Sandbox::new();
    let ws = sb.ws();
    let mut data = b"head\n".to_vec();
    data.extend(std::iter::repeat_n(b'y', 9 * 1024 * 1024));
    std::fs::write(ws.join("huge.log"), data).unwrap();
    let script = sb.script(&json!({"turns": [
        {"tool_calls": [
            {"name": "read_file", "arguments": {"file_path": "huge.log", "offset": 2, "limit": 10}},
            {"name": "read_file", "arguments": {"file_path": "huge.log"}}
        ]},
        {"text": "done"}
    ]}));
    let out = sb.run(&["--script", s(&script), "read it"]);
    out.expect_code(0);
    let records = read_records(&sb.trace());
    check_pairing(&records, true);
    let first = output_of(&records, "call_0");
    assert_eq!(first["stop_reason"], "failed");
    assert_eq!(
        first["output"],
        "Stopped after scanning 8 MB of \"huge.log\" without reaching the requested window (scanned 2 lines). The offset is too deep or the file has extremely long lines — use shell commands (e.g. sed -n '2,11p') for this file."
    );
    // The lines before it are shown, and the total is a lower bound.
    let second = output_of(&records, "call_1");
    assert_eq!(second["stop_reason"], "completed");
    assert_eq!(
        second["output"],
        "     1\thead\n[file has more than 2 lines; showing 1-1 — call again with offset to continue]"
    );
}
