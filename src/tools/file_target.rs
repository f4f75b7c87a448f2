//! Finding and opening the real file behind a file tool's path without surprises: symlinks at
//! the final component are followed to the file they name (a dangling link names the file to
//! create), the target is `stat`ed before it is opened, anything but a regular file (directory,
//! FIFO, socket, device) is refused with its kind, and a regular file is opened read-only with
//! `O_NONBLOCK | O_NOCTTY` and checked again with `fstat`, so no open ever blocks. A tool's
//! target is opened by its last name in its directory's descriptor, never through a symlink, so
//! a symlink swapped in after the look is noticed instead of followed.
//!
//! It never writes, creates or removes anything (fs_atomic writes) and never reads contents.

use std::ffi::OsStr;
use std::fs::{self, File, FileType, Metadata, OpenOptions};
use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use super::opened_at::{is_symlink_race, open_dir, open_regular_in};

/// Symlinks followed before giving up (the kernel's own limit).
const MAX_SYMLINK_HOPS: usize = 40;

/// Times a path whose last name keeps turning into a symlink is resolved again.
const MAX_SWAP_RETRIES: usize = 8;

/// What a path names, as far as the file tools care.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// A regular file.
    Regular,
    /// A directory.
    Directory,
    /// A named pipe.
    Fifo,
    /// A Unix socket.
    Socket,
    /// A character device.
    CharDevice,
    /// A block device.
    BlockDevice,
    /// Anything else.
    Other,
}

impl FileKind {
    /// The kind of `file_type`.
    pub fn of(file_type: FileType) -> Self {
        if file_type.is_file() {
            FileKind::Regular
        } else if file_type.is_dir() {
            FileKind::Directory
        } else if file_type.is_fifo() {
            FileKind::Fifo
        } else if file_type.is_socket() {
            FileKind::Socket
        } else if file_type.is_char_device() {
            FileKind::CharDevice
        } else if file_type.is_block_device() {
            FileKind::BlockDevice
        } else {
            FileKind::Other
        }
    }

    /// `a FIFO (named pipe)`, `a character device`, … (after "it is").
    pub fn describe(self) -> &'static str {
        match self {
            FileKind::Regular => "a regular file",
            FileKind::Directory => "a directory",
            FileKind::Fifo => "a FIFO (named pipe)",
            FileKind::Socket => "a socket",
            FileKind::CharDevice => "a character device",
            FileKind::BlockDevice => "a block device",
            FileKind::Other => "a special file",
        }
    }
}

/// Why a target cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    /// The path names something that is not a regular file.
    #[error("it is {}, not a regular file", .0.describe())]
    NotRegular(FileKind),
    /// Opening or `fstat` failed.
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// A regular file opened read-only, with the `fstat` of its descriptor.
#[derive(Debug)]
pub struct Opened {
    /// The open file.
    pub file: File,
    /// Its metadata, from the descriptor.
    pub meta: Metadata,
}

/// The real file behind a path: where it is, whether a symlink led there, the directory it is
/// in (opened) and the open file when it exists.
#[derive(Debug)]
pub struct Target {
    /// The path with every final-component symlink followed (not canonicalized otherwise).
    pub real: PathBuf,
    /// At least one symlink was followed.
    pub via_symlink: bool,
    /// The opened file; `None` when nothing exists at `real` yet.
    pub existing: Option<Opened>,
    /// The directory of `real`, opened once (`None` when it does not exist yet): the existing
    /// file was opened in it by its last name, never through a symlink, and a write lands in it
    /// under that same name (see `fs_atomic`), so what was checked is what is written.
    pub dir: Option<File>,
}

impl Target {
    /// Follows the symlinks at `path` and opens what they lead to: the real file's directory,
    /// then its last name in that directory without following a symlink. A name that became a
    /// symlink in between (swapped by rename) is resolved again, a few times at most. A missing
    /// target (or a path through a non-directory) is `existing: None`; a non-regular one is
    /// refused.
    pub fn open(path: &Path) -> Result<Target, TargetError> {
        for _ in 0..MAX_SWAP_RETRIES {
            let (real, via_symlink) = follow_symlinks(path)?;
            let Some(name) = real.file_name().map(OsStr::to_os_string) else {
                // `/` or a path ending in `..`: no name to open in a directory.
                let existing = absent_is_none(open_regular(&real))?;
                return Ok(Target {
                    real,
                    via_symlink,
                    existing,
                    dir: None,
                });
            };
            let dir = match open_dir(real.parent().unwrap_or(Path::new("."))) {
                Ok(dir) => dir,
                Err(e) if is_absent(&e) => {
                    return Ok(Target {
                        real,
                        via_symlink,
                        existing: None,
                        dir: None,
                    });
                }
                Err(e) => return Err(TargetError::Io(e)),
            };
            let existing = match open_regular_in(&dir, &name) {
                Err(TargetError::Io(e)) if is_symlink_race(&e) => continue,
                other => absent_is_none(other)?,
            };
            return Ok(Target {
                real,
                via_symlink,
                existing,
                dir: Some(dir),
            });
        }
        Err(TargetError::Io(io::Error::other(format!(
            "{} kept changing while it was opened (a symlink swapped in and out)",
            path.display()
        ))))
    }
}

/// A missing file (or a path through a non-directory).
fn is_absent(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
    )
}

/// `None` for a missing file, the opened one, or the error.
fn absent_is_none(opened: Result<Opened, TargetError>) -> Result<Option<Opened>, TargetError> {
    match opened {
        Ok(opened) => Ok(Some(opened)),
        Err(TargetError::Io(e)) if is_absent(&e) => Ok(None),
        Err(e) => Err(e),
    }
}

/// `path` with its final-component symlinks followed: a relative link target resolves against
/// the link's directory; a dangling link yields the path it points to.
pub fn follow_symlinks(path: &Path) -> io::Result<(PathBuf, bool)> {
    let mut current = path.to_path_buf();
    let mut via = false;
    for _ in 0..MAX_SYMLINK_HOPS {
        match fs::symlink_metadata(&current) {
            Ok(meta) if meta.file_type().is_symlink() => {
                let target = fs::read_link(&current)?;
                current = if target.is_absolute() {
                    target
                } else {
                    match current.parent() {
                        Some(dir) => dir.join(target),
                        None => target,
                    }
                };
                via = true;
            }
            Ok(_) => return Ok((current, via)),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
                ) =>
            {
                return Ok((current, via));
            }
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::other(format!(
        "too many levels of symbolic links at {}",
        path.display()
    )))
}

/// Opens a regular file read-only without ever blocking: `stat` first (a FIFO, socket or
/// device is refused before any open), then `open(O_RDONLY | O_NONBLOCK | O_NOCTTY)` and an
/// `fstat` of the descriptor (the file may have been swapped in between).
pub fn open_regular(path: &Path) -> Result<Opened, TargetError> {
    open_regular_stat(path, None)
}

/// [`open_regular`] with the `stat` of `path` the caller already made (`None`: made here).
pub fn open_regular_stat(path: &Path, stat: Option<Metadata>) -> Result<Opened, TargetError> {
    let stat = match stat {
        Some(stat) => stat,
        None => fs::metadata(path)?,
    };
    let kind = FileKind::of(stat.file_type());
    if kind != FileKind::Regular {
        return Err(TargetError::NotRegular(kind));
    }
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)?;
    let meta = file.metadata()?;
    let kind = FileKind::of(meta.file_type());
    if kind != FileKind::Regular {
        return Err(TargetError::NotRegular(kind));
    }
    Ok(Opened { file, meta })
}

/// Same device and inode.
pub fn same_file(a: &Metadata, b: &Metadata) -> bool {
    a.dev() == b.dev() && a.ino() == b.ino()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn kinds_are_named_and_never_opened() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("pipe");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let sock = dir.path().join("sock");
        let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        let null_link = dir.path().join("null");
        symlink("/dev/null", &null_link).unwrap();
        for (path, kind) in [
            (&fifo, FileKind::Fifo),
            (&sock, FileKind::Socket),
            (&null_link, FileKind::CharDevice),
        ] {
            match Target::open(path) {
                Err(TargetError::NotRegular(k)) => assert_eq!(k, kind, "{}", path.display()),
                other => panic!("{}: {other:?}", path.display()),
            }
        }
        assert_eq!(
            TargetError::NotRegular(FileKind::Fifo).to_string(),
            "it is a FIFO (named pipe), not a regular file"
        );
        match Target::open(dir.path()) {
            Err(TargetError::NotRegular(FileKind::Directory)) => {}
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn symlink_chains_and_dangling_links() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        fs::create_dir(d.join("sub")).unwrap();
        fs::write(d.join("sub/real.txt"), "x").unwrap();
        symlink("sub/real.txt", d.join("one")).unwrap();
        symlink(d.join("one"), d.join("two")).unwrap();
        let t = Target::open(&d.join("two")).unwrap();
        assert_eq!(t.real, d.join("sub/real.txt"));
        assert!(t.via_symlink);
        assert!(t.existing.is_some());

        symlink("missing.txt", d.join("sub/dangling")).unwrap();
        let t = Target::open(&d.join("sub/dangling")).unwrap();
        assert_eq!(t.real, d.join("sub/missing.txt"));
        assert!(t.via_symlink && t.existing.is_none());

        let t = Target::open(&d.join("sub/real.txt/below")).unwrap();
        assert!(!t.via_symlink && t.existing.is_none());

        symlink(d.join("loop"), d.join("loop")).unwrap();
        assert!(matches!(
            Target::open(&d.join("loop")),
            Err(TargetError::Io(_))
        ));
    }
}
