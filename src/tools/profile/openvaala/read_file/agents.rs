//! The `AGENTS.md` files the openvaala read_file brings along: those in the workspace root and
//! in every directory down to the file's own, outermost first, each once per session (the
//! session's [`SessionScope`] remembers them by their real location, so one met again through
//! a symlink is not brought twice), marked as project instructions. One that read_file would
//! refuse (out of the workspace, a secret store, not UTF-8 text) is never brought.

use std::io::Read;
use std::path::Path;

use crate::tools::canonical::canonical;
use crate::tools::session_scope::SessionScope;

/// The file name looked for.
pub(super) const AGENTS_MD: &str = "AGENTS.md";
/// Bytes of one AGENTS.md shown at most.
const MAX_AGENTS_BYTES: usize = 65_536;

/// The project-instruction blocks for the AGENTS.md files on the way from `workspace` to the
/// directory of `file` (both absolute and normalized) that `scope` has not seen; empty when
/// there are none.
pub(in crate::tools) fn bring(workspace: &Path, file: &Path, scope: &SessionScope) -> String {
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
    // Files are known by their real location: one met again through a symlink is the same.
    let file_real = canonical(&workspace, file);
    let mut blocks = Vec::new();
    for d in dirs {
        let candidate = d.join(AGENTS_MD);
        let Some(real) = canonical(&workspace, &candidate) else {
            continue;
        };
        // Reading an AGENTS.md itself counts as having seen it.
        if !scope.first_sight(&real) || file_real.as_ref() == Some(&real) {
            continue;
        }
        // One that read_file would refuse (leading out of the workspace, a secret store, not
        // UTF-8 text) stays out too, and is looked at again the next time.
        let Some(text) = readable(&workspace, &candidate) else {
            scope.forget(&real);
            continue;
        };
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

/// The first [`MAX_AGENTS_BYTES`] of the AGENTS.md at `path`, unless the guard refuses it or it
/// is not UTF-8 text (a character cut by the limit is left out, not taken as invalid).
fn readable(workspace: &Path, path: &Path) -> Option<String> {
    let opened = super::guard::open_guarded(workspace, path).ok()?;
    let mut bytes = Vec::new();
    opened
        .file
        .take(MAX_AGENTS_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .ok()?;
    let cut = bytes.len() > MAX_AGENTS_BYTES;
    bytes.truncate(MAX_AGENTS_BYTES);
    match String::from_utf8(bytes) {
        Ok(text) => Some(text),
        // Only an incomplete character at the very end of a cut file is forgiven.
        Err(e) if cut && e.utf8_error().error_len().is_none() => {
            let valid = e.utf8_error().valid_up_to();
            let mut bytes = e.into_bytes();
            bytes.truncate(valid);
            String::from_utf8(bytes).ok()
        }
        Err(_) => None,
    }
}
