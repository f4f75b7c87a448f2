//! The nodes of a cluster in the store: each `rookery serve --node-id NAME` registers its row
//! (`node_id`, `advertise` URL, `boot`, `started_at`) and heartbeats it every third of the
//! lease TTL; a node is live while its last heartbeat is younger than one TTL. It answers who
//! holds a session (its `owner_node` with an unexpired lease, joined to a live node for the URL
//! to forward to) and lists the live nodes with the count of sessions each holds.
//!
//! It owns the `nodes` statements only; it must not take or renew session leases (`lease.rs`)
//! nor forward requests (the server does).

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::PgStore;
use super::error::StoreError;

/// A live node as `/v1/cluster` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeRow {
    /// Its `--node-id`.
    pub node_id: String,
    /// Its `--advertise` URL (where the other nodes forward to).
    pub advertise: String,
    /// Its last heartbeat, RFC 3339 UTC.
    pub last_heartbeat: String,
    /// Sessions whose unexpired lease it holds.
    pub resident_sessions: i64,
}

/// The live node holding a session's lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// Its `--node-id`.
    pub node_id: String,
    /// Its `--advertise` URL.
    pub advertise: String,
}

/// This process's registration: its name and the `boot` id its heartbeats carry.
#[derive(Debug, Clone)]
pub struct Registration {
    /// The node id.
    pub node_id: String,
    boot: String,
}

fn ttl_secs(store: &PgStore) -> f64 {
    store.options().lease_ttl.as_secs_f64().max(0.001)
}

/// Registers this process as node `store.options().node`, reachable at `advertise`. Refused
/// when a live node (another process, heartbeat within the TTL) already has the name.
pub async fn register(store: &PgStore, advertise: &str) -> Result<Registration, StoreError> {
    let node_id = store.options().node.clone();
    let boot = uuid::Uuid::new_v4().to_string();
    let client = store.client().await?;
    let row = client
        .query_opt(
            "INSERT INTO nodes (node_id, advertise, boot)
             VALUES ($1, $2, $3)
             ON CONFLICT (node_id) DO UPDATE
                SET advertise = EXCLUDED.advertise, boot = EXCLUDED.boot,
                    started_at = now(), last_heartbeat = now()
              WHERE nodes.last_heartbeat < now() - make_interval(secs => $4)
             RETURNING node_id",
            &[&node_id, &advertise, &boot, &ttl_secs(store)],
        )
        .await?;
    if row.is_none() {
        return Err(StoreError::NodeTaken(node_id));
    }
    Ok(Registration { node_id, boot })
}

/// One heartbeat: whether the row is still this process's (another process that registered
/// the name after this one's heartbeats stopped for a TTL has taken it).
pub async fn heartbeat(store: &PgStore, me: &Registration) -> Result<bool, StoreError> {
    let client = store.client().await?;
    let n = client
        .execute(
            "UPDATE nodes SET last_heartbeat = now() WHERE node_id = $1 AND boot = $2",
            &[&me.node_id, &me.boot],
        )
        .await?;
    Ok(n == 1)
}

/// Heartbeats every third of the TTL until `stop` is cancelled. A failed heartbeat is logged
/// and retried; a row taken over by another process is logged once and the heartbeats stop
/// (this node then no longer counts as live, so no request is forwarded to it).
pub fn keep_beating(store: PgStore, me: Registration, stop: CancellationToken) {
    tokio::spawn(async move {
        let every = (store.options().lease_ttl / 3).max(Duration::from_millis(10));
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(every) => {}
            }
            match heartbeat(&store, &me).await {
                Ok(true) => {}
                Ok(false) => {
                    tracing::error!(
                        "[store] node {} was registered by another process: this one stops heartbeating",
                        me.node_id
                    );
                    return;
                }
                Err(e) => tracing::warn!(
                    "[store] cannot heartbeat node {} (will retry): {e}",
                    me.node_id
                ),
            }
        }
    });
}

/// Removes this process's row (a clean shutdown), so nobody forwards to it meanwhile.
pub async fn deregister(store: &PgStore, me: &Registration) -> Result<(), StoreError> {
    let client = store.client().await?;
    client
        .execute(
            "DELETE FROM nodes WHERE node_id = $1 AND boot = $2",
            &[&me.node_id, &me.boot],
        )
        .await?;
    Ok(())
}

/// The live nodes (heartbeat within one TTL), by name, each with its resident session count.
pub async fn live(store: &PgStore) -> Result<Vec<NodeRow>, StoreError> {
    let client = store.client().await?;
    let rows = client
        .query(
            "SELECT n.node_id, n.advertise,
                    to_char(n.last_heartbeat AT TIME ZONE 'UTC',
                            'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'),
                    (SELECT count(*) FROM sessions s
                      WHERE s.owner_node = n.node_id AND s.lease_expiry > now())
               FROM nodes n
              WHERE n.last_heartbeat >= now() - make_interval(secs => $1)
              ORDER BY n.node_id",
            &[&ttl_secs(store)],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| NodeRow {
            node_id: r.get(0),
            advertise: r.get(1),
            last_heartbeat: r.get(2),
            resident_sessions: r.get(3),
        })
        .collect())
}

/// Who holds session `id`: the node of its unexpired lease when that node is live; `None`
/// when nobody does (a new, hibernated or unknown session, or a dead owner).
pub async fn holder(store: &PgStore, id: &str) -> Result<Option<Holder>, StoreError> {
    let client = store.client().await?;
    let row = client
        .query_opt(
            "SELECT n.node_id, n.advertise
               FROM sessions s JOIN nodes n ON n.node_id = s.owner_node
              WHERE s.id = $1 AND s.lease_expiry > now()
                AND n.last_heartbeat >= now() - make_interval(secs => $2)",
            &[&id, &ttl_secs(store)],
        )
        .await?;
    Ok(row.map(|r| Holder {
        node_id: r.get(0),
        advertise: r.get(1),
    }))
}
