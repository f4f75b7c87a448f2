//! `rookery sessions fork ID [--at-task N]`: writes a fork of a recorded session (a new session
//! whose history is the origin's up to the end of task N, default the last completed one) and
//! prints its id; `rookery chat --resume NEW_ID` or the server continues it.
//!
//! Command line only: the copy is `crate::trace::fork`. It never writes into the origin's
//! trace.

use std::io::Write;
use std::process::ExitCode;

use clap::Args;

use super::CliError;
use crate::error::RookeryError;
use crate::trace::catalog::Catalog;
use crate::trace::fork::{ForkOverrides, fork_trace};

/// The flags of `rookery sessions fork`.
#[derive(Debug, Clone, Args)]
pub struct ForkArgs {
    /// A session id, or a unique abbreviation of it.
    #[arg(value_name = "ID")]
    pub id: String,
    /// The task whose end the fork starts from (numbered from 1; default: the last completed).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub at_task: Option<u64>,
}

/// Forks the session and prints the new session's id on stdout.
pub(super) fn fork_session(catalog: &Catalog, args: &ForkArgs) -> Result<ExitCode, CliError> {
    let files = catalog.resolve(&args.id)?;
    let Some(latest) = files.files.last() else {
        return Err(CliError::Usage(format!(
            "session {} has no trace file",
            files.id
        )));
    };
    let forked = fork_trace(
        catalog.home(),
        latest,
        args.at_task,
        &ForkOverrides::default(),
    )
    .map_err(|e| match e {
        crate::trace::fork::ForkError::NoSuchTask { .. }
        | crate::trace::fork::ForkError::NoCompletedTask(_) => CliError::Usage(e.to_string()),
        other => CliError::Failed(RookeryError::Fork(other)),
    })?;
    let _ = writeln!(std::io::stdout().lock(), "{}", forked.session_id);
    Ok(ExitCode::SUCCESS)
}
