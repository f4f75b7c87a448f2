//! The postgres store as the trace area's [`RecordSource`]: a session's records after a `seq`, a
//! bounded page at a time (`records.rs`), for the readers that render or page a stored trace
//! as they do trace files (`sessions show`, `GET …/messages`).
//!
//! It only reads. Its calls block on the runtime it was made on, so they must come from a
//! blocking thread (`tokio::task::spawn_blocking`), never from an async task.

use tokio::runtime::Handle;

use super::PgStore;
use super::records::records_after;
use crate::trace::record_source::{RecordSource, SourceError};

/// A [`PgStore`] read from a blocking thread.
#[derive(Debug, Clone)]
pub struct BlockingRecords {
    store: PgStore,
    runtime: Handle,
}

impl BlockingRecords {
    /// Reads `store` through the current runtime (call it from within one).
    pub fn new(store: PgStore) -> Self {
        BlockingRecords {
            store,
            runtime: Handle::current(),
        }
    }
}

impl RecordSource for BlockingRecords {
    fn records_after(
        &self,
        id: &str,
        after: i64,
        limit: usize,
    ) -> Result<Vec<(i64, Vec<u8>)>, SourceError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.runtime
            .block_on(records_after(&self.store, id, after, limit))
            .map_err(|e| SourceError(Box::new(e)))
    }
}
