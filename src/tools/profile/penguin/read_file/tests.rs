//! Tests of read_file on real files in temp dirs: texts, paging, budgets, guards and caps.

use super::*;
use crate::tools::profile::penguin::default_definition;
use serde_json::json;
use std::fs;
use std::path::PathBuf;

fn def(max: i64) -> ToolDefinitionConfig {
    let mut d = default_definition("read_file").unwrap();
    d.max_output_length = max;
    d
}

fn call_with(ws: &Path, a: Value, max: i64) -> ToolReply {
    read_file(ws, a.as_object().unwrap(), &def(max))
}

fn call(ws: &Path, a: Value) -> ToolReply {
    call_with(ws, a, 64_000)
}

fn ok(text: impl Into<String>) -> ToolReply {
    ToolReply::ok(text)
}

fn fail(text: impl Into<String>) -> ToolReply {
    ToolReply::fail(text)
}

fn ws_with(files: &[(&str, &[u8])]) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().to_path_buf();
    for (name, data) in files {
        fs::write(ws.join(name), data).unwrap();
    }
    (dir, ws)
}

fn numbered(lines: std::ops::RangeInclusive<u64>, f: impl Fn(u64) -> String) -> String {
    lines
        .map(|n| format!("{n:>6}\t{}", f(n)))
        .collect::<Vec<_>>()
        .join("\n")
}

fn lines_file(n: u64) -> Vec<u8> {
    (1..=n)
        .map(|i| format!("line {i}\n"))
        .collect::<String>()
        .into_bytes()
}

#[test]
fn missing_file_path() {
    let (_d, ws) = ws_with(&[]);
    let text = "Missing required argument \"file_path\" for read_file.";
    assert_eq!(call(&ws, json!({})), fail(text));
    assert_eq!(call(&ws, json!({"file_path": 3})), fail(text));
    assert_eq!(call(&ws, json!({"file_path": ""})), fail(text));
}

#[test]
fn invalid_offset_and_limit_texts() {
    let (_d, ws) = ws_with(&[("f.txt", b"a\n")]);
    assert_eq!(
        call(&ws, json!({"file_path": "f.txt", "offset": "abc"})),
        fail("Invalid \"offset\": expected a number (got \"abc\").")
    );
    assert_eq!(
        call(&ws, json!({"file_path": "f.txt", "offset": [1]})),
        fail("Invalid \"offset\": expected a number (got [1]).")
    );
    for (bad, shown) in [
        (json!(0), "0"),
        (json!(-3), "-3"),
        (json!("0.5"), "\"0.5\""),
        (json!(true), "true"),
        (json!("x"), "\"x\""),
    ] {
        assert_eq!(
            call(&ws, json!({"file_path": "f.txt", "limit": bad})),
            fail(format!(
                "Invalid \"limit\": expected a positive number (got {shown})."
            ))
        );
    }
}

#[test]
fn cat_n_format_absolute_path_and_final_line_without_newline() {
    let (_d, ws) = ws_with(&[("f.txt", b"alpha\n\tbeta\ngamma")]);
    let abs = ws.join("f.txt");
    let expected = ok("     1\talpha\n     2\t\tbeta\n     3\tgamma");
    assert_eq!(call(&ws, json!({"file_path": "f.txt"})), expected);
    let other = tempfile::tempdir().unwrap();
    assert_eq!(
        call(other.path(), json!({"file_path": abs.to_str().unwrap()})),
        expected
    );
}

#[test]
fn paging_with_offset_limit_numeric_strings_and_clamp() {
    let (_d, ws) = ws_with(&[("f.txt", &lines_file(5))]);
    let cont = |a: u64, b: u64| {
        format!("[file has 5 lines total; showing {a}-{b} — call again with offset to continue]")
    };
    assert_eq!(
        call(&ws, json!({"file_path": "f.txt", "offset": 2, "limit": 2})),
        ok(format!(
            "{}\n{}",
            numbered(2..=3, |n| format!("line {n}")),
            cont(2, 3)
        ))
    );
    assert_eq!(
        call(
            &ws,
            json!({"file_path": "f.txt", "offset": "2.9", "limit": " 2.2 "})
        ),
        ok(format!(
            "{}\n{}",
            numbered(2..=3, |n| format!("line {n}")),
            cont(2, 3)
        ))
    );
    assert_eq!(
        call(
            &ws,
            json!({"file_path": "f.txt", "offset": -7, "limit": 1.5})
        ),
        ok(format!("     1\tline 1\n{}", cont(1, 1)))
    );
    // The last page carries no continuation note.
    assert_eq!(
        call(
            &ws,
            json!({"file_path": "f.txt", "offset": "4", "limit": 2})
        ),
        ok(numbered(4..=5, |n| format!("line {n}")))
    );
    assert_eq!(
        call(
            &ws,
            json!({"file_path": "f.txt", "offset": 5, "limit": 100})
        ),
        ok("     5\tline 5")
    );
}

#[test]
fn default_limit_is_2000() {
    let (_d, ws) = ws_with(&[("f.txt", &lines_file(2500))]);
    assert_eq!(
        call(&ws, json!({"file_path": "f.txt"})),
        ok(format!(
            "{}\n[file has 2500 lines total; showing 1-2000 — call again with offset to continue]",
            numbered(1..=2000, |n| format!("line {n}"))
        ))
    );
}

#[test]
fn offset_past_the_end() {
    let (_d, ws) = ws_with(&[("f.txt", b"a\nb\nc\n"), ("one.txt", b"x")]);
    assert_eq!(
        call(&ws, json!({"file_path": "f.txt", "offset": 10})),
        fail("Offset 10 is past the end of \"f.txt\" (3 lines total).")
    );
    assert_eq!(
        call(&ws, json!({"file_path": "one.txt", "offset": "2"})),
        fail("Offset 2 is past the end of \"one.txt\" (1 line total).")
    );
}

#[test]
fn long_lines_truncated_by_characters() {
    let ascii = "x".repeat(2500);
    let accented = "é".repeat(3000); // 6000 bytes: not cut by bytes, cut by chars
    let exact = "y".repeat(2000);
    let emoji = format!("a{}", "😀".repeat(2500)); // cut by the 8000-byte cap mid-character
    let content = format!("{ascii}\n{accented}\n{exact}\n{emoji}\n");
    let (_d, ws) = ws_with(&[("long.txt", content.as_bytes())]);
    let marker = "… [line truncated]";
    let expected = [
        format!("     1\t{}{marker}", "x".repeat(2000)),
        format!("     2\t{}{marker}", "é".repeat(2000)),
        format!("     3\t{exact}"),
        format!("     4\ta{}{marker}", "😀".repeat(1999)),
    ]
    .join("\n");
    assert_eq!(call(&ws, json!({"file_path": "long.txt"})), ok(expected));
}

#[test]
fn crlf_note_and_stripped_cr() {
    let (_d, ws) = ws_with(&[("crlf.txt", b"one\r\ntwo\r\nthree\r\n")]);
    assert_eq!(
        call(&ws, json!({"file_path": "crlf.txt"})),
        ok("     1\tone\n     2\ttwo\n     3\tthree\n(file uses CRLF line endings)")
    );
    assert_eq!(
        call(&ws, json!({"file_path": "crlf.txt", "limit": 1})),
        ok(
            "     1\tone\n(file uses CRLF line endings)\n[file has 3 lines total; showing 1-1 — call again with offset to continue]"
        )
    );
}

#[test]
fn invalid_utf8_is_replaced() {
    let (_d, ws) = ws_with(&[("latin1.txt", b"caf\xe9\n")]);
    assert_eq!(
        call(&ws, json!({"file_path": "latin1.txt"})),
        ok("     1\tcaf\u{FFFD}")
    );
}

#[test]
fn binary_file_fails_even_when_nul_is_past_the_window() {
    let mut late = lines_file(100);
    late.extend_from_slice(b"\0");
    let (_d, ws) = ws_with(&[("bin.dat", b"\x89PNG\0\0"), ("late.txt", &late)]);
    let text = |p: &str| {
        format!(
            "\"{p}\" looks like a binary file (contains NUL bytes). Use shell commands to inspect it, or read_image if it is an image."
        )
    };
    assert_eq!(
        call(&ws, json!({"file_path": "bin.dat"})),
        fail(text("bin.dat"))
    );
    assert_eq!(
        call(&ws, json!({"file_path": "late.txt", "limit": 1})),
        fail(text("late.txt"))
    );
}

#[test]
fn directory_and_empty_file() {
    let (_d, ws) = ws_with(&[("empty.txt", b"")]);
    fs::create_dir(ws.join("sub")).unwrap();
    assert_eq!(
        call(&ws, json!({"file_path": "sub/"})),
        fail("Cannot read \"sub/\": it is a directory. Pass the path of a file inside it.")
    );
    assert_eq!(
        call(&ws, json!({"file_path": "empty.txt"})),
        ok("\"empty.txt\" is an empty file (0 lines).")
    );
}

#[test]
fn missing_file_with_ranked_hint() {
    let (_d, ws) = ws_with(&[
        ("AGENTS.md", b"x"),
        ("a.txt", b"x"),
        ("b.txt", b"x"),
        ("c.txt", b"x"),
        ("d.txt", b"x"),
        ("e.txt", b"x"),
        ("f.txt", b"x"),
        ("zeta.md", b"x"),
    ]);
    fs::create_dir(ws.join("agent_state")).unwrap();
    fs::create_dir(ws.join("src")).unwrap();
    let w = ws.display();
    assert_eq!(
        call(&ws, json!({"file_path": "agent_sate/notes.md"})),
        fail(format!(
            "File not found: \"agent_sate/notes.md\". Absolute paths are supported; relative paths resolve against the workspace ({w}). The directory \"{w}\" exists but has no entry \"agent_sate\". It contains: agent_state/, AGENTS.md, a.txt, b.txt, c.txt, d.txt, e.txt, f.txt (+2 more)."
        ))
    );
    assert_eq!(
        call(&ws, json!({"file_path": "src/deep/x.rs"})),
        fail(format!(
            "File not found: \"src/deep/x.rs\". Absolute paths are supported; relative paths resolve against the workspace ({w}). The directory \"{w}/src\" exists but has no entry \"deep\". It is empty."
        ))
    );
}

#[test]
fn file_used_as_directory_gets_the_note() {
    let (_d, ws) = ws_with(&[("a.txt", b"x")]);
    let w = ws.display();
    assert_eq!(
        call(&ws, json!({"file_path": "a.txt/inner.txt"})),
        fail(format!(
            "File not found: \"a.txt/inner.txt\". Absolute paths are supported; relative paths resolve against the workspace ({w}). Note: \"{w}/a.txt\" exists but is a file, not a directory."
        ))
    );
}

#[test]
fn other_stat_errors() {
    let (_d, ws) = ws_with(&[]);
    std::os::unix::fs::symlink(ws.join("loop"), ws.join("loop")).unwrap();
    let reply = call(&ws, json!({"file_path": "loop"}));
    let e = fs::metadata(ws.join("loop")).unwrap_err();
    assert_eq!(reply, fail(format!("Failed to read \"loop\": {e}")));
    assert!(reply.text.starts_with("Failed to read \"loop\": "));
    assert_ne!(e.kind(), ErrorKind::NotFound);
}

#[test]
fn secret_stores_refused_by_name_case_and_symlink() {
    let (_d, ws) = ws_with(&[(".vault.toml", b"KEY=1\n")]);
    fs::create_dir(ws.join("cfg")).unwrap();
    fs::write(ws.join("cfg/.project_config.toml"), b"x").unwrap();
    std::os::unix::fs::symlink(ws.join(".vault.toml"), ws.join("innocent.txt")).unwrap();
    std::os::unix::fs::symlink(ws.join("cfg"), ws.join("alias")).unwrap();
    let text = |p: &str, name: &str| {
        fail(format!(
            "Refusing to read \"{p}\": {name} holds the user's secrets and must never enter the conversation."
        ))
    };
    let vault = ".vault.toml";
    let project = ".project_config.toml";
    assert_eq!(call(&ws, json!({"file_path": vault})), text(vault, vault));
    assert_eq!(
        call(&ws, json!({"file_path": ".VAULT.TOML"})),
        text(".VAULT.TOML", vault)
    );
    assert_eq!(
        call(&ws, json!({"file_path": "innocent.txt"})),
        text("innocent.txt", vault)
    );
    assert_eq!(
        call(&ws, json!({"file_path": "nowhere/.Project_Config.toml"})),
        text("nowhere/.Project_Config.toml", project)
    );
    assert_eq!(
        call(&ws, json!({"file_path": "alias/.project_config.toml"})),
        text("alias/.project_config.toml", project)
    );
    let abs = ws.join("innocent.txt");
    let abs = abs.to_str().unwrap();
    assert_eq!(call(&ws, json!({"file_path": abs})), text(abs, vault));
}

#[test]
fn self_budget_keeps_the_notes() {
    let (_d, ws) = ws_with(&[("f.txt", &lines_file(10))]);
    // Budget 300 - 256 = 44 chars: three 13-char rows (+2 newlines) fit, a fourth does not.
    assert_eq!(
        call_with(&ws, json!({"file_path": "f.txt", "limit": 100}), 300),
        ok(format!(
            "{}\n[file has 10 lines total; showing 1-3 (output limit reached) — call again with offset to continue]",
            numbered(1..=3, |n| format!("line {n}"))
        ))
    );
}

#[test]
fn first_row_hard_cut_when_it_alone_does_not_fit() {
    let content = format!("{}\nsecond\n", "x".repeat(100));
    let (_d, ws) = ws_with(&[("wide.txt", content.as_bytes())]);
    assert_eq!(
        call_with(&ws, json!({"file_path": "wide.txt"}), 270),
        ok(format!(
            "     1\t{}\n[file has 2 lines total; showing 1-1 (output limit reached) — call again with offset to continue]",
            "x".repeat(7)
        ))
    );
}

#[test]
fn no_cap_means_64000_budget() {
    let row = "z".repeat(50);
    let content = format!("{row}\n").repeat(3000);
    let (_d, ws) = ws_with(&[("f.txt", content.as_bytes())]);
    // 57 + 58 * (k - 1) <= 63744 → k = 1099 rows.
    let expected = ok(format!(
        "{}\n[file has 3000 lines total; showing 1-1099 (output limit reached) — call again with offset to continue]",
        numbered(1..=1099, |_| row.clone())
    ));
    for max in [0, -1, 64_000] {
        let reply = call_with(&ws, json!({"file_path": "f.txt"}), max);
        assert_eq!(reply, expected);
        assert!(reply.text.chars().count() <= 64_000);
    }
}

#[test]
fn scan_cap_texts_and_lower_bound_total() {
    let (_d, ws) = ws_with(&[]);
    let cap = usize::try_from(scan::SCAN_CAP_BYTES).unwrap();
    // One line longer than the cap: the guidance, as PenguinHarness answers.
    fs::write(ws.join("one.txt"), vec![b'x'; cap + 10]).unwrap();
    assert_eq!(
        call(&ws, json!({"file_path": "one.txt"})),
        fail(
            "Stopped after scanning 8 MB of \"one.txt\" without reaching the requested window (scanned 1 line). The offset is too deep or the file has extremely long lines — use shell commands (e.g. sed -n '1,2000p') for this file."
        )
    );
    // Lines before it in the window are shown, with a lower bound of the total.
    let mut data = b"first\n".to_vec();
    data.extend(std::iter::repeat_n(b'x', cap));
    fs::write(ws.join("late.txt"), data).unwrap();
    assert_eq!(
        call(&ws, json!({"file_path": "late.txt"})),
        ok(
            "     1\tfirst\n[file has more than 2 lines; showing 1-1 — call again with offset to continue]"
        )
    );
    // A window that starts past the cap still gets the guidance.
    assert_eq!(
        call(&ws, json!({"file_path": "one.txt", "offset": 2})),
        fail(
            "Stopped after scanning 8 MB of \"one.txt\" without reaching the requested window (scanned 1 line). The offset is too deep or the file has extremely long lines — use shell commands (e.g. sed -n '2,2001p') for this file."
        )
    );
    // 9 MiB of 2-byte lines: the cap stops counting at 4194304 lines.
    fs::write(ws.join("many.txt"), b"x\n".repeat((cap + 1024 * 1024) / 2)).unwrap();
    assert_eq!(
        call(
            &ws,
            json!({"file_path": "many.txt", "offset": 5_000_000, "limit": 10})
        ),
        fail(
            "Stopped after scanning 8 MB of \"many.txt\" without reaching the requested window (scanned 4194304 lines). The offset is too deep or the file has extremely long lines — use shell commands (e.g. sed -n '5000000,5000009p') for this file."
        )
    );
    assert_eq!(
        call(&ws, json!({"file_path": "many.txt", "limit": 2})),
        ok(
            "     1\tx\n     2\tx\n[file has more than 4194304 lines; showing 1-2 — call again with offset to continue]"
        )
    );
    // A file of exactly the cap is scanned whole: its total is exact.
    fs::write(ws.join("exact.txt"), b"x\n".repeat(cap / 2)).unwrap();
    assert_eq!(
        call(&ws, json!({"file_path": "exact.txt", "limit": 1})),
        ok(
            "     1\tx\n[file has 4194304 lines total; showing 1-1 — call again with offset to continue]"
        )
    );
}

#[test]
fn dot_segments_resolve_like_node() {
    let (_d, ws) = ws_with(&[("f.txt", b"hi\n")]);
    assert_eq!(
        call(&ws, json!({"file_path": "./nowhere/../f.txt/"})),
        ok("     1\thi")
    );
}
