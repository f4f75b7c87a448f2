//! The schedules of `rookery serve`: each session's tasks that run on a cron pattern, kept in
//! memory and in the home's index (`schedule_index.rs`), each with its next minute on the
//! schedule clock (`schedule_spec.rs`).
//!
//! A schedule is due when a minute its pattern matches, after the one it last ran in, has come;
//! [`Schedules::take_due`] hands the due ones out marked as run now, so a schedule runs once
//! however many of its minutes went by unseen (the server was down, the machine too slow).
//! At most [`MAX_PER_SESSION`] schedules per session and [`MAX_TOTAL`] per server; additions
//! and removals are recorded in the session's trace through its handle.
//!
//! The table only: the ticker that starts the due tasks is `schedule_runner.rs`. It must not
//! import the server's state (which holds it), and never writes a trace itself.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use axum::http::StatusCode;
use serde_json::{Value, json};

use super::error::ApiError;
use super::schedule_index::{self, IndexError, Stored};
use super::schedule_spec::{Spec, minute_of, now_ms};
use crate::actors::session::SessionHandle;
use crate::message::schedule::ScheduleRecord;

/// Schedules one session may have.
pub const MAX_PER_SESSION: usize = 32;
/// Schedules one server may have.
pub const MAX_TOTAL: usize = 100_000;
/// The default of `--schedule-minute-ms`.
pub const DEFAULT_MINUTE_MS: u64 = 60_000;

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

    fn view(&self, minute_ms: u64) -> Value {
        let s = &self.stored;
        json!({
            "schedule_id": s.schedule_id,
            "cron": s.cron,
            "text": s.text,
            "timezone": s.timezone,
            "if_busy": s.if_busy,
            "created_minute": s.created_minute,
            "last_minute": s.last_minute,
            "next_minute": self.next,
            "next_at_ms": self.next.and_then(|m| m.checked_mul(minute_ms)),
        })
    }
}

/// What a request asks for (checked by [`Schedules::add`]).
pub struct NewSchedule {
    /// The 5-field pattern.
    pub cron: String,
    /// The task's text.
    pub text: String,
    /// The IANA time zone (`UTC` when absent).
    pub timezone: Option<String>,
    /// `reject`, `enqueue`, `interrupt` or `steer` (checked by the caller).
    pub if_busy: &'static str,
}

/// Every session's schedules and the clock they run on.
pub struct Schedules {
    home: PathBuf,
    minute_ms: u64,
    /// By session id.
    sessions: Mutex<BTreeMap<String, Vec<Live>>>,
    /// Serializes writes of the index (each writes what is in memory when it takes this).
    saving: Mutex<()>,
}

impl Schedules {
    /// The schedules of `home` (its index, or the traces when it has none) on a clock of
    /// `minute_ms` minutes. The minutes of an index written with another minute length mean
    /// nothing on this clock: those schedules start over from now, with no catch-up.
    pub fn open(home: PathBuf, minute_ms: u64) -> Result<Arc<Schedules>, IndexError> {
        let minute_ms = minute_ms.max(1);
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
        let schedules = Arc::new(Schedules {
            home,
            minute_ms,
            sessions: Mutex::new(sessions),
            saving: Mutex::new(()),
        });
        if loaded.rebuilt || restart {
            schedules.save()?;
        }
        Ok(schedules)
    }

    /// The length of a schedule minute, in milliseconds.
    pub fn minute_ms(&self) -> u64 {
        self.minute_ms
    }

    /// The schedule minute now.
    pub fn now_minute(&self) -> u64 {
        minute_of(now_ms(), self.minute_ms)
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

    /// Adds a schedule to `entry`'s session (recorded in its trace): the new schedule's view.
    /// 400 `invalid_cron` / `unknown_timezone` / `invalid_request`, 429 `too_many_schedules`.
    pub fn add(&self, entry: &SessionHandle, new: NewSchedule) -> Result<Value, ApiError> {
        if new.text.trim().is_empty() {
            return Err(ApiError::bad_request(
                "invalid_request",
                "text must not be empty",
            ));
        }
        let timezone = new.timezone.unwrap_or_else(|| "UTC".to_string());
        let spec = Spec::parse(new.cron.trim(), &timezone)
            .map_err(|e| ApiError::bad_request(e.code(), e.to_string()))?;
        let minute = self.now_minute();
        let stored = Stored {
            session_id: entry.id().to_string(),
            schedule_id: format!("sch-{}", uuid::Uuid::new_v4().simple()),
            cron: new.cron.trim().to_string(),
            text: new.text,
            timezone,
            if_busy: new.if_busy.to_string(),
            created_minute: minute,
            last_minute: minute,
        };
        let live = Live::new(stored.clone(), spec);
        let view = live.view(self.minute_ms);
        let added = ScheduleRecord::Added(crate::message::schedule::ScheduleAdded {
            schedule_id: stored.schedule_id,
            cron: stored.cron,
            text: stored.text,
            timezone: stored.timezone,
            if_busy: stored.if_busy,
            minute,
        });
        {
            let mut map = self.sessions.lock().map_err(|_| poisoned())?;
            let total: usize = map.values().map(Vec::len).sum();
            let own = map.get(entry.id()).map_or(0, Vec::len);
            if own >= MAX_PER_SESSION || total >= MAX_TOTAL {
                return Err(too_many(entry.id(), own >= MAX_PER_SESSION));
            }
            entry
                .record_schedule(added)
                .map_err(|_| ApiError::session_closed(entry.id()))?;
            map.entry(entry.id().to_string()).or_default().push(live);
        }
        self.save_or_warn();
        Ok(view)
    }

    /// The views of session `id`'s schedules, oldest first.
    pub fn list(&self, id: &str) -> Vec<Value> {
        self.sessions
            .lock()
            .ok()
            .and_then(|m| {
                m.get(id)
                    .map(|l| l.iter().map(|s| s.view(self.minute_ms)).collect())
            })
            .unwrap_or_default()
    }

    /// Whether session `id` has any schedule.
    pub fn has_any(&self, id: &str) -> bool {
        self.sessions.lock().is_ok_and(|m| m.contains_key(id))
    }

    /// Removes schedule `schedule_id` of `entry`'s session (recorded with `reason`); 404
    /// `unknown_schedule` when it has none of that id.
    pub fn remove(&self, entry: &SessionHandle, schedule_id: &str) -> Result<(), ApiError> {
        let removed = {
            let mut map = self.sessions.lock().map_err(|_| poisoned())?;
            let list = map.get_mut(entry.id());
            let at = list
                .as_ref()
                .and_then(|l| l.iter().position(|s| s.stored.schedule_id == schedule_id));
            match (list, at) {
                (Some(list), Some(at)) => {
                    list.remove(at);
                    if list.is_empty() {
                        map.remove(entry.id());
                    }
                    true
                }
                _ => false,
            }
        };
        if !removed {
            return Err(ApiError::new(
                StatusCode::NOT_FOUND,
                "unknown_schedule",
                format!(
                    "session {} has no schedule {schedule_id} (GET …/schedules lists them)",
                    entry.id()
                ),
            ));
        }
        record_removed(entry, schedule_id, "deleted");
        self.save_or_warn();
        Ok(())
    }

    /// Removes every schedule of session `id` (it is being deleted), recorded in its trace
    /// when its `entry` is at hand.
    pub fn remove_session(&self, id: &str, entry: Option<&SessionHandle>) {
        for s in self.drop_session(id) {
            if let Some(entry) = entry {
                record_removed(entry, &s.schedule_id, "session_deleted");
            }
        }
    }

    /// Forgets session `id`'s schedules (nothing recorded; the index is written); what they
    /// were.
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

fn poisoned() -> ApiError {
    ApiError::internal("the schedule table is unusable after a panic")
}

fn too_many(id: &str, per_session: bool) -> ApiError {
    let message = if per_session {
        format!(
            "session {id} already has {MAX_PER_SESSION} schedules; delete one first (DELETE …/schedules/{{schedule_id}})"
        )
    } else {
        format!("the server already has {MAX_TOTAL} schedules; delete some first")
    };
    ApiError::new(StatusCode::TOO_MANY_REQUESTS, "too_many_schedules", message)
}

fn record_removed(entry: &SessionHandle, schedule_id: &str, reason: &str) {
    let record = ScheduleRecord::Removed(crate::message::schedule::ScheduleRemoved {
        schedule_id: schedule_id.to_string(),
        reason: reason.to_string(),
    });
    if let Err(e) = entry.record_schedule(record) {
        tracing::debug!(session = %entry.id(), "cannot record a schedule's removal: {e}");
    }
}
