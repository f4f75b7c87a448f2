//! The per-principal quotas of `--auth FILE`: `max_sessions` (sessions not deleted, hibernated
//! included), `max_running_tasks`, and `max_resident` (beyond it the principal's least
//! recently used idle session hibernates). Over a limit: 429 `quota_exceeded` with
//! `error.limit` and `error.current`.
//!
//! Each check and the admission it guards run under the principal's own lock, so N parallel
//! creates at a limit of N admit exactly N. It decides and admits; it never runs a task.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::http::StatusCode;
use serde_json::json;

use super::{OpenOptions, ServerState, SessionEntry};
use crate::actors::session::SessionStatus;
use crate::server::error::ApiError;
use crate::server::principal::Principal;

/// One lock per principal name (a name is added once, at its first quota'd request).
#[derive(Default)]
pub(super) struct QuotaLocks(Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>);

impl QuotaLocks {
    fn of(&self, name: &str) -> Arc<tokio::sync::Mutex<()>> {
        match self.0.lock() {
            Ok(mut map) => map.entry(name.to_string()).or_default().clone(),
            // A poisoned map: a lock of its own still serializes nothing wrong (fail closed
            // would refuse every request; the count check below still runs).
            Err(_) => Arc::default(),
        }
    }
}

/// 429 `quota_exceeded` for `limit` (e.g. `max_sessions`) at `current` of `max`.
pub fn quota_exceeded(limit: &'static str, max: usize, current: usize) -> ApiError {
    ApiError::new(
        StatusCode::TOO_MANY_REQUESTS,
        "quota_exceeded",
        format!("{limit} is {max} and {current} are in use: close one first"),
    )
    .with_detail("limit", json!(limit))
    .with_detail("current", json!(current))
}

impl ServerState {
    /// Creates a session for `who`: its workspace must be inside its roots, and its
    /// `max_sessions` and `max_resident` hold.
    pub async fn create_as(
        &self,
        who: &Principal,
        mut open: OpenOptions,
    ) -> Result<Arc<SessionEntry>, ApiError> {
        if let Some(w) = &open.workspace {
            crate::server::workspace::check(who, w)?;
        }
        open.owner = Some(who.name.clone());
        let q = who.quotas;
        if q.max_sessions.is_none() && q.max_resident.is_none() {
            return self.create(open).await;
        }
        let lock = self.quota_locks.of(&who.name);
        let _held = lock.lock().await;
        if let Some(max) = q.max_sessions {
            let current = self.owned_count(&who.name);
            if current >= max {
                return Err(quota_exceeded("max_sessions", max, current));
            }
        }
        self.make_room_for(who).await?;
        self.create(open).await
    }

    /// `POST …/resume` by `who`: a workspace the request names must be inside its roots (the
    /// recorded one was checked by `ownership.rs`), and a session not served counts against
    /// its `max_sessions` and `max_resident`.
    pub async fn resume_as(
        &self,
        who: &Principal,
        id: &str,
        open: OpenOptions,
    ) -> Result<Arc<SessionEntry>, ApiError> {
        if let Some(w) = &open.workspace {
            crate::server::workspace::check(who, w)?;
        }
        let q = who.quotas;
        if self.is_served(id) || (q.max_sessions.is_none() && q.max_resident.is_none()) {
            return self.resume(id, open).await;
        }
        let lock = self.quota_locks.of(&who.name);
        let _held = lock.lock().await;
        let hibernated = self.hibernated.lock().is_ok_and(|m| m.contains_key(id));
        if let Some(max) = q.max_sessions
            && !hibernated
        {
            let current = self.owned_count(&who.name);
            if current >= max {
                return Err(quota_exceeded("max_sessions", max, current));
            }
        }
        self.make_room_for(who).await?;
        self.resume(id, open).await
    }

    /// Under `who`'s `max_resident`, hibernates its least recently used idle sessions until
    /// one more fits; 429 when none can go.
    pub async fn make_room_for(&self, who: &Principal) -> Result<(), ApiError> {
        let Some(max) = who.quotas.max_resident else {
            return Ok(());
        };
        let own: Vec<_> = self
            .by_last_use()
            .into_iter()
            .filter(|e| e.handle.meta().owner.as_deref() == Some(who.name.as_str()))
            .collect();
        let mut resident = own.len();
        for entry in own {
            if resident < max {
                break;
            }
            if Self::is_quiet(&entry).await && self.hibernate(&entry).await {
                resident -= 1;
            }
        }
        if resident >= max {
            return Err(quota_exceeded("max_resident", max, resident));
        }
        Ok(())
    }

    /// Runs `start` (a task start or steer on one of `who`'s sessions) when `who`'s
    /// `max_running_tasks` allows one more running session, besides `entry` itself.
    pub async fn within_running_quota<T, F>(
        &self,
        who: &Principal,
        entry_id: &str,
        start: F,
    ) -> Result<T, ApiError>
    where
        F: Future<Output = Result<T, ApiError>>,
    {
        let Some(max) = who.quotas.max_running_tasks else {
            return start.await;
        };
        let lock = self.quota_locks.of(&who.name);
        let _held = lock.lock().await;
        let own: Vec<_> = self
            .list()
            .into_iter()
            .filter(|e| e.id() != entry_id)
            .filter(|e| e.handle.meta().owner.as_deref() == Some(who.name.as_str()))
            .collect();
        let statuses = futures::future::join_all(own.iter().map(|e| e.handle.status())).await;
        let current = statuses
            .into_iter()
            .filter(|s| matches!(s, Ok(SessionStatus::Running)))
            .count();
        if current >= max {
            return Err(quota_exceeded("max_running_tasks", max, current));
        }
        start.await
    }
}
