//! The data of the `schedule_added`, `schedule_removed` and `schedule_fired` records: a
//! session's schedules (`rookery serve`'s `POST /v1/sessions/{id}/schedules`) as its trace
//! keeps them, so that the server can rebuild its schedule index from the traces.
//!
//! Plain data: what a cron pattern means and when a schedule is due is the server's
//! (`server/schedule_spec.rs`); nothing here parses or evaluates one.

use serde::{Deserialize, Serialize};

use super::EventPayload;

/// A schedule was added to the session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScheduleAdded {
    /// `sch-…`, unique within the server's home.
    pub schedule_id: String,
    /// The 5-field cron pattern.
    pub cron: String,
    /// The text of the task each run starts.
    pub text: String,
    /// The IANA time zone the pattern is evaluated in (`UTC` when the request named none).
    pub timezone: String,
    /// What a run does when the session is busy (`reject`, `enqueue`, `interrupt`, `steer`).
    pub if_busy: String,
    /// The schedule minute it was added in (minutes since the Unix epoch, each as long as the
    /// server's `--schedule-minute-ms`); it first runs at a matching minute after this one.
    pub minute: u64,
}

/// A schedule was removed (`reason`: `deleted` by a request, `session_deleted` with its session).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScheduleRemoved {
    /// The schedule's id.
    pub schedule_id: String,
    /// Why: `deleted` or `session_deleted`.
    pub reason: String,
}

/// A due schedule ran (or tried to): `outcome` is `started`, `queued`, `steered`,
/// `skipped_busy` (`if_busy: reject` on a busy session) or `failed`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScheduleFired {
    /// The schedule's id.
    pub schedule_id: String,
    /// The schedule minute it ran in (a catch-up at start runs in the start's minute).
    pub minute: u64,
    /// What the run did.
    pub outcome: String,
    /// Why it failed (`failed` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One of the three schedule records, as a session is asked to record it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScheduleRecord {
    /// `schedule_added`.
    Added(ScheduleAdded),
    /// `schedule_removed`.
    Removed(ScheduleRemoved),
    /// `schedule_fired`.
    Fired(ScheduleFired),
}

impl ScheduleRecord {
    /// The record's event payload.
    pub fn into_event(self) -> EventPayload {
        match self {
            ScheduleRecord::Added(a) => EventPayload::ScheduleAdded(a),
            ScheduleRecord::Removed(r) => EventPayload::ScheduleRemoved(r),
            ScheduleRecord::Fired(f) => EventPayload::ScheduleFired(f),
        }
    }
}
