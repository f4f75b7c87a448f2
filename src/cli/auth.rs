//! `rookery auth hash-token`: reads a token on stdin and prints the `sha256:<64 hex>` line
//! that `rookery serve --auth FILE` stores instead of the token.
//!
//! It reads one token (a trailing newline is not part of it) and prints its hash; it never
//! prints the token or writes a file.

use std::io::{Read, Write};
use std::process::ExitCode;

use clap::{Args, Subcommand};

use super::CliError;
use crate::server::token_hash::TokenHash;

/// The most a token read on stdin may be (bytes).
const MAX_TOKEN_BYTES: u64 = 4096;

/// `rookery auth …`.
#[derive(Debug, Clone, Args)]
pub struct AuthArgs {
    /// What to do.
    #[command(subcommand)]
    pub action: AuthAction,
}

/// The subcommands of `rookery auth`.
#[derive(Debug, Clone, Subcommand)]
pub enum AuthAction {
    /// Read a token on stdin and print its `sha256:<64 hex>` hash for `--auth FILE`.
    HashToken,
}

/// Runs `rookery auth …`.
pub fn auth(args: &AuthArgs) -> Result<ExitCode, CliError> {
    match args.action {
        AuthAction::HashToken => hash_token(),
    }
}

fn hash_token() -> Result<ExitCode, CliError> {
    let mut raw = Vec::new();
    std::io::stdin()
        .take(MAX_TOKEN_BYTES + 1)
        .read_to_end(&mut raw)
        .map_err(|e| CliError::startup_io("cannot read the token on stdin", e))?;
    if raw.len() as u64 > MAX_TOKEN_BYTES {
        return Err(CliError::usage(format!(
            "the token on stdin is longer than {MAX_TOKEN_BYTES} bytes"
        )));
    }
    let text =
        String::from_utf8(raw).map_err(|_| CliError::usage("the token on stdin is not UTF-8"))?;
    let token = text.strip_suffix('\n').unwrap_or(&text);
    let token = token.strip_suffix('\r').unwrap_or(token);
    if token.trim().is_empty() || token.trim() != token || token.contains('\n') {
        return Err(CliError::usage(
            "give one token on stdin: not empty, one line, no leading or trailing spaces (e.g. `printf %s \"$TOKEN\" | rookery auth hash-token`)",
        ));
    }
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{}", TokenHash::of(token));
    Ok(ExitCode::SUCCESS)
}
