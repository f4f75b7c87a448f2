//! A session's records read from a store other than the trace files, as plain data: the
//! interface [`RecordSource`] that a store above the trace area implements (the `postgres`
//! store's is `crate::store::record_source`), and a whole [`SessionHistory`] read through one.
//!
//! It owns the interface only; it must not know any store's protocol. The methods are blocking:
//! readers call them from a blocking thread (`tokio::task::spawn_blocking`), as they read trace
//! files.

use std::path::PathBuf;

use crate::trace::catalog::SessionHistory;

/// Records one [`RecordSource::records_after`] call asks for when reading a whole history.
pub const SOURCE_PAGE: usize = 256;

/// A store's failure to read records, kept whole so the caller can tell what it was (an
/// unreachable database is answered differently from a refused statement).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct SourceError(pub Box<dyn std::error::Error + Send + Sync>);

/// Where the records of stored sessions are read from, a bounded page at a time.
pub trait RecordSource: Send + Sync {
    /// Up to `limit` records of session `id` whose sequence number is above `after` (`-1`:
    /// from the first), in order, each with its sequence number and the exact bytes of its
    /// JSONL line. Empty at the end of the history, and for a session with no record.
    fn records_after(
        &self,
        id: &str,
        after: i64,
        limit: usize,
    ) -> Result<Vec<(i64, Vec<u8>)>, SourceError>;
}

/// Every record of session `id` read from `source` a page at a time, as one history whose
/// `files` is `[place]` (the name the store shows the trace by). Records that do not parse are
/// skipped with a warning, as the file reader does.
pub fn read_stored_history(
    source: &dyn RecordSource,
    id: &str,
    place: PathBuf,
) -> Result<SessionHistory, SourceError> {
    let mut history = SessionHistory {
        id: id.to_string(),
        files: vec![place],
        ..SessionHistory::default()
    };
    let mut after = -1;
    loop {
        let page = source.records_after(id, after, SOURCE_PAGE)?;
        let full = page.len() == SOURCE_PAGE;
        for (seq, bytes) in &page {
            if !history.push_record(bytes) {
                tracing::warn!(session = %id, seq, "skipped a stored record that does not parse");
                history.skipped += 1;
            }
            after = *seq;
        }
        if !full {
            return Ok(history);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{OmniMessage, SessionMeta, build};

    /// A source over records in memory, serving at most `SOURCE_PAGE` per call.
    struct Memory(Vec<Vec<u8>>);

    impl RecordSource for Memory {
        fn records_after(
            &self,
            _id: &str,
            after: i64,
            limit: usize,
        ) -> Result<Vec<(i64, Vec<u8>)>, SourceError> {
            Ok(self
                .0
                .iter()
                .enumerate()
                .map(|(i, r)| (i as i64, r.clone()))
                .filter(|(seq, _)| *seq > after)
                .take(limit)
                .collect())
        }
    }

    #[test]
    fn reads_every_page_and_skips_what_does_not_parse() {
        let mut records = vec![format!(
            "{}\n",
            OmniMessage::session_meta(SessionMeta::default()).to_json()
        )];
        for i in 0..SOURCE_PAGE + 3 {
            records.push(format!(
                "{}\n",
                build::user_text(format!("p{i}"), None).to_json()
            ));
        }
        records.push("{not json\n".into());
        let source = Memory(records.into_iter().map(String::into_bytes).collect());
        let history = read_stored_history(&source, "s", PathBuf::from("store:/s")).unwrap();
        assert_eq!(history.records.len(), SOURCE_PAGE + 4);
        assert_eq!(history.lines.len(), history.records.len());
        assert_eq!(history.metas.len(), 1);
        assert_eq!(history.skipped, 1);
        assert_eq!(history.summary().files, ["store:/s"]);
    }
}
