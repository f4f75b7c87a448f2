//! `GET /v1/sessions/{id}/messages`: a session's conversation, a page at a time, read from
//! its trace (`trace::page`): `{"messages": […], "next_cursor": "…" | null}`, oldest first,
//! prompts included, subagents' messages tagged with their `origin`.
//!
//! With `--store` the same pages are read from the postgres store (`messages_stored.rs`).
//!
//! It never wakes a hibernated session nor resumes a recorded one: it only reads their traces
//! (a resident session's trace is flushed first, so the page has what it streamed).

use std::sync::Arc;

use axum::Json;
use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use serde::Serialize;
use serde_json::value::RawValue;

use super::error::{ApiError, ApiPath};
use super::paging::{decode, encode, page_query};
use super::state::ServerState;
use crate::trace::page::{PageError, Position, Spot, read_page};

/// The cursor kind of this route.
const KIND: &str = "m1";

/// The answer of the route.
#[derive(Debug, Serialize)]
pub struct MessagesPage {
    /// The messages, oldest first, each a trace record.
    pub messages: Vec<Box<RawValue>>,
    /// The cursor of the next page; `None` when the history ended.
    pub next_cursor: Option<String>,
}

/// `<id>|<file>.<offset>/<file>.<offset>…` of a position in session `id`.
fn position_text(id: &str, position: &Position) -> String {
    let spots: Vec<String> = position
        .0
        .iter()
        .map(|s| format!("{}.{}", s.file, s.offset))
        .collect();
    format!("{id}|{}", spots.join("/"))
}

/// The position [`position_text`] wrote for session `id`; `None` for anything else.
fn parse_position(id: &str, text: &str) -> Option<Position> {
    let (of, spots) = text.split_once('|')?;
    if of != id {
        return None;
    }
    let spots = spots
        .split('/')
        .map(|s| {
            let (file, offset) = s.split_once('.')?;
            Some(Spot {
                file: file.parse().ok()?,
                offset: offset.parse().ok()?,
            })
        })
        .collect::<Option<Vec<Spot>>>()?;
    Some(Position(spots))
}

/// A resident session's trace flushed, so the page has what its stream sent.
async fn flush(state: &ServerState, id: &str) {
    if let Some(entry) = state.resident(id)
        && let Err(e) = entry.handle.flush_trace().await
    {
        tracing::warn!(session = %id, "cannot flush the trace before reading messages: {e}");
    }
}

/// 400 `invalid_cursor`, saying why.
pub(super) fn invalid_cursor(why: &str) -> ApiError {
    ApiError::bad_request(
        "invalid_cursor",
        format!(
            "cursor is not one this route gave out for this session ({why}); leave it out to start over"
        ),
    )
}

/// The handler.
#[utoipa::path(get, path = "/v1/sessions/{id}/messages", tag = "events",
    params(("id" = String, Path, description = "The session's id."), ("limit" = Option<usize>, Query, minimum = 1, maximum = 1000, description = "Items of the page (default 100)."), ("cursor" = Option<String>, Query, description = "The `next_cursor` of the previous page.")),
    responses(
        (status = 200, description = "A page of the conversation, oldest first.", body = super::openapi_shapes::MessagePage),
        (status = 400, description = "invalid_request, invalid_cursor"),
        (status = 500, description = "unreadable_trace"),
        (status = 503, description = "store_unavailable"),
    ))]
pub async fn messages(
    State(state): State<Arc<ServerState>>,
    ApiPath(id): ApiPath<String>,
    RawQuery(query): RawQuery,
) -> Result<Json<MessagesPage>, ApiError> {
    let page = page_query(query.as_deref())?;
    #[cfg(feature = "postgres")]
    if let Some(store) = &state.cfg.store {
        state.check_known(&id).await?;
        flush(&state, &id).await;
        let read = super::messages_stored::read(store, &id, page.cursor.as_deref(), page.limit);
        return read.await.map(Json);
    }
    let from = match &page.cursor {
        Some(c) => parse_position(&id, &decode(KIND, c)?)
            .ok_or_else(|| invalid_cursor("not a position of this session"))?,
        None => Position::start(),
    };
    let files = state.trace_files_of(&id)?;
    flush(&state, &id).await;
    let home = state.cfg.home.clone();
    let limit = page.limit;
    let read = tokio::task::spawn_blocking(move || read_page(&home, files, &from, limit))
        .await
        .map_err(|e| ApiError::internal(format!("the message reader failed: {e}")))?;
    let read = match read {
        Ok(read) => read,
        Err(PageError::BadPosition(why)) => return Err(invalid_cursor(why)),
        Err(e @ (PageError::Read { .. } | PageError::Source(_))) => {
            return Err(ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "unreadable_trace",
                e.to_string(),
            ));
        }
    };
    let messages = read
        .messages
        .into_iter()
        .filter_map(|json| RawValue::from_string(json).ok())
        .collect();
    Ok(Json(MessagesPage {
        messages,
        next_cursor: read
            .next
            .map(|next| encode(KIND, &position_text(&id, &next))),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_round_trip_for_their_session_only() {
        let p = Position(vec![
            Spot {
                file: 1,
                offset: 40,
            },
            Spot { file: 2, offset: 0 },
        ]);
        let text = position_text("s-1", &p);
        assert_eq!(parse_position("s-1", &text), Some(p));
        assert_eq!(parse_position("s-2", &text), None);
        assert_eq!(parse_position("s-1", "s-1|1.x"), None);
        assert_eq!(parse_position("s-1", "s-1"), None);
    }
}
