//! The ticker of `rookery serve`'s schedules: at start (the catch-up of runs missed while the
//! server was down) and then at the start of every schedule minute, it takes the due schedules
//! (`schedules.rs`) and starts each one's task in its session — a hibernated or recorded
//! session is woken, as a request would — under its `if_busy` (`busy.rs`), then has the session
//! record what the run did (`schedule_fired`). A schedule whose session no longer exists is
//! dropped when it comes due.
//!
//! On the `postgres` store every node ticks, and takes only the due schedules it claimed in the
//! store (one node per minute): those of the sessions it holds, and those of sessions nobody
//! holds, which it wakes (taking their lease). When such a session was taken by another node
//! before this one could wake it (409 `session_locked`), or the store failed, the minute is
//! given back, and the node that may run it does at its next tick.
//!
//! It stops when the server shuts down. It never runs a turn and never writes a trace.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use super::busy::{self, IfBusy, Started};
use super::schedule_spec::{minute_of, now_ms};
use super::schedules::{Due, Schedules};
use super::state::ServerState;
use crate::message::schedule::{ScheduleFired, ScheduleRecord};

/// Wakes of a session that may find it hibernating again before a run gives up and starts
/// its task on the entry it has.
const WAKE_TRIES: usize = 2;

/// Starts the ticker of `schedules` for `state`'s sessions.
pub fn start(schedules: &Arc<Schedules>, state: &Arc<ServerState>) {
    let schedules = schedules.clone();
    let state = Arc::downgrade(state);
    tokio::spawn(tick_forever(schedules, state));
}

async fn tick_forever(schedules: Arc<Schedules>, state: Weak<ServerState>) {
    let minute_ms = schedules.minute_ms();
    loop {
        let now = minute_of(now_ms(), minute_ms);
        {
            let Some(state) = state.upgrade() else { return };
            if state.is_shutting_down() {
                return;
            }
            for due in schedules.take_due(now).await {
                tokio::spawn(run(state.clone(), schedules.clone(), due, now));
            }
        }
        // Just past the start of the next minute (from the time now: asking the store took
        // some of it).
        let next_ms = (now + 1).saturating_mul(minute_ms);
        let wait = next_ms.saturating_sub(now_ms()) + 1;
        tokio::time::sleep(Duration::from_millis(wait)).await;
    }
}

/// Runs one due schedule in minute `minute`: wakes its session, starts the task under its
/// `if_busy` and has the session record what happened.
async fn run(state: Arc<ServerState>, schedules: Arc<Schedules>, due: Due, minute: u64) {
    let s = &due.stored;
    let policy = IfBusy::parse(Some(&s.if_busy)).unwrap_or(IfBusy::Reject);
    let mut tries = 0;
    let (entry, result) = loop {
        let entry = match state.get(&s.session_id).await {
            Ok(entry) => entry,
            Err(e) if e.code == "unknown_session" => {
                tracing::warn!(session = %s.session_id, "its schedules are dropped: the session no longer exists");
                schedules.drop_session(&s.session_id).await;
                return;
            }
            Err(e) if e.code == "session_locked" || e.code == "store_unavailable" => {
                tracing::info!(session = %s.session_id, "schedule {} not run here: {}", s.schedule_id, e.message);
                schedules.give_back(&due, minute).await;
                return;
            }
            Err(e) => {
                tracing::warn!(session = %s.session_id, "schedule {} cannot run: {}", s.schedule_id, e.message);
                return;
            }
        };
        // Under the gate, as a request's work: no hibernation closes the session meanwhile.
        let gate = entry.gate.read().await;
        if entry.hibernating.load(Ordering::SeqCst) && tries < WAKE_TRIES {
            drop(gate);
            tries += 1;
            continue;
        }
        let result = busy::start(&state, &entry, &s.text, policy).await;
        drop(gate);
        break (entry, result);
    };
    let (outcome, error) = match result {
        Ok(Started::Now) => {
            state.metrics.task_started();
            ("started", None)
        }
        Ok(Started::Queued(_)) => ("queued", None),
        Ok(Started::Steered) => ("steered", None),
        Err(e) if e.code == "session_busy" => ("skipped_busy", None),
        Err(e) => ("failed", Some(e.message)),
    };
    if let Some(error) = &error {
        tracing::warn!(session = %s.session_id, "schedule {} failed: {error}", s.schedule_id);
    }
    let record = ScheduleRecord::Fired(ScheduleFired {
        schedule_id: s.schedule_id.clone(),
        minute,
        outcome: outcome.to_string(),
        error,
    });
    if let Err(e) = entry.handle.record_schedule(record) {
        tracing::debug!(session = %s.session_id, "cannot record a schedule's run: {e}");
    }
}
