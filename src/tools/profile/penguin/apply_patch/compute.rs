//! Turning parsed sections into the complete set of file changes, in memory: every path is
//! resolved and confined to the workspace, every file to update is read and its hunks applied
//! ([`super::hunks`]), and every rule is checked (Add and Move never overwrite, only regular
//! files, secret stores refused, the size and count limits).
//!
//! It reads and stats but never writes: when it returns an error nothing was changed, and
//! when it returns a plan, [`super::commit`] can apply it without further decisions. It asks
//! its `stop` between files, between hunks and during long searches, and ends with
//! [`PlanError::Stopped`] once it says so.

use std::collections::HashSet;
use std::fs::{self, Metadata};
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use super::hunks::{HunkError, new_contents};
use super::parser::{FileOp, ParseError, Section};
use crate::tools::canonical::{real_location, really_inside, under_workspace};
use crate::tools::file_target::{Target, TargetError};
use crate::tools::path_hint::normalize_lexically;
use crate::tools::resolve_path;
use crate::tools::secret_guard::{secret_by_identity, secret_by_name};

/// Most file sections in one patch.
pub const MAX_FILES: usize = 128;
/// Most `@@` hunks in one patch.
pub const MAX_HUNKS: usize = 1024;
/// Largest patch text, file read for an update, and file written (bytes).
pub const MAX_BYTES: usize = 4 * 1024 * 1024;

/// Why a patch cannot be applied. Nothing has been changed when one of these is returned.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// The patch text does not parse.
    #[error("{0}")]
    Parse(#[from] ParseError),
    /// The patch changes no file.
    #[error("No files were modified.")]
    NoChanges,
    /// The call was cancelled (aborted or timed out) while the patch was computed.
    #[error("apply_patch stopped: the call was cancelled before any file was written")]
    Stopped,
    /// The patch text is over 4 MB (`bytes`: its size).
    #[error("the patch is {bytes} bytes; at most {MAX_BYTES} (4 MB) are accepted")]
    PatchTooLarge {
        /// The patch text's size in bytes.
        bytes: usize,
    },
    /// The patch changes too many files (`count`: how many).
    #[error("the patch changes {count} files; at most {MAX_FILES} are accepted")]
    TooManyFiles {
        /// How many files the patch changes.
        count: usize,
    },
    /// The patch has too many hunks (`count`: how many).
    #[error("the patch has {count} hunks; at most {MAX_HUNKS} are accepted")]
    TooManyHunks {
        /// How many hunks the patch has.
        count: usize,
    },
    /// One file of the patch cannot be changed (`path` as written, `reason`).
    #[error("{path}: {reason}")]
    File {
        /// The path as the patch wrote it.
        path: String,
        /// Why that file cannot be changed.
        reason: FileError,
    },
    /// codex's text for a file that cannot be read (a missing one included).
    #[error("Failed to read file to {op} {path}: {source}")]
    Unreadable {
        /// What the file was read for (`update`, `delete`, …).
        op: &'static str,
        /// The path as the patch wrote it.
        path: String,
        /// The I/O error.
        source: io::Error,
    },
    /// A hunk that is not found (the texts are codex's).
    #[error(transparent)]
    Hunk(HunkError),
}

impl From<HunkError> for PlanError {
    fn from(e: HunkError) -> Self {
        match e {
            HunkError::Stopped => PlanError::Stopped,
            other => PlanError::Hunk(other),
        }
    }
}

/// What is wrong with one file of the patch.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// The path resolves outside the workspace.
    #[error("the path is outside the workspace")]
    OutsideWorkspace,
    /// The path is a file of the user's secrets (named in the text).
    #[error("{0} holds the user's secrets; apply_patch never changes it")]
    Secret(&'static str),
    /// An add or move onto an existing file (`op`: which).
    #[error("{op} would overwrite an existing file; apply_patch never overwrites")]
    Exists {
        /// The operation as the message names it (`add`, `Move to`, …).
        op: &'static str,
    },
    /// The file cannot be read (`op`: what for).
    #[error("Failed to read file to {op}: {source}")]
    Unreadable {
        /// What the file was read for (`update`, `delete`, …).
        op: &'static str,
        /// The OS error.
        source: io::Error,
    },
    /// The path is not a regular file (a directory, a device, …).
    #[error("cannot {op} it: {source}")]
    Kind {
        /// What was to be done with it.
        op: &'static str,
        /// What the path is instead.
        source: TargetError,
    },
    /// A parent of the path is a file (the parent as written).
    #[error("\"{0}\" is a file, not a directory")]
    ParentNotDirectory(String),
    /// The file is over 4 MB.
    #[error("the file is larger than {MAX_BYTES} bytes (4 MB)")]
    TooLarge,
    /// The file is not UTF-8 text.
    #[error("the file is not UTF-8 text")]
    NotUtf8,
    /// The patch has two sections for this file.
    #[error("the patch changes this file more than once; put all its hunks in one section")]
    Twice,
}

/// One change on disk, fully decided.
#[derive(Debug)]
pub enum Action {
    /// A new file at `path` (nothing may exist there).
    Create {
        /// Where the file is created.
        path: PathBuf,
        /// Its bytes.
        contents: Vec<u8>,
    },
    /// New contents for the existing regular file `path`; `old` and `meta` are what it was.
    Replace {
        /// The file.
        path: PathBuf,
        /// Its new contents.
        contents: Vec<u8>,
        /// Its contents before (for the rollback).
        old: Vec<u8>,
        /// Its metadata before (owner and mode are kept).
        meta: Metadata,
    },
    /// Removes the directory entry `path`.
    Remove {
        /// The entry removed.
        path: PathBuf,
    },
    /// Writes `contents` to the new file `to` (with `meta`'s owner and mode) and removes `from`.
    Move {
        /// The file moved.
        from: PathBuf,
        /// Where it goes (must not exist).
        to: PathBuf,
        /// Its new contents.
        contents: Vec<u8>,
        /// Its metadata before (owner and mode are kept).
        meta: Metadata,
    },
}

/// A change and its line of the success summary (`A`, `M` or `D` and the path as written).
#[derive(Debug)]
pub struct Change {
    /// `A` (added), `M` (modified or moved) or `D` (deleted).
    pub letter: char,
    /// The path as the patch wrote it.
    pub shown: String,
    /// What to do on disk.
    pub action: Action,
}

/// The total hunk count of a patch.
pub fn hunk_count(sections: &[Section]) -> usize {
    sections
        .iter()
        .map(|s| match &s.op {
            FileOp::Update { chunks, .. } => chunks.len(),
            _ => 0,
        })
        .sum()
}

/// Every change of the patch, or the first reason it cannot be applied (`stop`: see the
/// module header).
pub fn plan(
    workspace: &Path,
    sections: &[Section],
    stop: &dyn Fn() -> bool,
) -> Result<Vec<Change>, PlanError> {
    if sections.is_empty() {
        return Err(PlanError::NoChanges);
    }
    if sections.len() > MAX_FILES {
        return Err(PlanError::TooManyFiles {
            count: sections.len(),
        });
    }
    let hunks = hunk_count(sections);
    if hunks > MAX_HUNKS {
        return Err(PlanError::TooManyHunks { count: hunks });
    }
    let ws = Workspace::new(workspace);
    let mut seen = HashSet::new();
    let mut changes = Vec::with_capacity(sections.len());
    for section in sections {
        if stop() {
            return Err(PlanError::Stopped);
        }
        changes.push(plan_one(&ws, &section.op, &mut seen, stop)?);
    }
    Ok(changes)
}

fn plan_one(
    ws: &Workspace,
    op: &FileOp,
    seen: &mut HashSet<PathBuf>,
    stop: &dyn Fn() -> bool,
) -> Result<Change, PlanError> {
    let shown = op.path().to_string();
    let fail = |path: &str, reason: FileError| match reason {
        FileError::Unreadable { op, source } => PlanError::Unreadable {
            op,
            path: path.to_string(),
            source,
        },
        reason => PlanError::File {
            path: path.to_string(),
            reason,
        },
    };
    let path = ws.resolve(&shown).map_err(|r| fail(&shown, r))?;
    if let Some(name) = secret_by_name(&path) {
        return Err(fail(&shown, FileError::Secret(name)));
    }
    match op {
        FileOp::Add { contents, .. } => {
            let real = ws
                .new_file(&path, "Add File")
                .map_err(|r| fail(&shown, r))?;
            claim(seen, &real).map_err(|r| fail(&shown, r))?;
            check_size(contents.len()).map_err(|r| fail(&shown, r))?;
            Ok(Change {
                letter: 'A',
                shown,
                action: Action::Create {
                    path: real,
                    contents: contents.clone().into_bytes(),
                },
            })
        }
        FileOp::Delete { .. } => {
            if let Err(e) = fs::symlink_metadata(&path) {
                let source = e;
                return Err(fail(
                    &shown,
                    FileError::Unreadable {
                        op: "delete",
                        source,
                    },
                ));
            }
            let (real, meta, _) = ws.existing(&path, "delete").map_err(|r| fail(&shown, r))?;
            if let Some(name) = secret_by_identity(&real, &meta, &ws.given) {
                return Err(fail(&shown, FileError::Secret(name)));
            }
            claim(seen, &path).map_err(|r| fail(&shown, r))?;
            Ok(Change {
                letter: 'D',
                shown,
                action: Action::Remove { path },
            })
        }
        FileOp::Update {
            move_to, chunks, ..
        } => {
            let (real, meta, text) = ws.existing(&path, "update").map_err(|r| fail(&shown, r))?;
            if let Some(name) = secret_by_identity(&real, &meta, &ws.given) {
                return Err(fail(&shown, FileError::Secret(name)));
            }
            claim(seen, &real).map_err(|r| fail(&shown, r))?;
            let contents = new_contents(&shown, &text, chunks, stop)?.into_bytes();
            check_size(contents.len()).map_err(|r| fail(&shown, r))?;
            let Some(dest_shown) = move_to else {
                return Ok(Change {
                    letter: 'M',
                    shown,
                    action: Action::Replace {
                        path: real,
                        contents,
                        old: text.into_bytes(),
                        meta,
                    },
                });
            };
            let dest = ws.resolve(dest_shown).map_err(|r| fail(dest_shown, r))?;
            if let Some(name) = secret_by_name(&dest) {
                return Err(fail(dest_shown, FileError::Secret(name)));
            }
            if identity(&dest) == identity(&path) {
                // A move onto itself is an update.
                return Ok(Change {
                    letter: 'M',
                    shown: dest_shown.clone(),
                    action: Action::Replace {
                        path: real,
                        contents,
                        old: text.into_bytes(),
                        meta,
                    },
                });
            }
            if fs::symlink_metadata(&dest).is_ok() {
                return Err(fail(dest_shown, FileError::Exists { op: "Move to" }));
            }
            let to = ws
                .new_file(&dest, "Move to")
                .map_err(|r| fail(dest_shown, r))?;
            claim(seen, &to).map_err(|r| fail(dest_shown, r))?;
            Ok(Change {
                letter: 'M',
                shown: dest_shown.clone(),
                action: Action::Move {
                    from: path,
                    to,
                    contents,
                    meta,
                },
            })
        }
    }
}

fn check_size(len: usize) -> Result<(), FileError> {
    if len > MAX_BYTES {
        return Err(FileError::TooLarge);
    }
    Ok(())
}

/// Records that the patch changes `path`; a second change of the same file is refused.
fn claim(seen: &mut HashSet<PathBuf>, path: &Path) -> Result<(), FileError> {
    if seen.insert(identity(path)) {
        Ok(())
    } else {
        Err(FileError::Twice)
    }
}

/// `path` with its directory canonicalized (the name itself is kept: a link stays a link).
fn identity(path: &Path) -> PathBuf {
    let normal = normalize_lexically(path);
    match (normal.parent(), normal.file_name()) {
        (Some(dir), Some(name)) => fs::canonicalize(dir)
            .map(|d| d.join(name))
            .unwrap_or(normal.clone()),
        _ => normal,
    }
}

/// The workspace as given and lexically normalized (its canonical form is the `canonical`
/// module's, remembered per process).
struct Workspace {
    given: PathBuf,
    lexical: PathBuf,
}

impl Workspace {
    fn new(workspace: &Path) -> Self {
        Workspace {
            given: workspace.to_path_buf(),
            lexical: normalize_lexically(workspace),
        }
    }

    /// The patch path resolved against the workspace (an absolute one may name the workspace
    /// by any of its names: as given, canonical, or through a symlink to it) and rebased under
    /// it; it must stay inside, also after its existing directories' symlinks are resolved.
    fn resolve(&self, shown: &str) -> Result<PathBuf, FileError> {
        let asked = normalize_lexically(&resolve_path(&self.given, shown));
        let path = under_workspace(&self.lexical, &asked).ok_or(FileError::OutsideWorkspace)?;
        if path == self.lexical {
            return Err(FileError::OutsideWorkspace);
        }
        self.confine(&path)?;
        Ok(path)
    }

    /// Whether the directory of `path` really is inside the workspace (for a missing one,
    /// where its deepest existing ancestor leads).
    fn confine(&self, path: &Path) -> Result<(), FileError> {
        let dir = path.parent().unwrap_or(path);
        match real_location(dir) {
            Some(real) if really_inside(&self.lexical, &real) => Ok(()),
            _ => Err(FileError::OutsideWorkspace),
        }
    }

    /// Where a new file for `path` goes (a dangling symlink names its target): nothing may
    /// exist there, and the deepest existing ancestor must be a directory.
    fn new_file(&self, path: &Path, op: &'static str) -> Result<PathBuf, FileError> {
        let target = match Target::open(path) {
            Ok(t) => t,
            Err(TargetError::NotRegular(_)) => return Err(FileError::Exists { op }),
            Err(TargetError::Io(source)) => {
                return Err(FileError::Unreadable { op: "add", source });
            }
        };
        if target.existing.is_some() || fs::symlink_metadata(&target.real).is_ok() {
            return Err(FileError::Exists { op });
        }
        if target.via_symlink {
            let real = normalize_lexically(&target.real);
            if under_workspace(&self.lexical, &real).is_none() {
                return Err(FileError::OutsideWorkspace);
            }
            self.confine(&real)?;
            if let Some(name) = secret_by_name(&real) {
                return Err(FileError::Secret(name));
            }
        }
        let parent = target.real.parent().unwrap_or(Path::new("."));
        if let Some(blocking) = parent.ancestors().find(|a| fs::metadata(a).is_ok())
            && !blocking.is_dir()
        {
            return Err(FileError::ParentNotDirectory(
                blocking.display().to_string(),
            ));
        }
        Ok(target.real)
    }

    /// The real regular file behind `path`, its metadata and its UTF-8 text.
    fn existing(
        &self,
        path: &Path,
        op: &'static str,
    ) -> Result<(PathBuf, Metadata, String), FileError> {
        let target = Target::open(path).map_err(|source| match source {
            TargetError::Io(source) => FileError::Unreadable { op, source },
            source => FileError::Kind { op, source },
        })?;
        let Some(opened) = target.existing else {
            return Err(FileError::Unreadable {
                op,
                source: io::Error::from_raw_os_error(libc::ENOENT),
            });
        };
        if target.via_symlink {
            self.confine(&target.real)?;
        }
        if opened.meta.len() > MAX_BYTES as u64 {
            return Err(FileError::TooLarge);
        }
        let mut bytes = Vec::new();
        (&opened.file)
            .take(MAX_BYTES as u64 + 1)
            .read_to_end(&mut bytes)
            .map_err(|source| FileError::Unreadable { op, source })?;
        if bytes.len() > MAX_BYTES {
            return Err(FileError::TooLarge);
        }
        let text = String::from_utf8(bytes).map_err(|_| FileError::NotUtf8)?;
        Ok((target.real, opened.meta, text))
    }
}
