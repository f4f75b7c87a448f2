//! A replay from before a served session's ring: the recorded messages that left the ring
//! ([`Gone`]: number and hash of their JSON) are found again in the session's trace files
//! (`_001` up to the current one, in order) and sent under their own numbers, in order, as the
//! file is read (a bounded channel: a large trace is never held whole).
//!
//! It only reads the trace; it never writes one nor touches the session. A message the trace
//! does not have (never written, or a record of a failed write) is left out.

use std::collections::HashMap;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::sync::mpsc;

use super::sse::{Gone, Record, json_hash};

/// Records read back and waiting for the client, at most.
const READ_AHEAD: usize = 16;

/// The trace files of the session whose current file is `current`, oldest first.
pub fn trace_files(current: &Path) -> Vec<PathBuf> {
    crate::trace::page::files_from_latest(current)
}

/// Reads `files` on a blocking thread and sends the records of `wanted` found there. The
/// channel ends when everything was found, the files end, or the client went away.
pub fn read_back(files: Vec<PathBuf>, wanted: Vec<Gone>) -> mpsc::Receiver<Arc<Record>> {
    let (tx, rx) = mpsc::channel(READ_AHEAD);
    if wanted.is_empty() {
        return rx;
    }
    tokio::task::spawn_blocking(move || {
        let by_hash: HashMap<u64, u64> = wanted.iter().map(|g| (g.hash, g.seq)).collect();
        let last = wanted.iter().map(|g| g.seq).max().unwrap_or(0);
        let mut sent = 0u64;
        for path in files {
            let file = match std::fs::File::open(&path) {
                Ok(f) => f,
                Err(e) => {
                    tracing::warn!("cannot read {} for an SSE replay: {e}", path.display());
                    continue;
                }
            };
            let mut reader = std::io::BufReader::new(file);
            let mut line = Vec::new();
            loop {
                line.clear();
                match reader.read_until(b'\n', &mut line) {
                    Ok(0) => break,
                    Ok(_) => {}
                    Err(e) => {
                        tracing::warn!("cannot read {} for an SSE replay: {e}", path.display());
                        break;
                    }
                }
                let json = line.strip_suffix(b"\n").unwrap_or(&line);
                let Some(&seq) = by_hash.get(&json_hash(json)) else {
                    continue;
                };
                // In order, each once (a rotated file repeats its session's header).
                if seq <= sent {
                    continue;
                }
                let Ok(json) = String::from_utf8(json.to_vec()) else {
                    continue;
                };
                sent = seq;
                if tx.blocking_send(Arc::new(Record::new(seq, json))).is_err() || seq == last {
                    return;
                }
            }
        }
    });
    rx
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_files_of_a_rotated_trace_are_read_from_the_first() {
        let files = trace_files(Path::new("/h/traces/d/s-1_003.jsonl"));
        assert_eq!(
            files,
            [
                PathBuf::from("/h/traces/d/s-1_001.jsonl"),
                PathBuf::from("/h/traces/d/s-1_002.jsonl"),
                PathBuf::from("/h/traces/d/s-1_003.jsonl"),
            ]
        );
    }

    #[tokio::test]
    async fn records_are_found_by_hash_in_order_and_once() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("s_001.jsonl");
        let b = dir.path().join("s_002.jsonl");
        std::fs::write(&a, "{\"a\":1}\n{\"b\":2}\n{\"c\":3}\n").unwrap();
        // The header of the next file repeats the first record.
        std::fs::write(&b, "{\"a\":1}\n{\"d\":4}").unwrap();
        let gone = |seq, json: &str| Gone {
            seq,
            hash: json_hash(json.as_bytes()),
        };
        let wanted = vec![
            gone(2, "{\"a\":1}"),
            gone(5, "{\"c\":3}"),
            gone(9, "{\"d\":4}"),
            gone(11, "{\"never\":0}"),
        ];
        let mut rx = read_back(trace_files(&b), wanted);
        let mut got = Vec::new();
        while let Some(r) = rx.recv().await {
            got.push((r.seq, r.json.clone()));
        }
        assert_eq!(
            got,
            [
                (2, "{\"a\":1}".to_string()),
                (5, "{\"c\":3}".to_string()),
                (9, "{\"d\":4}".to_string()),
            ]
        );
    }
}
