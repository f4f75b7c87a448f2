//! The file tools through `rookery run`: parallel edits of one file (one of them through a
//! symlink) all land, a FIFO and a hard link to a secret store are refused, and the secret's
//! content appears nowhere in the output or the trace.

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
