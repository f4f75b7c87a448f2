//! Trace rotation: after a completed compaction a session's records continue in the next file
//! of its trace (`<session_id>_002.jsonl`, then `_003`, …, in the same date directory), which
//! starts with the session's `session_meta` and `tool_list_ready`.
//!
//! The switch is one step of the `TraceActor` (`TraceMsg::Rotate`), so it is serialized with the
//! writes: every record sent before the rotation is in the old file, every later one in the new
//! file, none twice. It is deferred until the next record (no empty file for a session that
//! never writes again). A failed rotation is logged (`[trace] rotate failed: …`) and the records
//! stay in the old file. This module must not decide when to rotate (the session does).

use std::path::{Path, PathBuf};

use super::batch::Batch;
use super::file::TraceFile;
use super::sink::Sink;
use super::writer::TraceState;

/// A pending rotation: the serialized records (newline included) the new file starts with.
#[derive(Debug, Clone, Default)]
pub struct Rotation {
    /// The serialized records (each ending with its newline) written first to the new file.
    pub header: Vec<Vec<u8>>,
}

/// `<dir>/<session_id>_<NNN+1>.jsonl` for a trace file `<dir>/<session_id>_<NNN>.jsonl`.
pub fn next_file(path: &Path) -> Option<PathBuf> {
    let name = path.file_name()?.to_str()?;
    let (id, index) = split_name(name)?;
    let next = index.checked_add(1)?;
    Some(path.with_file_name(super::paths::trace_file_name(id, u32::try_from(next).ok()?)))
}

/// `(session_id, NNN)` of a file name `<session_id>_<NNN>.jsonl`.
pub fn split_name(name: &str) -> Option<(&str, u64)> {
    let stem = name.strip_suffix(".jsonl")?;
    let (id, digits) = stem.rsplit_once('_')?;
    if id.is_empty() || digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((id, digits.parse().ok()?))
}

impl TraceState {
    /// Switches to the next file and writes its header. Runs inside the actor, before the
    /// record that follows the rotation.
    pub(super) fn rotate(&mut self, rotation: Rotation) {
        let current = match &mut self.file {
            Sink::File(file) => file,
            Sink::Remote { trace, part } => {
                // A store numbers the parts itself: the header opens the next one.
                *part += 1;
                let header = Batch::from_parts(rotation.header);
                if !header.is_empty() {
                    use std::sync::atomic::Ordering;
                    self.stats
                        .bytes_written
                        .fetch_add(header.bytes() as u64, Ordering::Relaxed);
                    self.stats
                        .records
                        .fetch_add(header.records(), Ordering::Relaxed);
                    trace.append(header.into_parts(), *part);
                }
                tracing::debug!("[trace] {} goes on in part {part}", trace.place().display());
                return;
            }
        };
        let Some(next) = next_file(current.path()) else {
            tracing::error!(
                "[trace] rotate failed: {} is not a numbered trace file",
                current.path().display()
            );
            return;
        };
        let opened = TraceFile::open(&next).and_then(|mut f| {
            // The owner lock moves with the session: taken on the new file before the old
            // handle (and its lock) is dropped.
            f.lock().map_err(std::io::Error::other)?;
            Ok(f)
        });
        let file = match opened {
            Ok(f) => f,
            Err(e) => {
                tracing::error!("[trace] rotate failed: {}: {e}", next.display());
                return;
            }
        };
        // Named at once: the new file exists from here on, before the old one's sync.
        self.health.set_current(next.clone());
        let synced = current.sync();
        let old = std::mem::replace(current, file);
        old.unlock();
        drop(old);
        if let Err(e) = synced {
            self.failed(&e);
        }
        tracing::debug!("[trace] rotated to {}", next.display());
        for line in rotation.header {
            self.write_header_line(line);
        }
    }

    fn write_header_line(&mut self, line: Vec<u8>) {
        let len = line.len() as u64;
        let Sink::File(file) = &mut self.file else {
            return;
        };
        match file.append_records(&[line]) {
            Ok(()) => {
                use std::sync::atomic::Ordering;
                self.stats.bytes_written.fetch_add(len, Ordering::Relaxed);
                self.stats.records.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => self.failed(&e),
        }
    }
}

#[cfg(test)]
mod tests;
