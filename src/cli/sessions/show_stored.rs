//! `rookery sessions show ID --store URL`: the transcript of a session in the postgres store,
//! rendered by `show.rs` exactly as from trace files. Its records, and each subagent's (stored
//! under the subagent's own id, found through the `subagent` records of its parent), are read
//! a page at a time through the store's [`RecordSource`].
//!
//! Command line only: reading is `crate::store`, rendering `show.rs`. It never writes.

use std::io::Write;
use std::process::ExitCode;

use tokio::runtime::Handle;

use super::show::{Histories, transcript};
use crate::cli::CliError;
use crate::store::record_source::BlockingRecords;
use crate::store::{PgStore, StoreError, records};
use crate::trace::catalog::SessionHistory;
use crate::trace::record_source::{RecordSource, SourceError, read_stored_history};
use crate::trace::summary::SessionSummary;

/// The stored sessions a transcript reads (from a blocking thread).
struct Stored {
    store: PgStore,
    source: BlockingRecords,
    runtime: Handle,
}

impl Histories for Stored {
    type Error = SourceError;

    fn exists(&self, id: &str) -> bool {
        match self.source.records_after(id, -1, 1) {
            Ok(first) => !first.is_empty(),
            Err(e) => {
                tracing::warn!(session = %id, "cannot read the store: {e}");
                false
            }
        }
    }

    fn history(&self, id: &str) -> Result<SessionHistory, SourceError> {
        read_stored_history(&self.source, id, PgStore::place(id))
    }

    fn parent_of(&self, summary: &SessionSummary) -> Option<String> {
        if !summary.is_subagent() {
            return None;
        }
        match self
            .runtime
            .block_on(records::parent(&self.store, &summary.id))
        {
            Ok(parent) => parent,
            Err(e) => {
                tracing::warn!(session = %summary.id, "cannot read the store: {e}");
                None
            }
        }
    }

    fn place(&self) -> &'static str {
        "in the store"
    }
}

/// Prints stored session `id`'s transcript (a whole id: the store resolves no abbreviation).
pub(super) async fn show_stored(store: &PgStore, id: &str) -> Result<ExitCode, CliError> {
    let failed = |e: StoreError| CliError::Failed(e.into());
    let reader_failed = |source: std::io::Error| CliError::Io {
        what: format!("reading the transcript of {id} from the store"),
        source,
        code: 1,
    };
    if !records::exists(store, id).await.map_err(failed)? {
        return Err(CliError::usage(format!(
            "{id}: no session {id} in the store (a stored session is named by its whole id)"
        )));
    }
    let stored = Stored {
        store: store.clone(),
        source: BlockingRecords::new(store.clone()),
        runtime: Handle::current(),
    };
    let owned = id.to_string();
    let lines = tokio::task::spawn_blocking(move || {
        let history = stored.history(&owned)?;
        Ok::<_, SourceError>(transcript(&stored, &history))
    })
    .await
    .map_err(|e| reader_failed(std::io::Error::other(e)))?
    .map_err(|e| match e.0.downcast::<StoreError>() {
        Ok(e) => failed(*e),
        Err(e) => reader_failed(std::io::Error::other(e)),
    })?;
    let mut stdout = std::io::stdout().lock();
    for line in lines {
        if writeln!(stdout, "{line}").is_err() {
            break;
        }
    }
    Ok(ExitCode::SUCCESS)
}
