//! Stream tokens: a browser's `EventSource` cannot send `Authorization`, so
//! `POST /v1/sessions/{id}/stream_token` (bearer-authenticated; `stream_token_route.rs`) hands
//! out a short-lived random token that opens `GET /v1/sessions/{id}/events?stream_token=…` of
//! that one session, and nothing else.
//!
//! On one node, tokens are 256 random bits, unrelated to the bearer token, kept in memory only
//! (a bounded map; expired ones are dropped) and usable again until they expire (an
//! `EventSource` reconnects with the same URL). On a node of a cluster (once
//! [`StreamTokens::sign_for_cluster`] was called) they are signed instead
//! (`stream_token_signed.rs`), so every node of the cluster accepts them: the node that checks
//! one finds the principal it names among its own credentials (`credentials::by_identity`).
//! This file never logs a token; the access log prints paths only (`access_log.rs`).

use std::collections::HashMap;
use std::fmt::Write;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use axum::extract::{MatchedPath, Request};
use axum::http::Method;

use super::credentials::{Authenticator, by_identity};
use super::principal::Principal;
use super::stream_token_signed::{SignError, Signer};

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

/// Why no token was issued.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum IssueError {
    /// [`MAX_TOKENS`] unexpired tokens exist on this node.
    #[error("{MAX_TOKENS} stream tokens are live; try again once some expire")]
    TooMany,
    /// A cluster's signed token cannot be made.
    #[error(transparent)]
    Signed(#[from] SignError),
}

/// The tokens handed out and not yet expired.
pub struct StreamTokens {
    ttl: Duration,
    /// Token → what it was issued for (one node's tokens).
    map: Mutex<HashMap<String, Issued>>,
    /// A cluster's key: once set, tokens are signed and the map is not used.
    signer: OnceLock<Signer>,
}

impl StreamTokens {
    /// An empty set whose tokens live `ttl`.
    pub fn new(ttl: Duration) -> Self {
        StreamTokens {
            ttl,
            map: Mutex::new(HashMap::new()),
            signer: OnceLock::new(),
        }
    }

    /// From now on, tokens are signed with the key of the cluster whose shared secret is
    /// `cluster_token`, and only such tokens are accepted (set once, at start).
    pub fn sign_for_cluster(&self, cluster_token: &str) {
        let _ = self.signer.set(Signer::new(cluster_token));
    }

    /// How long a token lives.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// A new token for `session`, acting as `principal` (who asked for it). On one node it is
    /// refused when [`MAX_TOKENS`] unexpired ones exist; a cluster's signed tokens are kept
    /// nowhere, so there is nothing to bound.
    pub fn issue(&self, session: &str, principal: Arc<Principal>) -> Result<String, IssueError> {
        if let Some(signer) = self.signer.get() {
            return Ok(signer.issue(session, &principal.name, principal.role, self.ttl)?);
        }
        let bytes: [u8; 32] = rand::random();
        let mut token = String::with_capacity(3 + 64);
        token.push_str("st_");
        for b in bytes {
            let _ = write!(token, "{b:02x}");
        }
        let now = Instant::now();
        // A poisoned lock refuses (fails closed) like a full map.
        let mut map = self.map.lock().map_err(|_| IssueError::TooMany)?;
        map.retain(|_, issued| issued.expiry > now);
        if map.len() >= MAX_TOKENS {
            return Err(IssueError::TooMany);
        }
        map.insert(
            token.clone(),
            Issued {
                session: session.to_string(),
                principal,
                expiry: now + self.ttl,
            },
        );
        Ok(token)
    }

    /// The principal `token` acts as, when it was handed out for `session` and has not
    /// expired. A cluster's token names its principal, found here with `auth` (every node has
    /// the same credentials); one this node cannot find is refused.
    pub fn accepts(
        &self,
        token: &str,
        session: &str,
        auth: &Authenticator,
    ) -> Option<Arc<Principal>> {
        if let Some(signer) = self.signer.get() {
            let claims = signer.check(token)?;
            if claims.session != session {
                return None;
            }
            return by_identity(auth, &claims.principal, claims.role);
        }
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
pub fn admits(
    tokens: &StreamTokens,
    auth: &Authenticator,
    req: &Request,
) -> Option<Arc<Principal>> {
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
    tokens.accepts(token, session, auth)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::server::principal::{Principals, Quotas, Role};

    const OPEN: Authenticator = Authenticator::Open;

    #[test]
    fn a_token_opens_its_session_only_until_it_expires() {
        let tokens = StreamTokens::new(Duration::from_secs(60));
        let t = tokens.issue("s-1", Principal::default_admin()).unwrap();
        assert!(t.starts_with("st_") && t.len() == 67, "{t}");
        assert!(tokens.accepts(&t, "s-1", &OPEN).is_some());
        assert!(
            tokens.accepts(&t, "s-1", &OPEN).is_some(),
            "usable again (EventSource reconnects)"
        );
        assert!(tokens.accepts(&t, "s-2", &OPEN).is_none());
        assert!(tokens.accepts("st_forged", "s-1", &OPEN).is_none());
        assert_ne!(tokens.issue("s-1", Principal::default_admin()).unwrap(), t);
        let short = StreamTokens::new(Duration::ZERO);
        let t = short.issue("s-1", Principal::default_admin()).unwrap();
        assert!(short.accepts(&t, "s-1", &OPEN).is_none());
    }

    fn cluster_node(secret: &str, ttl: Duration) -> StreamTokens {
        let tokens = StreamTokens::new(ttl);
        tokens.sign_for_cluster(secret);
        tokens
    }

    #[test]
    fn a_cluster_token_opens_its_session_on_every_node_as_its_principal() {
        let secret = "cluster-secret-0123456789";
        let (a, b) = (
            cluster_node(secret, Duration::from_secs(60)),
            cluster_node(secret, Duration::from_secs(60)),
        );
        let alice = Arc::new(Principal {
            name: "alice".into(),
            role: Role::User,
            workspace_roots: Vec::new(),
            quotas: Quotas::default(),
            label: "alice".into(),
        });
        let auth = Authenticator::Principals(
            Arc::new(Principals {
                listed: vec![alice.clone()],
                ..Principals::default()
            }),
            None,
        );
        let t = a.issue("s-1", alice).unwrap();
        assert!(t.starts_with("stc_"), "{t}");
        let found = b.accepts(&t, "s-1", &auth).expect("accepted on b");
        assert_eq!((found.name.as_str(), found.role), ("alice", Role::User));
        assert!(b.accepts(&t, "s-2", &auth).is_none(), "another session");
        // The node's own kind of credentials decides: alice is nobody without --auth.
        assert!(b.accepts(&t, "s-1", &OPEN).is_none());
        let admin = a.issue("s-1", Principal::default_admin()).unwrap();
        assert!(b.accepts(&admin, "s-1", &OPEN).unwrap().is_admin());
        // A random token of a lone node, another cluster's, an expired one: refused.
        let lone = StreamTokens::new(Duration::from_secs(60));
        let random = lone.issue("s-1", Principal::default_admin()).unwrap();
        assert!(b.accepts(&random, "s-1", &OPEN).is_none());
        assert!(lone.accepts(&admin, "s-1", &OPEN).is_none());
        let other = cluster_node("another-cluster-secret", Duration::from_secs(60));
        assert!(other.accepts(&admin, "s-1", &OPEN).is_none());
        let short = cluster_node(secret, Duration::ZERO);
        let expired = short.issue("s-1", Principal::default_admin()).unwrap();
        assert!(b.accepts(&expired, "s-1", &OPEN).is_none());
    }
}
