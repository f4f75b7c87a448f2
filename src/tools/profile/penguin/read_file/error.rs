//! Why a read_file call failed (`docs/tools.md#read_file`). The `Display` texts are the failed
//! replies the model sees, so they do not change.

use std::io;
use std::path::PathBuf;

use super::scan;
use crate::tools::file_target::TargetError;

/// A failed read_file call, with the I/O error behind it where there is one.
#[derive(Debug, thiserror::Error)]
pub enum ReadFileError {
    /// A required argument is missing (the text of `args::missing`).
    #[error("{0}")]
    Argument(#[source] crate::tools::args::MissingArg),
    /// `offset` is not a number (`got` is its JSON text).
    #[error("Invalid \"offset\": expected a number (got {got}).")]
    InvalidOffset {
        /// The JSON text of the value given.
        got: String,
    },
    /// `limit` is not a positive number (`got` is its JSON text).
    #[error("Invalid \"limit\": expected a positive number (got {got}).")]
    InvalidLimit {
        /// The JSON text of the value given.
        got: String,
    },
    /// The path is a secret store.
    #[error(
        "Refusing to read \"{file_path}\": {name} holds the user's secrets and must never enter the conversation."
    )]
    Secret {
        /// The path as the call gave it.
        file_path: String,
        /// The secret store it is (e.g. `.vault.toml`).
        name: &'static str,
    },
    /// Nothing at the path (`hint` is the missing-path diagnostic, possibly empty).
    #[error(
        "File not found: \"{file_path}\". Absolute paths are supported; relative paths resolve against the workspace ({}).{hint}",
        .workspace.display()
    )]
    NotFound {
        /// The path as the call gave it.
        file_path: String,
        /// The workspace relative paths resolve against.
        workspace: PathBuf,
        /// The missing-path diagnostic, possibly empty.
        hint: String,
        /// The open error.
        #[source]
        source: io::Error,
    },
    /// Opening or reading failed.
    #[error("Failed to read \"{file_path}\": {source}")]
    Io {
        /// The path as the call gave it.
        file_path: String,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// The file has nothing to give yet (opened with O_NONBLOCK, e.g. /proc/kmsg).
    #[error("Failed to read \"{file_path}\": it has no data to read now (it would block)")]
    WouldBlock {
        /// The path as the call gave it.
        file_path: String,
        /// The I/O error (`EAGAIN`).
        #[source]
        source: io::Error,
    },
    /// The path is a directory.
    #[error("Cannot read \"{file_path}\": it is a directory. Pass the path of a file inside it.")]
    Directory {
        /// The path as the model wrote it.
        file_path: String,
    },
    /// The path is something other than a regular file or a directory.
    #[error("Cannot read \"{file_path}\": {source}.")]
    NotRegular {
        /// The path as the call gave it.
        file_path: String,
        /// What the path is instead.
        #[source]
        source: TargetError,
    },
    /// The file holds NUL bytes.
    #[error(
        "\"{file_path}\" looks like a binary file (contains NUL bytes). Use shell commands to inspect it, or read_image if it is an image."
    )]
    Binary {
        /// The path as the model wrote it.
        file_path: String,
    },
    /// The scan cap was reached before the window (`scanned` is `<n> line(s)`, `last` the
    /// window's last line).
    #[error(
        "Stopped after scanning {} MB of \"{file_path}\" without reaching the requested window (scanned {scanned}). The offset is too deep or the file has extremely long lines — use shell commands (e.g. sed -n '{offset},{last}p') for this file.",
        scan::SCAN_CAP_BYTES / (1024 * 1024)
    )]
    ScanCap {
        /// The path as the call gave it.
        file_path: String,
        /// The requested first line (1-based).
        offset: i64,
        /// The window's last line.
        last: i128,
        /// How far the scan got (`<n> line(s)`).
        scanned: String,
    },
    /// `offset` is past the last line (`total` is `<n> line(s)`).
    #[error("Offset {offset} is past the end of \"{file_path}\" ({total} total).")]
    PastEnd {
        /// The path as the call gave it.
        file_path: String,
        /// The requested first line (1-based).
        offset: i64,
        /// The file's length (`<n> line(s)`).
        total: String,
    },
}
