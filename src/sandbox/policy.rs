//! The sandbox setting of a session as plain data (codex's mode names), and how strict one
//! setting is compared with another. It knows no paths of any session (`layout.rs` resolves them).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// How much of the file system a session's processes may write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxMode {
    /// No confinement: processes run with the host user's rights.
    #[default]
    Off,
    /// Reads anywhere but `deny_read`; writes only to the session's private temp dir.
    ReadOnly,
    /// As `read-only`, plus writes inside the workspace and the writable roots.
    WorkspaceWrite,
}

impl SandboxMode {
    /// The config and wire spelling (`off`, `read-only`, `workspace-write`).
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxMode::Off => "off",
            SandboxMode::ReadOnly => "read-only",
            SandboxMode::WorkspaceWrite => "workspace-write",
        }
    }

    /// 0 for the strictest mode; a higher rank allows more.
    fn looseness(self) -> u8 {
        match self {
            SandboxMode::ReadOnly => 0,
            SandboxMode::WorkspaceWrite => 1,
            SandboxMode::Off => 2,
        }
    }
}

impl std::fmt::Display for SandboxMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for SandboxMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "off" => Ok(SandboxMode::Off),
            "read-only" => Ok(SandboxMode::ReadOnly),
            "workspace-write" => Ok(SandboxMode::WorkspaceWrite),
            other => Err(format!(
                "unknown sandbox mode `{other}` (expected off, read-only or workspace-write)"
            )),
        }
    }
}

/// Whether a sandboxed session's processes may use the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NetworkAccess {
    /// No IP sockets, no connection to the host's unix sockets.
    #[default]
    Off,
    /// IP and unix sockets work as without a sandbox.
    On,
}

impl NetworkAccess {
    /// `off` or `on`.
    pub fn as_str(self) -> &'static str {
        match self {
            NetworkAccess::Off => "off",
            NetworkAccess::On => "on",
        }
    }
}

impl std::str::FromStr for NetworkAccess {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "off" => Ok(NetworkAccess::Off),
            "on" => Ok(NetworkAccess::On),
            other => Err(format!(
                "unknown sandbox network `{other}` (expected off or on)"
            )),
        }
    }
}

/// A session's sandbox setting: `sandbox:` in the agent config, `--sandbox` on the CLI,
/// `"sandbox"` in `POST /v1/sessions`, and `session_meta.sandbox` in the trace.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SandboxPolicy {
    /// What the session's processes may write.
    pub mode: SandboxMode,
    /// Whether they may use the network (ignored when `mode` is `off`).
    pub network: NetworkAccess,
    /// Extra writable directories in `workspace-write` (relative ones resolve against the
    /// workspace).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub writable_roots: Vec<PathBuf>,
    /// Paths never readable, on top of the built-in list (the rookery home, `~/.ssh`, …).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub deny_read: Vec<PathBuf>,
    /// Whether a shell call's `require_escalated` may be granted without a human asked
    /// (under `allow-all` / `deny-all` approval).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub allow_escalation: bool,
}

impl SandboxPolicy {
    /// True when the policy confines nothing.
    pub fn is_off(&self) -> bool {
        self.mode == SandboxMode::Off
    }

    /// True when `self` allows something `than` does not: a looser mode, network where `than`
    /// has none, a writable root `than` lacks, or fewer `deny_read` entries. Used to refuse a
    /// resume or an API request that would widen a session's sandbox.
    pub fn is_looser_than(&self, than: &SandboxPolicy) -> bool {
        if self.mode.looseness() != than.mode.looseness() {
            return self.mode.looseness() > than.mode.looseness();
        }
        if self.mode == SandboxMode::Off {
            return false;
        }
        (self.network == NetworkAccess::On && than.network == NetworkAccess::Off)
            || (self.mode == SandboxMode::WorkspaceWrite
                && self
                    .writable_roots
                    .iter()
                    .any(|r| !than.writable_roots.contains(r)))
            || than.deny_read.iter().any(|d| !self.deny_read.contains(d))
            || (self.allow_escalation && !than.allow_escalation)
    }
}

/// What a caller asks of one session's sandbox (`--sandbox`, `--sandbox-network`, the API's
/// `"sandbox": {"mode", "network"}`): each given part replaces that part of a base policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SandboxRequest {
    /// The mode asked for (`None`: the server's or the recorded one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<SandboxMode>,
    /// The network asked for (`None`: the server's or the recorded one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkAccess>,
}

impl SandboxRequest {
    /// True when nothing is asked.
    pub fn is_empty(&self) -> bool {
        self.mode.is_none() && self.network.is_none()
    }

    /// `base` with the asked parts replaced.
    pub fn apply(&self, base: &SandboxPolicy) -> SandboxPolicy {
        SandboxPolicy {
            mode: self.mode.unwrap_or(base.mode),
            network: self.network.unwrap_or(base.network),
            ..base.clone()
        }
    }
}

impl SandboxPolicy {
    /// `workspace-write, network off` (or `off`), as errors and notes name a policy.
    pub fn describe(&self) -> String {
        if self.is_off() {
            return "off".to_string();
        }
        format!("{}, network {}", self.mode, self.network.as_str())
    }

    /// `asked`, unless it is looser than `allowed`: then `NotAllowed` naming both.
    pub fn within(
        asked: SandboxPolicy,
        allowed: &SandboxPolicy,
    ) -> Result<SandboxPolicy, super::SandboxError> {
        if asked.is_looser_than(allowed) {
            return Err(super::SandboxError::NotAllowed {
                requested: asked.describe(),
                allowed: allowed.describe(),
            });
        }
        Ok(asked)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(mode: SandboxMode, network: NetworkAccess) -> SandboxPolicy {
        SandboxPolicy {
            mode,
            network,
            ..SandboxPolicy::default()
        }
    }

    #[test]
    fn modes_order_from_strict_to_loose() {
        let ro = policy(SandboxMode::ReadOnly, NetworkAccess::Off);
        let ww = policy(SandboxMode::WorkspaceWrite, NetworkAccess::Off);
        let off = policy(SandboxMode::Off, NetworkAccess::Off);
        assert!(ww.is_looser_than(&ro));
        assert!(off.is_looser_than(&ww));
        assert!(!ro.is_looser_than(&ww));
        assert!(!ww.is_looser_than(&ww));
    }

    #[test]
    fn network_roots_and_deny_lists_count_as_looser() {
        let base = policy(SandboxMode::WorkspaceWrite, NetworkAccess::Off);
        let net = policy(SandboxMode::WorkspaceWrite, NetworkAccess::On);
        assert!(net.is_looser_than(&base));
        let mut root = base.clone();
        root.writable_roots.push("/srv".into());
        assert!(root.is_looser_than(&base));
        let mut denied = base.clone();
        denied.deny_read.push("/secret".into());
        assert!(base.is_looser_than(&denied));
        assert!(!denied.is_looser_than(&base));
    }

    #[test]
    fn a_request_replaces_only_what_it_names_and_stays_within() {
        let base = policy(SandboxMode::WorkspaceWrite, NetworkAccess::Off);
        let r: SandboxRequest = serde_json::from_str(r#"{"network":"on"}"#).unwrap();
        let asked = r.apply(&base);
        assert_eq!(
            asked,
            policy(SandboxMode::WorkspaceWrite, NetworkAccess::On)
        );
        let e = SandboxPolicy::within(asked, &base).unwrap_err().to_string();
        assert_eq!(
            e,
            "sandbox `workspace-write, network on` is looser than allowed (`workspace-write, network off`)"
        );
        let ro = SandboxRequest {
            mode: Some(SandboxMode::ReadOnly),
            network: None,
        };
        assert_eq!(
            SandboxPolicy::within(ro.apply(&base), &base).unwrap(),
            policy(SandboxMode::ReadOnly, NetworkAccess::Off)
        );
        assert!(SandboxRequest::default().is_empty());
        assert!(serde_json::from_str::<SandboxRequest>(r#"{"mod":"off"}"#).is_err());
    }

    #[test]
    fn the_wire_shape_uses_codex_names() {
        let p: SandboxPolicy =
            serde_json::from_str(r#"{"mode":"workspace-write","network":"on"}"#).unwrap();
        assert_eq!(p, policy(SandboxMode::WorkspaceWrite, NetworkAccess::On));
        assert_eq!(
            serde_json::to_string(&p).unwrap(),
            r#"{"mode":"workspace-write","network":"on"}"#
        );
        assert!(serde_json::from_str::<SandboxPolicy>(r#"{"mode":"loose"}"#).is_err());
        assert!("read-only".parse::<SandboxMode>().is_ok());
        assert!("ro".parse::<SandboxMode>().is_err());
    }
}
