//! Applying a computed plan to disk, all or nothing as far as a live process can make it.
//!
//! 1. **Stage**: every new content goes to a temp file `.<name>.tmp-<pid>-<6 random>` beside
//!    its target (missing parent directories are created and remembered), with the old file's
//!    owner, group and mode, fsynced. A failure here removes every temp file and created
//!    directory: nothing visible changed.
//! 2. **Switch**: one rename per step, each recorded with its undo. A replaced file's old inode
//!    is first hard-linked to a backup `.<name>.orig-<pid>-<6 random>`; a deleted (or moved
//!    away) file is renamed to such a backup; a new file is renamed into place without ever
//!    replacing anything (`RENAME_NOREPLACE`). A file with several hard links is written in
//!    place (the old bytes are kept in memory for the undo). If a step fails, every step done
//!    so far is undone in reverse order, temp files and created directories are removed.
//! 3. **Finish**: the backups are removed.
//!
//! A crash (power loss, SIGKILL) during step 2 can leave some files changed and others not,
//! with the previous contents of replaced or deleted files in their `.orig-` backups, leftover
//! `.tmp-` files and newly created directories; nothing is ever lost.
//!
//! It decides nothing about what to change (that is [`super::compute`]) and never follows a
//! path other than the ones in the plan.

use std::ffi::{OsStr, OsString};
use std::fs::{self, File, Metadata, OpenOptions};
use std::io::{self, Write};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use nix::fcntl::{AT_FDCWD, RenameFlags, renameat2};
use rand::Rng;
use rand::distr::Alphanumeric;

use super::compute::{Action, Change};
use crate::tools::file_target::same_file;

/// Attempts at finding an unused temp or backup name.
const NAME_ATTEMPTS: usize = 16;

/// Longest file name kept in a temp or backup name (bytes; the suffix is added after it).
const NAME_KEEP: usize = 200;

/// A failed commit: which file, why, and what the rollback achieved.
#[derive(Debug, thiserror::Error)]
#[error("Failed to apply the patch at {shown}: {source}\n{restored}")]
pub struct CommitError {
    pub shown: String,
    pub source: io::Error,
    pub restored: String,
}

/// One reversible change on disk.
enum Step {
    /// Rename `tmp` to `path`, which must not exist. Undo: remove `path`.
    Create { tmp: PathBuf, path: PathBuf },
    /// Link `path` to a backup, rename `tmp` over `path`. Undo: rename the backup back.
    Swap {
        tmp: PathBuf,
        path: PathBuf,
        backup: Option<PathBuf>,
    },
    /// Rewrite the inode of `path` in place. Undo: write `old` back the same way.
    InPlace {
        path: PathBuf,
        contents: Vec<u8>,
        old: Vec<u8>,
        meta: Metadata,
    },
    /// Rename `path` to a backup. Undo: rename it back.
    Remove {
        path: PathBuf,
        backup: Option<PathBuf>,
    },
}

/// The staged plan: its steps (with the file each belongs to) and the directories it created.
struct Staged {
    steps: Vec<(String, Step)>,
    created_dirs: Vec<PathBuf>,
}

/// Applies `changes`; on error nothing is left changed (see the module header).
pub fn commit(changes: Vec<Change>) -> Result<(), CommitError> {
    commit_with(changes, &mut |_| Ok(()))
}

/// [`commit`] with `before_step(i)` called before the `i`-th switch step; an error it returns
/// fails that step (tests use it to inject a failure on the real commit path).
pub fn commit_with(
    changes: Vec<Change>,
    before_step: &mut dyn FnMut(usize) -> io::Result<()>,
) -> Result<(), CommitError> {
    let mut staged = Staged {
        steps: Vec::new(),
        created_dirs: Vec::new(),
    };
    for change in changes {
        let shown = change.shown.clone();
        if let Err(source) = stage(change, &mut staged) {
            cleanup(&staged, 0);
            return Err(CommitError {
                shown,
                source,
                restored: "Nothing was changed.".to_string(),
            });
        }
    }
    let mut done = 0;
    let mut failure = None;
    for i in 0..staged.steps.len() {
        let result = before_step(i).and_then(|()| apply(&mut staged.steps[i].1));
        if let Err(source) = result {
            failure = Some((staged.steps[i].0.clone(), source));
            break;
        }
        done += 1;
    }
    if let Some((shown, source)) = failure {
        let mut problems = Vec::new();
        for (shown, step) in staged.steps[..done].iter().rev() {
            if let Err(e) = undo(step) {
                problems.push(format!("{shown}: {e}"));
            }
        }
        cleanup(&staged, done);
        let restored = if problems.is_empty() {
            "Every file was restored; nothing was changed.".to_string()
        } else {
            format!(
                "The rollback could not restore: {}. Backups are beside each file as .<name>.orig-*.",
                problems.join("; ")
            )
        };
        tracing::warn!(file = %shown, error = %source, "apply_patch commit failed; rolled back");
        return Err(CommitError {
            shown,
            source,
            restored,
        });
    }
    for (_, step) in &staged.steps {
        finish(step);
    }
    Ok(())
}

/// Writes the temp files of one change and records its steps.
fn stage(change: Change, staged: &mut Staged) -> io::Result<()> {
    let shown = change.shown;
    match change.action {
        Action::Create { path, contents } => {
            make_parents(&path, &mut staged.created_dirs)?;
            let tmp = write_temp(&path, &contents, None)?;
            staged.steps.push((shown, Step::Create { tmp, path }));
        }
        Action::Replace {
            path,
            contents,
            old,
            meta,
        } => {
            let in_place = |contents, old, meta| Step::InPlace {
                path: path.clone(),
                contents,
                old,
                meta,
            };
            if meta.nlink() > 1 {
                staged.steps.push((shown, in_place(contents, old, meta)));
                return Ok(());
            }
            match write_temp(&path, &contents, Some(&meta)) {
                Ok(tmp) => staged.steps.push((
                    shown,
                    Step::Swap {
                        tmp,
                        path: path.clone(),
                        backup: None,
                    },
                )),
                // The owner cannot be given to a new file: keep the inode.
                Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
                    tracing::debug!(path = %path.display(), "owner cannot be kept; writing in place");
                    staged.steps.push((shown, in_place(contents, old, meta)));
                }
                Err(e) => return Err(e),
            }
        }
        Action::Remove { path } => {
            staged
                .steps
                .push((shown, Step::Remove { path, backup: None }));
        }
        Action::Move {
            from,
            to,
            contents,
            meta,
        } => {
            make_parents(&to, &mut staged.created_dirs)?;
            let tmp = match write_temp(&to, &contents, Some(&meta)) {
                Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
                    // A moved file that cannot keep its owner still keeps its mode.
                    write_temp(&to, &contents, None).and_then(|tmp| {
                        fs::set_permissions(&tmp, fs::Permissions::from_mode(meta.mode() & 0o7777))
                            .map(|()| tmp)
                    })?
                }
                other => other?,
            };
            staged
                .steps
                .push((shown.clone(), Step::Create { tmp, path: to }));
            staged.steps.push((
                shown,
                Step::Remove {
                    path: from,
                    backup: None,
                },
            ));
        }
    }
    Ok(())
}

/// Does one step, recording what its undo needs.
fn apply(step: &mut Step) -> io::Result<()> {
    match step {
        Step::Create { tmp, path } => rename_noreplace(tmp, path),
        Step::Swap { tmp, path, backup } => {
            let b = free_name(path, "orig", |b| fs::hard_link(&*path, b))?;
            if let Err(e) = fs::rename(&*tmp, &*path) {
                // Not done: the backup link is not needed.
                let _ = fs::remove_file(&b);
                return Err(e);
            }
            *backup = Some(b);
            sync_parent(path);
            Ok(())
        }
        Step::InPlace {
            path,
            contents,
            meta,
            ..
        } => write_in_place(path, meta, contents),
        Step::Remove { path, backup } => {
            let b = free_name(path, "orig", |b| rename_noreplace(path, b))?;
            *backup = Some(b);
            sync_parent(path);
            Ok(())
        }
    }
}

/// Reverts a step that was done.
fn undo(step: &Step) -> io::Result<()> {
    match step {
        Step::Create { path, .. } => fs::remove_file(path),
        Step::Swap { path, backup, .. } => match backup {
            Some(b) => fs::rename(b, path),
            None => Ok(()),
        },
        Step::InPlace {
            path, old, meta, ..
        } => write_in_place(path, meta, old),
        Step::Remove { path, backup } => match backup {
            Some(b) => rename_noreplace(b, path),
            None => Ok(()),
        },
    }
}

/// After success: drops the backups (best effort; a leftover backup only costs space).
fn finish(step: &Step) {
    if let Step::Swap {
        backup: Some(b), ..
    }
    | Step::Remove {
        backup: Some(b), ..
    } = step
        && let Err(e) = fs::remove_file(b)
    {
        tracing::warn!(path = %b.display(), error = %e, "apply_patch could not remove a backup");
    }
}

/// Removes the temp files of the steps from `from` on (never done) and the created directories.
fn cleanup(staged: &Staged, from: usize) {
    for (_, step) in staged.steps.iter().skip(from) {
        if let Step::Create { tmp, .. } | Step::Swap { tmp, .. } = step {
            let _ = fs::remove_file(tmp);
        }
    }
    for dir in staged.created_dirs.iter().rev() {
        // Only empty directories go; one still holding something stays.
        let _ = fs::remove_dir(dir);
    }
}

/// Creates the missing parents of `path`, remembering each one created (outermost first).
fn make_parents(path: &Path, created: &mut Vec<PathBuf>) -> io::Result<()> {
    let Some(parent) = path.parent() else {
        return Ok(());
    };
    let missing: Vec<&Path> = parent
        .ancestors()
        .take_while(|a| !a.as_os_str().is_empty() && fs::symlink_metadata(a).is_err())
        .collect();
    for dir in missing.into_iter().rev() {
        match fs::create_dir(dir) {
            Ok(()) => created.push(dir.to_path_buf()),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && dir.is_dir() => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// A fresh temp file beside `path` holding `contents` (with `keep`'s owner, group and mode),
/// fsynced. On any failure nothing is left behind.
fn write_temp(path: &Path, contents: &[u8], keep: Option<&Metadata>) -> io::Result<PathBuf> {
    let mut file = None;
    let tmp = free_name(path, "tmp", |candidate| {
        file = Some(
            OpenOptions::new()
                .write(true)
                .create_new(true)
                .custom_flags(libc::O_NOCTTY)
                .open(candidate)?,
        );
        Ok(())
    })?;
    let Some(mut file) = file else {
        return Err(io::Error::other("temp file not created"));
    };
    let result = (|| {
        file.write_all(contents)?;
        if let Some(old) = keep {
            let mine = file.metadata()?;
            if (mine.uid(), mine.gid()) != (old.uid(), old.gid()) {
                std::os::unix::fs::fchown(&file, Some(old.uid()), Some(old.gid()))?;
            }
            file.set_permissions(fs::Permissions::from_mode(old.mode() & 0o7777))?;
        }
        file.sync_all()
    })();
    if let Err(e) = result {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    Ok(tmp)
}

/// Tries `make` on fresh names `.<name>.<tag>-<pid>-<6 random>` beside `path` until one does
/// not exist yet.
fn free_name(
    path: &Path,
    tag: &str,
    mut make: impl FnMut(&Path) -> io::Result<()>,
) -> io::Result<PathBuf> {
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::other(format!("{} does not name a file", path.display())))?;
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let mut last = None;
    for _ in 0..NAME_ATTEMPTS {
        let candidate = dir.join(side_name(name, tag));
        match make(&candidate) {
            Ok(()) => return Ok(candidate),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::other("no free temp name")))
}

fn side_name(name: &OsStr, tag: &str) -> OsString {
    let suffix: String = rand::rng()
        .sample_iter(&Alphanumeric)
        .take(6)
        .map(char::from)
        .collect();
    let bytes = name.as_bytes();
    let mut out = b".".to_vec();
    out.extend_from_slice(&bytes[..bytes.len().min(NAME_KEEP)]);
    out.extend_from_slice(format!(".{tag}-{}-{suffix}", std::process::id()).as_bytes());
    OsString::from_vec(out)
}

/// `rename(from, to)` that never replaces an existing `to`.
fn rename_noreplace(from: &Path, to: &Path) -> io::Result<()> {
    match renameat2(AT_FDCWD, from, AT_FDCWD, to, RenameFlags::RENAME_NOREPLACE) {
        Ok(()) => Ok(()),
        Err(nix::errno::Errno::EINVAL) | Err(nix::errno::Errno::ENOSYS) => {
            // The file system cannot do it atomically: check, then rename.
            if fs::symlink_metadata(to).is_ok() {
                return Err(io::Error::from(io::ErrorKind::AlreadyExists));
            }
            fs::rename(from, to)
        }
        Err(e) => Err(io::Error::from(e)),
    }
}

/// Truncate + write + fsync of the very inode `expected` describes.
fn write_in_place(path: &Path, expected: &Metadata, contents: &[u8]) -> io::Result<()> {
    let mut file = OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)?;
    let now = file.metadata()?;
    if !now.is_file() || !same_file(&now, expected) {
        return Err(io::Error::other(
            "the file was replaced by another one while the patch was applied",
        ));
    }
    file.set_len(0)?;
    file.write_all(contents)?;
    file.sync_all()
}

/// Best effort: makes a rename in `path`'s directory durable.
fn sync_parent(path: &Path) {
    if let Some(dir) = path.parent()
        && let Ok(d) = File::open(if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        })
    {
        let _ = d.sync_all();
    }
}
