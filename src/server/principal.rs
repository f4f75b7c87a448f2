//! Who a request acts as: a [`Principal`] (a name, a role, its workspace roots and quotas),
//! and the [`Principals`] directory that `rookery serve --auth FILE` loads (`auth_file.rs`).
//!
//! A `user` sees and acts on its own sessions only; an `admin` on every session. Without
//! `--auth` the server has one principal, the admin named `admin`. This file is plain data and
//! lookups; it never reads a request (`auth.rs` does) and never touches a session.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::token_hash::TokenHash;

/// The name of the one principal of a server started without `--auth`.
pub const DEFAULT_ADMIN: &str = "admin";

/// The metrics label of a principal not listed in the auth file (a JWT subject).
pub const UNLISTED_LABEL: &str = "other";

/// What a principal may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Its own sessions only.
    #[default]
    User,
    /// Every session, and the list says each one's owner.
    Admin,
}

impl Role {
    /// `user` or `admin`.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Admin => "admin",
        }
    }
}

/// Per-principal limits (`None`: no limit of that kind).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Quotas {
    /// Sessions not deleted (hibernated ones included).
    pub max_sessions: Option<usize>,
    /// Sessions running a task at once.
    pub max_running_tasks: Option<usize>,
    /// Resident sessions; beyond it the principal's least recently used idle one hibernates.
    pub max_resident: Option<usize>,
}

/// One authenticated caller.
#[derive(Debug)]
pub struct Principal {
    /// Its name: recorded as `session_meta.owner`, `decided_by` and `by`.
    pub name: String,
    /// What it may see.
    pub role: Role,
    /// Where its sessions' workspaces may be (canonical paths); empty: anywhere.
    pub workspace_roots: Vec<PathBuf>,
    /// Its limits.
    pub quotas: Quotas,
    /// Its `principal` label in `/metrics`: its name when the auth file lists it, else
    /// [`UNLISTED_LABEL`]; never a value of the request.
    pub label: String,
}

impl Principal {
    /// The admin of a server started without `--auth`: no roots, no limits.
    pub fn default_admin() -> Arc<Self> {
        Arc::new(Principal {
            name: DEFAULT_ADMIN.to_string(),
            role: Role::Admin,
            workspace_roots: Vec::new(),
            quotas: Quotas::default(),
            label: DEFAULT_ADMIN.to_string(),
        })
    }

    /// Whether it sees every session.
    pub fn is_admin(&self) -> bool {
        self.role == Role::Admin
    }

    /// Whether it may see and act on a session recorded as owned by `owner` (a session that
    /// records no owner is the host's: only an admin's).
    pub fn may_access(&self, owner: Option<&str>) -> bool {
        self.is_admin() || owner == Some(self.name.as_str())
    }

    /// Whether `workspace` (canonical) is inside its roots (always, when it has none).
    pub fn allows_workspace(&self, workspace: &Path) -> bool {
        self.workspace_roots.is_empty()
            || self
                .workspace_roots
                .iter()
                .any(|root| workspace.starts_with(root))
    }
}

/// The principals of `--auth FILE` and the defaults of subjects it does not list.
#[derive(Debug, Default)]
pub struct Principals {
    /// The listed principals.
    pub listed: Vec<Arc<Principal>>,
    /// Each static token's hash and whose it is.
    pub tokens: Vec<(TokenHash, Arc<Principal>)>,
    /// The top-level roots (unlisted subjects get them).
    pub default_roots: Vec<PathBuf>,
    /// The top-level quotas (unlisted subjects get them; listed ones where they set none).
    pub default_quotas: Quotas,
}

impl Principals {
    /// The principal whose static token is `token`: every stored hash is compared, each in
    /// constant time, whether one matched already or not.
    pub fn by_token(&self, token: &str) -> Option<Arc<Principal>> {
        let presented = TokenHash::of(token);
        let mut found = None;
        for (hash, principal) in &self.tokens {
            if hash.matches(&presented) && found.is_none() {
                found = Some(principal.clone());
            }
        }
        found
    }

    /// The listed principal named `name`.
    pub fn by_name(&self, name: &str) -> Option<Arc<Principal>> {
        self.listed.iter().find(|p| p.name == name).cloned()
    }

    /// A principal for subject `name` authenticated elsewhere (a JWT): the listed one of that
    /// name, else one with the top-level defaults, the given role and the label
    /// [`UNLISTED_LABEL`].
    pub fn for_subject(&self, name: &str, role: Role) -> Arc<Principal> {
        self.by_name(name).unwrap_or_else(|| {
            Arc::new(Principal {
                name: name.to_string(),
                role,
                workspace_roots: self.default_roots.clone(),
                quotas: self.default_quotas,
                label: UNLISTED_LABEL.to_string(),
            })
        })
    }

    /// Every listed principal's roots but `name`'s (what a session of `name` must not read).
    pub fn roots_of_others(&self, name: &str) -> Vec<PathBuf> {
        let mut out = Vec::new();
        for p in self.listed.iter().filter(|p| p.name != name) {
            for root in &p.workspace_roots {
                if !out.contains(root) {
                    out.push(root.clone());
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(name: &str, roots: &[&str]) -> Arc<Principal> {
        Arc::new(Principal {
            name: name.into(),
            role: Role::User,
            workspace_roots: roots.iter().map(PathBuf::from).collect(),
            quotas: Quotas::default(),
            label: name.into(),
        })
    }

    #[test]
    fn users_see_their_own_sessions_and_admins_all() {
        let alice = user("alice", &["/w/alice"]);
        assert!(alice.may_access(Some("alice")));
        assert!(!alice.may_access(Some("bob")));
        assert!(!alice.may_access(None));
        let admin = Principal::default_admin();
        assert!(admin.may_access(Some("bob")) && admin.may_access(None));
        assert!(alice.allows_workspace(Path::new("/w/alice/x")));
        assert!(!alice.allows_workspace(Path::new("/w/alice2")));
        assert!(admin.allows_workspace(Path::new("/anywhere")));
    }

    #[test]
    fn tokens_and_subjects_find_their_principal() {
        let alice = user("alice", &["/w/alice"]);
        let bob = user("bob", &["/w/bob", "/w/shared"]);
        let dir = Principals {
            listed: vec![alice.clone(), bob.clone()],
            tokens: vec![
                (TokenHash::of("a-token"), alice),
                (TokenHash::of("b-token"), bob),
            ],
            default_roots: vec![PathBuf::from("/w/others")],
            default_quotas: Quotas {
                max_sessions: Some(2),
                ..Quotas::default()
            },
        };
        assert_eq!(dir.by_token("a-token").unwrap().name, "alice");
        assert_eq!(dir.by_token("b-token").unwrap().name, "bob");
        assert!(dir.by_token("c-token").is_none());
        assert!(dir.by_token("").is_none());
        assert_eq!(dir.for_subject("bob", Role::Admin).role, Role::User);
        let carol = dir.for_subject("carol", Role::User);
        assert_eq!(
            (carol.label.as_str(), carol.quotas.max_sessions),
            ("other", Some(2))
        );
        assert_eq!(carol.workspace_roots, vec![PathBuf::from("/w/others")]);
        assert_eq!(
            dir.roots_of_others("alice"),
            vec![PathBuf::from("/w/bob"), PathBuf::from("/w/shared")]
        );
    }
}
