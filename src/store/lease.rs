//! A session's lease in the store: who runs it (`owner_node`), under which `epoch`, until when
//! (`lease_expiry`). Taking a lease bumps the epoch by one; a lease is taken only when nobody
//! holds it or the holder's has expired. The holder renews it every third of its TTL; a renewal
//! that finds the epoch moved, or no renewal for a whole TTL (the database unreachable), loses
//! it: [`Lease::lost`] fires and the host stops the session at once. Giving a session up (its
//! close) clears the owner so any node may take it next.
//!
//! It owns the lease rules and their statements; it must not write trace records (the append
//! stream does, fenced by the epoch it holds).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::PgStore;
use super::error::StoreError;

/// What a new session's row shows in a listing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionRow {
    /// The session id.
    pub id: String,
    /// The parent session of a subagent.
    pub parent: Option<String>,
    /// The canonical workspace path.
    pub workspace: String,
    /// The tool profile.
    pub tool_profile: String,
    /// `provider/model`.
    pub model: String,
    /// The approval mode it started with.
    pub approval_mode: String,
}

/// A held lease: the session, the epoch every append carries, and the signal of its loss.
#[derive(Debug)]
pub struct Lease {
    /// The session.
    pub session_id: String,
    /// The epoch this holder appends under.
    pub epoch: i64,
    ttl: Duration,
    /// When the last renewal that succeeded was sent.
    renewed: Mutex<Instant>,
    lost: watch::Sender<Option<String>>,
    stop: CancellationToken,
}

/// A lease just taken, and where the session's trace goes on.
#[derive(Debug)]
pub struct Taken {
    /// The lease.
    pub lease: Arc<Lease>,
    /// The `seq` of the next record.
    pub next_seq: i64,
    /// The latest part of the trace (1 for a new one).
    pub part: u32,
    /// The holder before this one, when it never gave the session up (its lease ran out: the
    /// node died or was cut off). `None` for a new session and after a clean release.
    pub abandoned: Option<Abandoned>,
}

/// A lease taken over from a holder that did not give it up: whose, and the epoch its records
/// carry (the new epoch minus one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Abandoned {
    /// The node that held the session (`sessions.owner_node`).
    pub node: String,
    /// The epoch it appended under.
    pub epoch: i64,
}

impl Lease {
    fn new(session_id: String, epoch: i64, ttl: Duration, sent: Instant) -> Lease {
        Lease {
            session_id,
            epoch,
            ttl,
            renewed: Mutex::new(sent),
            lost: watch::Sender::new(None),
            stop: CancellationToken::new(),
        }
    }

    /// Marks the lease lost (the first reason is kept); the session must stop.
    pub fn lose(&self, reason: String) {
        self.stop.cancel();
        self.lost.send_if_modified(|r| {
            if r.is_some() {
                return false;
            }
            tracing::warn!("[store] {reason}");
            *r = Some(reason);
            true
        });
    }

    /// Why the lease was lost, if it was.
    pub fn lost_reason(&self) -> Option<String> {
        self.lost.borrow().clone()
    }

    /// Waits until the lease is lost; returns why.
    pub async fn lost(&self) -> String {
        let mut rx = self.lost.subscribe();
        loop {
            if let Some(reason) = rx.borrow_and_update().clone() {
                return reason;
            }
            if rx.changed().await.is_err() {
                return "the lease was dropped".to_string();
            }
        }
    }

    /// Whether the lease may have run out: no renewal succeeded for a whole TTL.
    pub fn expired_locally(&self) -> bool {
        let renewed = match self.renewed.lock() {
            Ok(g) => *g,
            Err(p) => *p.into_inner(),
        };
        renewed.elapsed() >= self.ttl
    }

    /// Waits until the lease ends: given up or lost.
    pub async fn ended(&self) {
        self.stop.cancelled().await;
    }

    /// Stops the renewals (the session was given up).
    pub fn stop_renewing(&self) {
        self.stop.cancel();
    }

    fn renewed_at(&self, sent: Instant) {
        match self.renewed.lock() {
            Ok(mut g) => *g = sent,
            Err(p) => *p.into_inner() = sent,
        }
    }
}

fn ttl_secs(ttl: Duration) -> f64 {
    ttl.as_secs_f64().max(0.001)
}

/// Creates a new session's row holding its lease (epoch 1).
pub async fn take_new(store: &PgStore, row: &SessionRow) -> Result<Taken, StoreError> {
    let ttl = store.options().lease_ttl;
    let client = store.client().await?;
    let sent = Instant::now();
    let inserted = client
        .execute(
            "INSERT INTO sessions (id, parent, workspace, tool_profile, model, approval_mode,
                                   status, owner_node, epoch, lease_expiry)
             VALUES ($1, $2, $3, $4, $5, $6, 'running', $7, 1,
                     now() + make_interval(secs => $8))
             ON CONFLICT (id) DO NOTHING",
            &[
                &row.id,
                &row.parent,
                &row.workspace,
                &row.tool_profile,
                &row.model,
                &row.approval_mode,
                &store.options().node,
                &ttl_secs(ttl),
            ],
        )
        .await?;
    if inserted == 0 {
        return Err(StoreError::Exists(row.id.clone()));
    }
    Ok(Taken {
        lease: Arc::new(Lease::new(row.id.clone(), 1, ttl, sent)),
        next_seq: 0,
        part: 1,
        abandoned: None,
    })
}

/// Takes an existing session's lease when nobody holds it (or the holder's expired): its epoch
/// goes up by one, fencing off every earlier holder. A holder whose lease ran out without a
/// release is named in [`Taken::abandoned`] (the row is locked while it is read, so two nodes
/// racing for it see one winner, which alone learns of the abandoned holder).
pub async fn take_existing(store: &PgStore, id: &str) -> Result<Taken, StoreError> {
    let ttl = store.options().lease_ttl;
    let client = store.client().await?;
    let sent = Instant::now();
    let row = client
        .query_opt(
            "WITH old AS (
                 SELECT id, owner_node, epoch FROM sessions WHERE id = $1 FOR UPDATE
             )
             UPDATE sessions s
                SET epoch = s.epoch + 1, owner_node = $2, status = 'running',
                    lease_expiry = now() + make_interval(secs => $3)
               FROM old
              WHERE s.id = old.id
                AND (s.owner_node IS NULL OR s.lease_expiry IS NULL OR s.lease_expiry < now())
             RETURNING s.epoch, old.owner_node, old.epoch",
            &[&id, &store.options().node, &ttl_secs(ttl)],
        )
        .await?;
    let Some(row) = row else {
        let holder = client
            .query_opt(
                "SELECT owner_node,
                        greatest(extract(epoch FROM lease_expiry - now()), 0)::float8
                   FROM sessions WHERE id = $1",
                &[&id],
            )
            .await?;
        return Err(match holder {
            None => StoreError::UnknownSession(id.to_string()),
            Some(h) => StoreError::Leased {
                id: id.to_string(),
                node: h.get::<_, Option<String>>(0).unwrap_or_default(),
                left: Duration::from_secs_f64(h.get::<_, Option<f64>>(1).unwrap_or(0.0)),
            },
        });
    };
    let epoch: i64 = row.get(0);
    let abandoned = row.get::<_, Option<String>>(1).map(|node| Abandoned {
        node,
        epoch: row.get(2),
    });
    let tail = client
        .query_one(
            "SELECT coalesce(max(seq) + 1, 0), coalesce(max(part), 1)
               FROM trace_records WHERE session_id = $1",
            &[&id],
        )
        .await?;
    let part: i32 = tail.get(1);
    Ok(Taken {
        lease: Arc::new(Lease::new(id.to_string(), epoch, ttl, sent)),
        next_seq: tail.get(0),
        part: u32::try_from(part).unwrap_or(1),
        abandoned,
    })
}

/// Renews the lease every third of its TTL until it is given up or lost. A renewal that finds
/// the epoch moved loses it at once; failing renewals lose it once a whole TTL has passed since
/// the last one that succeeded.
pub fn keep_renewed(store: PgStore, lease: Arc<Lease>) {
    tokio::spawn(async move {
        let every = lease.ttl / 3;
        loop {
            tokio::select! {
                () = lease.stop.cancelled() => return,
                () = tokio::time::sleep(every) => {}
            }
            let sent = Instant::now();
            match renew(&store, &lease).await {
                Ok(true) => lease.renewed_at(sent),
                Ok(false) => {
                    lease.lose(format!(
                        "session {} moved: its lease was taken by another node (epoch past {})",
                        lease.session_id, lease.epoch
                    ));
                    return;
                }
                Err(e) if lease.expired_locally() => {
                    lease.lose(format!(
                        "session {} stopped: its lease could not be renewed for {:?} ({e})",
                        lease.session_id, lease.ttl
                    ));
                    return;
                }
                Err(e) => tracing::warn!(
                    "[store] cannot renew the lease of {} (will retry): {e}",
                    lease.session_id
                ),
            }
        }
    });
}

/// One renewal: whether the lease is still this holder's.
async fn renew(store: &PgStore, lease: &Lease) -> Result<bool, StoreError> {
    let client = store.client().await?;
    let n = client
        .execute(
            "UPDATE sessions SET lease_expiry = now() + make_interval(secs => $3)
              WHERE id = $1 AND epoch = $2",
            &[&lease.session_id, &lease.epoch, &ttl_secs(lease.ttl)],
        )
        .await?;
    Ok(n == 1)
}

/// Gives the session up: no owner, so any node may take it next (a no-op once the epoch has
/// moved on).
pub async fn release(store: &PgStore, lease: &Lease) -> Result<(), StoreError> {
    lease.stop_renewing();
    let client = store.client().await?;
    client
        .execute(
            "UPDATE sessions SET owner_node = NULL, lease_expiry = NULL, status = 'idle'
              WHERE id = $1 AND epoch = $2",
            &[&lease.session_id, &lease.epoch],
        )
        .await?;
    Ok(())
}
