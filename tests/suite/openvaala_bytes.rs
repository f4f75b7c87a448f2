//! openvaala's cursors count the bytes a command wrote, through `rookery run`: output that is
//! not UTF-8 is shown with U+FFFD but moves `next_cursor` by the bytes it was, page after page,
//! so a command that wrote N bytes is read to its end at `next_cursor: N`.

use serde_json::json;

use super::openvaala_tools::{call, cursor_of, parse, run_openvaala, text};
use crate::common::cli::Sandbox;

#[test]
fn next_cursor_counts_the_bytes_the_command_wrote_even_when_they_are_not_utf8() {
    let sb = Sandbox::new();
    let pages = 6;
    let mut calls = vec![
        // 7 bytes, three invalid sequences among them (shown as 11 bytes of text).
        call(
            "bash",
            json!({"command": "printf 'a\\377b\\376\\342\\234c'", "wait_seconds": 60}),
        ),
        // 100,000 invalid bytes: 300,000 bytes of U+FFFD, over several pages.
        call(
            "bash",
            json!({"command": "head -c 100000 /dev/zero | tr '\\0' '\\377'", "wait_seconds": 60}),
        ),
    ];
    for _ in 1..pages {
        calls.push(call(
            "read_command_output",
            json!({"command_id": "{{output:1:command_id: (cmd-[0-9a-f]{8})}}",
                "cursor": cursor_of(-1), "wait_seconds": 0}),
        ));
    }
    let records = run_openvaala(&sb, calls);
    let mixed = parse(&text(&records, "call_0"));
    assert_eq!(mixed.output, "a\u{FFFD}b\u{FFFD}\u{FFFD}c");
    assert_eq!(mixed.next_cursor, 7);

    let mut cursor = 0;
    let mut shown = 0;
    for k in 1..=pages {
        let page = parse(&text(&records, &format!("call_{k}")));
        assert!(page.output.chars().all(|c| c == '\u{FFFD}'), "page {k}");
        let n = page.output.chars().count() as u64;
        assert_eq!(page.next_cursor, cursor + n, "page {k}");
        cursor = page.next_cursor;
        shown += n;
    }
    assert_eq!(shown, 100_000);
    assert_eq!(cursor, 100_000);
}
