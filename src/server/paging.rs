//! The paging of list routes: `limit` (1 to [`MAX_LIMIT`], default [`DEFAULT_LIMIT`]) and an
//! opaque `cursor` from the query string, and the cursors themselves (a route's kind and its
//! position, base64url-encoded: opaque to clients, checked again when they come back).
//!
//! It parses and encodes only; what a position means is the route's business.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use super::error::{ApiError, shown};

/// Items of a page when the request names no `limit`.
pub const DEFAULT_LIMIT: usize = 100;
/// Items of a page at most.
pub const MAX_LIMIT: usize = 1000;
/// Characters of a cursor at most (a longer one is not one of ours).
const MAX_CURSOR_CHARS: usize = 4096;

/// A page request.
#[derive(Debug, PartialEq, Eq)]
pub struct PageQuery {
    /// Items wanted.
    pub limit: usize,
    /// Where to go on from, as a previous page's `next_cursor` gave it.
    pub cursor: Option<String>,
}

/// `limit` and `cursor` of a query string (other parameters are left to the route); a bad
/// `limit` is 400 `invalid_request`.
pub fn page_query(query: Option<&str>) -> Result<PageQuery, ApiError> {
    let mut page = PageQuery {
        limit: DEFAULT_LIMIT,
        cursor: None,
    };
    let pairs = url::form_urlencoded::parse(query.unwrap_or_default().as_bytes());
    for (key, value) in pairs {
        match key.as_ref() {
            "limit" => {
                page.limit = value
                    .trim()
                    .parse::<usize>()
                    .ok()
                    .filter(|n| (1..=MAX_LIMIT).contains(n))
                    .ok_or_else(|| {
                        ApiError::bad_request(
                            "invalid_request",
                            format!(
                                "limit must be a whole number from 1 to {MAX_LIMIT}, got \"{}\"",
                                shown(&value)
                            ),
                        )
                    })?;
            }
            "cursor" if !value.is_empty() => page.cursor = Some(value.into_owned()),
            _ => {}
        }
    }
    Ok(page)
}

/// The cursor of a `kind` route at `position`.
pub fn encode(kind: &str, position: &str) -> String {
    URL_SAFE_NO_PAD.encode(format!("{kind}:{position}"))
}

/// The position a cursor of a `kind` route holds; anything else is 400 `invalid_cursor`.
pub fn decode(kind: &str, cursor: &str) -> Result<String, ApiError> {
    let bad = || {
        ApiError::bad_request(
            "invalid_cursor",
            "cursor is not one this route gave out (pass next_cursor back unchanged, or leave it out to start over)",
        )
    };
    if cursor.len() > MAX_CURSOR_CHARS {
        return Err(bad());
    }
    let bytes = URL_SAFE_NO_PAD.decode(cursor).map_err(|_| bad())?;
    let text = String::from_utf8(bytes).map_err(|_| bad())?;
    text.strip_prefix(kind)
        .and_then(|t| t.strip_prefix(':'))
        .map(str::to_string)
        .ok_or_else(bad)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_and_cursors_are_checked() {
        assert_eq!(
            page_query(None).unwrap(),
            PageQuery {
                limit: DEFAULT_LIMIT,
                cursor: None
            }
        );
        let q = page_query(Some("limit=5&cursor=abc&x=1")).unwrap();
        assert_eq!((q.limit, q.cursor.as_deref()), (5, Some("abc")));
        for bad in ["limit=0", "limit=1001", "limit=x", "limit=-1", "limit="] {
            let e = page_query(Some(bad)).unwrap_err();
            assert_eq!(e.code, "invalid_request", "{bad}");
        }
        let c = encode("m1", "1.0");
        assert_eq!(decode("m1", &c).unwrap(), "1.0");
        assert_eq!(decode("l1", &c).unwrap_err().code, "invalid_cursor");
        assert_eq!(decode("m1", "!!").unwrap_err().code, "invalid_cursor");
    }
}
