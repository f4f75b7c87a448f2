//! What the server knows of sessions without waking any: one page of `GET /v1/sessions` over
//! the resident, the hibernated and the recorded sessions (every user session whose trace is
//! under the home, so a restarted server lists them all), whether an id is known, and where a
//! session's trace files are.
//!
//! It reads only the first record of a trace file (`trace_meta.rs`) and lists directories
//! (`trace::catalog`); it never resumes, wakes or closes a session.

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::Arc;

use super::trace_meta::{first_meta_record, recorded_creation};
use super::{ApiError, HibernatedView, ServerState, SessionEntry};
use crate::message::{Payload, SessionMeta};
use crate::trace::catalog::Catalog;
use crate::trace::paths;

/// A session recorded under the home and not served by this server run.
pub struct StoredView {
    /// The session's id.
    pub id: String,
    /// What the `session_meta` opening its latest trace file records.
    pub meta: SessionMeta,
    /// When it was created (ISO-8601 UTC).
    pub created_at: String,
    /// Its latest trace file (`postgres:/<id>` in the store).
    pub trace_path: PathBuf,
    /// When its last record was stored (the store's; `None`: the file's modification time).
    pub last_activity: Option<String>,
}

/// One session of a listing page.
pub enum Listed {
    /// Served now.
    Live(Arc<SessionEntry>),
    /// Hibernated by this server run.
    Hibernated(HibernatedView),
    /// Only on disk (boxed: its `session_meta` is large).
    Stored(Box<StoredView>),
}

/// A page of sessions by id and whether more follow.
pub struct ListPage {
    /// The sessions, by id.
    pub sessions: Vec<Listed>,
    /// The id the next page starts after; `None` when this was the last page.
    pub next_after: Option<String>,
    /// With a store: when each listed session's last record was stored, by id (its row's
    /// `last_activity`, for the resident and hibernated ones whose view has no file to read).
    pub stored_activity: HashMap<String, String>,
}

impl ServerState {
    /// The served session `id`, if it is resident (a hibernated one is not woken).
    pub fn resident(&self, id: &str) -> Option<Arc<SessionEntry>> {
        self.in_memory(id)
    }

    /// 404 unless `id` is served, hibernated or recorded under the home or in the store (none
    /// is woken).
    pub async fn check_known(&self, id: &str) -> Result<(), ApiError> {
        if self.in_memory(id).is_some()
            || self.hibernated.lock().is_ok_and(|m| m.contains_key(id))
            || match self.in_store(id).await? {
                Some(stored) => stored,
                None => paths::locate_trace(&self.cfg.home, id).is_some(),
            }
        {
            Ok(())
        } else {
            Err(ApiError::unknown_session(id))
        }
    }

    /// The trace files of session `id`, oldest first, without waking it (an unknown id is 404).
    pub fn trace_files_of(&self, id: &str) -> Result<Vec<PathBuf>, ApiError> {
        let latest = match self.in_memory(id) {
            Some(e) => Some(e.handle.trace_path()),
            None => self
                .hibernated_list()
                .into_iter()
                .find(|h| h.id == id)
                .map(|h| h.trace_path)
                .filter(|p| p.is_file())
                .or_else(|| paths::locate_trace(&self.cfg.home, id)),
        };
        match latest {
            Some(latest) => Ok(crate::trace::page::files_from_latest(&latest)),
            None => Err(ApiError::unknown_session(id)),
        }
    }

    /// [`Self::list_page`] from the store when the server has one (its sessions by id, an
    /// indexed query a page at a time; 503 `store_unavailable` while it is down).
    pub async fn list_sessions(
        &self,
        after: Option<&str>,
        limit: usize,
        visible: &(dyn Fn(Option<&str>) -> bool + Sync),
    ) -> Result<ListPage, ApiError> {
        #[cfg(feature = "postgres")]
        if let Some(store) = self.cfg.store.clone() {
            return self.list_page_stored(&store, after, limit, visible).await;
        }
        Ok(self.list_page(after, limit, visible))
    }

    /// At most `limit` sessions with ids after `after`, by id, among those whose owner
    /// `visible` admits: the resident and hibernated ones and the user sessions recorded under
    /// the home (subagents and sessions closed through the API in this run are left out).
    pub fn list_page(
        &self,
        after: Option<&str>,
        limit: usize,
        visible: &dyn Fn(Option<&str>) -> bool,
    ) -> ListPage {
        let resident: HashMap<String, Arc<SessionEntry>> =
            self.sessions.lock().map(|m| m.clone()).unwrap_or_default();
        let mut hibernated: HashMap<String, HibernatedView> = self
            .hibernated_list()
            .into_iter()
            .map(|h| (h.id.clone(), h))
            .collect();
        let catalog = match Catalog::scan(&self.cfg.home) {
            Ok(c) => Some(c),
            Err(e) => {
                tracing::warn!("cannot list the recorded sessions: {e}");
                None
            }
        };
        let mut ids: BTreeSet<&str> = resident.keys().map(String::as_str).collect();
        ids.extend(hibernated.keys().map(String::as_str));
        if let Some(c) = &catalog {
            ids.extend(c.sessions().iter().map(|s| s.id.as_str()));
        }
        let mut ids: Vec<String> = ids
            .into_iter()
            .filter(|id| after.is_none_or(|a| *id > a))
            .map(str::to_string)
            .collect();
        ids.reverse();
        let mut page = ListPage {
            sessions: Vec::new(),
            next_after: None,
            stored_activity: HashMap::new(),
        };
        while let Some(id) = ids.pop() {
            if page.sessions.len() == limit {
                page.next_after = page.sessions.last().map(|l| listed_id(l).to_string());
                break;
            }
            if let Some(e) = resident.get(&id) {
                if visible(e.handle.meta().owner.as_deref()) {
                    page.sessions.push(Listed::Live(e.clone()));
                }
            } else if let Some(h) = hibernated.remove(&id) {
                if visible(h.owner.as_deref()) {
                    page.sessions.push(Listed::Hibernated(h));
                }
            } else if !self.is_closed(&id)
                && let Some(files) = catalog.as_ref().and_then(|c| c.get(&id))
                && let Some(stored) = stored_view(&id, &files.files)
                && visible(stored.meta.owner.as_deref())
            {
                page.sessions.push(Listed::Stored(Box::new(stored)));
            }
        }
        page
    }
}

/// The id of a listed session.
pub fn listed_id(l: &Listed) -> &str {
    match l {
        Listed::Live(e) => e.id(),
        Listed::Hibernated(h) => &h.id,
        Listed::Stored(s) => &s.id,
    }
}

/// A recorded user session's view from its files' opening records; `None` for a subagent or
/// a trace that opens with no `session_meta`.
fn stored_view(id: &str, files: &[PathBuf]) -> Option<StoredView> {
    let latest = files.last()?;
    let opening = first_meta_record(latest)?;
    let created_at = recorded_creation(id, latest, Some(&opening));
    let Payload::SessionMeta(meta) = opening.payload else {
        return None;
    };
    if meta.source.as_deref() == Some("subagent") {
        return None;
    }
    Some(StoredView {
        id: id.to_string(),
        meta: *meta,
        created_at,
        trace_path: latest.clone(),
        last_activity: None,
    })
}
