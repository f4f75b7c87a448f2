//! edit_file: replaces an exact `old_string` with `new_string` in an existing regular file (once,
//! or every occurrence with `replace_all`), writes it through to the real file (symlinks followed,
//! owner and mode kept, hard links in place, see `fs_atomic`), and answers with
//! `Replaced <n> occurrence[s] in "<p>".` plus git-style hunks of the change (`docs/tools.md#edit_file`).
//!
//! It must not create files (write_file does), touch a secret store (by name or by inode), hold
//! more than [`MAX_FILE_BYTES`] of a file or of its edited content in memory (a larger file is
//! refused before it is read), or stream or truncate its output itself beyond its own hunk budget
//! (the close-out truncates), and never panics on any argument.

mod error;

use std::io;
use std::path::Path;

use serde_json::{Map, Value};

pub use self::error::EditFileError;

use super::apply_patch::compute::MAX_BYTES;
use super::args::{flag, require_nonempty_str, require_str};
use super::capped_read::{Capped, read_capped};
use super::definition::ToolDefinitionConfig;
use super::diff_render::replacement_hunks;
use super::file_target::{FileKind, Target, TargetError};
use super::fs_atomic::{write_notes, write_through};
use super::path_hint::path_hint;
use super::secret_guard::{secret_by_identity, secret_by_name};
use super::{ToolReply, resolve_path};

/// Largest file edit_file reads, and largest content it writes: apply_patch's per-file limit
/// (4 MiB), so both tools take the same files.
pub const MAX_FILE_BYTES: u64 = MAX_BYTES as u64;

/// Most hunks shown (replace_all over a big file stays readable).
const MAX_HUNKS: usize = 5;

/// Budget headroom kept for the `…and <k> more replacements` line.
const NOTE_RESERVE: i64 = 120;

/// Budget when the definition has no cap.
const DEFAULT_BUDGET: i64 = 16_000;

/// Runs one edit_file call.
pub fn edit_file(
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
) -> Result<String, EditFileError> {
    let tool = def.name.as_str();
    let p = require_nonempty_str(args, "file_path", tool)?;
    let old = require_str(args, "old_string", tool)?;
    if old.is_empty() {
        return Err(EditFileError::EmptyOldString);
    }
    let new = require_str(args, "new_string", tool)?;
    if old == new {
        return Err(EditFileError::NothingToChange);
    }
    let replace_all = flag(args, "replace_all");

    let resolved = resolve_path(workspace, p);
    if let Some(name) = secret_by_name(&resolved) {
        return Err(refusal(p, name));
    }
    let not_found = |source: Option<io::Error>| EditFileError::NotFound {
        file_path: p.to_string(),
        hint: path_hint(&resolved),
        source,
    };
    let read_error = |e: io::Error| match e.kind() {
        io::ErrorKind::NotFound | io::ErrorKind::NotADirectory => not_found(Some(e)),
        _ => EditFileError::Read {
            file_path: p.to_string(),
            source: e,
        },
    };
    let target = match Target::open(&resolved) {
        Ok(target) => target,
        Err(TargetError::NotRegular(FileKind::Directory)) => {
            return Err(EditFileError::Directory {
                file_path: p.to_string(),
            });
        }
        Err(e @ TargetError::NotRegular(_)) => {
            return Err(EditFileError::NotRegular {
                file_path: p.to_string(),
                source: e,
            });
        }
        Err(TargetError::Io(e)) => return Err(read_error(e)),
    };
    let Some(opened) = target.existing.as_ref() else {
        return Err(not_found(None));
    };
    // Decided by the opened file: a hard link to a secret store is one too.
    if let Some(name) = secret_by_identity(&target.real, &opened.meta, workspace) {
        return Err(refusal(p, name));
    }
    // Decided by the fstat size and enforced while reading: a file that grows in between is
    // never read past the cap.
    let bytes = match read_capped(opened, MAX_FILE_BYTES).map_err(read_error)? {
        Capped::Whole(bytes) => bytes,
        Capped::TooLarge { size } => {
            return Err(EditFileError::TooLarge {
                file_path: p.to_string(),
                size,
            });
        }
    };
    let content = String::from_utf8(bytes).map_err(|_| {
        read_error(io::Error::new(
            io::ErrorKind::InvalidData,
            "stream did not contain valid UTF-8",
        ))
    })?;

    let occurrences = content.matches(old).count();
    if occurrences == 0 {
        return Err(EditFileError::NoMatch {
            file_path: p.to_string(),
            crlf: content.contains("\r\n"),
        });
    }
    if occurrences > 1 && !replace_all {
        return Err(EditFileError::Ambiguous {
            file_path: p.to_string(),
            occurrences,
        });
    }

    let replaced = if replace_all { occurrences } else { 1 };
    // The edited size, known before the new content is built (a replace_all can multiply it).
    let new_size = (content.len() as u64)
        .saturating_sub((replaced as u64).saturating_mul(old.len() as u64))
        .saturating_add((replaced as u64).saturating_mul(new.len() as u64));
    if new_size > MAX_FILE_BYTES {
        return Err(EditFileError::ResultTooLarge {
            file_path: p.to_string(),
            size: new_size,
        });
    }
    let updated = if replace_all {
        content.replace(old, new)
    } else {
        content.replacen(old, new, 1)
    };
    let mode =
        write_through(&target, updated.as_bytes()).map_err(|source| EditFileError::Write {
            file_path: p.to_string(),
            source,
        })?;
    tracing::debug!(path = %target.real.display(), replaced, ?mode, "edit_file applied");
    let head = format!(
        "Replaced {replaced} occurrence{} in \"{p}\".{}",
        plural(replaced),
        write_notes(&target, mode)
    );
    Ok(render(
        &content,
        old,
        new,
        replace_all,
        replaced,
        head,
        def.max_output_length,
    ))
}

/// The refusal of a secret store.
fn refusal(p: &str, name: &'static str) -> EditFileError {
    EditFileError::Secret {
        file_path: p.to_string(),
        name,
    }
}

/// The success text: `head` (the summary line and the write notes), hunks within the budget,
/// and the count of uncovered sites.
fn render(
    content: &str,
    old: &str,
    new: &str,
    replace_all: bool,
    replaced: usize,
    head: String,
    max_len: i64,
) -> String {
    let budget = if max_len > 0 { max_len } else { DEFAULT_BUDGET };
    let mut out = head;
    let mut used = out.chars().count() as i64;
    let mut shown = 0;
    for site_hunk in replacement_hunks(content, old, new, replace_all, MAX_HUNKS) {
        let text = site_hunk.hunk.render();
        let len = text.chars().count() as i64;
        if used + 1 + len > budget - NOTE_RESERVE {
            break;
        }
        out.push('\n');
        out.push_str(&text);
        used += 1 + len;
        shown += site_hunk.sites;
    }
    let omitted = replaced.saturating_sub(shown);
    if omitted > 0 {
        out.push_str(&format!(
            "\n…and {omitted} more replacement{}",
            plural(omitted)
        ));
    }
    out
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::StopReason;
    use crate::tools::profile::penguin::default_definition;
    use serde_json::json;
    use std::fs;
    use std::os::unix::fs::PermissionsExt;

    fn def() -> ToolDefinitionConfig {
        default_definition("edit_file").unwrap()
    }

    fn call(ws: &Path, args: Value) -> ToolReply {
        edit_file(ws, args.as_object().unwrap(), &def())
    }

    fn failed(text: &str) -> ToolReply {
        ToolReply::fail(text)
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
    fn unique_replace_writes_and_shows_the_diff() {
        let ws = tempfile::tempdir().unwrap();
        let f = ws.path().join("a.txt");
        fs::write(&f, "one\ntwo\nthree\nfour\nfive\nsix\nseven\neight\n").unwrap();
        let r = call(
            ws.path(),
            json!({"file_path": "a.txt", "old_string": "five", "new_string": "FIVE\n5"}),
        );
        assert_eq!(
            r,
            ToolReply::ok(
                "Replaced 1 occurrence in \"a.txt\".\n@@ -2,7 +2,8 @@\n two\n three\n four\n-five\n+FIVE\n+5\n six\n seven\n eight"
            )
        );
        assert_eq!(
            fs::read_to_string(&f).unwrap(),
            "one\ntwo\nthree\nfour\nFIVE\n5\nsix\nseven\neight\n"
        );
        // Atomic write: no temp file left in the directory.
        assert_eq!(names(ws.path()), vec!["a.txt".to_string()]);
    }

    #[test]
    fn replace_all_same_line_and_absolute_path() {
        let ws = tempfile::tempdir().unwrap();
        let other = tempfile::tempdir().unwrap();
        let f = other.path().join("b.txt");
        fs::write(&f, "x = foo + foo;\nkeep\n").unwrap();
        let p = f.to_str().unwrap();
        let r = call(
            ws.path(),
            json!({"file_path": p, "old_string": "foo", "new_string": "bar", "replace_all": true}),
        );
        assert_eq!(
            r,
            ToolReply::ok(format!(
                "Replaced 2 occurrences in \"{p}\".\n@@ -1,2 +1,2 @@\n-x = foo + foo;\n+x = bar + bar;\n keep"
            ))
        );
        assert_eq!(fs::read_to_string(&f).unwrap(), "x = bar + bar;\nkeep\n");
    }

    #[test]
    fn not_found_ambiguous_and_replace_all_string_flag() {
        let ws = tempfile::tempdir().unwrap();
        fs::write(ws.path().join("c.txt"), "aaaa\nab ab ab\n").unwrap();
        assert_eq!(
            call(
                ws.path(),
                json!({"file_path": "c.txt", "old_string": "zzz", "new_string": "y"})
            ),
            failed(
                "old_string not found in \"c.txt\". Make sure it matches the file content exactly, including whitespace and indentation."
            )
        );
        // Non-overlapping count: "aa" occurs twice in "aaaa".
        assert_eq!(
            call(
                ws.path(),
                json!({"file_path": "c.txt", "old_string": "aa", "new_string": "b"})
            ),
            failed(
                "old_string occurs 2 times in \"c.txt\". Add surrounding context to make it unique, or set replace_all to true to replace every occurrence."
            )
        );
        // "true" as a string is not the flag.
        assert_eq!(
            call(
                ws.path(),
                json!({"file_path": "c.txt", "old_string": "ab", "new_string": "b", "replace_all": "true"})
            ),
            failed(
                "old_string occurs 3 times in \"c.txt\". Add surrounding context to make it unique, or set replace_all to true to replace every occurrence."
            )
        );
        assert_eq!(
            fs::read_to_string(ws.path().join("c.txt")).unwrap(),
            "aaaa\nab ab ab\n"
        );
    }

    #[test]
    fn argument_validation_order_and_texts() {
        let ws = tempfile::tempdir().unwrap();
        let dir_missing = "Missing required argument \"file_path\" for edit_file.";
        assert_eq!(call(ws.path(), json!({})), failed(dir_missing));
        assert_eq!(
            call(ws.path(), json!({"file_path": "", "old_string": "a"})),
            failed(dir_missing)
        );
        assert_eq!(
            call(
                ws.path(),
                json!({"file_path": "nope.txt", "old_string": 3, "new_string": "b"})
            ),
            failed("Missing required argument \"old_string\" for edit_file.")
        );
        // Empty old_string is reported before a missing new_string.
        assert_eq!(
            call(
                ws.path(),
                json!({"file_path": "nope.txt", "old_string": ""})
            ),
            failed(
                "old_string must not be empty — edit_file replaces existing text. To create a file or rewrite it wholesale, use write_file."
            )
        );
        assert_eq!(
            call(
                ws.path(),
                json!({"file_path": "nope.txt", "old_string": "a"})
            ),
            failed("Missing required argument \"new_string\" for edit_file.")
        );
        // Identical strings are reported before the file is looked at.
        assert_eq!(
            call(
                ws.path(),
                json!({"file_path": "nope.txt", "old_string": "a", "new_string": "a"})
            ),
            failed(
                "old_string and new_string are identical — nothing to change. Make new_string the desired replacement text."
            )
        );
    }

    #[test]
    fn directory_and_nonexistent_files() {
        let ws = tempfile::tempdir().unwrap();
        fs::create_dir(ws.path().join("sub")).unwrap();
        fs::write(ws.path().join("plain"), "x").unwrap();
        assert_eq!(
            call(
                ws.path(),
                json!({"file_path": "sub", "old_string": "a", "new_string": "b"})
            ),
            failed("Cannot edit \"sub\": it is a directory.")
        );
        let expected = |p: &str| {
            format!(
                "File not found: \"{p}\". edit_file only edits existing files — check the path (absolute paths are supported), or use write_file to create it.{}",
                path_hint(&ws.path().join(p))
            )
        };
        assert_eq!(
            call(
                ws.path(),
                json!({"file_path": "sub/missing.txt", "old_string": "a", "new_string": "b"})
            ),
            failed(&expected("sub/missing.txt"))
        );
        // ENOTDIR (a file used as a directory) gets the same diagnosis.
        assert_eq!(
            call(
                ws.path(),
                json!({"file_path": "plain/x.txt", "old_string": "a", "new_string": "b"})
            ),
            failed(&expected("plain/x.txt"))
        );
        assert!(!ws.path().join("sub/missing.txt").exists());
    }

    #[test]
    fn crlf_hint_and_cr_stripped_in_diff() {
        let ws = tempfile::tempdir().unwrap();
        let f = ws.path().join("w.txt");
        fs::write(&f, "alpha\r\nbeta\r\ngamma\r\n").unwrap();
        assert_eq!(
            call(
                ws.path(),
                json!({"file_path": "w.txt", "old_string": "alpha\nbeta", "new_string": "x"})
            ),
            failed(
                "old_string not found in \"w.txt\". Make sure it matches the file content exactly, including whitespace and indentation. Note: the file uses CRLF (\\r\\n) line endings — a multi-line old_string must include the \\r characters."
            )
        );
        let r = call(
            ws.path(),
            json!({"file_path": "w.txt", "old_string": "beta", "new_string": "BETA"}),
        );
        assert_eq!(
            r,
            ToolReply::ok(
                "Replaced 1 occurrence in \"w.txt\".\n@@ -1,3 +1,3 @@\n alpha\n-beta\n+BETA\n gamma"
            )
        );
        assert_eq!(fs::read(&f).unwrap(), b"alpha\r\nBETA\r\ngamma\r\n");
    }

    #[test]
    fn pure_removal_hunk() {
        let ws = tempfile::tempdir().unwrap();
        fs::write(ws.path().join("r.txt"), "a\nb\nc\n").unwrap();
        let r = call(
            ws.path(),
            json!({"file_path": "r.txt", "old_string": "b\n", "new_string": ""}),
        );
        assert_eq!(
            r,
            ToolReply::ok("Replaced 1 occurrence in \"r.txt\".\n@@ -1,3 +1,2 @@\n a\n-b\n c")
        );
        let r = call(
            ws.path(),
            json!({"file_path": "r.txt", "old_string": "a\nc\n", "new_string": ""}),
        );
        assert_eq!(
            r,
            ToolReply::ok("Replaced 1 occurrence in \"r.txt\".\n@@ -1,2 +0,0 @@\n-a\n-c")
        );
        assert_eq!(fs::read_to_string(ws.path().join("r.txt")).unwrap(), "");
    }

    #[test]
    fn at_most_five_hunks_then_the_rest_is_counted() {
        let ws = tempfile::tempdir().unwrap();
        let content: String = (0..80)
            .map(|i| {
                if i % 10 == 0 {
                    "HIT\n".to_string()
                } else {
                    format!("{i}\n")
                }
            })
            .collect();
        fs::write(ws.path().join("m.txt"), &content).unwrap();
        let r = call(
            ws.path(),
            json!({"file_path": "m.txt", "old_string": "HIT", "new_string": "hit", "replace_all": true}),
        );
        assert_eq!(r.stop_reason, StopReason::Completed);
        assert!(r.text.starts_with("Replaced 8 occurrences in \"m.txt\".\n@@ -1,4 +1,4 @@\n-HIT\n+hit\n 1\n 2\n 3\n@@ -8,7 +8,7 @@"));
        assert_eq!(r.text.matches("\n@@ ").count(), 5);
        assert!(r.text.ends_with("\n 43\n…and 3 more replacements"));
        assert_eq!(
            fs::read_to_string(ws.path().join("m.txt")).unwrap(),
            content.replace("HIT", "hit")
        );
    }

    #[test]
    fn tiny_budget_keeps_summary_and_counts_everything() {
        let ws = tempfile::tempdir().unwrap();
        fs::write(ws.path().join("t.txt"), "one\ntwo\n").unwrap();
        let mut d = def();
        d.max_output_length = 150;
        let args = json!({"file_path": "t.txt", "old_string": "two", "new_string": "2"});
        let r = edit_file(ws.path(), args.as_object().unwrap(), &d);
        assert_eq!(
            r,
            ToolReply::ok("Replaced 1 occurrence in \"t.txt\".\n…and 1 more replacement")
        );
        // <= 0 means no cap: the 16000 default applies and the hunk is shown.
        d.max_output_length = 0;
        let args = json!({"file_path": "t.txt", "old_string": "2", "new_string": "two"});
        let r = edit_file(ws.path(), args.as_object().unwrap(), &d);
        assert_eq!(
            r,
            ToolReply::ok("Replaced 1 occurrence in \"t.txt\".\n@@ -1,2 +1,2 @@\n one\n-2\n+two")
        );
    }

    #[test]
    fn mode_is_kept_and_no_temp_leftovers() {
        let ws = tempfile::tempdir().unwrap();
        let f = ws.path().join("run.sh");
        fs::write(&f, "echo hi\n").unwrap();
        fs::set_permissions(&f, fs::Permissions::from_mode(0o754)).unwrap();
        let r = call(
            ws.path(),
            json!({"file_path": "run.sh", "old_string": "hi", "new_string": "bye"}),
        );
        assert_eq!(r.stop_reason, StopReason::Completed);
        assert_eq!(fs::read_to_string(&f).unwrap(), "echo bye\n");
        assert_eq!(
            fs::metadata(&f).unwrap().permissions().mode() & 0o777,
            0o754
        );
        assert_eq!(names(ws.path()), vec!["run.sh".to_string()]);
    }

    #[test]
    fn fifo_is_refused_without_blocking() {
        let ws = tempfile::tempdir().unwrap();
        nix::unistd::mkfifo(
            &ws.path().join("pipe"),
            nix::sys::stat::Mode::from_bits_truncate(0o600),
        )
        .unwrap();
        let r = call(
            ws.path(),
            json!({"file_path": "pipe", "old_string": "a", "new_string": "b"}),
        );
        assert_eq!(
            r,
            failed("Cannot edit \"pipe\": it is a FIFO (named pipe), not a regular file.")
        );
        let kind = fs::symlink_metadata(ws.path().join("pipe"))
            .unwrap()
            .file_type();
        assert!(std::os::unix::fs::FileTypeExt::is_fifo(&kind));
    }

    #[test]
    fn invalid_utf8_is_a_read_failure_and_file_untouched() {
        let ws = tempfile::tempdir().unwrap();
        let f = ws.path().join("bin.dat");
        fs::write(&f, b"ab\xffcd").unwrap();
        let r = call(
            ws.path(),
            json!({"file_path": "bin.dat", "old_string": "ab", "new_string": "x"}),
        );
        assert_eq!(
            r,
            failed("Failed to read \"bin.dat\": stream did not contain valid UTF-8")
        );
        assert_eq!(fs::read(&f).unwrap(), b"ab\xffcd");
    }
}
