//! JWT bearer tokens of `rookery serve --auth FILE`: `--jwt-jwks FILE` (RS256, ES256, EdDSA
//! public keys) and/or `--jwt-hs256-secret-env VAR`, with `--jwt-issuer`, `--jwt-audience` and
//! `--jwt-role-claim` (default `role`). The principal is the `sub` claim.
//!
//! Each algorithm is checked only with keys of its own kind: HS256 with the HS256 secret only,
//! RS256/ES256/EdDSA with the JWKS keys of that kind only (and the `kid` when the token names
//! one), so `alg: none` and algorithm confusion (an HS256 token "signed" with a public key)
//! never verify. `exp` is required; `exp` and `nbf` are checked with 60 s of leeway. Any
//! failure is `None`: the caller answers the one 401 body. It verifies; it never logs a token.

use std::path::Path;

use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, JwkSet};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::Value;

use super::auth_file::valid_name;
use super::principal::Role;

/// Clock skew allowed on `exp` and `nbf`, in seconds.
pub const LEEWAY_SECS: u64 = 60;

/// Why the JWT flags were refused at start.
#[derive(Debug, thiserror::Error)]
pub enum JwtSetupError {
    /// The JWKS file cannot be read.
    #[error("--jwt-jwks {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The JWKS file or one of its keys is unusable.
    #[error("--jwt-jwks {path}: {what}")]
    Keys {
        /// The file.
        path: String,
        /// What is wrong.
        what: String,
    },
    /// The secret variable is unset or empty.
    #[error("--jwt-hs256-secret-env {0}: the environment variable is not set or empty")]
    Secret(String),
}

/// A verified token's subject and role claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subject {
    /// The `sub` claim.
    pub name: String,
    /// `admin` when the role claim says so, else `user`.
    pub role: Role,
}

/// The keys and rules JWTs are checked with.
pub struct JwtVerifier {
    /// JWKS keys: `kid`, the one algorithm the key verifies, the key.
    keys: Vec<(Option<String>, Algorithm, DecodingKey)>,
    hs256: Option<DecodingKey>,
    issuer: Option<String>,
    audience: Option<String>,
    role_claim: String,
}

/// What the command line gives.
#[derive(Debug, Default, Clone)]
pub struct JwtOptions {
    /// `--jwt-jwks FILE`.
    pub jwks: Option<std::path::PathBuf>,
    /// The value of `--jwt-hs256-secret-env VAR` and the variable's name.
    pub hs256_secret: Option<(String, Option<String>)>,
    /// `--jwt-issuer`.
    pub issuer: Option<String>,
    /// `--jwt-audience`.
    pub audience: Option<String>,
    /// `--jwt-role-claim` (default `role`).
    pub role_claim: Option<String>,
}

impl JwtVerifier {
    /// The verifier of `options`; `None` when neither keys nor a secret are given.
    pub fn from_options(options: &JwtOptions) -> Result<Option<Self>, JwtSetupError> {
        let mut keys = Vec::new();
        if let Some(path) = &options.jwks {
            keys = load_jwks(path)?;
        }
        let hs256 = match &options.hs256_secret {
            None => None,
            Some((_, Some(secret))) if !secret.is_empty() => {
                Some(DecodingKey::from_secret(secret.as_bytes()).map_err(|_| {
                    JwtSetupError::Secret(options.hs256_secret.clone().unwrap_or_default().0)
                })?)
            }
            Some((var, _)) => return Err(JwtSetupError::Secret(var.clone())),
        };
        if keys.is_empty() && hs256.is_none() {
            return Ok(None);
        }
        Ok(Some(JwtVerifier {
            keys,
            hs256,
            issuer: options.issuer.clone(),
            audience: options.audience.clone(),
            role_claim: options.role_claim.clone().unwrap_or_else(|| "role".into()),
        }))
    }

    /// The subject of `token` when it verifies (signature, algorithm, `exp`, `nbf`, issuer,
    /// audience, a `sub` that may name a principal); `None` otherwise, whatever failed.
    pub fn verify(&self, token: &str) -> Option<Subject> {
        let header = jsonwebtoken::decode_header(token).ok()?;
        let alg = header.alg;
        let candidates: Vec<&DecodingKey> = if alg == Algorithm::HS256 {
            self.hs256.iter().collect()
        } else {
            self.keys
                .iter()
                .filter(|(kid, key_alg, _)| {
                    *key_alg == alg
                        && match (&header.kid, kid) {
                            (Some(want), Some(have)) => want == have,
                            _ => true,
                        }
                })
                .map(|(_, _, key)| key)
                .collect()
        };
        let mut validation = Validation::new(alg);
        validation.leeway = LEEWAY_SECS;
        validation.validate_exp = true;
        validation.validate_nbf = true;
        validation.set_required_spec_claims(&["exp", "sub"]);
        match &self.audience {
            Some(aud) => {
                validation.set_audience(&[aud]);
                validation.required_spec_claims.insert("aud".into());
            }
            None => validation.validate_aud = false,
        }
        if let Some(iss) = &self.issuer {
            validation.set_issuer(&[iss]);
            validation.required_spec_claims.insert("iss".into());
        }
        let claims = candidates
            .into_iter()
            .find_map(|key| jsonwebtoken::decode::<Value>(token, key, &validation).ok())?
            .claims;
        let name = claims.get("sub")?.as_str()?;
        if !valid_name(name) {
            return None;
        }
        let role = match claims.get(&self.role_claim).and_then(Value::as_str) {
            Some("admin") => Role::Admin,
            _ => Role::User,
        };
        Some(Subject {
            name: name.to_string(),
            role,
        })
    }
}

/// The keys of a JWKS file, each with the one algorithm it verifies.
fn load_jwks(path: &Path) -> Result<Vec<(Option<String>, Algorithm, DecodingKey)>, JwtSetupError> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| JwtSetupError::Read {
        path: shown.clone(),
        source,
    })?;
    let bad = |what: String| JwtSetupError::Keys {
        path: shown.clone(),
        what,
    };
    let set: JwkSet = serde_json::from_str(&text).map_err(|e| bad(format!("not a JWKS: {e}")))?;
    if set.keys.is_empty() {
        return Err(bad("no keys".into()));
    }
    let mut out = Vec::new();
    for (i, jwk) in set.keys.iter().enumerate() {
        let alg = match &jwk.algorithm {
            AlgorithmParameters::RSA(_) => Algorithm::RS256,
            AlgorithmParameters::EllipticCurve(p) if p.curve == EllipticCurve::P256 => {
                Algorithm::ES256
            }
            AlgorithmParameters::OctetKeyPair(p) if p.curve == EllipticCurve::Ed25519 => {
                Algorithm::EdDSA
            }
            _ => {
                return Err(bad(format!(
                    "keys[{i}]: only RSA (RS256), EC P-256 (ES256) and OKP Ed25519 (EdDSA) public keys are accepted (an HS256 secret goes in --jwt-hs256-secret-env)"
                )));
            }
        };
        let key = DecodingKey::from_jwk(jwk).map_err(|e| bad(format!("keys[{i}]: {e}")))?;
        out.push((jwk.common.key_id.clone(), alg, key));
    }
    Ok(out)
}
