//! Opening by descriptor, so that what a file tool checked is what it then uses, even while
//! another process swaps a symlink or a directory by rename: the path the kernel holds for an
//! open descriptor ([`path_of`], from `/proc/self/fd/<n>`), a directory opened once
//! ([`open_dir`]) and checked to really lie in the workspace *after* it was opened
//! ([`open_dir_inside`]), and a regular file opened in such a directory by one name that is
//! never followed as a symlink ([`open_regular_in`]).
//!
//! It only opens and looks; it never writes, creates or removes anything and never decides what
//! a tool refuses (the callers judge what was opened).

use std::ffi::OsStr;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use nix::fcntl::{OFlag, openat};
use nix::sys::stat::Mode;

use super::canonical::really_inside;
use super::file_target::{FileKind, Opened, TargetError, same_file};

/// What the kernel appends to the path of a descriptor whose file was unlinked.
const DELETED: &str = " (deleted)";

/// The path the kernel holds for the open descriptor `fd`: where the opened file or directory
/// really is now (symlinks and `..` resolved), whatever path was used to open it. A file unlinked
/// since it was opened keeps its last name (the kernel's ` (deleted)` mark is cut).
pub fn path_of(fd: impl AsFd) -> io::Result<PathBuf> {
    let fd = fd.as_fd();
    let link = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))?;
    let bytes = link.as_os_str().as_bytes();
    // Only a path with the mark asks the file (one `fstat`, on the hot path of every read none):
    // a file really named `x (deleted)` still has links.
    if let Some(kept) = bytes.strip_suffix(DELETED.as_bytes())
        && nix::sys::stat::fstat(fd).is_ok_and(|st| st.st_nlink == 0)
    {
        return Ok(PathBuf::from(OsStr::from_bytes(kept)));
    }
    if !link.is_absolute() {
        // Not a file system path (a pipe, a socket, an anonymous inode).
        return Err(io::Error::other(format!(
            "descriptor {} has no path ({})",
            fd.as_raw_fd(),
            link.display()
        )));
    }
    Ok(link)
}

/// Opens the directory `path` (symlinks followed) as a descriptor to create and open relative
/// to. Nothing but a directory is opened. A directory that may be searched but not listed
/// (`--x`) is opened `O_PATH`, which is enough for the `*at` calls (not for its `fsync`).
pub fn open_dir(path: &Path) -> io::Result<File> {
    let path = if path.as_os_str().is_empty() {
        Path::new(".")
    } else {
        path
    };
    let open = |extra| {
        OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC | extra)
            .open(path)
    };
    match open(0) {
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => open(libc::O_PATH),
        other => other,
    }
}

/// A directory opened by [`open_dir_inside`].
#[derive(Debug)]
pub struct InsideDir {
    /// The opened directory.
    pub dir: File,
    /// Where the opened directory really is (its canonical path, from the descriptor).
    pub real: PathBuf,
}

/// Why [`open_dir_inside`] did not give a directory.
#[derive(Debug, thiserror::Error)]
pub enum InsideError {
    /// It resolves outside the workspace (where it really is).
    #[error("the directory leads outside the workspace (it is {})", .0.display())]
    Outside(PathBuf),
    /// Opening failed.
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// Opens the directory `path` and judges the opened one: it must really lie in `workspace` (as
/// given or canonical). Whatever a symlink on the way pointed to at the moment of the open, the
/// descriptor returned is a directory inside the workspace, and what is created relative to it
/// stays there.
pub fn open_dir_inside(workspace: &Path, path: &Path) -> Result<InsideDir, InsideError> {
    let dir = open_dir(path)?;
    let real = path_of(&dir)?;
    if !really_inside(workspace, &real) {
        return Err(InsideError::Outside(real));
    }
    Ok(InsideDir { dir, real })
}

/// The error of a name that is (now) a symlink where a file was expected: the caller resolves
/// the path again.
pub fn is_symlink_race(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::ELOOP)
}

/// Opens the regular file `name` (one component) in the directory `dir` read-only without
/// following a symlink and without ever blocking: an `O_PATH` descriptor is `fstat`ed first (a
/// FIFO, socket or device is refused before any real open), then the name is opened
/// `O_RDONLY | O_NONBLOCK | O_NOCTTY | O_NOFOLLOW` and must be the same inode. A name that is a
/// symlink fails with `ELOOP` (see [`is_symlink_race`]).
pub fn open_regular_in(dir: &File, name: &OsStr) -> Result<Opened, TargetError> {
    let path_fd = openat(
        dir.as_fd(),
        name,
        OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(io::Error::from)?;
    let first = File::from(path_fd).metadata()?;
    if first.file_type().is_symlink() {
        return Err(TargetError::Io(io::Error::from_raw_os_error(libc::ELOOP)));
    }
    let kind = FileKind::of(first.file_type());
    if kind != FileKind::Regular {
        return Err(TargetError::NotRegular(kind));
    }
    let fd = openat(
        dir.as_fd(),
        name,
        OFlag::O_RDONLY
            | OFlag::O_NONBLOCK
            | OFlag::O_NOCTTY
            | OFlag::O_NOFOLLOW
            | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(io::Error::from)?;
    let file = File::from(fd);
    let meta = file.metadata()?;
    if !same_file(&first, &meta) {
        // Swapped between the two opens: the caller looks again.
        return Err(TargetError::Io(io::Error::from_raw_os_error(libc::ELOOP)));
    }
    Ok(Opened { file, meta })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::symlink;

    #[test]
    fn the_path_of_a_descriptor_is_where_it_really_is() {
        let dir = tempfile::tempdir().unwrap();
        let root = fs::canonicalize(dir.path()).unwrap();
        fs::create_dir_all(root.join("ws/sub")).unwrap();
        fs::create_dir_all(root.join("out")).unwrap();
        symlink(root.join("out"), root.join("ws/up")).unwrap();
        fs::write(root.join("ws/sub/a.txt"), "a").unwrap();

        let opened = open_dir(&root.join("ws/sub/../sub")).unwrap();
        assert_eq!(path_of(&opened).unwrap(), root.join("ws/sub"));
        let inside = open_dir_inside(&root.join("ws"), &root.join("ws/sub")).unwrap();
        assert_eq!(inside.real, root.join("ws/sub"));
        match open_dir_inside(&root.join("ws"), &root.join("ws/up")) {
            Err(InsideError::Outside(real)) => assert_eq!(real, root.join("out")),
            other => panic!("{other:?}"),
        }
        // A file unlinked after its open keeps its name.
        let file = File::open(root.join("ws/sub/a.txt")).unwrap();
        fs::remove_file(root.join("ws/sub/a.txt")).unwrap();
        assert_eq!(path_of(&file).unwrap(), root.join("ws/sub/a.txt"));
    }

    #[test]
    fn a_name_is_opened_only_as_the_regular_file_it_is() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        fs::write(d.join("real.txt"), "x").unwrap();
        symlink("real.txt", d.join("link")).unwrap();
        nix::unistd::mkfifo(&d.join("pipe"), Mode::from_bits_truncate(0o600)).unwrap();
        fs::create_dir(d.join("sub")).unwrap();
        let at = open_dir(d).unwrap();
        let opened = open_regular_in(&at, OsStr::new("real.txt")).unwrap();
        assert_eq!(opened.meta.len(), 1);
        match open_regular_in(&at, OsStr::new("link")) {
            Err(TargetError::Io(e)) => assert!(is_symlink_race(&e), "{e}"),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            open_regular_in(&at, OsStr::new("pipe")),
            Err(TargetError::NotRegular(FileKind::Fifo))
        ));
        assert!(matches!(
            open_regular_in(&at, OsStr::new("sub")),
            Err(TargetError::NotRegular(FileKind::Directory))
        ));
        match open_regular_in(&at, OsStr::new("missing")) {
            Err(TargetError::Io(e)) => assert_eq!(e.kind(), io::ErrorKind::NotFound),
            other => panic!("{other:?}"),
        }
    }
}
