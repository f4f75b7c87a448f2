//! The tolerant trace reader: JSONL bytes → `OmniMessage`s, surviving a torn last line
//! (a crash mid-append) and malformed middle lines.
//!
//! This module owns parsing only. It must not write, repair or rotate trace files, and it must
//! not interpret records (resume is a separate module). Unknown payload types are kept raw by
//! `OmniMessage::from_json`, so a newer trace never counts as malformed here.

use std::path::Path;

use crate::message::OmniMessage;

/// How many skipped line numbers the diagnostic lists before `, …`.
const LISTED_SKIPPED_LINES: usize = 20;

/// The result of reading a trace tolerantly.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TraceRead {
    /// The records that parsed, in file order.
    pub records: Vec<OmniMessage>,
    /// 1-based line numbers of malformed lines that were not the last non-empty line.
    pub skipped_lines: Vec<usize>,
    /// The last non-empty line did not parse (a torn append); it was ignored.
    pub torn_tail: bool,
}

/// Reads and parses the trace at `path` (see [`parse_trace_bytes`]). Skipped middle lines are
/// reported through `tracing::warn!` with [`skipped_lines_diagnostic`].
pub fn read_trace(path: &Path) -> std::io::Result<TraceRead> {
    let bytes = std::fs::read(path)?;
    let read = parse_trace_bytes(&bytes);
    if !read.skipped_lines.is_empty() {
        tracing::warn!("{}", skipped_lines_diagnostic(&read.skipped_lines, path));
    }
    Ok(read)
}

/// Parses trace bytes in one linear pass. Lines are split on `\n` and decoded one by one
/// (invalid UTF-8 makes a line malformed); blank lines are ignored; an unparseable last
/// non-empty line sets `torn_tail`; other unparseable lines are listed in `skipped_lines`.
pub fn parse_trace_bytes(bytes: &[u8]) -> TraceRead {
    let is_blank = |line: &[u8]| line.iter().all(u8::is_ascii_whitespace);
    let lines: Vec<&[u8]> = bytes.split(|&b| b == b'\n').collect();
    let last_non_blank = lines.iter().rposition(|line| !is_blank(line));
    let mut read = TraceRead::default();
    for (index, line) in lines.iter().enumerate() {
        if is_blank(line) {
            continue;
        }
        let parsed = std::str::from_utf8(line)
            .ok()
            .and_then(|text| OmniMessage::from_json(text).ok());
        match parsed {
            Some(message) => read.records.push(message),
            None if Some(index) == last_non_blank => read.torn_tail = true,
            None => read.skipped_lines.push(index + 1),
        }
    }
    read
}

/// Whether `line` (without its `\n`) is one record, as [`parse_trace_bytes`] would read it.
pub fn is_record(line: &[u8]) -> bool {
    std::str::from_utf8(line)
        .ok()
        .is_some_and(|text| OmniMessage::from_json(text).is_ok())
}

/// `[trace] skipped <n> malformed line(s) [<first 20 line numbers>, …] in <path>` (the `, …`
/// only when more than 20 lines were skipped).
pub fn skipped_lines_diagnostic(skipped: &[usize], path: &Path) -> String {
    let listed: Vec<String> = skipped
        .iter()
        .take(LISTED_SKIPPED_LINES)
        .map(usize::to_string)
        .collect();
    let more = if skipped.len() > LISTED_SKIPPED_LINES {
        ", …"
    } else {
        ""
    };
    format!(
        "[trace] skipped {} malformed line(s) [{}{more}] in {}",
        skipped.len(),
        listed.join(", "),
        path.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{EventPayload, Payload, StopReason, build};
    use crate::trace::file::TraceFile;

    fn lines(messages: &[OmniMessage]) -> Vec<String> {
        messages.iter().map(OmniMessage::to_json).collect()
    }

    fn sample() -> Vec<OmniMessage> {
        vec![
            build::user_text("hi", None),
            build::request_begin(),
            build::assistant_text("hello", StopReason::Completed),
            build::request_end(StopReason::Completed, None, None, None),
        ]
    }

    #[test]
    fn reads_back_what_trace_file_wrote() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        let messages = sample();
        let mut f = TraceFile::open(&path).unwrap();
        for line in lines(&messages) {
            f.append(line.as_bytes()).unwrap();
        }
        let read = read_trace(&path).unwrap();
        assert_eq!(
            read,
            TraceRead {
                records: messages,
                skipped_lines: vec![],
                torn_tail: false
            }
        );
    }

    #[test]
    fn skips_a_torn_last_line_and_malformed_middle_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        let good = lines(&sample());
        let torn = &good[2][..good[2].len() - 7];
        let text = format!(
            "{}\n\n{{not json\n{}\n   \n{{\"timestamp\":\"t\"}}\n{}\n[1,2]\n{}\n{torn}\n\n",
            good[0], good[1], good[2], good[3]
        );
        std::fs::write(&path, text).unwrap();
        let read = read_trace(&path).unwrap();
        assert_eq!(read.skipped_lines, vec![3, 6, 8]);
        assert!(read.torn_tail);
        assert_eq!(lines(&read.records), good);
    }

    #[test]
    fn invalid_utf8_line_is_malformed() {
        let good = lines(&sample());
        let mut bytes = format!("{}\n", good[0]).into_bytes();
        let mut bad = good[1].clone().into_bytes();
        let at = bad.len() - 3;
        bad[at] = 0xff;
        bytes.extend_from_slice(&bad);
        bytes.extend_from_slice(format!("\n{}\n", good[2]).as_bytes());
        let read = parse_trace_bytes(&bytes);
        assert_eq!(read.skipped_lines, vec![2]);
        assert!(!read.torn_tail);
        assert_eq!(lines(&read.records), vec![good[0].clone(), good[2].clone()]);

        // As the last line, it is a torn tail.
        let read = parse_trace_bytes(&[good[0].as_bytes(), b"\n", &bad].concat());
        assert!(read.torn_tail);
        assert!(read.skipped_lines.is_empty());
        assert_eq!(read.records.len(), 1);
    }

    #[test]
    fn complete_last_line_without_newline_is_a_record() {
        let good = lines(&sample());
        let read = parse_trace_bytes(format!("{}\n{}", good[0], good[1]).as_bytes());
        assert_eq!(lines(&read.records), good[..2].to_vec());
        assert!(!read.torn_tail);
    }

    #[test]
    fn empty_and_blank_inputs() {
        assert_eq!(parse_trace_bytes(b""), TraceRead::default());
        assert_eq!(parse_trace_bytes(b"\n \n\t\r\n"), TraceRead::default());
        let crlf = format!("{}\r\n", lines(&sample())[0]);
        assert_eq!(parse_trace_bytes(crlf.as_bytes()).records.len(), 1);
        let only_torn = parse_trace_bytes(b"{\"timestamp\":");
        assert!(only_torn.torn_tail && only_torn.records.is_empty());
    }

    #[test]
    fn missing_file_is_an_io_error() {
        let dir = tempfile::tempdir().unwrap();
        let err = read_trace(&dir.path().join("none.jsonl")).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
    }

    #[test]
    fn unknown_event_payload_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        let unknown = r#"{"timestamp":"2026-07-18T03:10:22.531Z","type":"event_msg","payload":{"type":"future_event","zeta":1,"alpha":{"nested":[true,null]}}}"#;
        let other_kind =
            r#"{"timestamp":"2026-07-18T03:10:22.532Z","type":"telemetry","payload":{"k":"v"}}"#;
        let mut f = TraceFile::open(&path).unwrap();
        f.append(unknown.as_bytes()).unwrap();
        f.append(other_kind.as_bytes()).unwrap();
        let read = read_trace(&path).unwrap();
        assert!(read.skipped_lines.is_empty() && !read.torn_tail);
        assert_eq!(read.records.len(), 2);
        match &read.records[0].payload {
            Payload::Unknown { kind, payload } => {
                assert_eq!(kind, "event_msg");
                assert_eq!(payload["type"], "future_event");
            }
            other => panic!("expected an unknown payload, got {other:?}"),
        }
        assert_eq!(read.records[0].to_json(), unknown);
        assert_eq!(read.records[1].to_json(), other_kind);
        assert_eq!(read.records[1].kind(), "telemetry");
    }

    #[test]
    fn known_event_is_typed() {
        let read = parse_trace_bytes(
            br#"{"timestamp":"t","type":"event_msg","payload":{"type":"subagent","session_id":"s1"}}"#,
        );
        assert_eq!(
            read.records[0].as_event(),
            Some(&EventPayload::Subagent {
                session_id: "s1".into()
            })
        );
    }

    #[test]
    fn diagnostic_text() {
        let path = Path::new("/h/traces/2026-07-18/s_001.jsonl");
        assert_eq!(
            skipped_lines_diagnostic(&[3, 6], path),
            "[trace] skipped 2 malformed line(s) [3, 6] in /h/traces/2026-07-18/s_001.jsonl"
        );
        let many: Vec<usize> = (1..=21).collect();
        assert_eq!(
            skipped_lines_diagnostic(&many, path),
            "[trace] skipped 21 malformed line(s) [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, \
             15, 16, 17, 18, 19, 20, …] in /h/traces/2026-07-18/s_001.jsonl"
        );
        let twenty: Vec<usize> = (1..=20).collect();
        assert!(skipped_lines_diagnostic(&twenty, path).contains("19, 20] in"));
    }

    #[test]
    fn many_lines_parse_in_one_pass() {
        // 20 000 records with every third line malformed: linear work, exact bookkeeping.
        let good = lines(&sample());
        let mut text = String::new();
        for i in 0..20_000 {
            if i % 3 == 2 {
                text.push_str("garbage\n");
            } else {
                text.push_str(&good[i % 4]);
                text.push('\n');
            }
        }
        let read = parse_trace_bytes(text.as_bytes());
        assert_eq!(read.records.len(), 20_000 - 6_666);
        assert_eq!(read.skipped_lines.len(), 6_666);
        assert_eq!(read.skipped_lines[0], 3);
        assert_eq!(read.skipped_lines[6_665], 19_998);
        assert!(!read.torn_tail);
    }
}
