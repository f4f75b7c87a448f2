//! `SessionScope`: what a session's tool calls share across calls and only within that session
//! (never a global): the `AGENTS.md` files the openvaala read_file already brought, and the
//! session's sandbox, which the file tools obey (`sandbox_guard.rs`).
//! One per session, cloned into every call's context; subagents get their own.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// State shared by the tool calls of one session. Cheap to clone (one `Arc`).
#[derive(Debug, Clone, Default)]
pub struct SessionScope {
    instructions_seen: Arc<Mutex<HashSet<PathBuf>>>,
    sandbox: Option<Arc<crate::sandbox::SandboxLayout>>,
}

impl SessionScope {
    /// A fresh scope (a new session).
    pub fn new() -> Self {
        Self::default()
    }

    /// A fresh scope of a session whose sandbox has the layout `sandbox` (`None`: unsandboxed).
    pub fn with_sandbox(sandbox: Option<Arc<crate::sandbox::SandboxLayout>>) -> Self {
        SessionScope {
            sandbox,
            ..Self::default()
        }
    }

    /// The layout the session's file tools are held to, when it is sandboxed.
    pub fn sandbox(&self) -> Option<&crate::sandbox::SandboxLayout> {
        self.sandbox.as_deref()
    }

    /// Marks the instructions file `path` as brought; true when the session had not seen it.
    pub fn first_sight(&self, path: &Path) -> bool {
        match self.instructions_seen.lock() {
            Ok(mut seen) => seen.insert(path.to_path_buf()),
            // A poisoned set: a panicking call held it; the set itself is still usable.
            Err(poisoned) => poisoned.into_inner().insert(path.to_path_buf()),
        }
    }

    /// Forgets that `path` was brought (its content could not be read after all).
    pub fn forget(&self, path: &Path) {
        match self.instructions_seen.lock() {
            Ok(mut seen) => seen.remove(path),
            Err(poisoned) => poisoned.into_inner().remove(path),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_path_is_first_seen_once_per_scope() {
        let a = SessionScope::new();
        let b = SessionScope::new();
        let p = Path::new("/w/AGENTS.md");
        assert!(a.first_sight(p));
        assert!(!a.first_sight(p));
        // A clone shares the scope (the session hands clones to its calls).
        let shared = a.clone();
        assert!(!shared.first_sight(p));
        drop(shared);
        assert!(b.first_sight(p));
        a.forget(p);
        assert!(a.first_sight(p));
    }
}
