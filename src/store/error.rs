//! The failures of the `postgres` store, each a line an operator can act on. It owns the error
//! type only.

use std::time::Duration;

/// What went wrong with the store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The `--store` URL does not parse.
    #[error("--store: not a valid postgres URL: {0}")]
    BadUrl(#[source] tokio_postgres::Error),
    /// The pool could not be built.
    #[error("the store's connection pool: {0}")]
    Pool(String),
    /// The database cannot be reached (or went away).
    #[error("the store is unavailable: {0}")]
    Unavailable(String),
    /// A statement failed.
    #[error("the store refused a statement: {0}")]
    Query(#[from] tokio_postgres::Error),
    /// A migration failed (the schema is left at the version before it).
    #[error("store migration {version} failed: {source}")]
    Migration {
        /// The migration that failed.
        version: i32,
        /// Why.
        #[source]
        source: tokio_postgres::Error,
    },
    /// The database has a newer schema than this build knows.
    #[error(
        "the store's schema is at version {found}, newer than this build's {known}: upgrade rookery"
    )]
    SchemaTooNew {
        /// The database's version.
        found: i32,
        /// The newest this build applies.
        known: i32,
    },
    /// No session with this id is in the store.
    #[error("no session {0} in the store")]
    UnknownSession(String),
    /// A session with this id is already in the store.
    #[error("session {0} is already in the store")]
    Exists(String),
    /// Another node holds the session's lease.
    #[error(
        "session {id} is in use by node {node} (its lease runs {left:?} more); try again once it expires"
    )]
    Leased {
        /// The session.
        id: String,
        /// The node holding it.
        node: String,
        /// How long the lease still runs.
        left: Duration,
    },
    /// The session's epoch moved on: this process no longer owns it.
    #[error("session {id} moved: its lease epoch is now past {epoch}; this node no longer owns it")]
    Fenced {
        /// The session.
        id: String,
        /// The epoch this process held.
        epoch: i64,
    },
    /// Another live process is registered under this node id.
    #[error(
        "--node-id {0}: a live node already has this id (it heartbeat within the lease TTL); choose another id or wait until its heartbeats stop for a TTL"
    )]
    NodeTaken(String),
    /// A local file (import, export) failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// A files home cannot be read (import).
    #[error("{0}")]
    Catalog(#[from] crate::trace::catalog::CatalogError),
}

impl StoreError {
    /// A pool error: the database is unreachable, or the pool is misbuilt.
    pub fn from_pool(e: deadpool_postgres::PoolError) -> StoreError {
        StoreError::Unavailable(e.to_string())
    }

    /// Whether retrying later may succeed (the connection, not the statement, failed).
    pub fn is_transient(&self) -> bool {
        match self {
            StoreError::Unavailable(_) => true,
            StoreError::Query(e) => e.as_db_error().is_none(),
            _ => false,
        }
    }
}
