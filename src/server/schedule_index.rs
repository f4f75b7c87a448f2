//! The schedule index: `<home>/schedules.json`, every session's schedules with the minute each
//! last ran in, so that `rookery serve` finds them at start without reading any trace.
//!
//! The traces are the record (`schedule_added`, `schedule_removed`, `schedule_fired`); the index
//! is a copy, written whole by an atomic rename after every change. Only when it is missing (a
//! new home, a home from before schedules) or unreadable is it rebuilt from the traces, once:
//! a scan that parses only the trace files that mention a schedule.
//!
//! It reads and writes files; it never evaluates a pattern or starts a task.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::message::EventPayload;
use crate::trace::catalog::{Catalog, CatalogError};

/// The index's file name inside the home.
pub const INDEX_FILE: &str = "schedules.json";
/// The index format this build writes.
const VERSION: u32 = 1;

/// One schedule as the index keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stored {
    /// The session it runs tasks in.
    pub session_id: String,
    /// `sch-…`.
    pub schedule_id: String,
    /// The 5-field cron pattern.
    pub cron: String,
    /// The task's text.
    pub text: String,
    /// The IANA time zone.
    pub timezone: String,
    /// `reject`, `enqueue`, `interrupt` or `steer`.
    pub if_busy: String,
    /// The schedule minute it was added in.
    pub created_minute: u64,
    /// The schedule minute it last ran in (its creation minute before its first run): it is
    /// due when a minute after this one matches.
    pub last_minute: u64,
}

/// The file's content.
#[derive(Debug, Serialize, Deserialize)]
struct IndexFile {
    version: u32,
    /// The `--schedule-minute-ms` the minutes were counted with.
    minute_ms: u64,
    schedules: Vec<Stored>,
}

/// What the server starts with.
#[derive(Debug, Default)]
pub struct Loaded {
    /// The minute length the stored minutes were counted with (`None` when rebuilt).
    pub minute_ms: Option<u64>,
    /// The schedules.
    pub schedules: Vec<Stored>,
    /// Whether they were rebuilt from the traces (the index must be written).
    pub rebuilt: bool,
}

/// Failures of the index.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    /// The index cannot be written.
    #[error("cannot write the schedule index {path}: {source}")]
    Write {
        /// The index (or its temporary file).
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The traces cannot be scanned to rebuild it.
    #[error("cannot rebuild the schedule index from the traces: {0}")]
    Scan(#[from] CatalogError),
    /// The index exists but cannot be read.
    #[error("cannot read the schedule index {path}: {source}")]
    Read {
        /// The index.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// The index of `home`, rebuilt from the traces when it is missing or does not parse.
pub fn load(home: &Path) -> Result<Loaded, IndexError> {
    let path = home.join(INDEX_FILE);
    match std::fs::read(&path) {
        Ok(bytes) => match serde_json::from_slice::<IndexFile>(&bytes) {
            Ok(file) if file.version == VERSION => {
                return Ok(Loaded {
                    minute_ms: Some(file.minute_ms),
                    schedules: file.schedules,
                    rebuilt: false,
                });
            }
            Ok(file) => tracing::warn!(
                "{} has format version {}, this build reads {VERSION}; rebuilding it from the traces",
                path.display(),
                file.version
            ),
            Err(e) => tracing::warn!(
                "{} does not parse ({e}); rebuilding it from the traces",
                path.display()
            ),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(source) => return Err(IndexError::Read { path, source }),
    }
    Ok(Loaded {
        minute_ms: None,
        schedules: rebuild(home)?,
        rebuilt: true,
    })
}

/// The schedules the traces under `home` record: every `schedule_added` not followed by its
/// `schedule_removed`, with the minute of its last `schedule_fired`. Only files that mention a
/// schedule are parsed.
pub fn rebuild(home: &Path) -> Result<Vec<Stored>, IndexError> {
    let catalog = Catalog::scan(home)?;
    let mut out = Vec::new();
    for session in catalog.sessions() {
        let mut live: BTreeMap<String, Stored> = BTreeMap::new();
        for file in &session.files {
            let bytes = match std::fs::read(file) {
                Ok(b) => b,
                Err(e) => {
                    tracing::warn!("cannot read {} for schedules: {e}", file.display());
                    continue;
                }
            };
            if memchr::memmem::find(&bytes, b"\"schedule_").is_none() {
                continue;
            }
            let read = crate::trace::reader::parse_trace_bytes(&bytes);
            for record in &read.records {
                apply(&mut live, &session.id, record.as_event());
            }
        }
        out.extend(live.into_values());
    }
    if !out.is_empty() {
        tracing::info!("rebuilt {} schedules from the traces", out.len());
    }
    Ok(out)
}

/// Applies one record of session `id` to its live schedules.
fn apply(live: &mut BTreeMap<String, Stored>, id: &str, event: Option<&EventPayload>) {
    match event {
        Some(EventPayload::ScheduleAdded(a)) => {
            live.insert(
                a.schedule_id.clone(),
                Stored {
                    session_id: id.to_string(),
                    schedule_id: a.schedule_id.clone(),
                    cron: a.cron.clone(),
                    text: a.text.clone(),
                    timezone: a.timezone.clone(),
                    if_busy: a.if_busy.clone(),
                    created_minute: a.minute,
                    last_minute: a.minute,
                },
            );
        }
        Some(EventPayload::ScheduleRemoved(r)) => {
            live.remove(&r.schedule_id);
        }
        Some(EventPayload::ScheduleFired(f)) => {
            if let Some(s) = live.get_mut(&f.schedule_id) {
                s.last_minute = s.last_minute.max(f.minute);
            }
        }
        _ => {}
    }
}

/// Writes the index of `home` (a temporary file, synced, renamed over the old one).
pub fn save(home: &Path, minute_ms: u64, schedules: Vec<Stored>) -> Result<(), IndexError> {
    let path = home.join(INDEX_FILE);
    let tmp = home.join(format!(".{INDEX_FILE}.{}.tmp", std::process::id()));
    let file = IndexFile {
        version: VERSION,
        minute_ms,
        schedules,
    };
    let write = |p: &Path| -> std::io::Result<()> {
        let bytes = serde_json::to_vec(&file).map_err(std::io::Error::other)?;
        let mut f = std::fs::File::create(p)?;
        f.write_all(&bytes)?;
        f.sync_all()
    };
    write(&tmp).map_err(|source| IndexError::Write {
        path: tmp.clone(),
        source,
    })?;
    std::fs::rename(&tmp, &path).map_err(|source| IndexError::Write { path, source })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::schedule::{ScheduleAdded, ScheduleFired, ScheduleRemoved};

    fn added(id: &str, minute: u64) -> EventPayload {
        EventPayload::ScheduleAdded(ScheduleAdded {
            schedule_id: id.into(),
            cron: "* * * * *".into(),
            text: "t".into(),
            timezone: "UTC".into(),
            if_busy: "reject".into(),
            minute,
        })
    }

    #[test]
    fn records_replay_to_the_live_schedules() {
        let mut live = BTreeMap::new();
        apply(&mut live, "s1", Some(&added("a", 5)));
        apply(&mut live, "s1", Some(&added("b", 6)));
        let fired = |id: &str, minute| {
            EventPayload::ScheduleFired(ScheduleFired {
                schedule_id: id.into(),
                minute,
                outcome: "started".into(),
                error: None,
            })
        };
        apply(&mut live, "s1", Some(&fired("a", 9)));
        apply(&mut live, "s1", Some(&fired("a", 7)));
        apply(
            &mut live,
            "s1",
            Some(&EventPayload::ScheduleRemoved(ScheduleRemoved {
                schedule_id: "b".into(),
                reason: "deleted".into(),
            })),
        );
        let list: Vec<_> = live.into_values().collect();
        assert_eq!(list.len(), 1);
        assert_eq!(
            (list[0].schedule_id.as_str(), list[0].last_minute),
            ("a", 9)
        );
    }

    #[test]
    fn saved_index_loads_back_and_a_missing_one_is_rebuilt_empty() {
        let home = tempfile::tempdir().unwrap();
        let loaded = load(home.path()).unwrap();
        assert!(loaded.rebuilt && loaded.schedules.is_empty());
        let s = Stored {
            session_id: "s".into(),
            schedule_id: "sch-1".into(),
            cron: "0 * * * *".into(),
            text: "x".into(),
            timezone: "UTC".into(),
            if_busy: "enqueue".into(),
            created_minute: 1,
            last_minute: 2,
        };
        save(home.path(), 500, vec![s.clone()]).unwrap();
        let loaded = load(home.path()).unwrap();
        assert!(!loaded.rebuilt);
        assert_eq!((loaded.minute_ms, loaded.schedules), (Some(500), vec![s]));
        std::fs::write(home.path().join(INDEX_FILE), "{not json").unwrap();
        assert!(load(home.path()).unwrap().rebuilt);
    }
}
