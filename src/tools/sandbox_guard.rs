//! The sandbox's rules for the file tools, which run inside the host process where no kernel
//! filter reaches them: before a call of a sandboxed session runs, the paths it names are
//! checked against the session's layout (`SandboxLayout::may_read` / `may_overwrite`, which
//! follow symlinks and `..`). Reads: the `file_path`, `path` and local `source` arguments;
//! writes: every file the tool declares it writes ([`Tool::write_keys`]), which must be inside
//! a writable root, not hidden, and not a file with more than one hard link.
//!
//! It only looks (stat, readlink); the close-out calls it once per call, and a refusal is the
//! call's failed output.

use std::path::Path;

use serde_json::{Map, Value};

use super::path_locks::PathKey;
use super::{Tool, resolve_path};
use crate::sandbox::{PathDenied, SandboxLayout};

/// Arguments that name a file a tool reads.
const READ_ARGS: [&str; 3] = ["file_path", "path", "source"];

/// Whether a call of `name` with `args` may run under `layout`: the first path it may not use
/// is the refusal.
pub fn check_call(
    layout: &SandboxLayout,
    name: &str,
    tool: &dyn Tool,
    workspace: &Path,
    args: &Map<String, Value>,
) -> Result<(), PathDenied> {
    // Shell tools run confined by the kernel; MCP tools belong to their servers.
    if super::escalation::SHELL_TOOLS.contains(&name) || name.starts_with("mcp__") {
        return Ok(());
    }
    for key in READ_ARGS {
        let Some(p) = args.get(key).and_then(Value::as_str) else {
            continue;
        };
        if p.is_empty() || (key == "source" && is_url(p)) {
            continue;
        }
        layout.may_read(&resolve_path(workspace, p))?;
    }
    for key in tool.write_keys(workspace, args) {
        if let PathKey::Path(p) = key {
            layout.may_overwrite(&p)?;
        }
    }
    Ok(())
}

fn is_url(s: &str) -> bool {
    ["http://", "https://", "data:"]
        .iter()
        .any(|scheme| s.len() >= scheme.len() && s[..scheme.len()].eq_ignore_ascii_case(scheme))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::{SandboxMode, SandboxPolicy};
    use crate::tools::binding::ToolBinding;
    use crate::tools::profile::penguin::builtin_registry;
    use serde_json::json;
    use std::sync::Arc;

    fn tool(name: &str) -> Arc<dyn Tool> {
        let registry = builtin_registry();
        match registry.get(name).map(|t| &t.binding) {
            Some(ToolBinding::Local(t)) => t.clone(),
            _ => panic!("{name} is not a local builtin"),
        }
    }

    fn check(l: &SandboxLayout, name: &str, args: Value) -> Result<(), PathDenied> {
        let args = args.as_object().cloned().unwrap_or_default();
        check_call(l, name, tool(name).as_ref(), &l.workspace.clone(), &args)
    }

    #[test]
    fn file_tools_are_held_to_the_layout() {
        let root = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(root.path()).unwrap();
        for d in ["ws", "home/.ssh", "home/.rookery", "tmp", "out"] {
            std::fs::create_dir_all(base.join(d)).unwrap();
        }
        std::fs::write(base.join("home/.ssh/id"), "k").unwrap();
        std::fs::write(base.join("out/victim"), "v").unwrap();
        std::fs::hard_link(base.join("out/victim"), base.join("ws/alias")).unwrap();
        std::os::unix::fs::symlink(base.join("out"), base.join("ws/escape")).unwrap();
        let policy = SandboxPolicy {
            mode: SandboxMode::WorkspaceWrite,
            ..SandboxPolicy::default()
        };
        let l = SandboxLayout::resolve(
            &policy,
            &base.join("ws"),
            &base.join("home/.rookery"),
            Some(&base.join("home")),
            &base.join("tmp"),
        )
        .unwrap();
        assert!(
            check(
                &l,
                "write_file",
                json!({"file_path": "new.txt", "content": "x"})
            )
            .is_ok()
        );
        assert!(check(&l, "read_file", json!({"file_path": "alias"})).is_ok());
        let e = check(
            &l,
            "write_file",
            json!({"file_path": "../out/x", "content": "x"}),
        )
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("sandbox workspace-write: writing "), "{e}");
        assert!(
            check(
                &l,
                "write_file",
                json!({"file_path": "escape/x", "content": "x"})
            )
            .is_err()
        );
        let e = check(
            &l,
            "edit_file",
            json!({"file_path": "alias", "old_string": "v", "new_string": "w"}),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("2 hard links"), "{e}");
        let e = check(&l, "read_file", json!({"file_path": "../home/.ssh/id"}))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("sandbox workspace-write: reading "), "{e}");
        let patch = "*** Begin Patch\n*** Add File: escape/p.txt\n+x\n*** End Patch\n";
        assert!(check(&l, "apply_patch", json!({"input": patch})).is_err());
        let patch = "*** Begin Patch\n*** Add File: ok.txt\n+x\n*** End Patch\n";
        assert!(check(&l, "apply_patch", json!({"input": patch})).is_ok());
        // Shell tools are the kernel's business.
        let args = json!({"cmd": "cat ~/.ssh/id", "path": "../home/.ssh/id"});
        let args = args.as_object().cloned().unwrap_or_default();
        let ws = l.workspace.clone();
        assert!(check_call(&l, "exec_command", tool("read_file").as_ref(), &ws, &args).is_ok());
    }
}
