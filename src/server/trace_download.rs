//! `GET /v1/sessions/{id}/trace`: a session's whole JSONL trace as one download (all its files
//! in order, as `rookery sessions show --json` would read them), streamed file by file in
//! 64 KiB chunks, never held whole in memory.
//!
//! Like `/messages` it never wakes a hibernated session nor resumes a recorded one: it flushes
//! a resident session's trace, then only reads files. Each file is read up to the length it
//! had when the download reached it, so a record being appended meanwhile is left for the next
//! download rather than cut. Who may read it is the ownership middleware's business.

use std::path::PathBuf;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use tokio::io::AsyncReadExt;

use super::error::{ApiError, ApiPath};
use super::state::ServerState;

/// The size of one chunk of the body.
const CHUNK: usize = 64 * 1024;

/// Where the download stands: the files left, and the one being read with its bytes left.
struct Reading {
    files: std::vec::IntoIter<PathBuf>,
    open: Option<(tokio::fs::File, u64)>,
}

/// The next chunk of the files, `None` at the end; an unreadable file ends the body with an
/// error (the client sees a cut download, and the server logs why).
async fn next_chunk(mut at: Reading) -> Option<(std::io::Result<Bytes>, Reading)> {
    loop {
        if let Some((file, left)) = at.open.as_mut() {
            if *left > 0 {
                let want = CHUNK.min(usize::try_from(*left).unwrap_or(CHUNK));
                let mut buf = vec![0u8; want];
                match file.read(&mut buf).await {
                    Ok(0) => at.open = None,
                    Ok(n) => {
                        buf.truncate(n);
                        *left -= n as u64;
                        return Some((Ok(Bytes::from(buf)), at));
                    }
                    Err(e) => {
                        at.open = None;
                        at.files = Vec::new().into_iter();
                        return Some((Err(e), at));
                    }
                }
                continue;
            }
            at.open = None;
        }
        let path = at.files.next()?;
        let opened = async {
            let file = tokio::fs::File::open(&path).await?;
            let len = file.metadata().await?.len();
            Ok::<_, std::io::Error>((file, len))
        }
        .await;
        match opened {
            Ok(open) => at.open = Some(open),
            Err(e) => {
                tracing::warn!(path = %path.display(), "cannot read a trace file for a download: {e}");
                at.files = Vec::new().into_iter();
                return Some((Err(e), at));
            }
        }
    }
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
    let files = state.trace_files_of(&id)?;
    if let Some(entry) = state.resident(&id)
        && let Err(e) = entry.handle.flush_trace().await
    {
        tracing::warn!(session = %id, "cannot flush the trace before a download: {e}");
    }
    let reading = Reading {
        files: files.into_iter(),
        open: None,
    };
    let body = Body::from_stream(futures::stream::unfold(reading, next_chunk));
    Ok((
        [
            (header::CONTENT_TYPE, "application/x-ndjson".to_string()),
            (
                header::CONTENT_DISPOSITION,
                // Checked above: letters, digits, `_` and `-` only.
                format!("attachment; filename=\"{id}.jsonl\""),
            ),
        ],
        body,
    )
        .into_response())
}
