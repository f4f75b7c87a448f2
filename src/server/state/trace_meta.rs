//! What the server reads of a recorded session's trace before it opens it: the `session_meta`
//! opening a file, from it when the session was first created (`created_at`, kept across
//! resumes), and the last root `session_meta` (what a reopen goes on with); from the files
//! under the home, or from the store (`stored.rs`) when the server has one.
//!
//! It only reads; it never writes a trace nor starts a session.

use std::io::BufRead;
use std::path::{Path, PathBuf};

use super::{ApiError, ServerState};

use crate::message::{OmniMessage, SessionMeta, now_timestamp};
use crate::trace::paths;

/// What a resume reads of a recorded session first.
pub(super) struct Opening {
    /// Where its trace is (its latest file, or `postgres:/<id>`), for messages.
    pub place: PathBuf,
    /// The `session_meta` opening its trace (or its latest file).
    pub first: Option<SessionMeta>,
    /// When it was created.
    pub created_at: String,
    /// Its last root `session_meta` (a reopen appends one with the values then in use).
    pub last: Option<SessionMeta>,
}

impl ServerState {
    /// What a resume of `id` reads first: from the store, or from the trace files (`known`, the
    /// file a hibernated session was written to last, else the one found under the home);
    /// `None` when no trace of `id` is known.
    pub(super) async fn opening_of(
        &self,
        id: &str,
        known: Option<PathBuf>,
    ) -> Result<Option<Opening>, ApiError> {
        #[cfg(feature = "postgres")]
        if let Some(store) = self.cfg.store.clone() {
            return super::stored::opening(&store, id).await;
        }
        let known = known.filter(|p| p.is_file());
        let Some(trace) = known.or_else(|| paths::locate_trace(&self.cfg.home, id)) else {
            return Ok(None);
        };
        let id = id.to_string();
        tokio::task::spawn_blocking(move || Some(file_opening(&id, trace)))
            .await
            .map_err(|e| ApiError::internal(format!("the trace reader failed: {e}")))
    }
}

/// [`Opening`] of the trace whose latest file is `trace`.
fn file_opening(id: &str, trace: PathBuf) -> Opening {
    let first_record = first_meta_record(&trace);
    let created_at = recorded_creation(id, &trace, first_record.as_ref());
    let first = first_record.and_then(|m| match m.payload {
        crate::message::Payload::SessionMeta(m) => Some(*m),
        _ => None,
    });
    let last = crate::server::reopen::last_meta(&trace);
    Opening {
        place: trace,
        first,
        created_at,
        last,
    }
}

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
