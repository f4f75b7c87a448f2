//! What the server reads of a recorded session's trace files: the `session_meta` opening a
//! file, and from it when the session was first created (`created_at`, kept across resumes).
//!
//! It only reads the first line of a file; it never writes a trace nor starts a session.

use std::io::BufRead;
use std::path::Path;

use crate::message::{OmniMessage, SessionMeta, now_timestamp};
use crate::trace::paths;

/// The first record of a trace when it is a `session_meta`.
pub fn read_trace_meta(path: &Path) -> Option<SessionMeta> {
    first_meta_record(path).and_then(|m| match m.payload {
        crate::message::Payload::SessionMeta(m) => Some(*m),
        _ => None,
    })
}

/// The first record of the trace file at `path` when it is a `session_meta`.
pub(super) fn first_meta_record(path: &Path) -> Option<OmniMessage> {
    let file = std::fs::File::open(path).ok()?;
    let mut line = String::new();
    std::io::BufReader::new(file).read_line(&mut line).ok()?;
    let msg = OmniMessage::from_json(line.trim_end()).ok()?;
    matches!(msg.payload, crate::message::Payload::SessionMeta(_)).then_some(msg)
}

/// When the recorded session `id` whose latest trace file is `latest` was created: the time of
/// the `session_meta` opening its first file (`<id>_001.jsonl`, beside the latest), else of the
/// one opening the latest file (`first`, already read), else now.
pub(super) fn recorded_creation(id: &str, latest: &Path, first: Option<&OmniMessage>) -> String {
    let first_file = latest.with_file_name(paths::trace_file_name(id, 1));
    let from_first_file = if first_file == latest {
        None
    } else {
        first_meta_record(&first_file).map(|m| m.timestamp)
    };
    from_first_file
        .or_else(|| first.map(|m| m.timestamp.clone()))
        .unwrap_or_else(now_timestamp)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta_line(at: &str) -> String {
        let mut m = OmniMessage::session_meta(SessionMeta::default());
        m.timestamp = at.to_string();
        format!("{}\n", m.to_json())
    }

    #[test]
    fn creation_is_the_first_files_session_meta() {
        let tmp = tempfile::tempdir().unwrap();
        let first = tmp.path().join("s1_001.jsonl");
        let latest = tmp.path().join("s1_002.jsonl");
        std::fs::write(&first, meta_line("2026-01-01T00:00:00.001Z")).unwrap();
        std::fs::write(&latest, meta_line("2026-01-02T00:00:00.002Z")).unwrap();
        let opening = first_meta_record(&latest);
        assert_eq!(
            recorded_creation("s1", &latest, opening.as_ref()),
            "2026-01-01T00:00:00.001Z"
        );
        // Without its first file: the latest file's session_meta.
        std::fs::remove_file(&first).unwrap();
        assert_eq!(
            recorded_creation("s1", &latest, opening.as_ref()),
            "2026-01-02T00:00:00.002Z"
        );
        assert!(read_trace_meta(&latest).is_some());
        std::fs::write(&latest, "{\"not\": \"a record\"}\n").unwrap();
        assert!(first_meta_record(&latest).is_none());
    }
}
