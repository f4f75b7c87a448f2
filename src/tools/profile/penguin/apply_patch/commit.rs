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
//! Every file is reached through its directory, opened once when the change is staged and
//! judged after the open: the directory the kernel says was opened must really lie in the
//! workspace. Temp files, backups, renames, links and missing directories are then made
//! relative to that descriptor by one name, never following a symlink at that name, so a
//! directory or symlink swapped by rename after the plan was checked cannot lead a write out of
//! the workspace.
//!
//! It decides nothing about what to change (that is [`super::compute`]) and never follows a
//! path other than the ones in the plan.

use std::ffi::{OsStr, OsString};
use std::fs::{self, File, Metadata};
use std::io::{self, Write};
use std::os::fd::AsFd;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Component, Path};
use std::rc::Rc;

use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, RenameFlags, openat, renameat, renameat2};
use nix::sys::stat::{Mode, mkdirat};
use nix::unistd::{UnlinkatFlags, linkat, unlinkat};
use rand::Rng;
use rand::distr::Alphanumeric;

use super::compute::{Action, Change};
use crate::tools::file_target::same_file;
use crate::tools::opened_at::{InsideError, open_dir_inside};

/// Attempts at finding an unused temp or backup name.
const NAME_ATTEMPTS: usize = 16;

/// Longest file name kept in a temp or backup name (bytes; the suffix is added after it).
const NAME_KEEP: usize = 200;

/// A failed commit: which file, why, and what the rollback achieved.
#[derive(Debug, thiserror::Error)]
#[error("Failed to apply the patch at {shown}: {source}\n{restored}")]
pub struct CommitError {
    /// The path as the patch wrote it.
    pub shown: String,
    /// The I/O error.
    pub source: io::Error,
    /// What the rollback restored (or could not), as the result's last line.
    pub restored: String,
}

/// A directory opened (and judged inside the workspace) once, shared by the steps in it.
type Dir = Rc<File>;

/// One reversible change on disk; every name is one component in `dir`.
enum Step {
    /// Rename `tmp` to `name`, which must not exist. Undo: remove `name`.
    Create {
        dir: Dir,
        tmp: OsString,
        name: OsString,
    },
    /// Link `name` to a backup, rename `tmp` over `name`. Undo: rename the backup back.
    Swap {
        dir: Dir,
        tmp: OsString,
        name: OsString,
        backup: Option<OsString>,
    },
    /// Rewrite the inode of `name` in place. Undo: write `old` back the same way.
    InPlace {
        dir: Dir,
        name: OsString,
        contents: Vec<u8>,
        old: Vec<u8>,
        meta: Metadata,
    },
    /// Rename `name` to a backup. Undo: rename it back.
    Remove {
        dir: Dir,
        name: OsString,
        backup: Option<OsString>,
    },
}

/// The staged plan: its steps (with the file each belongs to) and the directories it created
/// (each as its parent directory and its name).
struct Staged {
    steps: Vec<(String, Step)>,
    created_dirs: Vec<(Dir, OsString)>,
}

/// Applies `changes` in `workspace`; on error nothing is left changed (see the module header).
pub fn commit(workspace: &Path, changes: Vec<Change>) -> Result<(), CommitError> {
    commit_with(workspace, changes, &mut |_| Ok(()))
}

/// [`commit`] with `before_step(i)` called before the `i`-th switch step; an error it returns
/// fails that step (tests use it to inject a failure on the real commit path).
pub fn commit_with(
    workspace: &Path,
    changes: Vec<Change>,
    before_step: &mut dyn FnMut(usize) -> io::Result<()>,
) -> Result<(), CommitError> {
    let mut staged = Staged {
        steps: Vec::new(),
        created_dirs: Vec::new(),
    };
    for change in changes {
        let shown = change.shown.clone();
        if let Err(source) = stage(workspace, change, &mut staged) {
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

/// The last name of `path` (a file's name in its directory).
fn name_of(path: &Path) -> io::Result<OsString> {
    path.file_name()
        .map(OsStr::to_os_string)
        .ok_or_else(|| io::Error::other(format!("{} does not name a file", path.display())))
}

/// The directory of `path`, opened and judged inside `workspace` (see the module header).
fn dir_of(workspace: &Path, path: &Path) -> io::Result<Dir> {
    let parent = path.parent().unwrap_or(Path::new("."));
    match open_dir_inside(workspace, parent) {
        Ok(inside) => Ok(Rc::new(inside.dir)),
        Err(InsideError::Io(e)) => Err(e),
        Err(e @ InsideError::Outside(_)) => Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            e.to_string(),
        )),
    }
}

/// Writes the temp files of one change and records its steps.
fn stage(workspace: &Path, change: Change, staged: &mut Staged) -> io::Result<()> {
    let shown = change.shown;
    match change.action {
        Action::Create { path, contents } => {
            let dir = make_parents(workspace, &path, &mut staged.created_dirs)?;
            let name = name_of(&path)?;
            let tmp = write_temp(&dir, &name, &contents, None)?;
            staged.steps.push((shown, Step::Create { dir, tmp, name }));
        }
        Action::Replace {
            path,
            contents,
            old,
            meta,
        } => {
            let dir = dir_of(workspace, &path)?;
            let name = name_of(&path)?;
            let in_place = |dir: &Dir, contents, old, meta| Step::InPlace {
                dir: Rc::clone(dir),
                name: name.clone(),
                contents,
                old,
                meta,
            };
            if meta.nlink() > 1 {
                staged
                    .steps
                    .push((shown, in_place(&dir, contents, old, meta)));
                return Ok(());
            }
            match write_temp(&dir, &name, &contents, Some(&meta)) {
                Ok(tmp) => staged.steps.push((
                    shown,
                    Step::Swap {
                        dir,
                        tmp,
                        name: name.clone(),
                        backup: None,
                    },
                )),
                // The owner cannot be given to a new file: keep the inode.
                Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
                    tracing::debug!(path = %path.display(), "owner cannot be kept; writing in place");
                    staged
                        .steps
                        .push((shown, in_place(&dir, contents, old, meta)));
                }
                Err(e) => return Err(e),
            }
        }
        Action::Remove { path } => {
            let dir = dir_of(workspace, &path)?;
            let name = name_of(&path)?;
            staged.steps.push((
                shown,
                Step::Remove {
                    dir,
                    name,
                    backup: None,
                },
            ));
        }
        Action::Move {
            from,
            to,
            contents,
            meta,
        } => {
            let from_dir = dir_of(workspace, &from)?;
            let from_name = name_of(&from)?;
            let dir = make_parents(workspace, &to, &mut staged.created_dirs)?;
            let name = name_of(&to)?;
            let tmp = match write_temp(&dir, &name, &contents, Some(&meta)) {
                Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
                    // A moved file that cannot keep its owner still keeps its mode.
                    let tmp = write_temp(&dir, &name, &contents, None)?;
                    let mode = Mode::from_bits_truncate(meta.mode() & 0o7777);
                    let chmod = openat(
                        dir.as_fd(),
                        tmp.as_os_str(),
                        OFlag::O_WRONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
                        Mode::empty(),
                    )
                    .and_then(|fd| nix::sys::stat::fchmod(&fd, mode));
                    if let Err(e) = chmod {
                        let _ = unlinkat(dir.as_fd(), tmp.as_os_str(), UnlinkatFlags::NoRemoveDir);
                        return Err(io::Error::from(e));
                    }
                    tmp
                }
                other => other?,
            };
            staged
                .steps
                .push((shown.clone(), Step::Create { dir, tmp, name }));
            staged.steps.push((
                shown,
                Step::Remove {
                    dir: from_dir,
                    name: from_name,
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
        Step::Create { dir, tmp, name } => rename_noreplace(dir, tmp, name),
        Step::Swap {
            dir,
            tmp,
            name,
            backup,
        } => {
            // The entry itself is linked (a symlink swapped in is linked, not followed).
            let b = free_name(name, "orig", |b| {
                linkat(
                    dir.as_fd(),
                    name.as_os_str(),
                    dir.as_fd(),
                    b,
                    AtFlags::empty(),
                )
                .map_err(io::Error::from)
            })?;
            if let Err(e) = renameat(dir.as_fd(), tmp.as_os_str(), dir.as_fd(), name.as_os_str()) {
                // Not done: the backup link is not needed.
                let _ = unlinkat(dir.as_fd(), b.as_os_str(), UnlinkatFlags::NoRemoveDir);
                return Err(io::Error::from(e));
            }
            *backup = Some(b);
            let _ = dir.sync_all();
            Ok(())
        }
        Step::InPlace {
            dir,
            name,
            contents,
            meta,
            ..
        } => write_in_place(dir, name, meta, contents),
        Step::Remove { dir, name, backup } => {
            let b = free_name(name, "orig", |b| rename_noreplace(dir, name, b))?;
            *backup = Some(b);
            let _ = dir.sync_all();
            Ok(())
        }
    }
}

/// Reverts a step that was done.
fn undo(step: &Step) -> io::Result<()> {
    match step {
        Step::Create { dir, name, .. } => {
            unlinkat(dir.as_fd(), name.as_os_str(), UnlinkatFlags::NoRemoveDir)
                .map_err(io::Error::from)
        }
        Step::Swap {
            dir, name, backup, ..
        } => match backup {
            Some(b) => renameat(dir.as_fd(), b.as_os_str(), dir.as_fd(), name.as_os_str())
                .map_err(io::Error::from),
            None => Ok(()),
        },
        Step::InPlace {
            dir,
            name,
            old,
            meta,
            ..
        } => write_in_place(dir, name, meta, old),
        Step::Remove { dir, name, backup } => match backup {
            Some(b) => rename_noreplace(dir, b, name),
            None => Ok(()),
        },
    }
}

/// After success: drops the backups (best effort; a leftover backup only costs space).
fn finish(step: &Step) {
    if let Step::Swap {
        dir,
        backup: Some(b),
        ..
    }
    | Step::Remove {
        dir,
        backup: Some(b),
        ..
    } = step
        && let Err(e) = unlinkat(dir.as_fd(), b.as_os_str(), UnlinkatFlags::NoRemoveDir)
    {
        tracing::warn!(name = %b.to_string_lossy(), error = %e, "apply_patch could not remove a backup");
    }
}

/// Removes the temp files of the steps from `from` on (never done) and the created directories.
fn cleanup(staged: &Staged, from: usize) {
    for (_, step) in staged.steps.iter().skip(from) {
        if let Step::Create { dir, tmp, .. } | Step::Swap { dir, tmp, .. } = step {
            let _ = unlinkat(dir.as_fd(), tmp.as_os_str(), UnlinkatFlags::NoRemoveDir);
        }
    }
    for (dir, name) in staged.created_dirs.iter().rev() {
        // Only empty directories go; one still holding something stays.
        let _ = unlinkat(dir.as_fd(), name.as_os_str(), UnlinkatFlags::RemoveDir);
    }
}

/// Opens the directory of `path` for a new file, creating its missing parents: the deepest
/// existing ancestor is opened and judged inside `workspace`, then each missing directory is
/// made in the one before it and opened without following a symlink. Each directory created is
/// remembered (outermost first).
fn make_parents(
    workspace: &Path,
    path: &Path,
    created: &mut Vec<(Dir, OsString)>,
) -> io::Result<Dir> {
    let parent = path.parent().unwrap_or(Path::new("."));
    let existing = parent
        .ancestors()
        .find(|a| a.as_os_str().is_empty() || fs::symlink_metadata(a).is_ok())
        .unwrap_or(Path::new("."));
    let mut dir = dir_of(workspace, &existing.join("_"))?;
    let below = parent.strip_prefix(existing).map_err(io::Error::other)?;
    for component in below.components() {
        let Component::Normal(name) = component else {
            return Err(io::Error::other(format!(
                "{} is not a plain directory path",
                parent.display()
            )));
        };
        match mkdirat(dir.as_fd(), name, Mode::from_bits_truncate(0o777)) {
            Ok(()) => created.push((Rc::clone(&dir), name.to_os_string())),
            Err(Errno::EEXIST) => {}
            Err(e) => return Err(io::Error::from(e)),
        }
        let next = openat(
            dir.as_fd(),
            name,
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(io::Error::from)?;
        dir = Rc::new(File::from(next));
    }
    Ok(dir)
}

/// A fresh temp file in `dir` beside `name` holding `contents` (with `keep`'s owner, group and
/// mode), fsynced. On any failure nothing is left behind.
fn write_temp(
    dir: &Dir,
    name: &OsStr,
    contents: &[u8],
    keep: Option<&Metadata>,
) -> io::Result<OsString> {
    let mut file = None;
    let tmp = free_name(name, "tmp", |candidate| {
        let fd = openat(
            dir.as_fd(),
            candidate,
            OFlag::O_WRONLY
                | OFlag::O_CREAT
                | OFlag::O_EXCL
                | OFlag::O_NOFOLLOW
                | OFlag::O_NOCTTY
                | OFlag::O_CLOEXEC,
            Mode::from_bits_truncate(0o666),
        )
        .map_err(io::Error::from)?;
        file = Some(File::from(fd));
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
        let _ = unlinkat(dir.as_fd(), tmp.as_os_str(), UnlinkatFlags::NoRemoveDir);
        return Err(e);
    }
    Ok(tmp)
}

/// Tries `make` on fresh names `.<name>.<tag>-<pid>-<6 random>` until one does not exist yet.
fn free_name(
    name: &OsStr,
    tag: &str,
    mut make: impl FnMut(&OsStr) -> io::Result<()>,
) -> io::Result<OsString> {
    let mut last = None;
    for _ in 0..NAME_ATTEMPTS {
        let candidate = side_name(name, tag);
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

/// `rename(from, to)` in `dir` that never replaces an existing `to`.
fn rename_noreplace(dir: &Dir, from: &OsStr, to: &OsStr) -> io::Result<()> {
    match renameat2(
        dir.as_fd(),
        from,
        dir.as_fd(),
        to,
        RenameFlags::RENAME_NOREPLACE,
    ) {
        Ok(()) => Ok(()),
        Err(Errno::EINVAL) | Err(Errno::ENOSYS) => {
            // The file system cannot do it atomically: check, then rename.
            let exists = nix::sys::stat::fstatat(dir.as_fd(), to, AtFlags::AT_SYMLINK_NOFOLLOW);
            if exists.is_ok() {
                return Err(io::Error::from(io::ErrorKind::AlreadyExists));
            }
            renameat(dir.as_fd(), from, dir.as_fd(), to).map_err(io::Error::from)
        }
        Err(e) => Err(io::Error::from(e)),
    }
}

/// Truncate + write + fsync of the very inode `expected` describes (opened by its name in `dir`
/// without following a symlink).
fn write_in_place(dir: &Dir, name: &OsStr, expected: &Metadata, contents: &[u8]) -> io::Result<()> {
    let fd = openat(
        dir.as_fd(),
        name,
        OFlag::O_WRONLY
            | OFlag::O_NONBLOCK
            | OFlag::O_NOCTTY
            | OFlag::O_NOFOLLOW
            | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(io::Error::from)?;
    let mut file = File::from(fd);
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
