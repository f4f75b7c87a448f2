//! The streams of sessions hibernated here while another node runs them (`serve --store`): a
//! session hibernated on this node with SSE clients connected keeps its event log here, but
//! once another node takes its lease (it woke it), nothing reaches those clients from here. A
//! watch asks the store, every third of the lease TTL, which of those sessions another node
//! holds; each such stream gets `{"type":"session_moved","node":…}` and ends, as when a
//! resident session's lease is lost, and the client reconnects with `Last-Event-ID` (to any
//! node: it is forwarded to the holder, which reads the store from that id).
//!
//! It only reads the store and ends parked streams; it never wakes, closes or forgets a
//! session, nor takes a lease. The entry stays hibernated, keeping only its numbering (a later
//! wake here starts a new log numbered by the store).

use std::sync::Arc;
use std::time::Duration;

use super::ServerState;
use super::hibernate::Parked;
use crate::message::{EventPayload, OmniMessage};
use crate::store::{PgStore, records};

/// Sessions asked about in one query at most.
const ASKED_AT_ONCE: usize = 1000;

/// The shortest pause between two looks (a very short lease TTL).
const MIN_EVERY: Duration = Duration::from_millis(100);

impl ServerState {
    /// Starts the watch (see the module doc) when the server is on the store.
    pub(super) fn start_parked_watch(self: &Arc<Self>) {
        let Some(store) = self.cfg.store.clone() else {
            return;
        };
        let every = (store.options().lease_ttl / 3).max(MIN_EVERY);
        let me = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let Some(state) = me.upgrade() else { return };
                if state.is_shutting_down() {
                    return;
                }
                state.end_moved_streams(&store).await;
            }
        });
    }

    /// Ends the parked streams of the sessions another node holds now.
    async fn end_moved_streams(&self, store: &PgStore) {
        let watched: Vec<String> = self
            .hibernated
            .lock()
            .map(|m| {
                m.iter()
                    .filter(|(_, h)| matches!(&h.log, Parked::Streams(log) if log.clients() > 0))
                    .map(|(id, _)| id.clone())
                    .collect()
            })
            .unwrap_or_default();
        let me = store.options().node.as_str();
        for ids in watched.chunks(ASKED_AT_ONCE) {
            let moved = match records::held_elsewhere(store, ids, me).await {
                Ok(moved) => moved,
                Err(e) => {
                    tracing::debug!("cannot ask the store who holds hibernated sessions: {e}");
                    return;
                }
            };
            for (id, node) in moved {
                self.end_parked_stream(&id, node);
            }
        }
    }

    /// Ends session `id`'s parked stream with `session_moved` naming `node`; its entry keeps
    /// only its numbering. Nothing when it was woken (or forgotten) meanwhile.
    fn end_parked_stream(&self, id: &str, node: String) {
        let log = {
            let Ok(mut map) = self.hibernated.lock() else {
                return;
            };
            let Some(h) = map.get_mut(id) else { return };
            let Parked::Streams(log) = &h.log else { return };
            let log = log.clone();
            h.log = Parked::Numbered(log.last_seq());
            log
        };
        tracing::info!(session = %id, %node, "hibernated here, woken by another node: its streams end");
        log.push(&OmniMessage::event(EventPayload::SessionMoved { node }));
        log.close();
    }
}
