//! The modes of the trace tree: traces hold whole conversations, so `<home>/traces`, its date
//! directories (0700) and its files (0600) are private to the user, and a home Rookery creates
//! is 0700.
//!
//! This module owns directory creation and mode repair of the tree only. It must not open or
//! write trace files (that is `file.rs`), and it never changes the mode of a home directory
//! that already existed (the user chose it).

use std::fs::{DirBuilder, Permissions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::Path;

use super::paths::TRACES_DIR_NAME;

/// The mode of the home Rookery creates, of `traces/` and of its date directories.
pub const PRIVATE_DIR_MODE: u32 = 0o700;

/// The mode of a trace file.
pub const PRIVATE_FILE_MODE: u32 = 0o600;

/// The permission bits of group and others.
const SHARED_BITS: u32 = 0o077;

/// Creates `dir` and every missing parent with mode 0700 (an existing one is left as it is).
pub fn create_private_dir_all(dir: &Path) -> io::Result<()> {
    DirBuilder::new()
        .recursive(true)
        .mode(PRIVATE_DIR_MODE)
        .create(dir)
}

/// At start: creates `<home>` (0700) when it is missing and `<home>/traces` (0700), and makes
/// an existing `traces/` and its date directories private again (0700), with one notice on the
/// log for each repair. The home's own mode is left alone when it already existed.
pub fn prepare(home: &Path) -> io::Result<()> {
    let traces = home.join(TRACES_DIR_NAME);
    create_private_dir_all(&traces)?;
    if make_private(&traces)? {
        tracing::warn!(
            "[trace] {} was readable by other users; its mode is now 0700",
            traces.display()
        );
    }
    let mut fixed = 0usize;
    for entry in std::fs::read_dir(&traces)?.flatten() {
        if entry.file_type().is_ok_and(|t| t.is_dir()) && make_private(&entry.path())? {
            fixed += 1;
        }
    }
    if fixed > 0 {
        tracing::warn!(
            "[trace] {fixed} date director{} under {} were readable by other users; their mode is now 0700",
            if fixed == 1 { "y" } else { "ies" },
            traces.display()
        );
    }
    Ok(())
}

/// Removes group and other bits from the directory `dir`; true when it had any. Never follows
/// a symlink (a link is left as it is).
fn make_private(dir: &Path) -> io::Result<bool> {
    let meta = std::fs::symlink_metadata(dir)?;
    let mode = meta.permissions().mode();
    if !meta.is_dir() || mode & SHARED_BITS == 0 {
        return Ok(false);
    }
    std::fs::set_permissions(dir, Permissions::from_mode(mode & 0o7700))?;
    Ok(true)
}

/// Whether a file or directory of `mode` is readable, writable or searchable by others than
/// its owner.
pub fn is_shared(mode: u32) -> bool {
    mode & SHARED_BITS != 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(p: &Path) -> u32 {
        std::fs::metadata(p).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn a_new_home_and_its_traces_are_private() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("a/home");
        prepare(&home).unwrap();
        assert_eq!(mode(&dir.path().join("a")), 0o700);
        assert_eq!(mode(&home), 0o700);
        assert_eq!(mode(&home.join("traces")), 0o700);
    }

    #[test]
    fn existing_traces_are_fixed_and_the_home_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let day = home.join("traces/2026-07-18");
        std::fs::create_dir_all(&day).unwrap();
        for d in [&home, &home.join("traces"), &day] {
            std::fs::set_permissions(d, Permissions::from_mode(0o755)).unwrap();
        }
        prepare(&home).unwrap();
        assert_eq!(mode(&home), 0o755);
        assert_eq!(mode(&home.join("traces")), 0o700);
        assert_eq!(mode(&day), 0o700);
        assert!(is_shared(0o644) && !is_shared(0o600));
    }

    #[test]
    fn a_home_that_is_a_file_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        std::fs::write(&home, b"").unwrap();
        assert!(prepare(&home).is_err());
    }
}
