//! The served sessions' `postgres` store (`serve --store`): what the server reads of a session
//! it does not hold (its opening and last `session_meta`, its owner and workspace, whether it
//! exists, a listing page by id), the answer when the database is down (503
//! `store_unavailable`), and a session's event log numbered by the store (`sse_store.rs`).
//!
//! It only reads the store (`crate::store::records`); leases are the host's (a wake is a
//! resume, which takes the lease), and it never opens or closes a session.

use std::path::PathBuf;
use std::sync::Arc;

use super::listing::{ListPage, Listed, StoredView, listed_id};
use super::trace_meta::Opening;
use super::{ApiError, Recorded, ServerState};
use crate::error::RookeryError;
use crate::message::{OmniMessage, Payload, SessionMeta};
use crate::server::sse::{CLIENT_BUFFER, EventLog, RING_CAPACITY};
use crate::server::sse_store;
use crate::store::{PgStore, StoreError, records};

/// A store failure as the API answers it: 503 `store_unavailable` while the database cannot be
/// reached, 409 `session_locked` for a lease held elsewhere, else 500.
pub(in crate::server) fn store_error(e: StoreError) -> ApiError {
    RookeryError::Store(e).into()
}

/// The record `bytes` (one JSONL line) when it is a root `session_meta`.
pub(in crate::server) fn meta_of(bytes: &[u8]) -> Option<(OmniMessage, SessionMeta)> {
    let text = std::str::from_utf8(bytes).ok()?;
    let msg = OmniMessage::from_json(text.trim_end()).ok()?;
    if msg.has_origin() {
        return None;
    }
    match &msg.payload {
        Payload::SessionMeta(m) => {
            let meta = (**m).clone();
            Some((msg, meta))
        }
        _ => None,
    }
}

/// What a resume of stored session `id` reads first; `None` when the store has no such session.
pub(super) async fn opening(store: &PgStore, id: &str) -> Result<Option<Opening>, ApiError> {
    let first = records::opening(store, id).await.map_err(store_error)?;
    if first.is_none() && !records::exists(store, id).await.map_err(store_error)? {
        return Ok(None);
    }
    let first = first.as_deref().and_then(meta_of);
    let metas = records::meta_records(store, id)
        .await
        .map_err(store_error)?;
    let last = metas.iter().find_map(|r| meta_of(r)).map(|(_, m)| m);
    Ok(Some(Opening {
        place: PgStore::place(id),
        created_at: first
            .as_ref()
            .map(|(msg, _)| msg.timestamp.clone())
            .unwrap_or_else(crate::message::now_timestamp),
        first: first.map(|(_, m)| m),
        last,
    }))
}

/// Rows one listing query reads.
const LIST_FETCH: i64 = 200;

impl ServerState {
    /// [`ServerState::list_page`] over the store: its sessions by id (the primary key, a
    /// bounded page per query), each shown as this server holds it (resident, hibernated) or
    /// from the `session_meta` opening its stored trace; subagents, sessions with no record
    /// yet and sessions closed through the API in this run are left out.
    pub(super) async fn list_page_stored(
        &self,
        store: &PgStore,
        after: Option<&str>,
        limit: usize,
        visible: &(dyn Fn(Option<&str>) -> bool + Sync),
    ) -> Result<ListPage, ApiError> {
        let mut page = ListPage {
            sessions: Vec::new(),
            next_after: None,
            stored_activity: std::collections::HashMap::new(),
        };
        let mut cursor = after.map(str::to_string);
        loop {
            let rows = records::page_by_id(store, cursor.as_deref(), LIST_FETCH)
                .await
                .map_err(store_error)?;
            let last_query = (rows.len() as i64) < LIST_FETCH;
            for row in rows {
                if page.sessions.len() == limit {
                    page.next_after = page.sessions.last().map(|l| listed_id(l).to_string());
                    return Ok(page);
                }
                cursor = Some(row.id.clone());
                page.stored_activity
                    .insert(row.id.clone(), row.last_activity.clone());
                if let Some(listed) = self.listed_stored(row, visible) {
                    page.sessions.push(listed);
                }
            }
            if last_query {
                return Ok(page);
            }
        }
    }

    /// How a stored session is listed, if `visible` admits it.
    fn listed_stored(
        &self,
        row: records::SessionOpening,
        visible: &(dyn Fn(Option<&str>) -> bool + Sync),
    ) -> Option<Listed> {
        if let Some(e) = self.in_memory(&row.id) {
            return visible(e.handle.meta().owner.as_deref()).then_some(Listed::Live(e));
        }
        if let Some(h) = self.hibernated_list_one(&row.id) {
            return visible(h.owner.as_deref()).then_some(Listed::Hibernated(h));
        }
        if self.is_closed(&row.id) {
            return None;
        }
        let (msg, meta) = row.opening.as_deref().and_then(meta_of)?;
        if meta.source.as_deref() == Some("subagent") || !visible(meta.owner.as_deref()) {
            return None;
        }
        Some(Listed::Stored(Box::new(StoredView {
            trace_path: PgStore::place(&row.id),
            id: row.id,
            meta,
            created_at: msg.timestamp,
            last_activity: Some(row.last_activity),
        })))
    }

    /// Session `id`'s event log numbered by the store and its follower, when the server is on
    /// the store (`carried`: a hibernated session's log); else `carried` back.
    pub(super) fn stored_log(
        &self,
        id: &str,
        carried: Option<Arc<EventLog>>,
    ) -> Result<sse_store::Followed, Option<Arc<EventLog>>> {
        let Some(store) = self.cfg.store.as_ref() else {
            return Err(carried);
        };
        let me = self.me.clone();
        let ring_bytes = self.cfg.ring_bytes;
        let new_log = |seq| EventLog::stored(seq, RING_CAPACITY, ring_bytes, CLIENT_BUFFER);
        let dropped = move |n| {
            if let Some(state) = me.upgrade() {
                state.metrics.sse_clients_dropped(n);
            }
        };
        if let Some(started) = sse_store::start(store, id, carried.clone(), new_log, dropped) {
            return Ok(started);
        }
        Err(carried)
    }

    /// The `session_moved` event of a session whose stream just ended, when another node holds
    /// its lease now (its lease was lost: the host stopped it); `None` for a close, a
    /// shutdown, or when the store cannot say.
    pub(super) async fn moved_event(&self, id: &str) -> Option<OmniMessage> {
        let store = self.cfg.store.as_ref()?;
        if self.is_closed(id) || self.is_shutting_down() {
            return None;
        }
        let node = match records::owner_node(store, id).await {
            Ok(node) => node?,
            Err(e) => {
                tracing::debug!(session = %id, "cannot read who holds the lease now: {e}");
                return None;
            }
        };
        (node != store.options().node)
            .then(|| OmniMessage::event(crate::message::EventPayload::SessionMoved { node }))
    }

    /// The owner and workspace of a stored session this server does not hold (from the
    /// `session_meta` opening its trace); `None` when the store has no such session.
    pub(super) async fn recorded_in_store(
        &self,
        store: &PgStore,
        id: &str,
    ) -> Result<Option<Recorded>, ApiError> {
        let first = records::opening(store, id).await.map_err(store_error)?;
        Ok(first
            .as_deref()
            .and_then(meta_of)
            .map(|(_, meta)| Recorded {
                owner: meta.owner,
                workspace: PathBuf::from(meta.workspace),
            }))
    }
}
