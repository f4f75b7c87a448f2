use std::io::Cursor;

use serde_json::json;

use super::text::{More, TextError, read_lines};
use super::*;
use crate::tools::session_scope::SessionScope;

fn obj(v: Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap_or_default()
}

#[test]
fn arguments_default_and_clamp() {
    let a = parse_args(&obj(json!({"path": "a.txt"}))).unwrap();
    assert_eq!((a.offset, a.limit), (1, 200));
    let a = parse_args(&obj(json!({"path": "a", "offset": 0, "limit": 5000}))).unwrap();
    assert_eq!((a.offset, a.limit), (1, 2000));
    let a = parse_args(&obj(json!({"path": "a", "offset": 7.9, "limit": -3}))).unwrap();
    assert_eq!((a.offset, a.limit), (7, 1));
    assert_eq!(
        parse_args(&obj(json!({})))
            .err()
            .map(|e| e.to_string())
            .as_deref(),
        Some("Missing required argument \"path\" for read_file.")
    );
}

#[test]
fn paths_stay_inside_the_workspace() {
    let ws = Path::new("/w/proj");
    assert_eq!(
        inside_workspace(ws, "src/../a.txt"),
        Ok(PathBuf::from("/w/proj/a.txt"))
    );
    assert_eq!(
        inside_workspace(ws, "/w/proj/x"),
        Ok(PathBuf::from("/w/proj/x"))
    );
    let e = inside_workspace(ws, "../other/a")
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert_eq!(e, "Path \"../other/a\" is outside the workspace /w/proj.");
    assert!(inside_workspace(ws, "/w/projx/a").is_err());
}

#[test]
fn numbered_lines_with_limit_and_continuation() {
    let text = "one\ntwo\r\nthree\nfour\n";
    let p = read_lines(Cursor::new(text), 2, 2, 65_536).unwrap();
    assert_eq!(p.lines, vec!["two", "three"]);
    assert_eq!(p.more, Some(More::Limit(4)));
    assert_eq!(
        p.render(2),
        "     2\ttwo\n     3\tthree\n[more lines follow: continue with offset=4]"
    );
    let p = read_lines(Cursor::new(text), 4, 200, 65_536).unwrap();
    assert_eq!(p.render(4), "     4\tfour");
    assert_eq!(
        read_lines(Cursor::new(text), 9, 1, 65_536).err(),
        Some(TextError::PastEnd {
            offset: 9,
            lines: 4
        })
    );
    let p = read_lines(Cursor::new(""), 1, 10, 65_536).unwrap();
    assert_eq!(p.render(1), "[the file is empty]");
}

#[test]
fn the_byte_budget_keeps_whole_lines() {
    // Each numbered line costs 7 + 10 + 1 = 18 bytes; 50 bytes take two lines.
    let text = "0123456789\n".repeat(5);
    let p = read_lines(Cursor::new(text.as_str()), 1, 200, 50).unwrap();
    assert_eq!(p.lines.len(), 2);
    assert_eq!(p.more, Some(More::Budget(3)));
    assert!(
        p.render(1)
            .ends_with("[64 KB per result reached: continue with offset=3]")
    );
    // The real budget: 2000 lines of 100 bytes stop below 65,536 bytes.
    let text = format!("{}\n", "y".repeat(100)).repeat(2000);
    let p = read_lines(Cursor::new(text.as_str()), 1, 2000, MAX_RESULT_BYTES).unwrap();
    let body: usize = p.lines.iter().map(|l| l.len() + 8).sum();
    assert!(body <= MAX_RESULT_BYTES);
    assert_eq!(p.lines.len(), MAX_RESULT_BYTES / 108);
}

#[test]
fn non_utf8_and_overlong_lines_are_errors() {
    let e = read_lines(Cursor::new(&b"ok\n\xff\xfe\n"[..]), 1, 10, 65_536).err();
    assert_eq!(e, Some(TextError::NotUtf8(2)));
    let long = format!("a\n{}\n", "x".repeat(70_000));
    let e = read_lines(Cursor::new(long.as_str()), 1, 10, 65_536)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(e.starts_with("line 2 is longer than 64 KB"), "{e}");
}

#[test]
fn agents_md_once_per_session_outermost_first() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    std::fs::create_dir_all(ws.join("a/b")).unwrap();
    std::fs::write(ws.join("AGENTS.md"), "root rules\n").unwrap();
    std::fs::write(ws.join("a/b/AGENTS.md"), "inner rules").unwrap();
    std::fs::write(ws.join("a/b/f.txt"), "x").unwrap();
    let scope = SessionScope::new();
    let file = ws.join("a/b/f.txt");
    let first = agents::bring(ws, &file, &scope);
    assert_eq!(
        first,
        "<project_instructions path=\"AGENTS.md\">\nroot rules\n</project_instructions>\n\n<project_instructions path=\"a/b/AGENTS.md\">\ninner rules\n</project_instructions>"
    );
    assert_eq!(agents::bring(ws, &file, &scope), "");
    // Another session brings them again.
    assert!(!agents::bring(ws, &file, &SessionScope::new()).is_empty());
}
