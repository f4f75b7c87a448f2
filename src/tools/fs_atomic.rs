//! Writing the file tools' results through to the real file (edit_file, write_file). A target
//! with one link is replaced atomically: the new bytes go to a temp file
//! `.<basename>.tmp-<pid>-<6 random alphanumerics>` in the real file's directory, get the old
//! file's owner, group and mode (`fchown`, `fchmod` on the descriptor), are fsynced, and the temp
//! file is renamed over the real file, so a reader sees either the old bytes or the new ones. A
//! file with more than one hard link (or whose owner cannot be given to a new file) is written in
//! place instead (truncate, write, fsync), so every link keeps seeing the same inode.
//!
//! Every step happens relative to the target's directory descriptor (`Target::dir`) under the
//! target's last name, never following a symlink at that name: a symlink swapped in after the
//! target was checked is replaced by the rename, never written through.
//!
//! This module must not create parent directories, decide which file is the target (that is
//! [`super::file_target`]: symlinks are followed there, so a link stays a link) or leave a temp
//! file behind on any failure.

use std::ffi::{OsStr, OsString};
use std::fs::{self, File, Metadata};
use std::io::{self, Write};
use std::os::fd::AsFd;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use nix::fcntl::{OFlag, openat, renameat};
use nix::sys::stat::Mode;
use nix::unistd::{UnlinkatFlags, unlinkat};
use rand::Rng;
use rand::distr::Alphanumeric;

use super::file_target::{Target, same_file};
use super::opened_at::open_dir;

/// Longest file name most Unix file systems accept (bytes).
const NAME_MAX: usize = 255;

/// Attempts at finding an unused temp name before giving up.
const TEMP_ATTEMPTS: usize = 16;

/// How the bytes reached the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteMode {
    /// A new inode renamed over the target (or a new file created).
    Replaced,
    /// Written in place because the file has `links` hard links.
    InPlaceLinks {
        /// The file's hard-link count.
        links: u64,
    },
    /// Written in place because a new file could not be given the old file's owner.
    InPlaceOwner,
}

impl WriteMode {
    /// The sentence a tool adds to its output for an in-place write, if any.
    pub fn note(self) -> Option<String> {
        match self {
            WriteMode::Replaced => None,
            WriteMode::InPlaceLinks { links } => Some(format!(
                "(written in place: the file has {links} hard links, and all of them see the new content)"
            )),
            WriteMode::InPlaceOwner => {
                Some("(written in place to keep the file's owner)".to_string())
            }
        }
    }
}

/// The lines (each starting with `\n`) a tool adds after its summary line: the real file a
/// symlink led to, and why the file was written in place. Empty for a plain replacement.
pub fn write_notes(target: &Target, mode: WriteMode) -> String {
    let mut out = String::new();
    if target.via_symlink {
        out.push_str(&format!(
            "\n(written through the symlink to \"{}\")",
            target.real.display()
        ));
    }
    if let Some(note) = mode.note() {
        out.push('\n');
        out.push_str(&note);
    }
    out
}

/// Why a write failed (the target is unchanged unless an in-place write failed midway).
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// The path has no file name (e.g. `/` or `..`).
    #[error("{0} does not name a file")]
    NoFileName(PathBuf),
    /// Another file took the target's place during the write.
    #[error("the file was replaced by another one while it was being written")]
    Changed,
    /// The new contents are longer than `RLIMIT_FSIZE` lets this process write (`ulimit -f`):
    /// refused before anything is written.
    #[error(
        "{size} bytes exceed this process's file size limit of {limit} bytes (RLIMIT_FSIZE, \
         `ulimit -f`); the file is unchanged"
    )]
    OverSizeLimit {
        /// The size in bytes the write needed.
        size: u64,
        /// The process's file-size limit in bytes (`RLIMIT_FSIZE`).
        limit: u64,
    },
    /// An I/O error.
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// The soft `RLIMIT_FSIZE` of this process, `None` when unlimited.
fn file_size_limit() -> Option<u64> {
    // SAFETY: a zeroed rlimit is a valid out value.
    let mut limit: libc::rlimit = unsafe { std::mem::zeroed() };
    // SAFETY: getrlimit writes into `limit`.
    if unsafe { libc::getrlimit(libc::RLIMIT_FSIZE, &mut limit) } != 0
        || limit.rlim_cur == libc::RLIM_INFINITY
    {
        return None;
    }
    Some(limit.rlim_cur as u64)
}

/// Refuses contents the file size limit would cut: a write past it fails with `EFBIG` midway,
/// which in place would leave the file truncated.
fn check_size_limit(len: usize) -> Result<(), WriteError> {
    match file_size_limit() {
        Some(limit) if len as u64 > limit => Err(WriteError::OverSizeLimit {
            size: len as u64,
            limit,
        }),
        _ => Ok(()),
    }
}

/// Writes `contents` to the real file of `target`: in place when it has more than one hard
/// link, else atomically through a temp file that keeps the old owner, group and mode. Every
/// step happens in the target's directory descriptor under the target's last name (never
/// following a symlink there), so a symlink swapped in after the target was checked is
/// replaced, not written through.
/// Contents over the file size limit are refused before anything is written.
pub fn write_through(target: &Target, contents: &[u8]) -> Result<WriteMode, WriteError> {
    check_size_limit(contents.len())?;
    let name = target
        .real
        .file_name()
        .ok_or_else(|| WriteError::NoFileName(target.real.clone()))?;
    let opened_now;
    let dir = match &target.dir {
        Some(dir) => dir,
        None => {
            // A directory made since the target was looked at (write_file creates parents).
            opened_now = open_dir(target.real.parent().unwrap_or(Path::new(".")))?;
            &opened_now
        }
    };
    let at = At { dir, name };
    let Some(existing) = &target.existing else {
        replace_atomic(&at, contents, None)?;
        return Ok(WriteMode::Replaced);
    };
    let links = existing.meta.nlink();
    if links > 1 {
        write_in_place(&at, &existing.meta, contents)?;
        return Ok(WriteMode::InPlaceLinks { links });
    }
    match replace_atomic(&at, contents, Some(&existing.meta)) {
        Ok(()) => Ok(WriteMode::Replaced),
        Err(ReplaceError::OwnerNotKept(e)) => {
            tracing::debug!(path = %target.real.display(), error = %e, "owner cannot be kept by a new file; writing in place");
            write_in_place(&at, &existing.meta, contents)?;
            Ok(WriteMode::InPlaceOwner)
        }
        Err(ReplaceError::Write(e)) => Err(e),
    }
}

/// A name in an opened directory.
struct At<'a> {
    dir: &'a File,
    name: &'a OsStr,
}

/// A failed replacement: the owner could not be carried over (try in place), or a real error.
enum ReplaceError {
    OwnerNotKept(io::Error),
    Write(WriteError),
}

impl From<io::Error> for ReplaceError {
    fn from(e: io::Error) -> Self {
        ReplaceError::Write(WriteError::Io(e))
    }
}

impl From<nix::errno::Errno> for ReplaceError {
    fn from(e: nix::errno::Errno) -> Self {
        ReplaceError::from(io::Error::from(e))
    }
}

impl From<ReplaceError> for WriteError {
    fn from(e: ReplaceError) -> Self {
        match e {
            ReplaceError::OwnerNotKept(e) => WriteError::Io(e),
            ReplaceError::Write(e) => e,
        }
    }
}

/// Temp file in the target's directory, write, owner/group/mode of `keep`, fsync, rename over
/// the target's name. On any failure the temp file is removed and the target is untouched.
fn replace_atomic(at: &At, contents: &[u8], keep: Option<&Metadata>) -> Result<(), ReplaceError> {
    let (tmp_name, mut file) = create_temp(at.dir, at.name)?;
    let guard = TempGuard {
        dir: at.dir,
        name: tmp_name,
        armed: true,
    };
    file.write_all(contents)?;
    if let Some(old) = keep {
        let mine = file.metadata()?;
        if (mine.uid(), mine.gid()) != (old.uid(), old.gid()) {
            std::os::unix::fs::fchown(&file, Some(old.uid()), Some(old.gid())).map_err(|e| {
                if e.kind() == io::ErrorKind::PermissionDenied {
                    ReplaceError::OwnerNotKept(e)
                } else {
                    ReplaceError::from(e)
                }
            })?;
        }
        // After the chown (which clears set-id bits); fchmod is not masked by the umask.
        file.set_permissions(fs::Permissions::from_mode(old.mode() & 0o7777))?;
    }
    // Rename orders the directory entry, not the data: without this a crash could commit the
    // new name over blocks that never reached the disk.
    file.sync_all()?;
    drop(file);
    // Replaces whatever entry has the name now (a symlink swapped in is replaced itself).
    renameat(at.dir, guard.name.as_os_str(), at.dir, at.name)?;
    guard.disarm();
    // Best effort: make the rename itself durable.
    let _ = at.dir.sync_all();
    tracing::trace!(name = %at.name.to_string_lossy(), bytes = contents.len(), "atomic write done");
    Ok(())
}

/// Truncate + write + fsync of the very inode `expected` describes (opened by its name in the
/// directory without following a symlink, and checked with `fstat` after the open, so a file
/// swapped in meanwhile is not written).
fn write_in_place(at: &At, expected: &Metadata, contents: &[u8]) -> Result<(), WriteError> {
    let fd = openat(
        at.dir.as_fd(),
        at.name,
        OFlag::O_WRONLY
            | OFlag::O_NONBLOCK
            | OFlag::O_NOCTTY
            | OFlag::O_NOFOLLOW
            | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| match e {
        nix::errno::Errno::ELOOP => WriteError::Changed,
        e => WriteError::Io(io::Error::from(e)),
    })?;
    let mut file = File::from(fd);
    let now = file.metadata()?;
    if !now.is_file() || !same_file(&now, expected) {
        return Err(WriteError::Changed);
    }
    file.set_len(0)?;
    file.write_all(contents)?;
    file.sync_all()?;
    tracing::trace!(name = %at.name.to_string_lossy(), bytes = contents.len(), "in-place write done");
    Ok(())
}

/// Creates a fresh temp file in `dir` next to the target (never reusing an existing name, never
/// through a symlink).
fn create_temp(dir: &File, name: &OsStr) -> io::Result<(OsString, File)> {
    let mut last_err = None;
    for _ in 0..TEMP_ATTEMPTS {
        let suffix: String = rand::rng()
            .sample_iter(&Alphanumeric)
            .take(6)
            .map(char::from)
            .collect();
        let tmp_name = temp_file_name(name, std::process::id(), &suffix);
        match openat(
            dir.as_fd(),
            tmp_name.as_os_str(),
            OFlag::O_WRONLY
                | OFlag::O_CREAT
                | OFlag::O_EXCL
                | OFlag::O_NOFOLLOW
                | OFlag::O_NOCTTY
                | OFlag::O_CLOEXEC,
            Mode::from_bits_truncate(0o666),
        ) {
            Ok(fd) => return Ok((tmp_name, File::from(fd))),
            Err(nix::errno::Errno::EEXIST) => {
                last_err = Some(io::Error::from(io::ErrorKind::AlreadyExists))
            }
            Err(e) => return Err(io::Error::from(e)),
        }
    }
    Err(last_err.unwrap_or_else(|| io::Error::other("could not create a temp file")))
}

/// `.<basename>.tmp-<pid>-<suffix>`; the basename part is shortened (on a byte boundary) when the
/// whole name would exceed `NAME_MAX`, so long target names still get a valid temp name.
fn temp_file_name(name: &OsStr, pid: u32, suffix: &str) -> OsString {
    let tail = format!(".tmp-{pid}-{suffix}");
    let base = name.as_bytes();
    let room = NAME_MAX.saturating_sub(1 + tail.len());
    let mut out = Vec::with_capacity(1 + base.len().min(room) + tail.len());
    out.push(b'.');
    out.extend_from_slice(&base[..base.len().min(room)]);
    out.extend_from_slice(tail.as_bytes());
    OsString::from_vec(out)
}

/// Removes the temp file on drop unless the rename succeeded (covers `?` returns and panics).
struct TempGuard<'a> {
    dir: &'a File,
    name: OsString,
    armed: bool,
}

impl TempGuard<'_> {
    fn disarm(mut self) {
        self.armed = false;
    }
}

impl Drop for TempGuard<'_> {
    fn drop(&mut self) {
        if self.armed
            && let Err(e) = unlinkat(
                self.dir.as_fd(),
                self.name.as_os_str(),
                UnlinkatFlags::NoRemoveDir,
            )
            && e != nix::errno::Errno::ENOENT
        {
            tracing::warn!(name = %self.name.to_string_lossy(), error = %e, "could not remove temp file");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{chown, symlink};

    fn entries(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    fn write(path: &Path, contents: &[u8]) -> Result<WriteMode, WriteError> {
        let target = Target::open(path).map_err(|e| WriteError::Io(io::Error::other(e)))?;
        write_through(&target, contents)
    }

    fn mode(path: &Path) -> u32 {
        fs::metadata(path).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn creates_a_new_file_without_leftovers() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("new.txt");
        assert_eq!(write(&target, b"hello\n").unwrap(), WriteMode::Replaced);
        assert_eq!(fs::read(&target).unwrap(), b"hello\n");
        assert_eq!(entries(dir.path()), vec!["new.txt".to_string()]);
    }

    #[test]
    fn overwrite_keeps_mode_and_replaces_content() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("script.sh");
        fs::write(&target, "old").unwrap();
        fs::set_permissions(&target, fs::Permissions::from_mode(0o751)).unwrap();
        let before = fs::metadata(&target).unwrap().ino();
        assert_eq!(write(&target, b"new content").unwrap(), WriteMode::Replaced);
        assert_eq!(fs::read_to_string(&target).unwrap(), "new content");
        assert_eq!(mode(&target), 0o751);
        // Replaced atomically: a new inode.
        assert_ne!(fs::metadata(&target).unwrap().ino(), before);
        assert_eq!(entries(dir.path()), vec!["script.sh".to_string()]);
    }

    #[test]
    fn read_only_file_is_still_replaced_and_stays_read_only() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("ro.txt");
        fs::write(&target, "old").unwrap();
        fs::set_permissions(&target, fs::Permissions::from_mode(0o444)).unwrap();
        write(&target, b"new").unwrap();
        assert_eq!(fs::read_to_string(&target).unwrap(), "new");
        assert_eq!(mode(&target), 0o444);
    }

    #[test]
    fn symlink_stays_a_link_and_its_target_gets_the_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        fs::create_dir(d.join("real")).unwrap();
        fs::write(d.join("real/file.txt"), "old").unwrap();
        symlink("real/file.txt", d.join("link")).unwrap();
        write(&d.join("link"), b"new").unwrap();
        assert!(
            fs::symlink_metadata(d.join("link"))
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(fs::read_to_string(d.join("real/file.txt")).unwrap(), "new");
        assert_eq!(entries(&d.join("real")), vec!["file.txt".to_string()]);
        // A dangling link creates the file it names.
        symlink("real/created.txt", d.join("dangling")).unwrap();
        write(&d.join("dangling"), b"made").unwrap();
        assert!(
            fs::symlink_metadata(d.join("dangling"))
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(
            fs::read_to_string(d.join("real/created.txt")).unwrap(),
            "made"
        );
    }

    #[test]
    fn hard_links_are_written_in_place_and_stay_shared() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.txt");
        let b = dir.path().join("b.txt");
        fs::write(&a, "old old old").unwrap();
        fs::hard_link(&a, &b).unwrap();
        let ino = fs::metadata(&a).unwrap().ino();
        let got = write(&a, b"new").unwrap();
        assert_eq!(got, WriteMode::InPlaceLinks { links: 2 });
        assert!(got.note().unwrap().contains("2 hard links"));
        assert_eq!(fs::read_to_string(&b).unwrap(), "new");
        assert_eq!(fs::metadata(&a).unwrap().ino(), ino);
        assert_eq!(fs::metadata(&b).unwrap().nlink(), 2);
        assert_eq!(
            entries(dir.path()),
            vec!["a.txt".to_string(), "b.txt".to_string()]
        );
    }

    #[test]
    fn owner_group_and_set_id_mode_are_kept() {
        let dir = tempfile::tempdir().unwrap();
        // A fresh directory is owned by the effective user.
        if fs::metadata(dir.path()).unwrap().uid() != 0 {
            eprintln!(
                "skipped owner_group_and_set_id_mode_are_kept: needs root to chown to nobody"
            );
            return;
        }
        let target = dir.path().join("owned.sh");
        fs::write(&target, "old").unwrap();
        chown(&target, Some(65534), Some(65534)).unwrap();
        fs::set_permissions(&target, fs::Permissions::from_mode(0o2750)).unwrap();
        assert_eq!(write(&target, b"new").unwrap(), WriteMode::Replaced);
        let meta = fs::metadata(&target).unwrap();
        assert_eq!((meta.uid(), meta.gid()), (65534, 65534));
        assert_eq!(mode(&target), 0o2750);
        assert_eq!(fs::read_to_string(&target).unwrap(), "new");
    }

    #[test]
    fn failed_rename_removes_the_temp_file() {
        let dir = tempfile::tempdir().unwrap();
        // A non-empty directory at the target: the temp file is written, the rename fails.
        let target = dir.path().join("taken");
        fs::create_dir(&target).unwrap();
        fs::write(target.join("inner"), "x").unwrap();
        let at_dir = open_dir(dir.path()).unwrap();
        let at = At {
            dir: &at_dir,
            name: OsStr::new("taken"),
        };
        let err = WriteError::from(replace_atomic(&at, b"data", None).err().unwrap());
        assert!(!err.to_string().is_empty());
        assert_eq!(entries(dir.path()), vec!["taken".to_string()]);
        assert_eq!(entries(&target), vec!["inner".to_string()]);
    }

    #[test]
    fn missing_directory_fails_cleanly() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("nope").join("file.txt");
        match write(&target, b"data").unwrap_err() {
            WriteError::Io(e) => assert_eq!(e.kind(), io::ErrorKind::NotFound),
            other => panic!("{other:?}"),
        }
        assert!(entries(dir.path()).is_empty());
    }

    #[test]
    fn temp_name_format_and_long_names() {
        let name = temp_file_name(OsStr::new("main.rs"), 4242, "aB3xY9");
        assert_eq!(name, OsString::from(".main.rs.tmp-4242-aB3xY9"));

        let long = "x".repeat(250);
        let name = temp_file_name(OsStr::new(&long), 4242, "aB3xY9");
        assert_eq!(name.len(), NAME_MAX);
        assert!(name.to_string_lossy().ends_with(".tmp-4242-aB3xY9"));

        // A 250-byte name can still be written atomically.
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join(&long);
        write(&target, b"ok").unwrap();
        assert_eq!(fs::read(&target).unwrap(), b"ok");
        assert_eq!(entries(dir.path()), vec![long]);
    }
}
