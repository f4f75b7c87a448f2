//! Which trace store a process uses: `files` (the JSONL files under the Rookery home, the
//! default) or `postgres` (a `postgres://…` URL), from `--store` or `$ROOKERY_STORE`.
//!
//! It owns the parsing of the choice only; it must not connect to anything (the `postgres`
//! backend is `src/store/`).

/// The environment variable `--store` defaults to.
pub const STORE_ENV: &str = "ROOKERY_STORE";

/// A trace store, as chosen on the command line or in the environment.
#[derive(Clone, PartialEq, Eq)]
pub enum StoreChoice {
    /// The JSONL files under the Rookery home.
    Files,
    /// A Postgres database (its connection URL, which may hold a password).
    Postgres(String),
}

impl std::fmt::Debug for StoreChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreChoice::Files => f.write_str("Files"),
            // Never the URL: it may carry a password.
            StoreChoice::Postgres(_) => f.write_str("Postgres(..)"),
        }
    }
}

/// A `--store` value that names no store.
#[derive(Debug, thiserror::Error)]
#[error(
    "--store: unknown trace store '{0}': use 'files' or a postgres://USER@HOST:PORT/DB URL (also from ${STORE_ENV})"
)]
pub struct StoreChoiceError(pub String);

impl StoreChoice {
    /// The store `flag` names, else the one `$ROOKERY_STORE` names, else `files`.
    pub fn resolve(flag: Option<&str>) -> Result<StoreChoice, StoreChoiceError> {
        let env = std::env::var(STORE_ENV).ok();
        match flag.or(env.as_deref()).map(str::trim) {
            None | Some("") => Ok(StoreChoice::Files),
            Some(value) => StoreChoice::parse(value),
        }
    }

    /// `files`, or a `postgres://` / `postgresql://` URL.
    pub fn parse(value: &str) -> Result<StoreChoice, StoreChoiceError> {
        if value == "files" {
            return Ok(StoreChoice::Files);
        }
        if value.starts_with("postgres://") || value.starts_with("postgresql://") {
            return Ok(StoreChoice::Postgres(value.to_string()));
        }
        // The value is echoed only when it cannot be a URL with a password in it.
        let shown = if value.contains('@') { "…" } else { value };
        Err(StoreChoiceError(shown.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_urls_and_nonsense() {
        assert_eq!(StoreChoice::parse("files").unwrap(), StoreChoice::Files);
        assert_eq!(
            StoreChoice::parse("postgres://u@127.0.0.1:5/db").unwrap(),
            StoreChoice::Postgres("postgres://u@127.0.0.1:5/db".into())
        );
        let e = StoreChoice::parse("mysql://u:secret@h/db").unwrap_err();
        assert!(!e.to_string().contains("secret"), "{e}");
        assert!(StoreChoice::parse("file").is_err());
    }
}
