//! Approval of tool calls: the `ApprovalMode` policy, the `Approver` trait library users
//! implement, and the policy approver that applies a mode and asks a human only when needed.
//!
//! Approvers decide; they never run tools and never touch the trace (the session records every
//! decision as `approval_decision`, and a `PolicyApprover`'s mode and each change of it as
//! `session_meta.approval_mode` and `approval_mode_changed`).

pub mod command_policy;
pub mod grants;
pub mod permission_rules;
mod shell_words;

use std::str::FromStr;
use std::sync::Arc;

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use crate::message::Decision;
use crate::tools::Permission;

/// How a session decides tool calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ApprovalMode {
    /// Allows every call.
    AllowAll,
    /// Denies every call.
    DenyAll,
    /// Allows `permission: r` tools, asks for the rest.
    ReadOnly,
    /// Asks the approver for every call.
    AlwaysAsk,
}

impl ApprovalMode {
    /// The mode's name in configs, flags and traces (`allow-all`, `deny-all`, `read-only`,
    /// `always-ask`).
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalMode::AllowAll => "allow-all",
            ApprovalMode::DenyAll => "deny-all",
            ApprovalMode::ReadOnly => "read-only",
            ApprovalMode::AlwaysAsk => "always-ask",
        }
    }
}

/// A name that is none of the four approval modes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown approval mode \"{0}\" (use allow-all, deny-all, read-only or always-ask)")]
pub struct UnknownApprovalMode(pub String);

impl FromStr for ApprovalMode {
    type Err = UnknownApprovalMode;
    /// Case-insensitive (`READ-ONLY` is `read-only`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "allow-all" => Ok(ApprovalMode::AllowAll),
            "deny-all" => Ok(ApprovalMode::DenyAll),
            "read-only" => Ok(ApprovalMode::ReadOnly),
            "always-ask" => Ok(ApprovalMode::AlwaysAsk),
            _ => Err(UnknownApprovalMode(s.to_string())),
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
    /// The call's id.
    pub tool_call_id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments JSON text as the model sent it.
    pub arguments: String,
    /// The tool's permission, `None` for an unknown tool.
    pub permission: Option<Permission>,
    /// Child-session ids (outer → inner) when a subagent asks; empty for the session itself.
    pub origin: Vec<String>,
}

/// An approver's answer with the reason it gave for it (an answer through the HTTP API may
/// give one with a denial; the model is told it in the denied call's output).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The verdict.
    pub decision: Decision,
    /// Why, in the answerer's words; `None` when it gave none.
    pub reason: Option<String>,
}

impl Answer {
    /// An answer without a reason.
    pub fn bare(decision: Decision) -> Self {
        Answer {
            decision,
            reason: None,
        }
    }
}

/// Decides tool calls. Called one call at a time, in call order. A panic or an error inside an
/// approver counts as `deny`.
pub trait Approver: Send + Sync + 'static {
    /// Decides one call. A panic or an error inside counts as `deny`.
    fn approve(&self, request: ApprovalRequest) -> BoxFuture<'static, Decision>;

    /// The mode policy this approver applies, if any: a session records its mode in the trace
    /// and restores it on resume.
    fn policy(&self) -> Option<&PolicyApprover> {
        None
    }

    /// Asks whoever answers for this approver even when its mode would decide alone (a
    /// PreToolUse hook answered `ask`). The default is [`Approver::approve`].
    fn ask(&self, request: ApprovalRequest) -> BoxFuture<'static, Decision> {
        self.approve(request)
    }

    /// Who answers `request` through [`Approver::approve`]: `mode`, `user` or `api` (the
    /// `source` of its `approval_decision`). With `asked`, who answers [`Approver::ask`].
    fn decided_by(&self, request: &ApprovalRequest, asked: bool) -> &'static str {
        let _ = (request, asked);
        match self.policy() {
            Some(p) => p.decided_by(request, asked),
            None => "user",
        }
    }

    /// The approval mode name hooks are told (`permission_mode`).
    fn mode_name(&self) -> &'static str {
        self.policy().map_or("default", |p| p.mode().as_str())
    }

    /// [`Approver::approve`] (with `ask`, [`Approver::ask`]) with the answerer's reason. The
    /// default gives none; an approver whose answerer can give one overrides it.
    fn answer(&self, request: ApprovalRequest, ask: bool) -> BoxFuture<'static, Answer> {
        let decision = if ask {
            self.ask(request)
        } else {
            self.approve(request)
        };
        Box::pin(async move { Answer::bare(decision.await) })
    }

    /// Who answered the call `tool_call_id` just decided, when the answer names someone (a
    /// principal of `rookery serve`): asked once, right after the decision, and forgotten.
    fn answered_by(&self, tool_call_id: &str) -> Option<String> {
        let _ = tool_call_id;
        None
    }
}

/// The library default: every call is denied.
#[derive(Debug, Clone, Copy, Default)]
pub struct DenyAllApprover;

impl Approver for DenyAllApprover {
    fn approve(&self, _request: ApprovalRequest) -> BoxFuture<'static, Decision> {
        Box::pin(async { Decision::Deny })
    }

    fn decided_by(&self, _request: &ApprovalRequest, _asked: bool) -> &'static str {
        "mode"
    }

    fn mode_name(&self) -> &'static str {
        ApprovalMode::DenyAll.as_str()
    }
}

/// Allows everything (benchmarks, trusted scripts).
#[derive(Debug, Clone, Copy, Default)]
pub struct AllowAllApprover;

impl Approver for AllowAllApprover {
    fn approve(&self, _request: ApprovalRequest) -> BoxFuture<'static, Decision> {
        Box::pin(async { Decision::Allow })
    }

    fn decided_by(&self, _request: &ApprovalRequest, _asked: bool) -> &'static str {
        "mode"
    }

    fn mode_name(&self) -> &'static str {
        ApprovalMode::AllowAll.as_str()
    }
}

/// Applies an [`ApprovalMode`] (changeable at run time) and forwards the calls the mode says to
/// ask about to `asker`.
///
/// The mode is part of the session: the session records it (`session_meta.approval_mode`) and
/// every change (`approval_mode_changed`). On resume, a policy made with [`PolicyApprover::new`]
/// keeps its mode (the caller chose it); one made with [`PolicyApprover::inherited`] takes the
/// mode the trace recorded last, `always-ask` when the trace cannot tell.
pub struct PolicyApprover {
    mode: watch::Sender<ApprovalMode>,
    explicit: bool,
    asker: Arc<dyn Approver>,
    grants: Arc<grants::Grants>,
}

impl PolicyApprover {
    /// A policy with a mode chosen by the caller (kept on resume).
    pub fn new(mode: ApprovalMode, asker: Arc<dyn Approver>) -> Self {
        PolicyApprover {
            mode: watch::Sender::new(mode),
            explicit: true,
            asker,
            grants: Arc::default(),
        }
    }

    /// The session's grants (approvals answered `allow_for_session`).
    pub fn grants(&self) -> &Arc<grants::Grants> {
        &self.grants
    }

    /// A policy that takes its mode from the session: `initial` for a new session, the mode
    /// recorded in the trace on resume (`always-ask` when it cannot be determined).
    pub fn inherited(initial: ApprovalMode, asker: Arc<dyn Approver>) -> Self {
        PolicyApprover {
            explicit: false,
            ..Self::new(initial, asker)
        }
    }

    /// Whether the caller chose the mode (it then wins over the trace on resume).
    pub fn is_explicit(&self) -> bool {
        self.explicit
    }

    /// The current mode.
    pub fn mode(&self) -> ApprovalMode {
        *self.mode.borrow()
    }

    /// Takes effect at the next decision; the session records the change in its trace.
    pub fn set_mode(&self, mode: ApprovalMode) {
        self.mode.send_replace(mode);
    }

    /// Every later mode change (the current mode counts as seen).
    pub fn subscribe(&self) -> watch::Receiver<ApprovalMode> {
        self.mode.subscribe()
    }

    /// Whether the mode decides `request` without asking.
    fn decides_alone(&self, request: &ApprovalRequest) -> bool {
        match self.mode() {
            ApprovalMode::AllowAll | ApprovalMode::DenyAll => true,
            ApprovalMode::ReadOnly => request.permission == Some(Permission::Read),
            ApprovalMode::AlwaysAsk => false,
        }
    }

    /// `mode` when the mode decides `request` alone, else who the asker is.
    pub fn decided_by(&self, request: &ApprovalRequest, asked: bool) -> &'static str {
        if !asked && self.decides_alone(request) {
            "mode"
        } else {
            self.asker.decided_by(request, true)
        }
    }
}

impl Approver for PolicyApprover {
    fn policy(&self) -> Option<&PolicyApprover> {
        Some(self)
    }

    fn answered_by(&self, tool_call_id: &str) -> Option<String> {
        self.asker.answered_by(tool_call_id)
    }

    fn ask(&self, request: ApprovalRequest) -> BoxFuture<'static, Decision> {
        self.asker.ask(request)
    }

    fn approve(&self, request: ApprovalRequest) -> BoxFuture<'static, Decision> {
        let answer = self.answer(request, false);
        Box::pin(async move { answer.await.decision })
    }

    fn answer(&self, request: ApprovalRequest, ask: bool) -> BoxFuture<'static, Answer> {
        if ask {
            return self.asker.answer(request, true);
        }
        let ask = match self.mode() {
            ApprovalMode::AllowAll => return Box::pin(async { Answer::bare(Decision::Allow) }),
            ApprovalMode::DenyAll => return Box::pin(async { Answer::bare(Decision::Deny) }),
            ApprovalMode::ReadOnly => request.permission != Some(Permission::Read),
            ApprovalMode::AlwaysAsk => true,
        };
        if ask {
            self.asker.answer(request, false)
        } else {
            Box::pin(async { Answer::bare(Decision::Allow) })
        }
    }
}

/// How a shell call that asks to run outside the session's sandbox (`require_escalated`) is
/// decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EscalationRule {
    /// Allowed without asking (`allow-all`/`deny-all` with `sandbox.allow_escalation: true`).
    Allow,
    /// Denied without asking (`allow-all`/`deny-all` otherwise).
    Deny,
    /// Asked of whoever answers approvals (`always-ask`, `read-only`, an approver without a
    /// mode).
    Ask,
}

/// The rule for an escalated call under approval mode `mode` (`None`: an approver without a
/// mode) and `sandbox.allow_escalation`.
pub fn escalation_rule(mode: Option<ApprovalMode>, allow_escalation: bool) -> EscalationRule {
    match mode {
        Some(ApprovalMode::AllowAll | ApprovalMode::DenyAll) if allow_escalation => {
            EscalationRule::Allow
        }
        Some(ApprovalMode::AllowAll | ApprovalMode::DenyAll) => EscalationRule::Deny,
        Some(ApprovalMode::ReadOnly | ApprovalMode::AlwaysAsk) | None => EscalationRule::Ask,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escalation_is_asked_unless_the_mode_decides_alone() {
        use ApprovalMode::*;
        for mode in [Some(AlwaysAsk), Some(ReadOnly), None] {
            assert_eq!(escalation_rule(mode, false), EscalationRule::Ask);
            assert_eq!(escalation_rule(mode, true), EscalationRule::Ask);
        }
        for mode in [AllowAll, DenyAll] {
            assert_eq!(escalation_rule(Some(mode), false), EscalationRule::Deny);
            assert_eq!(escalation_rule(Some(mode), true), EscalationRule::Allow);
        }
    }

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
    fn decisions_name_who_made_them() {
        let p = PolicyApprover::new(ApprovalMode::ReadOnly, Arc::new(DenyAllApprover));
        assert_eq!(p.decided_by(&req(Some(Permission::Read)), false), "mode");
        assert_eq!(Approver::mode_name(&p), "read-only");
        // The asker answers writes; a hook's `ask` goes past the mode to it.
        struct Human;
        impl Approver for Human {
            fn approve(&self, _r: ApprovalRequest) -> BoxFuture<'static, Decision> {
                Box::pin(async { Decision::Allow })
            }
        }
        let p = PolicyApprover::new(ApprovalMode::AllowAll, Arc::new(Human));
        assert_eq!(p.decided_by(&req(None), false), "mode");
        assert_eq!(p.decided_by(&req(None), true), "user");
        assert_eq!(AllowAllApprover.decided_by(&req(None), true), "mode");
        assert_eq!(AllowAllApprover.mode_name(), "allow-all");
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
        assert_eq!("READ-ONLY".parse(), Ok(ApprovalMode::ReadOnly));
        assert_eq!("Always-Ask".parse(), Ok(ApprovalMode::AlwaysAsk));
    }

    #[tokio::test]
    async fn mode_changes_are_observable_and_inherited_is_not_explicit() {
        let p = PolicyApprover::inherited(ApprovalMode::AllowAll, Arc::new(DenyAllApprover));
        assert!(!p.is_explicit());
        assert!(
            PolicyApprover::new(ApprovalMode::AllowAll, Arc::new(DenyAllApprover)).is_explicit()
        );
        let mut rx = p.subscribe();
        p.set_mode(ApprovalMode::AlwaysAsk);
        rx.changed().await.unwrap();
        assert_eq!(*rx.borrow_and_update(), ApprovalMode::AlwaysAsk);
        assert_eq!(p.mode(), ApprovalMode::AlwaysAsk);
        assert!(p.policy().is_some());
    }
}
