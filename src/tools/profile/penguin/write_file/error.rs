//! Why a write_file call failed (`docs/tools.md#write_file`). The `Display` texts are the failed
//! replies the model sees, so they do not change. It must not decide anything about the write:
//! `super` finds the failure, this only words it.

use std::io;

use crate::tools::args::MissingArg;
use crate::tools::file_target::TargetError;
use crate::tools::fs_atomic::WriteError;

/// A failed write_file call, with the error behind it where there is one.
#[derive(Debug, thiserror::Error)]
pub enum WriteFileError {
    /// A required argument is missing (the text of `args::missing`).
    #[error("{0}")]
    Argument(#[from] MissingArg),
    /// The path is a secret store.
    #[error(
        "Refusing to write \"{file_path}\": {name} holds the user's secrets and must never enter the conversation."
    )]
    Secret {
        /// The path as the call gave it.
        file_path: String,
        /// The secret store it is (e.g. `.vault.toml`).
        name: &'static str,
    },
    /// The path is a directory.
    #[error("Cannot write \"{file_path}\": it is a directory.")]
    Directory {
        /// The path as the model wrote it.
        file_path: String,
    },
    /// The path is something other than a regular file or a directory.
    #[error("Cannot write \"{file_path}\": {source}.")]
    NotRegular {
        /// The path as the call gave it.
        file_path: String,
        /// What the path is instead.
        #[source]
        source: TargetError,
    },
    /// Looking at the path failed before anything was written.
    #[error("Failed to write \"{file_path}\": {source}")]
    Open {
        /// The path as the call gave it.
        file_path: String,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// Creating the parent directories or writing the content failed.
    #[error("Failed to write \"{file_path}\": {source}")]
    Write {
        /// The path as the call gave it.
        file_path: String,
        /// What failed.
        #[source]
        source: WriteFailure,
    },
}

/// Why `write_file` could not write: the text after `Failed to write "p": `.
#[derive(Debug, thiserror::Error)]
pub enum WriteFailure {
    /// The parent directories cannot be created (`blocked`: a file stands in the way).
    #[error("{}", blocked.clone().unwrap_or_else(|| source.to_string()))]
    Parent {
        /// The file standing in the way, if that is why.
        blocked: Option<String>,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// Writing the content failed.
    #[error(transparent)]
    Write(#[from] WriteError),
}
