//! The schedules of a server on the `files` backend: kept in memory and in the home's index
//! (`schedule_index.rs`), each with its compiled pattern and its next minute. One process owns
//! the home (its `flock`), so this table alone decides what is due.
//!
//! It owns the table and the index writes; it must not check a request (`schedules.rs` does)
//! nor record in a trace (the caller's `record` does, under the table's lock).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Mutex;

use super::error::ApiError;
use super::schedule_index::{self, IndexError, Stored};
use super::schedule_spec::{Spec, minute_of, now_ms};

/// A schedule in memory: what the index keeps, its compiled pattern and its next minute.
struct Live {
    stored: Stored,
    spec: Spec,
    /// The first matching minute after `stored.last_minute` (`None`: never again).
    next: Option<u64>,
}

impl Live {
    fn new(stored: Stored, spec: Spec) -> Live {
        let next = spec.next_after(stored.last_minute);
        Live { stored, spec, next }
    }
}

/// Why [`FileTable::insert`] refused a schedule.
pub enum Refused {
    /// The session has this many schedules already.
    SessionFull,
    /// The server has its maximum already.
    ServerFull,
    /// The caller's `record` failed.
    Record(ApiError),
}

/// Every session's schedules of a `files` home.
pub struct FileTable {
    home: PathBuf,
    minute_ms: u64,
    /// By session id.
    sessions: Mutex<BTreeMap<String, Vec<Live>>>,
    /// Serializes writes of the index (each writes what is in memory when it takes this).
    saving: Mutex<()>,
}

impl FileTable {
    /// The schedules of `home` (its index, or the traces when it has none) on a clock of
    /// `minute_ms` minutes. The minutes of an index written with another minute length mean
    /// nothing on this clock: those schedules start over from now, with no catch-up.
    pub fn open(home: PathBuf, minute_ms: u64) -> Result<FileTable, IndexError> {
        let loaded = schedule_index::load(&home)?;
        let now = minute_of(now_ms(), minute_ms);
        let restart = loaded.minute_ms.is_some_and(|ms| ms != minute_ms);
        if restart {
            tracing::info!(
                "--schedule-minute-ms changed to {minute_ms}: schedules start over from now"
            );
        }
        let mut sessions: BTreeMap<String, Vec<Live>> = BTreeMap::new();
        for mut stored in loaded.schedules {
            if restart {
                stored.last_minute = now;
            }
            match Spec::parse(&stored.cron, &stored.timezone) {
                Ok(spec) => sessions
                    .entry(stored.session_id.clone())
                    .or_default()
                    .push(Live::new(stored, spec)),
                Err(e) => tracing::warn!(
                    session = %stored.session_id,
                    "schedule {} dropped: {e}",
                    stored.schedule_id
                ),
            }
        }
        let table = FileTable {
            home,
            minute_ms,
            sessions: Mutex::new(sessions),
            saving: Mutex::new(()),
        };
        if loaded.rebuilt || restart {
            table.save()?;
        }
        Ok(table)
    }

    /// Writes the index as it is in memory now.
    fn save(&self) -> Result<(), IndexError> {
        let _saving = self.saving.lock().unwrap_or_else(|e| e.into_inner());
        let all: Vec<Stored> = match self.sessions.lock() {
            Ok(map) => map.values().flatten().map(|l| l.stored.clone()).collect(),
            Err(_) => return Ok(()),
        };
        schedule_index::save(&self.home, self.minute_ms, all)
    }

    /// [`Self::save`], a failure logged (the traces still hold the change).
    fn save_or_warn(&self) {
        if let Err(e) = self.save() {
            tracing::warn!("{e}");
        }
    }

    /// Adds `stored` (compiled as `spec`) unless its session has `per_session` schedules or
    /// the table `total`; `record` (the trace's `schedule_added`) runs under the table's lock
    /// first, and a failure of it adds nothing.
    pub fn insert(
        &self,
        stored: Stored,
        spec: Spec,
        (per_session, total): (usize, usize),
        record: impl FnOnce() -> Result<(), ApiError>,
    ) -> Result<(), Refused> {
        {
            let mut map = self
                .sessions
                .lock()
                .map_err(|_| Refused::Record(poisoned()))?;
            let all: usize = map.values().map(Vec::len).sum();
            let own = map.get(&stored.session_id).map_or(0, Vec::len);
            if own >= per_session {
                return Err(Refused::SessionFull);
            }
            if all >= total {
                return Err(Refused::ServerFull);
            }
            record().map_err(Refused::Record)?;
            map.entry(stored.session_id.clone())
                .or_default()
                .push(Live::new(stored, spec));
        }
        self.save_or_warn();
        Ok(())
    }

    /// Session `id`'s schedules, oldest first, each with its next minute.
    pub fn list(&self, id: &str) -> Vec<(Stored, Option<u64>)> {
        self.sessions
            .lock()
            .ok()
            .and_then(|m| {
                m.get(id)
                    .map(|l| l.iter().map(|s| (s.stored.clone(), s.next)).collect())
            })
            .unwrap_or_default()
    }

    /// Whether session `id` has any schedule.
    pub fn has_any(&self, id: &str) -> bool {
        self.sessions.lock().is_ok_and(|m| m.contains_key(id))
    }

    /// Removes schedule `schedule_id` of session `id`; whether it had it.
    pub fn remove(&self, id: &str, schedule_id: &str) -> Result<bool, ApiError> {
        let removed = {
            let mut map = self.sessions.lock().map_err(|_| poisoned())?;
            let list = map.get_mut(id);
            let at = list
                .as_ref()
                .and_then(|l| l.iter().position(|s| s.stored.schedule_id == schedule_id));
            match (list, at) {
                (Some(list), Some(at)) => {
                    list.remove(at);
                    if list.is_empty() {
                        map.remove(id);
                    }
                    true
                }
                _ => false,
            }
        };
        if removed {
            self.save_or_warn();
        }
        Ok(removed)
    }

    /// Forgets session `id`'s schedules (the index is written); what they were.
    pub fn drop_session(&self, id: &str) -> Vec<Stored> {
        let dropped = self
            .sessions
            .lock()
            .ok()
            .and_then(|mut m| m.remove(id))
            .map(|l| l.into_iter().map(|s| s.stored).collect::<Vec<_>>())
            .unwrap_or_default();
        self.save_or_warn();
        dropped
    }

    /// The schedules due at `now` (a matching minute after their last run, up to `now`),
    /// marked as run in `now`; the index is written when any is.
    pub fn take_due(&self, now: u64) -> Vec<Stored> {
        let mut due = Vec::new();
        if let Ok(mut map) = self.sessions.lock() {
            for live in map.values_mut().flatten() {
                if live.next.is_some_and(|n| n <= now) {
                    live.stored.last_minute = now;
                    live.next = live.spec.next_after(now);
                    due.push(live.stored.clone());
                }
            }
        }
        if !due.is_empty() {
            self.save_or_warn();
        }
        due
    }
}

/// The table is unusable after a panic while it was locked.
pub fn poisoned() -> ApiError {
    ApiError::internal("the schedule table is unusable after a panic")
}
