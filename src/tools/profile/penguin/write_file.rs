//! write_file: creates or wholly overwrites a regular file (creating missing parent directories),
//! writes it through to the real file (symlinks followed, owner and mode kept, hard links in
//! place, see `fs_atomic`), and answers `Created|Overwrote "<p>" (<L> line[s], <B> byte[s]).` —
//! an overwrite adds a small diff against the previous content (`docs/tools.md#write_file`).
//!
//! It must not replace what is not a regular file, touch a secret store (by name or by inode,
//! nor create one through a dangling symlink), or fail because the previous content cannot be
//! diffed (that only drops the diff), and never panics on any argument.

mod error;

use std::path::Path;

use serde_json::{Map, Value};

pub use self::error::{WriteFailure, WriteFileError};

use super::args::{require_nonempty_str, require_str};
use super::capped_read::{Capped, read_capped};
use super::definition::ToolDefinitionConfig;
use super::diff_render::{Hunk, LineDiff, content_lines, line_diff};
use super::file_target::{FileKind, Target, TargetError};
use super::fs_atomic::{WriteMode, write_notes, write_through};
use super::secret_guard::{secret_by_identity, secret_by_name, secret_name};
use super::{ToolReply, resolve_path};

/// Previous contents above this size get no diff.
const DIFF_SOURCE_CAP: u64 = 1024 * 1024;

/// Most rendered diff lines (headers included) shown inline.
const MAX_DIFF_LINES: usize = 60;

/// Budget headroom kept below the output cap.
const NOTE_RESERVE: i64 = 120;

/// Budget when the definition has no cap.
const DEFAULT_BUDGET: i64 = 16_000;

/// Runs one write_file call.
pub fn write_file(
    workspace: &Path,
    args: &Map<String, Value>,
    def: &ToolDefinitionConfig,
) -> ToolReply {
    run(workspace, args, def).into()
}

fn run(
    workspace: &Path,
    args: &Map<String, Value>,
    def: &ToolDefinitionConfig,
) -> Result<String, WriteFileError> {
    let tool = def.name.as_str();
    let p = require_nonempty_str(args, "file_path", tool)?;
    // An empty string is valid content; only a missing or non-string value is an error.
    let content = require_str(args, "content", tool)?;

    let resolved = resolve_path(workspace, p);
    if let Some(name) = secret_by_name(&resolved) {
        return Err(refusal(p, name));
    }
    // Created vs overwrote is decided before writing; a missing path (or one under a file) is a
    // create (real write errors surface below).
    let target = match Target::open(&resolved) {
        Ok(target) => target,
        Err(TargetError::NotRegular(FileKind::Directory)) => {
            return Err(WriteFileError::Directory {
                file_path: p.to_string(),
            });
        }
        Err(e @ TargetError::NotRegular(_)) => {
            return Err(WriteFileError::NotRegular {
                file_path: p.to_string(),
                source: e,
            });
        }
        Err(TargetError::Io(source)) => {
            return Err(WriteFileError::Open {
                file_path: p.to_string(),
                source,
            });
        }
    };
    // The file the write lands on, after the symlinks: a dangling link names the file it would
    // create, which has no realpath yet for `secret_by_name` and no inode for
    // `secret_by_identity`.
    if let Some(name) = target.real.file_name().and_then(secret_name) {
        return Err(refusal(p, name));
    }
    let mut previous: Option<String> = None;
    if let Some(opened) = &target.existing {
        // Decided by the opened file: a hard link to a secret store is refused before its
        // content could reach the diff.
        if let Some(name) = secret_by_identity(&target.real, &opened.meta, workspace) {
            return Err(refusal(p, name));
        }
        // Bounded read-back for the diff; a big, binary or unreadable file just gets no diff.
        if let Ok(Capped::Whole(bytes)) = read_capped(opened, DIFF_SOURCE_CAP)
            && !bytes.contains(&0)
        {
            previous = Some(String::from_utf8_lossy(&bytes).into_owned());
        }
    }
    let existed = target.existing.is_some();

    let write = || -> Result<WriteMode, WriteFailure> {
        if let Some(parent) = target.real.parent() {
            std::fs::create_dir_all(parent).map_err(|source| WriteFailure::Parent {
                blocked: blocked_parent(parent),
                source,
            })?;
        }
        Ok(write_through(&target, content.as_bytes())?)
    };
    let mode = write().map_err(|source| WriteFileError::Write {
        file_path: p.to_string(),
        source,
    })?;

    let lines = content_lines(content).len();
    let bytes = content.len();
    let mut out = format!(
        "{} \"{p}\" ({lines} line{}, {bytes} byte{}).",
        if existed { "Overwrote" } else { "Created" },
        plural(lines),
        plural(bytes)
    );
    out.push_str(&write_notes(&target, mode));
    tracing::debug!(path = %target.real.display(), existed, bytes, ?mode, "write_file done");
    if let Some(previous) = previous {
        let budget = if def.max_output_length > 0 {
            def.max_output_length
        } else {
            DEFAULT_BUDGET
        };
        out.push('\n');
        out.push_str(&diff_section(
            &previous,
            content,
            out.chars().count() - 1,
            budget,
        ));
    }
    Ok(out)
}

/// The overwrite diff: `(content unchanged)`, the hunks, or a `+X/−Y` summary when the diff is
/// too big (more than 60 lines or beyond the budget). `head_len` is the summary line's length.
fn diff_section(previous: &str, content: &str, head_len: usize, budget: i64) -> String {
    let too_large = |plus: usize, minus: usize| {
        format!("+{plus}/−{minus} lines vs the previous content (diff too large to show)")
    };
    match line_diff(previous, content) {
        LineDiff::Identical => "(content unchanged)".to_string(),
        LineDiff::TooLarge { plus, minus } => too_large(plus, minus),
        LineDiff::Hunks { hunks, plus, minus } => {
            let rendered: Vec<String> = hunks.iter().map(Hunk::render).collect();
            let total_lines: usize = rendered.iter().map(|h| h.split('\n').count()).sum();
            let total_chars: usize = head_len
                + rendered
                    .iter()
                    .map(|h| h.chars().count() + 1)
                    .sum::<usize>();
            if total_lines > MAX_DIFF_LINES || total_chars as i64 > budget - NOTE_RESERVE {
                too_large(plus, minus)
            } else {
                rendered.join("\n")
            }
        }
    }
}

/// The refusal of a secret store.
fn refusal(p: &str, name: &'static str) -> WriteFileError {
    WriteFileError::Secret {
        file_path: p.to_string(),
        name,
    }
}

/// When creating `dir` failed because an existing ancestor is not a directory, says which one
/// (clearer than the raw `File exists` / `Not a directory`).
fn blocked_parent(dir: &Path) -> Option<String> {
    let existing = dir.ancestors().find(|a| std::fs::metadata(a).is_ok())?;
    (!existing.is_dir()).then(|| format!("\"{}\" is a file, not a directory", existing.display()))
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::profile::penguin::default_definition;
    use serde_json::json;
    use std::fs;
    use std::os::unix::fs::PermissionsExt;

    fn def() -> ToolDefinitionConfig {
        default_definition("write_file").unwrap()
    }

    fn call(ws: &Path, args: Value) -> ToolReply {
        write_file(ws, args.as_object().unwrap(), &def())
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn created_counts_lines_and_bytes_and_makes_parents() {
        let ws = tempfile::tempdir().unwrap();
        let r = call(
            ws.path(),
            json!({"file_path": "a/b/new.txt", "content": "héllo\nworld\n"}),
        );
        assert_eq!(
            r,
            ToolReply::ok("Created \"a/b/new.txt\" (2 lines, 13 bytes).")
        );
        assert_eq!(
            fs::read_to_string(ws.path().join("a/b/new.txt")).unwrap(),
            "héllo\nworld\n"
        );
        assert_eq!(names(&ws.path().join("a/b")), vec!["new.txt".to_string()]);

        let r = call(ws.path(), json!({"file_path": "one.txt", "content": "x"}));
        assert_eq!(r, ToolReply::ok("Created \"one.txt\" (1 line, 1 byte)."));
        let r = call(ws.path(), json!({"file_path": "empty.txt", "content": ""}));
        assert_eq!(
            r,
            ToolReply::ok("Created \"empty.txt\" (0 lines, 0 bytes).")
        );
        assert_eq!(fs::read(ws.path().join("empty.txt")).unwrap(), b"");
        let r = call(
            ws.path(),
            json!({"file_path": "blank.txt", "content": "\n\n"}),
        );
        assert_eq!(
            r,
            ToolReply::ok("Created \"blank.txt\" (2 lines, 2 bytes).")
        );
    }

    #[test]
    fn absolute_path_is_used_as_given() {
        let ws = tempfile::tempdir().unwrap();
        let other = tempfile::tempdir().unwrap();
        let f = other.path().join("abs.txt");
        let p = f.to_str().unwrap();
        let r = call(ws.path(), json!({"file_path": p, "content": "a\nb"}));
        assert_eq!(
            r,
            ToolReply::ok(format!("Created \"{p}\" (2 lines, 3 bytes)."))
        );
        assert_eq!(fs::read_to_string(&f).unwrap(), "a\nb");
    }

    #[test]
    fn overwrite_shows_a_small_diff_and_keeps_mode() {
        let ws = tempfile::tempdir().unwrap();
        let f = ws.path().join("s.sh");
        fs::write(&f, "#!/bin/sh\necho one\necho two\n").unwrap();
        fs::set_permissions(&f, fs::Permissions::from_mode(0o750)).unwrap();
        let r = call(
            ws.path(),
            json!({"file_path": "s.sh", "content": "#!/bin/sh\necho one\necho 2\n"}),
        );
        assert_eq!(
            r,
            ToolReply::ok(
                "Overwrote \"s.sh\" (3 lines, 26 bytes).\n@@ -1,3 +1,3 @@\n #!/bin/sh\n echo one\n-echo two\n+echo 2"
            )
        );
        assert_eq!(
            fs::read_to_string(&f).unwrap(),
            "#!/bin/sh\necho one\necho 2\n"
        );
        assert_eq!(
            fs::metadata(&f).unwrap().permissions().mode() & 0o777,
            0o750
        );
        assert_eq!(names(ws.path()), vec!["s.sh".to_string()]);
    }

    #[test]
    fn unchanged_content() {
        let ws = tempfile::tempdir().unwrap();
        fs::write(ws.path().join("u.txt"), "same\n").unwrap();
        let r = call(
            ws.path(),
            json!({"file_path": "u.txt", "content": "same\n"}),
        );
        assert_eq!(
            r,
            ToolReply::ok("Overwrote \"u.txt\" (1 line, 5 bytes).\n(content unchanged)")
        );
    }

    #[test]
    fn too_large_diffs_collapse_to_a_summary() {
        let ws = tempfile::tempdir().unwrap();
        // More than 60 rendered lines.
        let old: String = (0..40).map(|i| format!("old {i}\n")).collect();
        let new: String = (0..40).map(|i| format!("new {i}\n")).collect();
        fs::write(ws.path().join("big.txt"), &old).unwrap();
        let r = call(ws.path(), json!({"file_path": "big.txt", "content": new}));
        assert_eq!(
            r,
            ToolReply::ok(
                "Overwrote \"big.txt\" (40 lines, 270 bytes).\n+40/−40 lines vs the previous content (diff too large to show)"
            )
        );
        // Over the char budget though only a few lines.
        let mut d = def();
        d.max_output_length = 200;
        let args = json!({"file_path": "big.txt", "content": format!("{}\n", "z".repeat(100))});
        let r = write_file(ws.path(), args.as_object().unwrap(), &d);
        assert_eq!(
            r,
            ToolReply::ok(
                "Overwrote \"big.txt\" (1 line, 101 bytes).\n+1/−40 lines vs the previous content (diff too large to show)"
            )
        );
        // Beyond the cell guard: the sizes of the differing middles.
        let old: String = (0..600).map(|i| format!("a{i}\n")).collect();
        let new: String = (0..500).map(|i| format!("b{i}\n")).collect();
        fs::write(ws.path().join("huge.txt"), format!("top\n{old}")).unwrap();
        let r = call(
            ws.path(),
            json!({"file_path": "huge.txt", "content": format!("top\n{new}")}),
        );
        assert!(
            r.text
                .ends_with("\n+500/−600 lines vs the previous content (diff too large to show)"),
            "{}",
            r.text
        );
    }

    #[test]
    fn no_diff_for_binary_or_big_previous_content() {
        let ws = tempfile::tempdir().unwrap();
        fs::write(ws.path().join("bin"), b"a\0b").unwrap();
        let r = call(ws.path(), json!({"file_path": "bin", "content": "text\n"}));
        assert_eq!(r, ToolReply::ok("Overwrote \"bin\" (1 line, 5 bytes)."));
        let big = "x\n".repeat(600 * 1024);
        fs::write(ws.path().join("big"), &big).unwrap();
        let r = call(ws.path(), json!({"file_path": "big", "content": "y\n"}));
        assert_eq!(r, ToolReply::ok("Overwrote \"big\" (1 line, 2 bytes)."));
    }

    #[test]
    fn fifo_is_refused_and_stays_a_fifo() {
        let ws = tempfile::tempdir().unwrap();
        let f = ws.path().join("pipe");
        nix::unistd::mkfifo(&f, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let r = call(
            ws.path(),
            json!({"file_path": "pipe", "content": "now a file\n"}),
        );
        assert_eq!(
            r,
            ToolReply::fail(
                "Cannot write \"pipe\": it is a FIFO (named pipe), not a regular file."
            )
        );
        let kind = fs::symlink_metadata(&f).unwrap().file_type();
        assert!(std::os::unix::fs::FileTypeExt::is_fifo(&kind));
    }

    #[test]
    fn failures() {
        let ws = tempfile::tempdir().unwrap();
        fs::create_dir(ws.path().join("d")).unwrap();
        fs::write(ws.path().join("f"), "file").unwrap();
        assert_eq!(
            call(ws.path(), json!({"file_path": "d", "content": "x"})),
            ToolReply::fail("Cannot write \"d\": it is a directory.")
        );
        let r = call(
            ws.path(),
            json!({"file_path": "f/child.txt", "content": "x"}),
        );
        assert_eq!(
            r,
            ToolReply::fail(format!(
                "Failed to write \"f/child.txt\": \"{}\" is a file, not a directory",
                ws.path().join("f").display()
            ))
        );
        let r = call(
            ws.path(),
            json!({"file_path": "f/deeper/child.txt", "content": "x"}),
        );
        assert_eq!(
            r,
            ToolReply::fail(format!(
                "Failed to write \"f/deeper/child.txt\": \"{}\" is a file, not a directory",
                ws.path().join("f").display()
            ))
        );
        assert_eq!(fs::read_to_string(ws.path().join("f")).unwrap(), "file");
        assert_eq!(
            call(ws.path(), json!({"content": "x"})),
            ToolReply::fail("Missing required argument \"file_path\" for write_file.")
        );
        assert_eq!(
            call(ws.path(), json!({"file_path": "", "content": "x"})),
            ToolReply::fail("Missing required argument \"file_path\" for write_file.")
        );
        assert_eq!(
            call(ws.path(), json!({"file_path": "n.txt"})),
            ToolReply::fail("Missing required argument \"content\" for write_file.")
        );
        assert_eq!(
            call(ws.path(), json!({"file_path": "n.txt", "content": null})),
            ToolReply::fail("Missing required argument \"content\" for write_file.")
        );
        assert_eq!(names(ws.path()), vec!["d".to_string(), "f".to_string()]);
    }
}
