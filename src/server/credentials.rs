//! Credentials to principals: [`authenticate`] is the one place a request's credential becomes
//! a [`Principal`], or none (401 `unauthorized`, one body whatever failed).
//!
//! Without `--auth` the one bearer token (or none, with `--no-auth` on loopback) makes the
//! request the admin named `admin`. With `--auth FILE` the bearer token is hashed and compared
//! in constant time with the file's hashes ([`Principals::by_token`]). Another kind of
//! credential is one more branch of [`authenticate`]. The principal travels with the request as
//! a [`Caller`]. [`by_identity`] finds the principal a cluster's stream token names (a name
//! and a role another node authenticated) among this node's own credentials.
//!
//! It decides; it never logs or echoes a credential and never touches a session.

use std::sync::{Arc, LazyLock};

use axum::extract::FromRequestParts;
use axum::http::HeaderMap;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use subtle::ConstantTimeEq;

use super::error::ApiError;
use super::principal::{DEFAULT_ADMIN as DEFAULT_ADMIN_NAME, Principal, Principals, Role};

/// The admin every request is without `--auth`.
static DEFAULT_ADMIN: LazyLock<Arc<Principal>> = LazyLock::new(Principal::default_admin);

/// The principal a request acts as (set by `auth::require_token`; a handler that takes it from a
/// request that has none answers 401: it fails closed).
#[derive(Clone, Debug)]
pub struct Caller(pub Arc<Principal>);

impl<S: Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        parts
            .extensions
            .get::<Caller>()
            .cloned()
            .ok_or_else(ApiError::unauthorized)
    }
}

/// The token of `Authorization: Bearer <token>` (the scheme case-insensitive), if any.
pub fn bearer(header: Option<&str>) -> Option<&str> {
    let (scheme, given) = header?.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let given = given.trim();
    (!given.is_empty()).then_some(given)
}

/// True when `header` is `Bearer <token>` (the scheme case-insensitive); constant-time.
pub fn token_matches(header: Option<&str>, token: &str) -> bool {
    bearer(header).is_some_and(|given| bool::from(given.as_bytes().ct_eq(token.as_bytes())))
}

/// How the server authenticates: what the command line set up.
pub enum Authenticator {
    /// `--no-auth` (loopback only): every request is the admin.
    Open,
    /// The one token of `--token-env` or the token file: it makes the request the admin.
    Token(String),
    /// `--auth FILE`: the principals and their hashed tokens, and the JWT keys if any.
    Principals(Arc<Principals>, Option<Arc<super::jwt::JwtVerifier>>),
}

/// Who the request with these headers acts as, or `None` (401).
pub fn authenticate(auth: &Authenticator, headers: &HeaderMap) -> Option<Arc<Principal>> {
    let header = headers.get(AUTHORIZATION).and_then(|v| v.to_str().ok());
    match auth {
        Authenticator::Open => Some(DEFAULT_ADMIN.clone()),
        Authenticator::Token(token) => token_matches(header, token).then(|| DEFAULT_ADMIN.clone()),
        Authenticator::Principals(dir, jwt) => {
            let token = bearer(header)?;
            dir.by_token(token).or_else(|| {
                let subject = jwt.as_ref()?.verify(token)?;
                Some(dir.for_subject(&subject.name, subject.role))
            })
        }
    }
}

/// The principal named `name` (with `role` where it was authenticated, another node of the
/// cluster, which has the same credentials) as this node knows it; `None` (refused) when this
/// node could not have authenticated it:
/// - without `--auth`, only the admin named `admin`;
/// - with `--auth FILE`, a listed principal (as listed here, whatever role the claim says),
///   or, when this node verifies JWTs, a JWT subject with the claimed role (as
///   [`authenticate`] makes it); an unlisted name on a node without JWT keys is refused.
pub fn by_identity(auth: &Authenticator, name: &str, role: Role) -> Option<Arc<Principal>> {
    match auth {
        Authenticator::Open | Authenticator::Token(_) => {
            (name == DEFAULT_ADMIN_NAME && role == Role::Admin).then(|| DEFAULT_ADMIN.clone())
        }
        Authenticator::Principals(dir, jwt) => dir.by_name(name).or_else(|| {
            jwt.as_ref()?;
            super::auth_file::valid_name(name).then(|| dir.for_subject(name, role))
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::token_hash::TokenHash;
    use axum::http::HeaderValue;

    #[test]
    fn only_the_exact_bearer_token_passes() {
        assert!(token_matches(Some("Bearer s3cret"), "s3cret"));
        assert!(token_matches(Some("bearer s3cret"), "s3cret"));
        assert!(!token_matches(Some("Bearer s3cre"), "s3cret"));
        assert!(!token_matches(Some("Bearer s3cret2"), "s3cret"));
        assert!(!token_matches(Some("Basic s3cret"), "s3cret"));
        assert!(!token_matches(Some("s3cret"), "s3cret"));
        assert!(!token_matches(None, "s3cret"));
        assert!(!token_matches(Some("Bearer "), "s3cret"));
    }

    fn headers(auth: Option<&'static str>) -> HeaderMap {
        let mut h = HeaderMap::new();
        if let Some(a) = auth {
            h.insert(AUTHORIZATION, HeaderValue::from_static(a));
        }
        h
    }

    #[test]
    fn each_authenticator_finds_its_principal() {
        let open = authenticate(&Authenticator::Open, &headers(None)).unwrap();
        assert_eq!((open.name.as_str(), open.is_admin()), ("admin", true));
        let one = Authenticator::Token("t".into());
        assert_eq!(
            authenticate(&one, &headers(Some("Bearer t"))).unwrap().name,
            "admin"
        );
        assert!(authenticate(&one, &headers(Some("Bearer u"))).is_none());
        let alice = Arc::new(Principal {
            name: "alice".into(),
            role: crate::server::principal::Role::User,
            workspace_roots: Vec::new(),
            quotas: Default::default(),
            label: "alice".into(),
        });
        let dir = Authenticator::Principals(
            Arc::new(Principals {
                listed: vec![alice.clone()],
                tokens: vec![(TokenHash::of("a"), alice)],
                ..Principals::default()
            }),
            None,
        );
        let found = authenticate(&dir, &headers(Some("Bearer a"))).unwrap();
        assert_eq!((found.name.as_str(), found.is_admin()), ("alice", false));
        assert!(authenticate(&dir, &headers(Some("Bearer b"))).is_none());
        assert!(authenticate(&dir, &headers(None)).is_none());
    }

    #[test]
    fn an_identity_is_found_only_where_it_could_authenticate() {
        use crate::server::jwt::{JwtOptions, JwtVerifier};
        assert!(by_identity(&Authenticator::Open, "admin", Role::Admin).is_some());
        let one = Authenticator::Token("t".into());
        assert!(by_identity(&one, "admin", Role::Admin).unwrap().is_admin());
        assert!(by_identity(&one, "admin", Role::User).is_none());
        assert!(by_identity(&one, "alice", Role::Admin).is_none());
        let alice = Arc::new(Principal {
            name: "alice".into(),
            role: Role::User,
            workspace_roots: Vec::new(),
            quotas: Default::default(),
            label: "alice".into(),
        });
        let dir = Arc::new(Principals {
            listed: vec![alice],
            ..Principals::default()
        });
        let no_jwt = Authenticator::Principals(dir.clone(), None);
        // A listed name is as listed here, whatever role the token claims.
        let found = by_identity(&no_jwt, "alice", Role::Admin).unwrap();
        assert_eq!((found.name.as_str(), found.is_admin()), ("alice", false));
        // A JWT subject: refused on a node without JWT keys, found with them.
        assert!(by_identity(&no_jwt, "carol", Role::User).is_none());
        let jwt = JwtVerifier::from_options(&JwtOptions {
            hs256_secret: Some(("V".into(), Some("jwt-secret".into()))),
            ..JwtOptions::default()
        })
        .unwrap()
        .map(Arc::new);
        let with_jwt = Authenticator::Principals(dir, jwt);
        let carol = by_identity(&with_jwt, "carol", Role::Admin).unwrap();
        assert_eq!((carol.name.as_str(), carol.is_admin()), ("carol", true));
        assert_eq!(carol.label, "other");
        assert!(by_identity(&with_jwt, "no spaces", Role::User).is_none());
    }
}
