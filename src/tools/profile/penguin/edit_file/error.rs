//! Why an edit_file call failed (`docs/tools.md#edit_file`). The `Display` texts are the failed
//! replies the model sees, so they do not change. It must not decide anything about the edit:
//! `super` finds the failure, this only words it.

use std::io;

use super::MAX_FILE_BYTES;
use crate::tools::args::MissingArg;
use crate::tools::file_target::TargetError;
use crate::tools::fs_atomic::WriteError;

/// The note added when `old_string` is not found in a file with CRLF line endings.
const CRLF_NOTE: &str = " Note: the file uses CRLF (\\r\\n) line endings — a multi-line old_string must include the \\r characters.";

/// A failed edit_file call, with the error behind it where there is one.
#[derive(Debug, thiserror::Error)]
pub enum EditFileError {
    /// A required argument is missing (the text of `args::missing`).
    #[error("{0}")]
    Argument(#[from] MissingArg),
    /// `old_string` is empty.
    #[error(
        "old_string must not be empty — edit_file replaces existing text. To create a file or rewrite it wholesale, use write_file."
    )]
    EmptyOldString,
    /// `old_string` and `new_string` are the same.
    #[error(
        "old_string and new_string are identical — nothing to change. Make new_string the desired replacement text."
    )]
    NothingToChange,
    /// The path is a secret store.
    #[error(
        "Refusing to edit \"{file_path}\": {name} holds the user's secrets and must never enter the conversation."
    )]
    Secret {
        /// The path as the call gave it.
        file_path: String,
        /// The secret store it is (e.g. `.vault.toml`).
        name: &'static str,
    },
    /// Nothing at the path (`hint` is the missing-path diagnostic, possibly empty).
    #[error(
        "File not found: \"{file_path}\". edit_file only edits existing files — check the path (absolute paths are supported), or use write_file to create it.{hint}"
    )]
    NotFound {
        /// The path as the call gave it.
        file_path: String,
        /// The missing-path diagnostic, possibly empty.
        hint: String,
        /// The open error, if there was one.
        #[source]
        source: Option<io::Error>,
    },
    /// Opening or reading failed.
    #[error("Failed to read \"{file_path}\": {source}")]
    Read {
        /// The path as the call gave it.
        file_path: String,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// The path is a directory.
    #[error("Cannot edit \"{file_path}\": it is a directory.")]
    Directory {
        /// The path as the model wrote it.
        file_path: String,
    },
    /// The path is something other than a regular file or a directory.
    #[error("Cannot edit \"{file_path}\": {source}.")]
    NotRegular {
        /// The path as the call gave it.
        file_path: String,
        /// What the path is instead.
        #[source]
        source: TargetError,
    },
    /// The file is larger than edit_file reads (`size`: its size in bytes).
    #[error(
        "Cannot edit \"{file_path}\": it is {size} bytes, and edit_file only edits files of at most {} bytes (4 MB). Change a file this large with shell commands (exec_command, e.g. sed -i 's/old/new/' FILE), or replace its whole content with write_file.",
        MAX_FILE_BYTES
    )]
    TooLarge {
        /// The path as the model wrote it.
        file_path: String,
        /// The size in bytes (more than the cap).
        size: u64,
    },
    /// The edited content would be larger than edit_file writes (`size`: its size in bytes).
    #[error(
        "Cannot edit \"{file_path}\": the edit would make it {size} bytes, and edit_file only writes files of at most {} bytes (4 MB). Nothing was changed. Make a smaller change, or use shell commands (exec_command) for this one.",
        MAX_FILE_BYTES
    )]
    ResultTooLarge {
        /// The path as the model wrote it.
        file_path: String,
        /// The size in bytes the edit would give.
        size: u64,
    },
    /// `old_string` does not occur in the file (`crlf`: the file uses CRLF line endings).
    #[error(
        "old_string not found in \"{file_path}\". Make sure it matches the file content exactly, including whitespace and indentation.{}",
        crlf_note(*.crlf)
    )]
    NoMatch {
        /// The path as the model wrote it.
        file_path: String,
        /// Whether the file has CRLF line ends (the text then says so).
        crlf: bool,
    },
    /// `old_string` occurs more than once and `replace_all` is not set.
    #[error(
        "old_string occurs {occurrences} times in \"{file_path}\". Add surrounding context to make it unique, or set replace_all to true to replace every occurrence."
    )]
    Ambiguous {
        /// The path as the call gave it.
        file_path: String,
        /// How often `old_string` occurs.
        occurrences: usize,
    },
    /// Writing the edited content failed.
    #[error("Failed to write \"{file_path}\": {source}")]
    Write {
        /// The path as the call gave it.
        file_path: String,
        /// The write failure.
        #[source]
        source: WriteError,
    },
}

fn crlf_note(crlf: bool) -> &'static str {
    if crlf { CRLF_NOTE } else { "" }
}
