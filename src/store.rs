//! The `postgres` trace store (`--store postgres://…`, `$ROOKERY_STORE`): sessions and their
//! trace records in a shared Postgres database, each session fenced by a lease with an epoch.
//!
//! A session's trace is the `trace_records` rows of its id, in `seq` order, each the exact bytes
//! of one JSONL line the `files` backend would write; its `sessions` row holds what a listing
//! shows and the lease (owner node, epoch, expiry). The writer appends through a
//! [`append::PgTrace`] (the trace area's `RemoteTrace`): one multi-row `INSERT` per batch, which
//! the database refuses once the session's epoch has moved on.
//!
//! This area owns the database: the pool, the migrations, the lease rules, the statements and
//! `rookery store`'s export and import. It must not decide what is recorded (the sessions do) nor
//! run sessions (the host does, and stops a session whose lease is lost).

pub mod append; // one session's fenced append stream (group commit: one INSERT per batch)
pub mod commits; // what a stream committed, told to the session's follower (SSE ids)
pub mod error;
pub mod export; // a session's trace written back as JSONL
pub mod fork; // a stored session's fork, stored
pub mod import; // a files home's traces loaded into the store (idempotent)
pub mod lease; // taking, renewing and giving up a session's lease
pub mod listing; // sessions listed by an indexed query, and a trace read for resume
pub mod migrate; // the versioned schema, applied under an advisory lock
pub mod nodes; // the cluster's nodes: registration, heartbeats, who holds a session
pub mod record_source; // the store as the trace area's record source (show, /messages)
pub mod records; // what the server reads of sessions it does not hold, a page at a time
pub mod removal; // `sessions rm`: a session and its subagents deleted
pub mod schedules; // the sessions' schedules, and the claim that lets one node fire a minute

use std::path::{Path, PathBuf};
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, RecyclingMethod, Runtime};

pub use error::StoreError;

/// The lease a session is taken for when nothing else is asked (`--lease-ttl`).
pub const DEFAULT_LEASE_TTL: Duration = Duration::from_secs(10);

/// Connections a process keeps at most (the writers, the lease renewals and the readers share
/// them).
const POOL_SIZE: usize = 8;

/// How long a connect, or a wait for a free connection, may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How a process uses the store.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// This process's name in the `sessions.owner_node` of the sessions it holds.
    pub node: String,
    /// How long a lease lasts unless renewed (renewed every third of it).
    pub lease_ttl: Duration,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            node: default_node_name(),
            lease_ttl: DEFAULT_LEASE_TTL,
        }
    }
}

/// `<hostname>-<pid>`: a name no other live process shares.
pub fn default_node_name() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "node".to_string());
    format!("{host}-{}", std::process::id())
}

/// A connected, migrated Postgres store (cheap to clone).
#[derive(Clone)]
pub struct PgStore {
    pool: Pool,
    options: StoreOptions,
    feeds: commits::CommitFeeds,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore")
            .field("node", &self.options.node)
            .field("lease_ttl", &self.options.lease_ttl)
            .finish()
    }
}

impl PgStore {
    /// Connects to `url` and applies the missing migrations (under an advisory lock, so nodes
    /// starting together apply each once).
    pub async fn connect(url: &str, options: StoreOptions) -> Result<PgStore, StoreError> {
        let store = Self::connect_unmigrated(url, options)?;
        migrate::migrate(&mut *store.client().await?).await?;
        Ok(store)
    }

    /// Connects to `url` without touching the schema (`rookery store migrate` does that
    /// itself). Nothing is sent until the first query.
    pub fn connect_unmigrated(url: &str, options: StoreOptions) -> Result<PgStore, StoreError> {
        let mut config: tokio_postgres::Config = url.parse().map_err(StoreError::BadUrl)?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        config.application_name("rookery");
        let manager = Manager::from_config(
            config,
            tokio_postgres::NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(POOL_SIZE)
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(CONNECT_TIMEOUT))
            .create_timeout(Some(CONNECT_TIMEOUT))
            .build()
            .map_err(|e| StoreError::Pool(e.to_string()))?;
        Ok(PgStore {
            pool,
            options,
            feeds: commits::CommitFeeds::default(),
        })
    }

    /// A connection from the pool.
    pub async fn client(&self) -> Result<Object, StoreError> {
        self.pool.get().await.map_err(StoreError::from_pool)
    }

    /// The commit feeds of this process's append streams not yet followed.
    pub fn commit_feeds(&self) -> &commits::CommitFeeds {
        &self.feeds
    }

    /// How this process uses the store.
    pub fn options(&self) -> &StoreOptions {
        &self.options
    }

    /// The name a trace in the store is shown by (`postgres:/<session id>`).
    pub fn place(session_id: &str) -> PathBuf {
        Path::new("postgres:").join(session_id)
    }
}
