//! What a `session_meta` records so that a session can be reopened without repeating its
//! flags: the model's endpoint details, the *name* of the key variable (never the key), the
//! tool profile, the scripted model's script and position, the config file, and on a record
//! written by a reopen, the flags that overrode the recorded values; and the session's sandbox.
//!
//! It owns only the wire shape; it must not read files or environment variables.

use serde::{Deserialize, Serialize};

/// Reopen details, flattened into `session_meta` (every field optional on the wire).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Launch {
    /// The provider's base URL, when one was configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// The environment variable the API key was read from (its name only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    /// The tool profile of the session (`penguin` | `openvaala`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_profile: Option<String>,
    /// The scripted model's script, as an absolute path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub script: Option<String>,
    /// How many scripted turns the session had consumed when this record was written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub script_position: Option<u64>,
    /// The agent config file, as an absolute path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<String>,
    /// Set on a `session_meta` appended by a reopen: the flags given on resume (e.g.
    /// `["--model"]`) whose values replace the recorded ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reopened_with: Option<Vec<String>>,
    /// `session_meta.sandbox`: the session's sandbox (absent: `off`). A resume restores it and
    /// never loosens it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<crate::sandbox::SandboxPolicy>,
}

impl Launch {
    /// The sandbox the session was recorded with (`off` when none was).
    pub fn sandbox_policy(&self) -> crate::sandbox::SandboxPolicy {
        self.sandbox.clone().unwrap_or_default()
    }
}
