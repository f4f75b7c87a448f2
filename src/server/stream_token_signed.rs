//! Stream tokens every node of a cluster accepts: with `--store postgres://…` and the cluster
//! flags, a token is not kept in the issuing node's memory but carries what it was issued for
//! (the session, the principal's name and role, the expiry, a random nonce), MACed with
//! HMAC-SHA256 under a key derived from the cluster token, so any node holding that token can
//! check it without asking anyone. `stream_token.rs` decides when this form is used and finds
//! the principal the checked claims name (`credentials::by_identity`).
//!
//! Form: `stc_<base64url(claims JSON)>.<base64url(tag)>`, the tag over the first part's text;
//! the tag is checked (constant time) before anything of the claims is decoded. Expiry is a
//! wall-clock instant (Unix milliseconds) checked against the checking node's clock.
//!
//! It signs and checks; it never stores or logs a token, and it never decides who a principal
//! is.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{KeyInit, Mac};
use serde::{Deserialize, Serialize};

use super::principal::Role;

/// The prefix of a signed stream token (a node's own random ones start `st_`).
pub const PREFIX: &str = "stc_";

/// The longest signed token checked or issued (a longer one is refused unread).
pub const MAX_LEN: usize = 1024;

/// What the cluster key is derived for: a label no other use of the cluster token shares.
const KEY_LABEL: &[u8] = b"rookery stream token v1";

type HmacSha256 = hmac::Hmac<sha2::Sha256>;

/// What a signed token was issued for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Wire {
    /// The session.
    s: String,
    /// The principal's name.
    p: String,
    /// Its role (`user` or `admin`).
    r: String,
    /// Expiry, Unix milliseconds.
    e: u64,
    /// A random nonce: two tokens are never the same.
    n: String,
}

/// The checked claims of a signed token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claims {
    /// The one session whose events it opens.
    pub session: String,
    /// The name of the principal it acts as.
    pub principal: String,
    /// That principal's role where it was issued.
    pub role: Role,
}

/// Why a signed token could not be issued.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SignError {
    /// The session id and principal name make a token longer than [`MAX_LEN`].
    #[error("the stream token would be longer than {MAX_LEN} characters")]
    TooLong,
    /// No key could be made from the cluster token (HMAC takes any key: never seen).
    #[error("no stream-token key could be derived from the cluster token")]
    NoKey,
}

/// The cluster's stream-token key, ready to MAC (`None`: none could be made; then nothing is
/// issued and nothing accepted).
pub struct Signer {
    mac: Option<HmacSha256>,
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Signer(…)")
    }
}

/// Milliseconds since the Unix epoch, now (0 before it: every token is then unexpired for at
/// most its own life, never longer).
fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl Signer {
    /// The key of the cluster whose shared secret is `cluster_token`: HMAC-SHA256 of a fixed
    /// label under it, so the stream tokens' key is never the secret itself.
    pub fn new(cluster_token: &str) -> Self {
        let mac = HmacSha256::new_from_slice(cluster_token.as_bytes())
            .ok()
            .and_then(|mut derive| {
                derive.update(KEY_LABEL);
                HmacSha256::new_from_slice(&derive.finalize().into_bytes()).ok()
            });
        Signer { mac }
    }

    /// A token for `session`, acting as `principal` (`role`), valid for `ttl` from now.
    pub fn issue(
        &self,
        session: &str,
        principal: &str,
        role: Role,
        ttl: Duration,
    ) -> Result<String, SignError> {
        let ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        self.issue_at(session, principal, role, now_ms().saturating_add(ttl_ms))
    }

    fn issue_at(
        &self,
        session: &str,
        principal: &str,
        role: Role,
        expiry_ms: u64,
    ) -> Result<String, SignError> {
        let nonce: [u8; 16] = rand::random();
        let wire = Wire {
            s: session.to_string(),
            p: principal.to_string(),
            r: role.as_str().to_string(),
            e: expiry_ms,
            n: URL_SAFE_NO_PAD.encode(nonce),
        };
        // Serializing strings and a number cannot fail.
        let json = serde_json::to_vec(&wire).unwrap_or_default();
        let body = URL_SAFE_NO_PAD.encode(json);
        let mut mac = self.mac.clone().ok_or(SignError::NoKey)?;
        mac.update(body.as_bytes());
        let tag = URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes());
        let token = format!("{PREFIX}{body}.{tag}");
        if token.len() > MAX_LEN {
            return Err(SignError::TooLong);
        }
        Ok(token)
    }

    /// The claims of `token` when this cluster signed it and it has not expired; `None` for
    /// anything else (too long, malformed, another key, altered, expired), whatever failed.
    pub fn check(&self, token: &str) -> Option<Claims> {
        self.check_at(token, now_ms())
    }

    fn check_at(&self, token: &str, now_ms: u64) -> Option<Claims> {
        if token.len() > MAX_LEN {
            return None;
        }
        let (body, tag) = token.strip_prefix(PREFIX)?.split_once('.')?;
        let tag = URL_SAFE_NO_PAD.decode(tag).ok()?;
        let mut mac = self.mac.clone()?;
        mac.update(body.as_bytes());
        mac.verify_slice(&tag).ok()?;
        // Signed here: from now on the claims are this cluster's own.
        let wire: Wire = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(body).ok()?).ok()?;
        if now_ms >= wire.e {
            return None;
        }
        let role = match wire.r.as_str() {
            "admin" => Role::Admin,
            "user" => Role::User,
            _ => return None,
        };
        Some(Claims {
            session: wire.s,
            principal: wire.p,
            role,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "cluster-secret-0123456789";

    #[test]
    fn a_token_carries_its_claims_until_it_expires() {
        let signer = Signer::new(SECRET);
        let t = signer.issue_at("s-1", "alice", Role::User, 10_000).unwrap();
        assert!(t.starts_with(PREFIX) && !t.contains(SECRET), "{t}");
        let claims = signer.check_at(&t, 9_999).unwrap();
        assert_eq!(
            claims,
            Claims {
                session: "s-1".into(),
                principal: "alice".into(),
                role: Role::User
            }
        );
        // Another node of the same cluster checks it the same.
        assert_eq!(Signer::new(SECRET).check_at(&t, 0), Some(claims));
        assert_eq!(signer.check_at(&t, 10_000), None, "expired");
        assert_ne!(
            signer.issue_at("s-1", "alice", Role::User, 10_000).unwrap(),
            t,
            "a nonce each"
        );
        let admin = signer.issue_at("s-1", "root", Role::Admin, 10).unwrap();
        assert_eq!(signer.check_at(&admin, 0).unwrap().role, Role::Admin);
    }

    #[test]
    fn forged_altered_and_foreign_tokens_are_refused() {
        let signer = Signer::new(SECRET);
        let t = signer
            .issue_at("s-1", "alice", Role::User, u64::MAX)
            .unwrap();
        assert!(
            Signer::new("another-cluster-secret")
                .check_at(&t, 0)
                .is_none()
        );
        let (body, tag) = t.split_once('.').unwrap();
        // A body claiming more, under the old tag.
        let forged = URL_SAFE_NO_PAD
            .encode(br#"{"s":"s-1","p":"alice","r":"admin","e":18446744073709551615,"n":"x"}"#);
        for bad in [
            format!("{PREFIX}{forged}.{tag}"),
            format!("{body}.{}", &tag[1..]),
            format!("{body}x.{tag}"),
            format!("{body}.{tag}x"),
            format!("{body}{tag}"),
            t.replacen(PREFIX, "st_", 1),
            format!("{PREFIX}.{tag}"),
            format!("{t}{}", "A".repeat(MAX_LEN)),
            String::new(),
        ] {
            assert!(signer.check_at(&bad, 0).is_none(), "{bad}");
        }
        // A token signed with the cluster secret itself (not the derived key) is refused.
        let mut mac = HmacSha256::new_from_slice(SECRET.as_bytes()).unwrap();
        mac.update(forged.as_bytes());
        let tag = URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes());
        assert!(
            signer
                .check_at(&format!("{PREFIX}{forged}.{tag}"), 0)
                .is_none()
        );
        // Too long to issue.
        assert_eq!(
            signer.issue_at(&"s".repeat(MAX_LEN), "alice", Role::User, 1),
            Err(SignError::TooLong)
        );
    }
}
