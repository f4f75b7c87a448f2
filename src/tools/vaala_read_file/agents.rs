//! The `AGENTS.md` files the openvaala read_file brings along: those in the workspace root and
//! in every directory down to the file's own, outermost first, each once per session (the
//! session's [`SessionScope`] remembers them), marked as project instructions.

use std::path::Path;

use crate::tools::session_scope::SessionScope;

/// The file name looked for.
pub(super) const AGENTS_MD: &str = "AGENTS.md";
/// Bytes of one AGENTS.md shown at most.
const MAX_AGENTS_BYTES: usize = 65_536;

/// The project-instruction blocks for the AGENTS.md files on the way from `workspace` to the
/// directory of `file` (both absolute and normalized) that `scope` has not seen; empty when
/// there are none.
pub(super) fn bring(workspace: &Path, file: &Path, scope: &SessionScope) -> String {
    let workspace = super::normalize(workspace);
    let Some(dir) = file.parent() else {
        return String::new();
    };
    let Ok(rel) = dir.strip_prefix(&workspace) else {
        return String::new();
    };
    let mut dirs = vec![workspace.clone()];
    let mut cur = workspace.clone();
    for c in rel.components() {
        cur.push(c.as_os_str());
        dirs.push(cur.clone());
    }
    let mut blocks = Vec::new();
    for d in dirs {
        let candidate = d.join(AGENTS_MD);
        // Reading an AGENTS.md itself counts as having seen it.
        if !scope.first_sight(&candidate) || candidate == file {
            continue;
        }
        // One that read_file would refuse (leading out of the workspace, a secret store)
        // stays out too.
        let Ok(opened) = super::guard::open_guarded(&workspace, &candidate) else {
            scope.forget(&candidate);
            continue;
        };
        let mut bytes = Vec::new();
        use std::io::Read;
        if opened
            .file
            .take(MAX_AGENTS_BYTES as u64)
            .read_to_end(&mut bytes)
            .is_err()
        {
            scope.forget(&candidate);
            continue;
        }
        let text = String::from_utf8_lossy(&bytes);
        let shown = candidate
            .strip_prefix(&workspace)
            .unwrap_or(&candidate)
            .display()
            .to_string();
        blocks.push(format!(
            "<project_instructions path=\"{shown}\">\n{}\n</project_instructions>",
            text.trim_end()
        ));
    }
    blocks.join("\n\n")
}
