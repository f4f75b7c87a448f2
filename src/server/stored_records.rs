//! A stored session's records read back for the API (`serve --store`): the trace download as
//! a stream of the stored lines, and an SSE replay from before a session's ring found again in
//! the store. Both read `trace_records` in `seq` order a bounded page at a time (never the
//! whole trace in memory); the first page is read before the answer starts, so a store that is
//! down answers 503 `store_unavailable` rather than an empty body.
//!
//! It only reads the store; it never touches a session nor writes a record.

use std::collections::HashMap;
use std::sync::Arc;

use futures::Stream;
use tokio::sync::mpsc;

use super::error::ApiError;
use super::sse::{Gone, Record, json_hash};
use super::state::store_error;
use crate::store::records::{RECORD_PAGE, records_after};
use crate::store::{PgStore, StoreError};

/// Records read back and waiting for an SSE client, at most.
const READ_AHEAD: usize = 16;

/// One page of records, each with its `seq`.
type Page = Vec<(i64, Vec<u8>)>;

/// The first page of session `id`'s records after `after` (`-1`: from the first).
pub async fn first_page(store: &PgStore, id: &str, after: i64) -> Result<Page, ApiError> {
    records_after(store, id, after, RECORD_PAGE)
        .await
        .map_err(store_error)
}

/// What [`pages`] reads next.
enum Next {
    /// This page, then the one after it if it was full.
    Page(Page),
    /// The page after this `seq`.
    After(i64),
    /// Nothing more.
    Done,
}

/// The pages of session `id`'s records from `first` on, in order; a failed read ends the
/// stream with its error.
pub fn pages(
    store: PgStore,
    id: String,
    first: Page,
) -> impl Stream<Item = Result<Page, StoreError>> {
    futures::stream::unfold(Next::Page(first), move |next| {
        let store = store.clone();
        let id = id.clone();
        async move {
            let page = match next {
                Next::Done => return None,
                Next::Page(page) => page,
                Next::After(seq) => match records_after(&store, &id, seq, RECORD_PAGE).await {
                    Ok(page) => page,
                    Err(e) => return Some((Err(e), Next::Done)),
                },
            };
            let &(last, _) = page.last()?;
            let then = if page.len() as i64 == RECORD_PAGE {
                Next::After(last)
            } else {
                Next::Done
            };
            Some((Ok(page), then))
        }
    })
}

/// Reads session `id`'s stored records and sends those of `wanted` (found by the hash of their
/// JSON) under their own numbers, in order, each once; the channel ends when everything was
/// found, the records end, the store fails (logged) or the client went away.
pub async fn read_back(
    store: PgStore,
    id: String,
    wanted: Vec<Gone>,
) -> Result<mpsc::Receiver<Arc<Record>>, ApiError> {
    let (tx, rx) = mpsc::channel(READ_AHEAD);
    if wanted.is_empty() {
        return Ok(rx);
    }
    let first = first_page(&store, &id, -1).await?;
    tokio::spawn(async move {
        use futures::StreamExt;
        let by_hash: HashMap<u64, u64> = wanted.iter().map(|g| (g.hash, g.seq)).collect();
        let last = wanted.iter().map(|g| g.seq).max().unwrap_or(0);
        let mut sent = 0u64;
        let stream = pages(store, id.clone(), first);
        futures::pin_mut!(stream);
        while let Some(page) = stream.next().await {
            let page = match page {
                Ok(p) => p,
                Err(e) => {
                    tracing::warn!(session = %id, "cannot read the store for an SSE replay: {e}");
                    return;
                }
            };
            for (_, record) in page {
                let json = record.strip_suffix(b"\n").unwrap_or(&record);
                let Some(&seq) = by_hash.get(&json_hash(json)) else {
                    continue;
                };
                // In order, each once (a rotated part repeats its session's header).
                if seq <= sent {
                    continue;
                }
                let Ok(json) = String::from_utf8(json.to_vec()) else {
                    continue;
                };
                sent = seq;
                if tx.send(Arc::new(Record::new(seq, json))).await.is_err() || seq == last {
                    return;
                }
            }
        }
    });
    Ok(rx)
}
