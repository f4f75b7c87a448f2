//! What the command line gives the server ([`ServerConfig`]): the home, the model and config of
//! new sessions, authentication, the guard's rules, the caps, hibernation, the sandbox and the
//! store.
//!
//! It owns the shape of that configuration; it must not act on it (`state.rs` does).

use std::path::PathBuf;
use std::sync::Arc;

use super::hibernate;
use crate::config::AgentConfig;
use crate::message::launch::Launch;
use crate::model::Model;
use crate::server::guard_config::GuardConfig;
use crate::server::session_config::ConfigDir;

/// What the command line gives the server.
pub struct ServerConfig {
    /// The Rookery home (traces).
    pub home: PathBuf,
    /// The model of new sessions (`None`: the server only resumes recorded sessions, each with
    /// the model its trace records).
    pub model: Option<Arc<dyn Model>>,
    /// What the sessions' `session_meta` records of the server's model and config (for a
    /// later reopen with no flags).
    pub launch: Launch,
    /// The agent config of sessions that name none.
    pub config: AgentConfig,
    /// How requests are authenticated (`auth.rs`): open, one token, or `--auth FILE`.
    pub auth: crate::server::credentials::Authenticator,
    /// Host, Origin and body rules of the API.
    pub guard: GuardConfig,
    /// Where named session configs live (`--config-dir`).
    pub config_dir: Option<ConfigDir>,
    /// Sessions served at once, at most (`--max-sessions`).
    pub max_sessions: usize,
    /// `--hooks FILE`: run for every served session, besides its config's own.
    pub hooks: Arc<crate::hooks::HooksConfig>,
    /// `--settings FILE`'s permission rules: for every served session, besides its config's.
    pub permissions: Arc<crate::approval::permission_rules::PermissionRules>,
    /// Hibernation (`--idle-hibernate`, `--max-resident`; `hibernate.rs`).
    pub hibernation: hibernate::HibernationConfig,
    /// Bytes of each session's SSE replay ring (`--sse-ring-bytes`; `sse.rs`).
    pub ring_bytes: usize,
    /// `--sandbox` / `--sandbox-network` over the config's `sandbox:`: the sandbox of sessions
    /// that ask for none, and the loosest one a request (or a resumed session) may have.
    pub sandbox: crate::sandbox::SandboxPolicy,
    /// How long a stream token is accepted (`--stream-token-ttl-ms`; `stream_token.rs`).
    pub stream_token_ttl: std::time::Duration,
    /// The `postgres` store the sessions live in (`--store`), the host's; `None`: the files
    /// under `home`.
    #[cfg(feature = "postgres")]
    pub store: Option<crate::store::PgStore>,
}

impl ServerConfig {
    /// The one bearer token of a server started without `--auth`, if it has one.
    pub fn token(&self) -> Option<&str> {
        match &self.auth {
            crate::server::credentials::Authenticator::Token(t) => Some(t),
            _ => None,
        }
    }

    /// The `postgres` store the sessions live in, if the server uses one.
    #[cfg(feature = "postgres")]
    pub fn store(&self) -> Option<&crate::store::PgStore> {
        self.store.as_ref()
    }

    /// The principals of `--auth FILE`, if the server has them.
    pub fn principals(&self) -> Option<&crate::server::principal::Principals> {
        match &self.auth {
            crate::server::credentials::Authenticator::Principals(p, _) => Some(p),
            _ => None,
        }
    }
}
