//! Stream tokens: a browser's `EventSource` cannot send `Authorization`, so
//! `POST /v1/sessions/{id}/stream_token` (bearer-authenticated; `stream_token_route.rs`) hands
//! out a short-lived random token that opens `GET /v1/sessions/{id}/events?stream_token=…` of
//! that one session, and nothing else.
//!
//! Tokens are 256 random bits, unrelated to the bearer token, kept in memory only (a bounded
//! map; expired ones are dropped) and usable again until they expire (an `EventSource`
//! reconnects with the same URL). This file never logs a token; the access log prints paths
//! only (`access_log.rs`).

use std::collections::HashMap;
use std::fmt::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{MatchedPath, Request};
use axum::http::Method;

use super::principal::Principal;

/// How long a stream token is accepted, by default (`serve --stream-token-ttl-ms`).
pub const DEFAULT_TTL: Duration = Duration::from_secs(60);
/// Unexpired stream tokens kept at most (one more is refused with 503 until some expire).
pub const MAX_TOKENS: usize = 10_000;
/// The query parameter that carries a stream token.
pub const QUERY_KEY: &str = "stream_token";
/// The one route a stream token opens.
const EVENTS_ROUTE: &str = "/v1/sessions/{id}/events";

/// What a token was handed out for.
struct Issued {
    /// The one session whose events it opens.
    session: String,
    /// Who asked for it: the principal a request carrying it acts as.
    principal: Arc<Principal>,
    /// When it stops being accepted.
    expiry: Instant,
}

/// The tokens handed out and not yet expired.
pub struct StreamTokens {
    ttl: Duration,
    /// Token → what it was issued for.
    map: Mutex<HashMap<String, Issued>>,
}

impl StreamTokens {
    /// An empty set whose tokens live `ttl`.
    pub fn new(ttl: Duration) -> Self {
        StreamTokens {
            ttl,
            map: Mutex::new(HashMap::new()),
        }
    }

    /// How long a token lives.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// A new token for `session`, acting as `principal` (who asked for it); `None` when
    /// [`MAX_TOKENS`] unexpired ones exist.
    pub fn issue(&self, session: &str, principal: Arc<Principal>) -> Option<String> {
        let bytes: [u8; 32] = rand::random();
        let mut token = String::with_capacity(3 + 64);
        token.push_str("st_");
        for b in bytes {
            let _ = write!(token, "{b:02x}");
        }
        let now = Instant::now();
        let mut map = self.map.lock().ok()?;
        map.retain(|_, issued| issued.expiry > now);
        if map.len() >= MAX_TOKENS {
            return None;
        }
        map.insert(
            token.clone(),
            Issued {
                session: session.to_string(),
                principal,
                expiry: now + self.ttl,
            },
        );
        Some(token)
    }

    /// The principal `token` acts as, when it was handed out for `session` and has not
    /// expired.
    pub fn accepts(&self, token: &str, session: &str) -> Option<Arc<Principal>> {
        let now = Instant::now();
        let mut map = self.map.lock().ok()?;
        match map.get(token) {
            Some(issued) if issued.expiry > now => {
                (issued.session == session).then(|| issued.principal.clone())
            }
            Some(_) => {
                map.remove(token);
                None
            }
            None => None,
        }
    }
}

/// The principal of a stream token, when `req` is a `GET` of a session's event stream carrying
/// one issued for that session (the auth middleware's one exception to the bearer token).
pub fn admits(tokens: &StreamTokens, req: &Request) -> Option<Arc<Principal>> {
    if req.method() != Method::GET
        || req
            .extensions()
            .get::<MatchedPath>()
            .map(MatchedPath::as_str)
            != Some(EVENTS_ROUTE)
    {
        return None;
    }
    let session = req
        .uri()
        .path()
        .strip_prefix("/v1/sessions/")
        .and_then(|p| p.strip_suffix("/events"))?;
    let token = req.uri().query().and_then(|q| {
        q.split('&')
            .find_map(|kv| kv.strip_prefix(QUERY_KEY)?.strip_prefix('='))
    })?;
    tokens.accepts(token, session)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_opens_its_session_only_until_it_expires() {
        let tokens = StreamTokens::new(Duration::from_secs(60));
        let t = tokens.issue("s-1", Principal::default_admin()).unwrap();
        assert!(t.starts_with("st_") && t.len() == 67, "{t}");
        assert!(tokens.accepts(&t, "s-1").is_some());
        assert!(
            tokens.accepts(&t, "s-1").is_some(),
            "usable again (EventSource reconnects)"
        );
        assert!(tokens.accepts(&t, "s-2").is_none());
        assert!(tokens.accepts("st_forged", "s-1").is_none());
        assert_ne!(tokens.issue("s-1", Principal::default_admin()).unwrap(), t);
        let short = StreamTokens::new(Duration::ZERO);
        let t = short.issue("s-1", Principal::default_admin()).unwrap();
        assert!(short.accepts(&t, "s-1").is_none());
    }
}
