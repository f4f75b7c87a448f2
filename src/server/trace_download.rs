//! `GET /v1/sessions/{id}/trace`: a session's whole JSONL trace as one download (all its files
//! in order, as `rookery sessions show --json` would read them), streamed file by file in
//! 64 KiB chunks, never held whole in memory.
//!
//! Like `/messages` it never wakes a hibernated session nor resumes a recorded one: it flushes
//! a resident session's trace, then only reads files (with `serve --store`, the stored records
//! a page at a time: `stored_records.rs`). Each file is read up to the length it
//! had when the download reached it, so a record being appended meanwhile is left for the next
//! download rather than cut. Who may read it is the ownership middleware's business.

use std::path::PathBuf;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use tokio::io::AsyncReadExt;
use tokio_util::io::ReaderStream;

use super::error::{ApiError, ApiPath};
use super::state::ServerState;

/// The size of one chunk of the body.
const CHUNK: usize = 64 * 1024;

/// `path` opened and cut at the length it has now.
async fn open_at_its_length(path: PathBuf) -> std::io::Result<tokio::io::Take<tokio::fs::File>> {
    let file = tokio::fs::File::open(&path).await.inspect_err(|e| {
        tracing::warn!(path = %path.display(), "cannot read a trace file for a download: {e}");
    })?;
    let len = file.metadata().await?.len();
    Ok(file.take(len))
}

/// The handler.
#[utoipa::path(get, path = "/v1/sessions/{id}/trace", tag = "events", params(("id" = String, Path, description = "The session's id.")),
    responses(
        (status = 200, description = "The whole JSONL trace, every record of all its files in order (`docs/protocol.md`).", content_type = "application/x-ndjson", body = String),
    ))]
pub async fn download(
    State(state): State<Arc<ServerState>>,
    ApiPath(id): ApiPath<String>,
) -> Result<Response, ApiError> {
    if !crate::trace::paths::is_valid_session_id(&id) {
        return Err(ApiError::unknown_session(&id));
    }
    #[cfg(feature = "postgres")]
    if let Some(store) = state.cfg.store.clone() {
        return download_stored(&state, store, id).await;
    }
    let files = state.trace_files_of(&id)?;
    if let Some(entry) = state.resident(&id)
        && let Err(e) = entry.handle.flush_trace().await
    {
        tracing::warn!(session = %id, "cannot flush the trace before a download: {e}");
    }
    // File after file, each in chunks; an unreadable file ends the body with its error (the
    // client sees a cut download, the server logs why).
    let chunks = futures::stream::iter(files)
        .then(open_at_its_length)
        .flat_map(|opened| match opened {
            Ok(file) => ReaderStream::with_capacity(file, CHUNK).left_stream(),
            Err(e) => futures::stream::once(async { Err(e) }).right_stream(),
        });
    Ok(attachment(&id, Body::from_stream(chunks)))
}

/// The download's answer: `body` as `<id>.jsonl` (`id` checked: letters, digits, `_`, `-`).
fn attachment(id: &str, body: Body) -> Response {
    (
        [
            (header::CONTENT_TYPE, "application/x-ndjson".to_string()),
            (
                header::CONTENT_DISPOSITION,
                format!("attachment; filename=\"{id}.jsonl\""),
            ),
        ],
        body,
    )
        .into_response()
}

/// The download of a stored session: its records in `seq` order, a page per chunk, each line
/// as stored (the first page read before the answer: 503 `store_unavailable` while the store
/// is down; a later failure cuts the body and is logged).
#[cfg(feature = "postgres")]
async fn download_stored(
    state: &ServerState,
    store: crate::store::PgStore,
    id: String,
) -> Result<Response, ApiError> {
    use super::stored_records::{first_page, pages};
    state.check_known(&id).await?;
    if let Some(entry) = state.resident(&id)
        && let Err(e) = entry.handle.flush_trace().await
    {
        tracing::warn!(session = %id, "cannot flush the trace before a download: {e}");
    }
    let first = first_page(&store, &id, -1).await?;
    let logged = id.clone();
    let chunks = pages(store, id.clone(), first).map(move |page| match page {
        Ok(page) => Ok(axum::body::Bytes::from(
            page.into_iter().flat_map(|(_, r)| r).collect::<Vec<u8>>(),
        )),
        Err(e) => {
            tracing::warn!(session = %logged, "cannot read the store for a download: {e}");
            Err(std::io::Error::other(e))
        }
    });
    Ok(attachment(&id, Body::from_stream(chunks)))
}
