//! Atomic file replacement shared by the file tools (edit_file, write_file): the new bytes go to a
//! temp file `.<basename>.tmp-<pid>-<6 random alphanumerics>` in the target's directory, are
//! fsynced, and the temp file is renamed over the target, so a reader sees either the old bytes or
//! the new ones. An existing target's permission bits are kept.
//!
//! This module must not create parent directories, follow or resolve symlinks (a link standing at
//! the target is replaced by a regular file), or leave a temp file behind on any failure.

use std::ffi::{OsStr, OsString};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use rand::Rng;
use rand::distr::Alphanumeric;

/// Longest file name most Unix file systems accept (bytes).
const NAME_MAX: usize = 255;

/// Attempts at finding an unused temp name before giving up.
const TEMP_ATTEMPTS: usize = 16;

/// Writes `contents` to `path` atomically (temp file in the same directory, write, fsync, rename
/// over the target), keeping the permission bits of an existing file. On any failure the temp file
/// is removed and the target is left untouched.
pub fn write_atomic(path: &Path, contents: &[u8]) -> io::Result<()> {
    let name = path.file_name().ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} does not name a file", path.display()),
        )
    })?;
    let dir = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    // Rename replaces the inode, so an existing file's bits must be carried over explicitly.
    let keep_mode = match fs::metadata(path) {
        Ok(meta) if meta.is_file() => Some(meta.permissions().mode() & 0o777),
        _ => None,
    };

    let (tmp_path, mut file) = create_temp(dir, name)?;
    let guard = TempGuard {
        path: tmp_path,
        armed: true,
    };
    file.write_all(contents)?;
    if let Some(mode) = keep_mode {
        // fchmod on the open descriptor: not masked by the umask.
        file.set_permissions(fs::Permissions::from_mode(mode))?;
    }
    // Rename orders the directory entry, not the data: without this a crash could commit the
    // new name over blocks that never reached the disk.
    file.sync_all()?;
    drop(file);
    fs::rename(&guard.path, path)?;
    guard.disarm();
    // Best effort: make the rename itself durable.
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
    tracing::trace!(path = %path.display(), bytes = contents.len(), "atomic write done");
    Ok(())
}

/// Creates a fresh temp file next to the target (never reusing an existing name).
fn create_temp(dir: &Path, name: &OsStr) -> io::Result<(PathBuf, File)> {
    let mut last_err = None;
    for _ in 0..TEMP_ATTEMPTS {
        let suffix: String = rand::rng()
            .sample_iter(&Alphanumeric)
            .take(6)
            .map(char::from)
            .collect();
        let tmp_path = dir.join(temp_file_name(name, std::process::id(), &suffix));
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp_path)
        {
            Ok(file) => return Ok((tmp_path, file)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last_err = Some(e),
            Err(e) => return Err(e),
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
struct TempGuard {
    path: PathBuf,
    armed: bool,
}

impl TempGuard {
    fn disarm(mut self) {
        self.armed = false;
    }
}

impl Drop for TempGuard {
    fn drop(&mut self) {
        if self.armed
            && let Err(e) = fs::remove_file(&self.path)
            && e.kind() != io::ErrorKind::NotFound
        {
            tracing::warn!(path = %self.path.display(), error = %e, "could not remove temp file");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn creates_a_new_file_without_leftovers() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("new.txt");
        write_atomic(&target, b"hello\n").unwrap();
        assert_eq!(fs::read(&target).unwrap(), b"hello\n");
        assert_eq!(entries(dir.path()), vec!["new.txt".to_string()]);
    }

    #[test]
    fn overwrite_keeps_mode_and_replaces_content() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("script.sh");
        fs::write(&target, "old").unwrap();
        fs::set_permissions(&target, fs::Permissions::from_mode(0o751)).unwrap();
        write_atomic(&target, b"new content").unwrap();
        assert_eq!(fs::read_to_string(&target).unwrap(), "new content");
        let mode = fs::metadata(&target).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o751);
        assert_eq!(entries(dir.path()), vec!["script.sh".to_string()]);
    }

    #[test]
    fn read_only_file_is_still_replaced_and_stays_read_only() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("ro.txt");
        fs::write(&target, "old").unwrap();
        fs::set_permissions(&target, fs::Permissions::from_mode(0o444)).unwrap();
        write_atomic(&target, b"new").unwrap();
        assert_eq!(fs::read_to_string(&target).unwrap(), "new");
        let mode = fs::metadata(&target).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o444);
    }

    #[test]
    fn failed_rename_removes_the_temp_file() {
        let dir = tempfile::tempdir().unwrap();
        // A non-empty directory at the target: the temp file is written, the rename fails.
        let target = dir.path().join("taken");
        fs::create_dir(&target).unwrap();
        fs::write(target.join("inner"), "x").unwrap();
        let err = write_atomic(&target, b"data").unwrap_err();
        assert!(!err.to_string().is_empty());
        assert_eq!(entries(dir.path()), vec!["taken".to_string()]);
        assert_eq!(entries(&target), vec!["inner".to_string()]);
    }

    #[test]
    fn missing_directory_fails_cleanly() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("nope").join("file.txt");
        let err = write_atomic(&target, b"data").unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
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
        write_atomic(&target, b"ok").unwrap();
        assert_eq!(fs::read(&target).unwrap(), b"ok");
        assert_eq!(entries(dir.path()), vec![long]);
    }
}
