//! Approval of tool calls: the `ApprovalMode` policy, the `Approver` trait library users
//! implement, and the policy approver that applies a mode and asks a human only when needed.
//!
//! Approvers decide; they never run tools and never touch the trace (the session records every
//! decision as `approval_decision`).

use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};

use crate::message::Decision;
use crate::tools::Permission;

/// How a session decides tool calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ApprovalMode {
    AllowAll,
    DenyAll,
    /// Allows `permission: r` tools, asks for the rest.
    ReadOnly,
    AlwaysAsk,
}

impl ApprovalMode {
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalMode::AllowAll => "allow-all",
            ApprovalMode::DenyAll => "deny-all",
            ApprovalMode::ReadOnly => "read-only",
            ApprovalMode::AlwaysAsk => "always-ask",
        }
    }

    fn to_u8(self) -> u8 {
        match self {
            ApprovalMode::AllowAll => 0,
            ApprovalMode::DenyAll => 1,
            ApprovalMode::ReadOnly => 2,
            ApprovalMode::AlwaysAsk => 3,
        }
    }

    fn from_u8(v: u8) -> Self {
        match v {
            0 => ApprovalMode::AllowAll,
            1 => ApprovalMode::DenyAll,
            2 => ApprovalMode::ReadOnly,
            _ => ApprovalMode::AlwaysAsk,
        }
    }
}

impl FromStr for ApprovalMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "allow-all" => Ok(ApprovalMode::AllowAll),
            "deny-all" => Ok(ApprovalMode::DenyAll),
            "read-only" => Ok(ApprovalMode::ReadOnly),
            "always-ask" => Ok(ApprovalMode::AlwaysAsk),
            other => Err(format!(
                "unknown approval mode \"{other}\" (use allow-all, deny-all, read-only or always-ask)"
            )),
        }
    }
}

impl std::fmt::Display for ApprovalMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One tool call waiting for a decision.
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalRequest {
    pub tool_call_id: String,
    pub name: String,
    /// The arguments JSON text as the model sent it.
    pub arguments: String,
    /// The tool's permission, `None` for an unknown tool.
    pub permission: Option<Permission>,
    /// Child-session ids (outer → inner) when a subagent asks; empty for the session itself.
    pub origin: Vec<String>,
}

/// Decides tool calls. Called one call at a time, in call order. A panic or an error inside an
/// approver counts as `deny`.
pub trait Approver: Send + Sync + 'static {
    fn approve(&self, request: ApprovalRequest) -> BoxFuture<'static, Decision>;
}

/// The library default: every call is denied.
#[derive(Debug, Clone, Copy, Default)]
pub struct DenyAllApprover;

impl Approver for DenyAllApprover {
    fn approve(&self, _request: ApprovalRequest) -> BoxFuture<'static, Decision> {
        Box::pin(async { Decision::Deny })
    }
}

/// Allows everything (benchmarks, trusted scripts).
#[derive(Debug, Clone, Copy, Default)]
pub struct AllowAllApprover;

impl Approver for AllowAllApprover {
    fn approve(&self, _request: ApprovalRequest) -> BoxFuture<'static, Decision> {
        Box::pin(async { Decision::Allow })
    }
}

/// Applies an [`ApprovalMode`] (changeable at run time) and forwards the calls the mode says to
/// ask about to `asker`.
pub struct PolicyApprover {
    mode: AtomicU8,
    asker: Arc<dyn Approver>,
}

impl PolicyApprover {
    pub fn new(mode: ApprovalMode, asker: Arc<dyn Approver>) -> Self {
        PolicyApprover {
            mode: AtomicU8::new(mode.to_u8()),
            asker,
        }
    }

    pub fn mode(&self) -> ApprovalMode {
        ApprovalMode::from_u8(self.mode.load(Ordering::Relaxed))
    }

    /// Takes effect at the next decision.
    pub fn set_mode(&self, mode: ApprovalMode) {
        self.mode.store(mode.to_u8(), Ordering::Relaxed);
    }
}

impl Approver for PolicyApprover {
    fn approve(&self, request: ApprovalRequest) -> BoxFuture<'static, Decision> {
        let ask = match self.mode() {
            ApprovalMode::AllowAll => return Box::pin(async { Decision::Allow }),
            ApprovalMode::DenyAll => return Box::pin(async { Decision::Deny }),
            ApprovalMode::ReadOnly => request.permission != Some(Permission::Read),
            ApprovalMode::AlwaysAsk => true,
        };
        if ask {
            self.asker.approve(request)
        } else {
            Box::pin(async { Decision::Allow })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(permission: Option<Permission>) -> ApprovalRequest {
        ApprovalRequest {
            tool_call_id: "call_0".into(),
            name: "read_file".into(),
            arguments: "{}".into(),
            permission,
            origin: vec![],
        }
    }

    #[tokio::test]
    async fn read_only_allows_reads_and_asks_for_writes() {
        let p = PolicyApprover::new(ApprovalMode::ReadOnly, Arc::new(DenyAllApprover));
        assert_eq!(
            p.approve(req(Some(Permission::Read))).await,
            Decision::Allow
        );
        assert_eq!(
            p.approve(req(Some(Permission::ReadWrite))).await,
            Decision::Deny
        );
        assert_eq!(p.approve(req(None)).await, Decision::Deny);
        p.set_mode(ApprovalMode::AllowAll);
        assert_eq!(p.approve(req(None)).await, Decision::Allow);
    }

    #[test]
    fn modes_parse_and_print() {
        for m in ["allow-all", "deny-all", "read-only", "always-ask"] {
            assert_eq!(
                m.parse::<ApprovalMode>().map(|x| x.to_string()),
                Ok(m.to_string())
            );
        }
        assert!("yes".parse::<ApprovalMode>().is_err());
    }
}
