//! Unit tests of apply_patch on real temp directories: the all-or-nothing rules, the commit's
//! rollback, and the file-tool rules (symlinks, modes, hard links, secrets).

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
use std::path::Path;

use super::*;
use crate::message::StopReason;

fn run(ws: &Path, patch: &str) -> ToolReply {
    apply_text(ws, patch, &mut |_| Ok(()))
}

/// Every file under `dir` (relative path, bytes), sorted.
fn tree(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let rel = p.strip_prefix(dir).unwrap().display().to_string();
            let meta = fs::symlink_metadata(&p).unwrap();
            if meta.is_dir() {
                out.push((format!("{rel}/"), Vec::new()));
                stack.push(p);
            } else if meta.file_type().is_symlink() {
                out.push((rel, fs::read_link(&p).unwrap().display().to_string().into()));
            } else {
                out.push((rel, fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn success_lists_every_file() {
    let ws = tempfile::tempdir().unwrap();
    let d = ws.path();
    fs::write(d.join("m.txt"), "a\nb\n").unwrap();
    fs::write(d.join("gone.txt"), "x\n").unwrap();
    fs::write(d.join("old.txt"), "keep\n").unwrap();
    let r = run(
        d,
        "*** Begin Patch\n*** Add File: n/new.txt\n+hi\n*** Update File: m.txt\n@@\n-b\n+B\n*** Delete File: gone.txt\n*** Update File: old.txt\n*** Move to: moved/new.txt\n@@\n-keep\n+kept\n*** End Patch\n",
    );
    assert_eq!(r.stop_reason, StopReason::Completed, "{}", r.text);
    assert_eq!(
        r.text,
        "Success. Updated the following files:\nA n/new.txt\nM m.txt\nD gone.txt\nM moved/new.txt\n"
    );
    assert_eq!(fs::read_to_string(d.join("n/new.txt")).unwrap(), "hi\n");
    assert_eq!(fs::read_to_string(d.join("m.txt")).unwrap(), "a\nB\n");
    assert_eq!(
        fs::read_to_string(d.join("moved/new.txt")).unwrap(),
        "kept\n"
    );
    assert!(!d.join("gone.txt").exists() && !d.join("old.txt").exists());
    // No temp or backup file is left.
    let names: Vec<String> = tree(d).into_iter().map(|(n, _)| n).collect();
    assert!(
        names
            .iter()
            .all(|n| !n.contains(".tmp-") && !n.contains(".orig-")),
        "{names:?}"
    );
}

#[test]
fn a_later_failure_changes_nothing_and_names_file_and_hunk() {
    let ws = tempfile::tempdir().unwrap();
    let d = ws.path();
    fs::write(d.join("a.txt"), "one\n").unwrap();
    fs::write(d.join("b.txt"), "x\ny\n").unwrap();
    let before = tree(d);
    let r = run(
        d,
        "*** Begin Patch\n*** Add File: new/c.txt\n+c\n*** Update File: a.txt\n@@\n-one\n+ONE\n*** Update File: b.txt\n@@\n-x\n+X\n@@\n-nope\n+NOPE\n*** End Patch",
    );
    assert_eq!(r.stop_reason, StopReason::Failed);
    assert_eq!(
        r.text,
        "Failed to find expected lines in b.txt:\nnope\n(hunk 2 of b.txt, at line 12 of the patch)\nNo file was changed."
    );
    assert_eq!(tree(d), before);
}

#[test]
fn add_and_move_never_overwrite() {
    let ws = tempfile::tempdir().unwrap();
    let d = ws.path();
    fs::write(d.join("a.txt"), "a\n").unwrap();
    fs::write(d.join("b.txt"), "b\n").unwrap();
    let before = tree(d);
    let add = run(
        d,
        "*** Begin Patch\n*** Add File: a.txt\n+new\n*** End Patch",
    );
    assert_eq!(
        add.text,
        "a.txt: Add File would overwrite an existing file; apply_patch never overwrites\nNo file was changed."
    );
    let mv = run(
        d,
        "*** Begin Patch\n*** Update File: a.txt\n*** Move to: b.txt\n@@\n-a\n+A\n*** End Patch",
    );
    assert!(
        mv.text.starts_with("b.txt: Move to would overwrite"),
        "{}",
        mv.text
    );
    assert_eq!(tree(d), before);
}

#[test]
fn refusals_name_the_file() {
    let ws = tempfile::tempdir().unwrap();
    let d = ws.path();
    fs::create_dir(d.join("dir")).unwrap();
    fs::write(d.join(".vault.toml"), "k = 1\n").unwrap();
    fs::write(d.join("t.txt"), "1\n").unwrap();
    let before = tree(d);
    let cases = [
        (
            "*** Delete File: missing.txt",
            "Failed to read file to delete missing.txt: No such file",
        ),
        (
            "*** Update File: missing.txt\n@@\n-a\n+b",
            "Failed to read file to update missing.txt: No such file",
        ),
        (
            "*** Delete File: dir",
            "dir: cannot delete it: it is a directory, not a regular file",
        ),
        (
            "*** Add File: ../escape.txt\n+x",
            "../escape.txt: the path is outside the workspace",
        ),
        (
            "*** Add File: /etc/escape.txt\n+x",
            "/etc/escape.txt: the path is outside the workspace",
        ),
        (
            "*** Delete File: .vault.toml",
            ".vault.toml: .vault.toml holds the user's secrets",
        ),
        (
            "*** Update File: t.txt\n@@\n-1\n+2\n*** Update File: ./t.txt\n@@\n-2\n+3",
            "./t.txt: the patch changes this file more than once",
        ),
    ];
    for (body, want) in cases {
        let r = run(d, &format!("*** Begin Patch\n{body}\n*** End Patch"));
        assert_eq!(r.stop_reason, StopReason::Failed, "{body}");
        assert!(r.text.starts_with(want), "{body}: {}", r.text);
        assert!(r.text.ends_with("No file was changed."), "{}", r.text);
    }
    let empty = run(d, "*** Begin Patch\n*** End Patch");
    assert_eq!(empty.text, "No files were modified.");
    let bad = run(
        d,
        "*** Begin Patch\n*** Frobnicate File: foo\n*** End Patch",
    );
    assert!(bad.text.starts_with(
        "invalid hunk at line 2, '*** Frobnicate File: foo' is not a valid hunk header"
    ));
    assert_eq!(tree(d), before);
}

#[test]
fn limits() {
    let ws = tempfile::tempdir().unwrap();
    let d = ws.path();
    let mut many = String::from("*** Begin Patch\n");
    for i in 0..129 {
        many.push_str(&format!("*** Add File: f{i}.txt\n+x\n"));
    }
    many.push_str("*** End Patch");
    let r = run(d, &many);
    assert!(
        r.text
            .starts_with("the patch changes 129 files; at most 128"),
        "{}",
        r.text
    );
    fs::write(d.join("h.txt"), "x\n".repeat(2000)).unwrap();
    let mut hunks = String::from("*** Begin Patch\n*** Update File: h.txt\n");
    for _ in 0..1025 {
        hunks.push_str("@@\n-x\n+y\n");
    }
    hunks.push_str("*** End Patch");
    let r = run(d, &hunks);
    assert!(
        r.text.starts_with("the patch has 1025 hunks; at most 1024"),
        "{}",
        r.text
    );
    let huge = format!(
        "*** Begin Patch\n*** Add File: big.txt\n+{}\n*** End Patch",
        "x".repeat(MAX_BYTES)
    );
    let r = run(d, &huge);
    assert!(r.text.starts_with("the patch is "), "{}", r.text);
    let names: Vec<String> = tree(d).into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, vec!["h.txt".to_string()]);
}

#[test]
fn rollback_when_the_second_rename_fails() {
    let ws = tempfile::tempdir().unwrap();
    let d = ws.path();
    fs::write(d.join("a.txt"), "a1\n").unwrap();
    fs::write(d.join("del.txt"), "gone?\n").unwrap();
    let before = tree(d);
    let patch = "*** Begin Patch\n*** Update File: a.txt\n@@\n-a1\n+a2\n*** Delete File: del.txt\n*** Add File: sub/deep/b.txt\n+b\n*** End Patch";
    // Step 0 (a.txt) and 1 (del.txt) succeed; right before step 2 another writer creates
    // sub/deep/b.txt, so the real no-replace rename of step 2 fails.
    let target = d.join("sub/deep/b.txt");
    let mut seen = Vec::new();
    let r = apply_text(d, patch, &mut |i| {
        seen.push(i);
        if i == 2 {
            fs::write(&target, "someone else\n")?;
        }
        Ok(())
    });
    assert_eq!(r.stop_reason, StopReason::Failed);
    assert!(
        r.text
            .starts_with("Failed to apply the patch at sub/deep/b.txt: "),
        "{}",
        r.text
    );
    assert!(
        r.text
            .ends_with("Every file was restored; nothing was changed."),
        "{}",
        r.text
    );
    assert_eq!(seen, vec![0, 1, 2]);
    assert_eq!(fs::read_to_string(d.join("a.txt")).unwrap(), "a1\n");
    assert_eq!(fs::read_to_string(d.join("del.txt")).unwrap(), "gone?\n");
    // Only the other writer's file is new; the staged temp file is gone.
    fs::remove_file(&target).unwrap();
    fs::remove_dir_all(d.join("sub")).unwrap();
    assert_eq!(tree(d), before);
}

#[test]
fn rollback_of_a_second_rename_failing_in_a_read_only_directory() {
    let ws = tempfile::tempdir().unwrap();
    let d = ws.path();
    fs::write(d.join("a.txt"), "a1\n").unwrap();
    fs::create_dir(d.join("ro")).unwrap();
    fs::write(d.join("ro/b.txt"), "b1\n").unwrap();
    let before = tree(d);
    let patch = "*** Begin Patch\n*** Update File: a.txt\n@@\n-a1\n+a2\n*** Update File: ro/b.txt\n@@\n-b1\n+b2\n*** End Patch";
    // The directory of the second target turns read-only after staging: its backup link and
    // rename fail for real (for root, which ignores modes, the hook fails the step instead).
    let ro = d.join("ro");
    let r = apply_text(d, patch, &mut |i| {
        if i == 1 {
            fs::set_permissions(&ro, fs::Permissions::from_mode(0o555))?;
            let probe = ro.join("probe");
            if fs::write(&probe, "").is_ok() {
                fs::remove_file(&probe)?;
                return Err(io::Error::from(io::ErrorKind::PermissionDenied));
            }
        }
        Ok(())
    });
    fs::set_permissions(&ro, fs::Permissions::from_mode(0o755)).unwrap();
    assert_eq!(r.stop_reason, StopReason::Failed);
    assert!(
        r.text
            .starts_with("Failed to apply the patch at ro/b.txt: "),
        "{}",
        r.text
    );
    assert!(
        r.text
            .ends_with("Every file was restored; nothing was changed."),
        "{}",
        r.text
    );
    assert_eq!(tree(d), before);
}

#[test]
fn writes_through_symlinks_and_keeps_mode_and_hard_links() {
    let ws = tempfile::tempdir().unwrap();
    let d = ws.path();
    fs::write(d.join("real.txt"), "r1\n").unwrap();
    symlink("real.txt", d.join("link.txt")).unwrap();
    fs::write(d.join("x.sh"), "echo 1\n").unwrap();
    fs::set_permissions(d.join("x.sh"), fs::Permissions::from_mode(0o751)).unwrap();
    fs::write(d.join("h1.txt"), "h1\n").unwrap();
    fs::hard_link(d.join("h1.txt"), d.join("h2.txt")).unwrap();
    let r = run(
        d,
        "*** Begin Patch\n*** Update File: link.txt\n@@\n-r1\n+r2\n*** Update File: x.sh\n@@\n-echo 1\n+echo 2\n*** Update File: h1.txt\n@@\n-h1\n+h2\n*** End Patch",
    );
    assert_eq!(r.stop_reason, StopReason::Completed, "{}", r.text);
    assert!(
        fs::symlink_metadata(d.join("link.txt"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(fs::read_to_string(d.join("real.txt")).unwrap(), "r2\n");
    assert_eq!(fs::metadata(d.join("x.sh")).unwrap().mode() & 0o7777, 0o751);
    assert_eq!(fs::read_to_string(d.join("h2.txt")).unwrap(), "h2\n");
    assert_eq!(fs::metadata(d.join("h1.txt")).unwrap().nlink(), 2);
}

#[test]
fn write_keys_cover_sources_and_destinations() {
    let ws = tempfile::tempdir().unwrap();
    let d = ws.path();
    fs::write(d.join("a.txt"), "a\n").unwrap();
    let args = serde_json::json!({"input": "*** Begin Patch\n*** Update File: a.txt\n*** Move to: b.txt\n@@\n-a\n+b\n*** Add File: c.txt\n+c\n*** End Patch"});
    let keys = write_keys(d, args.as_object().unwrap());
    let canon = fs::canonicalize(d).unwrap();
    for name in ["a.txt", "b.txt", "c.txt"] {
        assert!(
            keys.contains(&PathKey::Path(canon.join(name))),
            "{name}: {keys:?}"
        );
    }
    let none = serde_json::json!({"input": "not a patch"});
    assert!(write_keys(d, none.as_object().unwrap()).is_empty());
}

#[test]
fn the_readme_example_applies() {
    let ws = tempfile::tempdir().unwrap();
    let d = ws.path();
    fs::create_dir(d.join("src")).unwrap();
    fs::write(d.join("src/app.py"), "def main():\n    print(\"hi\")\n").unwrap();
    fs::write(d.join("CHANGES.md"), "# Changes\n## 1.0\n").unwrap();
    fs::write(d.join("old.txt"), "old\n").unwrap();
    let readme =
        fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/guide/tools.md")).unwrap();
    let start = readme.find("*** Begin Patch").unwrap();
    let end = readme[start..].find("*** End Patch").unwrap() + start + "*** End Patch".len();
    let r = run(d, &readme[start..end]);
    assert_eq!(
        r.text,
        "Success. Updated the following files:\nA docs/hello.md\nM src/main.py\nM CHANGES.md\nD old.txt\n"
    );
    assert_eq!(
        fs::read_to_string(d.join("docs/hello.md")).unwrap(),
        "Hello\nworld\n"
    );
    assert_eq!(
        fs::read_to_string(d.join("src/main.py")).unwrap(),
        "def main():\n    print(\"hello\")\n"
    );
    assert_eq!(
        fs::read_to_string(d.join("CHANGES.md")).unwrap(),
        "# Changes\n## 1.0\n- renamed app.py to main.py\n"
    );
    assert!(!d.join("src/app.py").exists() && !d.join("old.txt").exists());
}

#[test]
fn non_regular_and_outside_targets_are_refused() {
    let ws = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let d = ws.path();
    let o = outside.path();
    fs::write(o.join("o.txt"), "o\n").unwrap();
    symlink(o.join("o.txt"), d.join("out.txt")).unwrap();
    symlink(o.join("new.txt"), d.join("dangling")).unwrap();
    symlink(o, d.join("outdir")).unwrap();
    nix::unistd::mkfifo(
        &d.join("pipe"),
        nix::sys::stat::Mode::from_bits_truncate(0o600),
    )
    .unwrap();
    let cases = [
        (
            "*** Update File: out.txt\n@@\n-o\n+x",
            "out.txt: the path is outside the workspace",
        ),
        (
            "*** Add File: dangling\n+x",
            "dangling: the path is outside the workspace",
        ),
        (
            "*** Add File: outdir/n.txt\n+x",
            "outdir/n.txt: the path is outside the workspace",
        ),
        (
            "*** Update File: pipe\n@@\n-a\n+b",
            "pipe: cannot update it: it is a FIFO (named pipe), not a regular file",
        ),
    ];
    for (body, want) in cases {
        let r = run(d, &format!("*** Begin Patch\n{body}\n*** End Patch"));
        assert_eq!(r.stop_reason, StopReason::Failed, "{body}");
        assert!(r.text.starts_with(want), "{body}: {}", r.text);
    }
    assert_eq!(tree(o), vec![("o.txt".to_string(), b"o\n".to_vec())]);
}

#[test]
fn absolute_paths_may_name_the_workspace_through_a_symlink() {
    let dir = tempfile::tempdir().unwrap();
    let root = fs::canonicalize(dir.path()).unwrap();
    let (ws, link) = (root.join("ws"), root.join("wslink"));
    fs::create_dir_all(root.join("out")).unwrap();
    fs::create_dir_all(&ws).unwrap();
    fs::write(ws.join("m.txt"), "a\n").unwrap();
    symlink(root.join("out"), ws.join("outdir")).unwrap();
    symlink("ws", &link).unwrap();
    // The workspace as a session holds it (canonical) or as given (the link).
    for (given, other, name) in [(&ws, &link, "c.txt"), (&link, &ws, "d.txt")] {
        let (new, m) = (other.join(name), other.join("m.txt"));
        let patch = format!(
            "*** Begin Patch\n*** Add File: {}\n+x\n*** Update File: {}\n@@\n-a\n+b\n*** End Patch",
            new.display(),
            m.display()
        );
        let r = run(given, &patch);
        assert_eq!(r.stop_reason, StopReason::Completed, "{}", r.text);
        assert_eq!(fs::read_to_string(ws.join(name)).unwrap(), "x\n");
        assert_eq!(fs::read_to_string(ws.join("m.txt")).unwrap(), "b\n");
        fs::write(ws.join("m.txt"), "a\n").unwrap();
        // Where a path really leads is still checked.
        let out = other.join("outdir/n.txt");
        let r = run(
            given,
            &format!(
                "*** Begin Patch\n*** Add File: {}\n+x\n*** End Patch",
                out.display()
            ),
        );
        assert!(
            r.text.starts_with(&format!(
                "{}: the path is outside the workspace",
                out.display()
            )),
            "{}",
            r.text
        );
    }
    assert!(tree(&root.join("out")).is_empty());
}

#[test]
fn a_stop_before_the_commit_changes_nothing() {
    let ws = tempfile::tempdir().unwrap();
    let d = ws.path();
    fs::write(d.join("a.txt"), "a1\n").unwrap();
    let before = tree(d);
    let patch = "*** Begin Patch\n*** Update File: a.txt\n@@\n-a1\n+a2\n*** Add File: b.txt\n+b\n*** End Patch";
    let mut steps = Vec::new();
    let r = apply_text_until(d, patch, &|| true, &mut |i| {
        steps.push(i);
        Ok(())
    });
    assert_eq!(
        r,
        ToolReply::fail(
            "apply_patch stopped: the call was cancelled before any file was written\nNo file was changed."
        )
    );
    assert!(steps.is_empty());
    assert_eq!(tree(d), before);
}

#[test]
fn a_stop_during_the_commit_undoes_the_renames_done() {
    let ws = tempfile::tempdir().unwrap();
    let d = ws.path();
    fs::write(d.join("a.txt"), "a1\n").unwrap();
    fs::write(d.join("del.txt"), "gone?\n").unwrap();
    let before = tree(d);
    let patch = "*** Begin Patch\n*** Update File: a.txt\n@@\n-a1\n+a2\n*** Delete File: del.txt\n*** Add File: sub/b.txt\n+b\n*** End Patch";
    // The cancel arrives while step 0 (a.txt) is done: step 1 is never made.
    let cancelled = std::cell::Cell::new(false);
    let mut steps = Vec::new();
    let r = apply_text_until(d, patch, &|| cancelled.get(), &mut |i| {
        steps.push(i);
        cancelled.set(true);
        Ok(())
    });
    assert_eq!(steps, vec![0]);
    assert_eq!(r.stop_reason, StopReason::Failed);
    assert_eq!(
        r.text,
        "Failed to apply the patch at del.txt: the call was cancelled before this file was written\nEvery file was restored; nothing was changed."
    );
    assert_eq!(tree(d), before);
}
