//! Grants for the session: allow rules added at run time by an approval answered
//! `allow_for_session`. It derives a grant's rule from the call answered ([`rule_for`]), keeps
//! the session's grants (add, list, revoke, restore from the trace) and matches a call against
//! them with the permission rules' own matcher (a grant is an allow rule).
//!
//! It never records anything: the session writes `approval_grant` and `approval_grant_revoked`.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::json;

use super::permission_rules::{PermissionRules, RuleCall, RuleDecision};

pub use crate::message::Grant;

/// Told the id of each revoked grant (the session records it).
pub type OnRevoke = Box<dyn Fn(&str) + Send + Sync>;

/// The grants of one session, shared by its gate and whoever lists or revokes them.
#[derive(Default)]
pub struct Grants {
    list: Mutex<Vec<Grant>>,
    next: AtomicU64,
    on_revoke: Mutex<Option<OnRevoke>>,
}

/// The grant rule for a call answered `allow_for_session`: `Bash(<first two words>:*)` for a
/// shell command of two or more words, `Bash(<word>)` for one word, the tool's name for other
/// tools; `None` for a compound or empty shell command (no grant).
pub fn rule_for(call: &RuleCall<'_>) -> Option<String> {
    match super::permission_rules::shell_command(call) {
        None => Some(call.name.to_string()),
        Some(command) => {
            if super::permission_rules::is_compound(&command) {
                return None;
            }
            let words: Vec<&str> = command.split_whitespace().collect();
            match words.as_slice() {
                [] => None,
                [one] => Some(format!("Bash({one})")),
                [a, b, ..] => Some(format!("Bash({a} {b}:*)")),
            }
        }
    }
}

impl Grants {
    /// No grants.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a grant for `rule`; returns it (its id is new).
    pub fn add(&self, rule: String, created_at: String) -> Grant {
        let n = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        let grant = Grant {
            grant_id: format!("grant-{n}"),
            rule,
            created_at,
        };
        if let Ok(mut list) = self.list.lock() {
            list.push(grant.clone());
        }
        grant
    }

    /// Puts back a grant read from the trace (later ids do not collide with it).
    pub fn restore(&self, grant: Grant) {
        if let Some(n) = grant
            .grant_id
            .strip_prefix("grant-")
            .and_then(|n| n.parse::<u64>().ok())
        {
            self.next.fetch_max(n, Ordering::Relaxed);
        }
        if let Ok(mut list) = self.list.lock()
            && !list.iter().any(|g| g.grant_id == grant.grant_id)
        {
            list.push(grant);
        }
    }

    /// The grants, oldest first.
    pub fn list(&self) -> Vec<Grant> {
        self.list.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// Removes a grant; false when there is none with this id.
    pub fn revoke(&self, grant_id: &str) -> bool {
        let Ok(mut list) = self.list.lock() else {
            return false;
        };
        let before = list.len();
        list.retain(|g| g.grant_id != grant_id);
        let revoked = list.len() != before;
        drop(list);
        if revoked
            && let Ok(f) = self.on_revoke.lock()
            && let Some(f) = f.as_ref()
        {
            f(grant_id);
        }
        revoked
    }

    /// Sets who is told of each revocation (the running session; replaces the last one).
    pub fn on_revoke(&self, f: OnRevoke) {
        if let Ok(mut slot) = self.on_revoke.lock() {
            *slot = Some(f);
        }
    }

    /// The rule of the first grant allowing `call`, if any (a compound shell command never
    /// matches).
    pub fn matching(&self, call: &RuleCall<'_>) -> Option<String> {
        let list = self.list();
        if list.is_empty() {
            return None;
        }
        let rules: Vec<&str> = list.iter().map(|g| g.rule.as_str()).collect();
        let rules = PermissionRules::from_value(&json!({ "allow": rules })).ok()?;
        match rules.decide(call) {
            Some((RuleDecision::Allow, rule)) => Some(rule),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::tools::definition::ToolDefinitionConfig;
    use crate::tools::profile::penguin::default_definition;

    fn shell_def() -> ToolDefinitionConfig {
        default_definition("exec_command").unwrap()
    }

    fn call<'a>(
        name: &'a str,
        def: Option<&'a ToolDefinitionConfig>,
        args: &'a str,
    ) -> RuleCall<'a> {
        RuleCall {
            name,
            definition: def,
            arguments: args,
            workspace: Path::new("/tmp"),
        }
    }

    #[test]
    fn rules_are_derived_from_the_call() {
        let d = shell_def();
        let sh = |cmd: &str| {
            let args = json!({ "cmd": cmd }).to_string();
            rule_for(&call("exec_command", Some(&d), &args))
        };
        assert_eq!(sh("git status"), Some("Bash(git status:*)".into()));
        assert_eq!(
            sh("  git   push origin main"),
            Some("Bash(git push:*)".into())
        );
        assert_eq!(sh("ls"), Some("Bash(ls)".into()));
        for compound in [
            "git status && rm x",
            "git status; rm x",
            "git log | head",
            "echo $(rm x)",
            "echo `rm x`",
            "git status\nrm x",
            "",
        ] {
            assert_eq!(sh(compound), None, "{compound:?}");
        }
        assert_eq!(
            rule_for(&call("read_file", None, "{\"path\":\"a\"}")),
            Some("read_file".into())
        );
    }

    #[test]
    fn grants_match_list_revoke_and_restore() {
        let d = shell_def();
        let g = Grants::new();
        let a = g.add("Bash(git status:*)".into(), "t".into());
        assert_eq!(a.grant_id, "grant-1");
        let args = |cmd: &str| json!({ "cmd": cmd }).to_string();
        let short = args("git status --short");
        assert_eq!(
            g.matching(&call("exec_command", Some(&d), &short)),
            Some("Bash(git status:*)".into())
        );
        let push = args("git push");
        assert_eq!(g.matching(&call("exec_command", Some(&d), &push)), None);
        let compound = args("git status && rm x");
        assert_eq!(g.matching(&call("exec_command", Some(&d), &compound)), None);
        assert!(g.revoke("grant-1"));
        assert!(!g.revoke("grant-1"));
        assert_eq!(g.matching(&call("exec_command", Some(&d), &short)), None);
        g.restore(Grant {
            grant_id: "grant-7".into(),
            rule: "read_file".into(),
            created_at: "t".into(),
        });
        assert_eq!(g.add("x".into(), "t".into()).grant_id, "grant-8");
        assert_eq!(g.list().len(), 2);
    }
}
