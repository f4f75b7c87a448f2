//! `rookery store export ID`: a session's trace written back as the JSONL the `files` backend
//! writes (every part, in `seq` order, each record's bytes as stored). It owns nothing else.

use std::io::Write;

use futures::TryStreamExt;

use super::PgStore;
use super::error::StoreError;

/// Writes session `id`'s records to `out`, streamed (a long trace is never held whole);
/// returns how many were written.
pub async fn export(store: &PgStore, id: &str, out: &mut impl Write) -> Result<u64, StoreError> {
    let client = store.client().await?;
    let known = client
        .query_opt("SELECT 1 FROM sessions WHERE id = $1", &[&id])
        .await?;
    if known.is_none() {
        return Err(StoreError::UnknownSession(id.to_string()));
    }
    let rows = client
        .query_raw(
            "SELECT record FROM trace_records WHERE session_id = $1 ORDER BY seq",
            [&id],
        )
        .await?;
    futures::pin_mut!(rows);
    let mut n = 0;
    while let Some(row) = rows.try_next().await? {
        out.write_all(row.get::<_, &[u8]>(0))?;
        n += 1;
    }
    out.flush()?;
    Ok(n)
}
