//! The schedules of `rookery serve`: each session's tasks that run on a cron pattern, each
//! with its next minute on the schedule clock (`schedule_spec.rs`), kept by one of two
//! backends: on the `files` backend in memory and in the home's index (`schedule_files.rs`,
//! `schedule_index.rs`); on the `postgres` store in its `schedules` table, shared by every node
//! of a cluster (`schedule_store.rs`).
//!
//! A schedule is due when a minute its pattern matches, after the one it last ran in, has come;
//! [`Schedules::take_due`] hands the due ones out marked as run now, so a schedule runs once
//! however many of its minutes went by unseen (the server was down, the machine too slow). On
//! the store, only the due ones this node claimed (one node per minute) are handed out.
//! At most [`MAX_PER_SESSION`] schedules per session and [`MAX_TOTAL`] per server (per store);
//! additions and removals are recorded in the session's trace through its handle.
//!
//! The checks of a request and the choice of backend only: the ticker that starts the due
//! tasks is `schedule_runner.rs`. It must not import the server's state (which holds it), and
//! never writes a trace itself.

use std::path::PathBuf;
use std::sync::Arc;

use axum::http::StatusCode;
use serde_json::{Value, json};

use super::error::ApiError;
use super::schedule_files::{FileTable, Refused};
use super::schedule_index::{IndexError, Stored};
use super::schedule_spec::{Spec, minute_of, now_ms};
use crate::actors::session::SessionHandle;
use crate::message::schedule::ScheduleRecord;

/// Schedules one session may have.
pub const MAX_PER_SESSION: usize = 32;
/// Schedules one server (or one store, shared by a cluster) may have.
pub const MAX_TOTAL: usize = 100_000;
/// The default of `--schedule-minute-ms`.
pub const DEFAULT_MINUTE_MS: u64 = 60_000;

/// A schedule's view in the API: what is stored and its next minute.
fn view(s: &Stored, next: Option<u64>, minute_ms: u64) -> Value {
    json!({
        "schedule_id": s.schedule_id,
        "cron": s.cron,
        "text": s.text,
        "timezone": s.timezone,
        "if_busy": s.if_busy,
        "created_minute": s.created_minute,
        "last_minute": s.last_minute,
        "next_minute": next,
        "next_at_ms": next.and_then(|m| m.checked_mul(minute_ms)),
    })
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

/// Where the schedules are kept.
enum Backend {
    /// The home's index, this process alone.
    Files(FileTable),
    /// The store's table, shared by the cluster.
    #[cfg(feature = "postgres")]
    Store(super::schedule_store::StoreTable),
}

/// A due schedule handed out by [`Schedules::take_due`], marked as run in the minute it was
/// taken in.
#[derive(Debug, Clone)]
pub struct Due {
    /// The schedule.
    pub stored: Stored,
    /// On the store, the claim [`Schedules::give_back`] undoes.
    #[cfg(feature = "postgres")]
    claim: Option<super::schedule_store::Claimed>,
}

/// Every session's schedules and the clock they run on.
pub struct Schedules {
    minute_ms: u64,
    backend: Backend,
}

impl Schedules {
    /// The schedules of `home` (its index, or the traces when it has none) on a clock of
    /// `minute_ms` minutes. The minutes of an index written with another minute length mean
    /// nothing on this clock: those schedules start over from now, with no catch-up.
    pub fn open(home: PathBuf, minute_ms: u64) -> Result<Arc<Schedules>, IndexError> {
        let minute_ms = minute_ms.max(1);
        Ok(Arc::new(Schedules {
            minute_ms,
            backend: Backend::Files(FileTable::open(home, minute_ms)?),
        }))
    }

    /// The schedules in `store`, shared with every node of its cluster, on a clock of
    /// `minute_ms` minutes (those counted on another length start over from now).
    #[cfg(feature = "postgres")]
    pub async fn open_store(
        store: crate::store::PgStore,
        minute_ms: u64,
    ) -> Result<Arc<Schedules>, crate::store::StoreError> {
        let minute_ms = minute_ms.max(1);
        let table = super::schedule_store::StoreTable::open(store, minute_ms).await?;
        Ok(Arc::new(Schedules {
            minute_ms,
            backend: Backend::Store(table),
        }))
    }

    /// The length of a schedule minute, in milliseconds.
    pub fn minute_ms(&self) -> u64 {
        self.minute_ms
    }

    /// The schedule minute now.
    pub fn now_minute(&self) -> u64 {
        minute_of(now_ms(), self.minute_ms)
    }

    /// Adds a schedule to `entry`'s session (recorded in its trace): the new schedule's view.
    /// 400 `invalid_cron` / `unknown_timezone` / `invalid_request`, 429 `too_many_schedules`.
    pub async fn add(&self, entry: &SessionHandle, new: NewSchedule) -> Result<Value, ApiError> {
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
        let next = spec.next_after(minute);
        let view = view(&stored, next, self.minute_ms);
        let added = ScheduleRecord::Added(crate::message::schedule::ScheduleAdded {
            schedule_id: stored.schedule_id.clone(),
            cron: stored.cron.clone(),
            text: stored.text.clone(),
            timezone: stored.timezone.clone(),
            if_busy: stored.if_busy.clone(),
            minute,
        });
        let limits = (MAX_PER_SESSION, MAX_TOTAL);
        match &self.backend {
            Backend::Files(table) => table
                .insert(stored, spec, limits, || {
                    entry
                        .record_schedule(added)
                        .map_err(|_| ApiError::session_closed(entry.id()))
                })
                .map_err(|refused| match refused {
                    Refused::SessionFull => too_many(entry.id(), true),
                    Refused::ServerFull => too_many(entry.id(), false),
                    Refused::Record(e) => e,
                })?,
            #[cfg(feature = "postgres")]
            Backend::Store(table) => {
                use crate::store::schedules::Inserted;
                // The row first: a schedule recorded in the trace is one the cluster runs.
                match table.insert(&stored, next, limits).await? {
                    Inserted::Stored => {}
                    Inserted::SessionFull => return Err(too_many(entry.id(), true)),
                    Inserted::StoreFull => return Err(too_many(entry.id(), false)),
                }
                if entry.record_schedule(added).is_err() {
                    if let Err(e) = table.remove(entry.id(), &stored.schedule_id).await {
                        tracing::warn!(session = %entry.id(), "schedule {} is stored but its session closed: {}", stored.schedule_id, e.message);
                    }
                    return Err(ApiError::session_closed(entry.id()));
                }
            }
        }
        Ok(view)
    }

    /// The views of session `id`'s schedules, oldest first.
    pub async fn list(&self, id: &str) -> Result<Vec<Value>, ApiError> {
        let list = match &self.backend {
            Backend::Files(table) => table.list(id),
            #[cfg(feature = "postgres")]
            Backend::Store(table) => table.list(id).await?,
        };
        Ok(list
            .iter()
            .map(|(s, next)| view(s, *next, self.minute_ms))
            .collect())
    }

    /// Whether session `id` has any schedule.
    pub async fn has_any(&self, id: &str) -> Result<bool, ApiError> {
        match &self.backend {
            Backend::Files(table) => Ok(table.has_any(id)),
            #[cfg(feature = "postgres")]
            Backend::Store(table) => table.has_any(id).await,
        }
    }

    /// Removes schedule `schedule_id` of `entry`'s session (recorded with `reason`); 404
    /// `unknown_schedule` when it has none of that id.
    pub async fn remove(&self, entry: &SessionHandle, schedule_id: &str) -> Result<(), ApiError> {
        let removed = match &self.backend {
            Backend::Files(table) => table.remove(entry.id(), schedule_id)?,
            #[cfg(feature = "postgres")]
            Backend::Store(table) => table.remove(entry.id(), schedule_id).await?,
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
        Ok(())
    }

    /// Removes every schedule of session `id` (it is being deleted), recorded in its trace
    /// when its `entry` is at hand.
    pub async fn remove_session(&self, id: &str, entry: Option<&SessionHandle>) {
        for schedule_id in self.drop_session(id).await {
            if let Some(entry) = entry {
                record_removed(entry, &schedule_id, "session_deleted");
            }
        }
    }

    /// Forgets session `id`'s schedules (nothing recorded); the ids they had. A store that
    /// fails is logged (its rows go with the session's when it is deleted).
    pub async fn drop_session(&self, id: &str) -> Vec<String> {
        match &self.backend {
            Backend::Files(table) => table
                .drop_session(id)
                .into_iter()
                .map(|s| s.schedule_id)
                .collect(),
            #[cfg(feature = "postgres")]
            Backend::Store(table) => table.drop_session(id).await.unwrap_or_else(|e| {
                tracing::warn!(session = %id, "cannot delete its schedules: {}", e.message);
                Vec::new()
            }),
        }
    }

    /// The schedules due at `now` (a matching minute after their last run, up to `now`),
    /// marked as run in `now`. On the store, only those this node claimed: no other node runs
    /// them in this minute.
    pub async fn take_due(&self, now: u64) -> Vec<Due> {
        match &self.backend {
            Backend::Files(table) => table
                .take_due(now)
                .into_iter()
                .map(|stored| Due {
                    stored,
                    #[cfg(feature = "postgres")]
                    claim: None,
                })
                .collect(),
            #[cfg(feature = "postgres")]
            Backend::Store(table) => table
                .take_due(now)
                .await
                .into_iter()
                .map(|c| Due {
                    stored: c.stored.clone(),
                    claim: Some(c),
                })
                .collect(),
        }
    }

    /// Gives back a due schedule taken in `now` that this node could not start (its session
    /// is held elsewhere since, or the store failed): on the store, the node that may run it
    /// does at its next tick, once. On the `files` backend the run is lost, as before.
    pub async fn give_back(&self, due: &Due, now: u64) {
        #[cfg(feature = "postgres")]
        if let (Backend::Store(table), Some(claim)) = (&self.backend, &due.claim) {
            table.unclaim(claim, now).await;
        }
        #[cfg(not(feature = "postgres"))]
        let _ = (due, now);
    }
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
