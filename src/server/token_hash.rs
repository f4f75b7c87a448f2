//! The stored form of a static bearer token: `sha256:<64 lowercase hex>` of its bytes. The
//! server keeps only these hashes; a presented token is hashed and compared in constant time.
//!
//! It hashes, parses and compares; it never stores or logs a token itself.

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// The prefix of every stored token hash.
pub const PREFIX: &str = "sha256:";

/// A token's SHA-256, as stored (`sha256:<hex>` parsed).
#[derive(Clone, PartialEq, Eq)]
pub struct TokenHash([u8; 32]);

impl std::fmt::Debug for TokenHash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TokenHash(…)")
    }
}

/// A value that is not `sha256:` followed by 64 hex digits.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error(
    "not a token hash: expected \"sha256:\" and 64 hex digits (make one with `rookery auth hash-token`)"
)]
pub struct NotAHash;

impl TokenHash {
    /// The hash of `token` (its bytes, without a trailing newline the caller trimmed).
    pub fn of(token: &str) -> Self {
        TokenHash(Sha256::digest(token.as_bytes()).into())
    }

    /// Parses `sha256:<64 hex>` (either case).
    pub fn parse(s: &str) -> Result<Self, NotAHash> {
        let hex = s.strip_prefix(PREFIX).ok_or(NotAHash)?;
        if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(NotAHash);
        }
        let mut out = [0u8; 32];
        for (i, byte) in out.iter_mut().enumerate() {
            let pair = hex.get(2 * i..2 * i + 2).ok_or(NotAHash)?;
            *byte = u8::from_str_radix(pair, 16).map_err(|_| NotAHash)?;
        }
        Ok(TokenHash(out))
    }

    /// Constant-time equality.
    pub fn matches(&self, other: &TokenHash) -> bool {
        bool::from(self.0.ct_eq(&other.0))
    }
}

impl std::fmt::Display for TokenHash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(PREFIX)?;
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_print_parse_and_compare() {
        let h = TokenHash::of("s3cret");
        let shown = h.to_string();
        assert_eq!(
            shown,
            "sha256:1ec1c26b50d5d3c58d9583181af8076655fe00756bf7285940ba3670f99fcba0"
        );
        assert_eq!(TokenHash::parse(&shown).unwrap(), h);
        assert_eq!(
            TokenHash::parse(&shown.to_uppercase().replace("SHA256:", "sha256:")).unwrap(),
            h
        );
        assert!(h.matches(&TokenHash::of("s3cret")));
        assert!(!h.matches(&TokenHash::of("s3cret ")));
        for bad in [
            "s3cret",
            "sha256:",
            "sha256:xyz",
            &shown[..70],
            &format!("{shown}0"),
            &shown.replace("sha256:", "sha512:"),
            &format!("{}g", &shown[..70]),
            &format!("{}+f", &shown[..69]),
        ] {
            assert_eq!(TokenHash::parse(bad), Err(NotAHash), "{bad}");
        }
    }
}
