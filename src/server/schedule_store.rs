//! The schedules of a server on the `postgres` store: kept in the store's `schedules` table
//! (`store/schedules.rs`), which every node of a cluster shares, and nowhere else. Nothing is
//! cached: a listing reads the session's rows, and each tick of a node's schedule clock asks
//! the store for the due schedules this node may fire (an indexed range of `next_minute`) and
//! claims them in one compare-and-set statement; only what it claimed it runs.
//!
//! It owns the translation between the server's schedules and the store's rows (the next
//! minute of each, computed from its pattern here); it must not record in a trace nor start a
//! task (`schedule_runner.rs` does).

use std::collections::HashSet;

use super::error::ApiError;
use super::schedule_index::Stored;
use super::schedule_spec::{Spec, minute_of, now_ms};
use crate::store::PgStore;
use crate::store::schedules::{self as rows, Claim, Inserted, ScheduleRow};

/// Due schedules one tick claims at most (the rest wait for the next tick).
const DUE_BATCH: i64 = 10_000;

/// A schedule this node claimed in some minute: what it runs, and how to give the minute back.
#[derive(Debug, Clone)]
pub struct Claimed {
    /// The schedule, marked as run in the claimed minute.
    pub stored: Stored,
    /// Its `last_minute` before the claim.
    read_last: i64,
    /// Its next minute before the claim.
    read_next: Option<i64>,
}

/// The schedules of a server on the store.
pub struct StoreTable {
    store: PgStore,
    minute_ms: u64,
}

/// The answer to a store failure (503 `store_unavailable` when it is transient), as every
/// route's.
fn store_error(e: crate::store::StoreError) -> ApiError {
    crate::error::RookeryError::Store(e).into()
}

fn to_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn to_u64(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

fn stored(r: ScheduleRow) -> (Stored, Option<u64>) {
    let next = r.next_minute.map(to_u64);
    (
        Stored {
            session_id: r.session_id,
            schedule_id: r.schedule_id,
            cron: r.cron,
            text: r.text,
            timezone: r.timezone,
            if_busy: r.if_busy,
            created_minute: to_u64(r.created_minute),
            last_minute: to_u64(r.last_minute),
        },
        next,
    )
}

impl StoreTable {
    /// The schedules in `store`, on a clock of `minute_ms` minutes. Those counted on minutes of
    /// another length (a node started with another `--schedule-minute-ms`) start over from now
    /// on this one, with no catch-up, as a `files` home's do; a cluster's nodes should share
    /// one length.
    pub async fn open(
        store: PgStore,
        minute_ms: u64,
    ) -> Result<StoreTable, crate::store::StoreError> {
        let now = minute_of(now_ms(), minute_ms);
        let others = rows::other_length(&store, to_i64(minute_ms)).await?;
        if !others.is_empty() {
            tracing::info!(
                "{} schedules in the store count minutes of another length than --schedule-minute-ms {minute_ms}: they start over from now",
                others.len()
            );
        }
        for r in others {
            let next = Spec::parse(&r.cron, &r.timezone)
                .ok()
                .and_then(|spec| spec.next_after(now))
                .map(to_i64);
            rows::restart(&store, &r.schedule_id, to_i64(minute_ms), to_i64(now), next).await?;
        }
        Ok(StoreTable { store, minute_ms })
    }

    /// Stores `stored`, whose next minute is `next`, unless its session has `per_session`
    /// schedules or the store `total`.
    pub async fn insert(
        &self,
        stored: &Stored,
        next: Option<u64>,
        (per_session, total): (usize, usize),
    ) -> Result<Inserted, ApiError> {
        let row = ScheduleRow {
            session_id: stored.session_id.clone(),
            schedule_id: stored.schedule_id.clone(),
            cron: stored.cron.clone(),
            text: stored.text.clone(),
            timezone: stored.timezone.clone(),
            if_busy: stored.if_busy.clone(),
            created_minute: to_i64(stored.created_minute),
            last_minute: to_i64(stored.last_minute),
            next_minute: next.map(to_i64),
        };
        rows::insert(
            &self.store,
            &row,
            to_i64(self.minute_ms),
            i64::try_from(per_session).unwrap_or(i64::MAX),
            i64::try_from(total).unwrap_or(i64::MAX),
        )
        .await
        .map_err(store_error)
    }

    /// Session `id`'s schedules, oldest first, each with its next minute.
    pub async fn list(&self, id: &str) -> Result<Vec<(Stored, Option<u64>)>, ApiError> {
        let list = rows::of_session(&self.store, id)
            .await
            .map_err(store_error)?;
        Ok(list.into_iter().map(stored).collect())
    }

    /// Whether session `id` has any schedule.
    pub async fn has_any(&self, id: &str) -> Result<bool, ApiError> {
        rows::any_of_session(&self.store, id)
            .await
            .map_err(store_error)
    }

    /// Deletes schedule `schedule_id` of session `id`; whether it had it.
    pub async fn remove(&self, id: &str, schedule_id: &str) -> Result<bool, ApiError> {
        rows::delete(&self.store, id, schedule_id)
            .await
            .map_err(store_error)
    }

    /// Deletes every schedule of session `id`; their ids.
    pub async fn drop_session(&self, id: &str) -> Result<Vec<String>, ApiError> {
        rows::delete_session(&self.store, id)
            .await
            .map_err(store_error)
    }

    /// Claims minute `now` of the schedules due at `now` that this node may fire (see the
    /// module doc); what it claimed. A failure of the store is logged: the next tick asks
    /// again, and its claims still run each schedule once.
    pub async fn take_due(&self, now: u64) -> Vec<Claimed> {
        let due = match rows::due(&self.store, to_i64(self.minute_ms), to_i64(now), DUE_BATCH).await
        {
            Ok(due) => due,
            Err(e) => {
                tracing::warn!("[schedules] cannot read the due schedules from the store: {e}");
                return Vec::new();
            }
        };
        let mut claims = Vec::with_capacity(due.len());
        let mut runs = Vec::with_capacity(due.len());
        for r in due {
            let next = match Spec::parse(&r.cron, &r.timezone) {
                Ok(spec) => spec.next_after(now).map(to_i64),
                Err(e) => {
                    // It never runs on this build: claimed with no next minute, so no node
                    // asks for it again (the schedule stays listed).
                    tracing::warn!(session = %r.session_id, "schedule {} cannot run: {e}", r.schedule_id);
                    claims.push(Claim {
                        schedule_id: r.schedule_id.clone(),
                        read_last: r.last_minute,
                        next: None,
                    });
                    continue;
                }
            };
            claims.push(Claim {
                schedule_id: r.schedule_id.clone(),
                read_last: r.last_minute,
                next,
            });
            let (read_last, read_next) = (r.last_minute, r.next_minute);
            let (mut s, _) = stored(r);
            s.last_minute = now;
            runs.push(Claimed {
                stored: s,
                read_last,
                read_next,
            });
        }
        let won: HashSet<String> = match rows::claim(&self.store, to_i64(now), &claims).await {
            Ok(won) => won.into_iter().collect(),
            Err(e) => {
                tracing::warn!("[schedules] cannot claim the due schedules in the store: {e}");
                return Vec::new();
            }
        };
        runs.retain(|c| won.contains(&c.stored.schedule_id));
        runs
    }

    /// Gives back minute `now` of `claimed`, which this node could not run: the node that may
    /// fire it does at its next tick.
    pub async fn unclaim(&self, claimed: &Claimed, now: u64) {
        let s = &claimed.stored;
        match rows::unclaim(
            &self.store,
            &s.schedule_id,
            to_i64(now),
            claimed.read_last,
            claimed.read_next,
        )
        .await
        {
            Ok(true) => tracing::info!(
                session = %s.session_id,
                "schedule {} given back: another node runs it at its next tick",
                s.schedule_id
            ),
            Ok(false) => {}
            Err(e) => tracing::warn!(
                session = %s.session_id,
                "schedule {} cannot be given back (its minute {now} is lost): {e}",
                s.schedule_id
            ),
        }
    }
}

/// What [`import`] did with a `files` home's schedules.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ImportedSchedules {
    /// Schedules stored by this import.
    pub new: usize,
    /// Schedules the store had already (a second import).
    pub present: usize,
    /// Schedules of a session the store does not have (not imported, or deleted since).
    pub no_session: usize,
    /// Schedules refused by the limits (per session, per store).
    pub refused: usize,
}

/// Stores `schedules`, a `files` home's index counted on `minute_ms` minutes, in `store`
/// (`rookery store import HOME`): each one whose session the store has and that it does not
/// have yet, with its next minute from its pattern, within `limits` (per session, in all).
/// A second import stores nothing.
pub async fn import(
    store: &PgStore,
    schedules: Vec<Stored>,
    minute_ms: u64,
    (per_session, total): (usize, usize),
) -> Result<ImportedSchedules, crate::store::StoreError> {
    let mut done = ImportedSchedules::default();
    let mut known: std::collections::HashMap<String, Option<HashSet<String>>> =
        std::collections::HashMap::new();
    for s in schedules {
        if !known.contains_key(&s.session_id) {
            let ids = if crate::store::records::exists(store, &s.session_id).await? {
                let rows = rows::of_session(store, &s.session_id).await?;
                Some(rows.into_iter().map(|r| r.schedule_id).collect())
            } else {
                None
            };
            known.insert(s.session_id.clone(), ids);
        }
        let Some(Some(ids)) = known.get_mut(&s.session_id) else {
            done.no_session += 1;
            continue;
        };
        if ids.contains(&s.schedule_id) {
            done.present += 1;
            continue;
        }
        let next = Spec::parse(&s.cron, &s.timezone)
            .ok()
            .and_then(|spec| spec.next_after(s.last_minute));
        let row = ScheduleRow {
            session_id: s.session_id.clone(),
            schedule_id: s.schedule_id.clone(),
            cron: s.cron,
            text: s.text,
            timezone: s.timezone,
            if_busy: s.if_busy,
            created_minute: to_i64(s.created_minute),
            last_minute: to_i64(s.last_minute),
            next_minute: next.map(to_i64),
        };
        let limits = (
            i64::try_from(per_session).unwrap_or(i64::MAX),
            i64::try_from(total).unwrap_or(i64::MAX),
        );
        match rows::insert(store, &row, to_i64(minute_ms), limits.0, limits.1).await? {
            Inserted::Stored => {
                ids.insert(s.schedule_id);
                done.new += 1;
            }
            Inserted::SessionFull | Inserted::StoreFull => done.refused += 1,
        }
    }
    Ok(done)
}
