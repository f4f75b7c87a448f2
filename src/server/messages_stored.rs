//! `GET /v1/sessions/{id}/messages` with `--store`: the pages of `messages.rs`, read from the
//! postgres store by the same reader as the trace files (`trace::page::read_stored_page`), so
//! both backends give the same messages in the same pages; a subagent's messages come from its
//! own stored records, found through the parent's `subagent` records. The cursor holds a
//! `seq` per nesting level (`<id>|<seq>/<seq>…`), never a whole trace: each level reads a
//! bounded page of records at a time.
//!
//! It only reads the store; it never wakes a session nor takes a lease.

use axum::http::StatusCode;
use serde_json::value::RawValue;

use super::error::ApiError;
use super::messages::{MessagesPage, invalid_cursor};
use super::paging::{decode, encode};
use super::state::store_error;
use crate::store::record_source::BlockingRecords;
use crate::store::{PgStore, StoreError};
use crate::trace::page::{PageError, StoredPosition, read_stored_page};

/// The cursor kind of the route's stored pages (a files cursor is refused, and the other way).
const KIND: &str = "ms1";

/// `<id>|<seq>/<seq>…` of a position in session `id`.
fn position_text(id: &str, position: &StoredPosition) -> String {
    let seqs: Vec<String> = position.0.iter().map(i64::to_string).collect();
    format!("{id}|{}", seqs.join("/"))
}

/// The position [`position_text`] wrote for session `id`; `None` for anything else.
fn parse_position(id: &str, text: &str) -> Option<StoredPosition> {
    let (of, seqs) = text.split_once('|')?;
    if of != id {
        return None;
    }
    let seqs = seqs
        .split('/')
        .map(|s| s.parse().ok())
        .collect::<Option<Vec<i64>>>()?;
    Some(StoredPosition(seqs))
}

/// The page of stored session `id` from `cursor` (the start when `None`).
pub async fn read(
    store: &PgStore,
    id: &str,
    cursor: Option<&str>,
    limit: usize,
) -> Result<MessagesPage, ApiError> {
    let from = match cursor {
        Some(c) => parse_position(id, &decode(KIND, c)?)
            .ok_or_else(|| invalid_cursor("not a position of this session"))?,
        None => StoredPosition::start(),
    };
    let source = BlockingRecords::new(store.clone());
    let owned = id.to_string();
    let read = tokio::task::spawn_blocking(move || read_stored_page(&source, &owned, &from, limit))
        .await
        .map_err(|e| ApiError::internal(format!("the message reader failed: {e}")))?;
    let read = match read {
        Ok(read) => read,
        Err(PageError::BadPosition(why)) => return Err(invalid_cursor(why)),
        Err(PageError::Source(e)) => {
            return Err(match e.0.downcast::<StoreError>() {
                Ok(e) => store_error(*e),
                Err(e) => unreadable(e.to_string()),
            });
        }
        Err(e @ PageError::Read { .. }) => return Err(unreadable(e.to_string())),
    };
    let messages = read
        .messages
        .into_iter()
        .filter_map(|json| RawValue::from_string(json).ok())
        .collect();
    Ok(MessagesPage {
        messages,
        next_cursor: read
            .next
            .map(|next| encode(KIND, &position_text(id, &next))),
    })
}

/// 500 `unreadable_trace`.
fn unreadable(message: String) -> ApiError {
    ApiError::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        "unreadable_trace",
        message,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_round_trip_for_their_session_only() {
        let p = StoredPosition(vec![40, -1]);
        let text = position_text("s-1", &p);
        assert_eq!(parse_position("s-1", &text), Some(p));
        assert_eq!(parse_position("s-2", &text), None);
        assert_eq!(parse_position("s-1", "s-1|1.2"), None);
        assert_eq!(parse_position("s-1", "s-1"), None);
    }
}
