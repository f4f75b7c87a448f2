//! `rookery completions SHELL` and `rookery man`: the shell completion script and the manual
//! page, both generated from the argument definitions of `cli.rs` (so they list every flag as
//! it is), printed on stdout.
//!
//! Printing only: it never runs a session or reads the Rookery home. A closed stdout (`rookery
//! man | head`) ends the command quietly.

use std::io::Write;
use std::process::ExitCode;

use clap::{Args, CommandFactory};
use clap_complete::Shell;

use super::{Cli, CliError};

/// `rookery completions SHELL`.
#[derive(Debug, Clone, Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_name = "SHELL", ignore_case = true)]
    pub shell: Shell,
}

/// Prints the completion script of `args.shell`.
pub fn completions(args: &CompletionsArgs) -> Result<ExitCode, CliError> {
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut Cli::command(), "rookery", &mut script);
    print(&script)
}

/// Prints the manual page (roff, section 1) with every subcommand and flag.
pub fn man() -> Result<ExitCode, CliError> {
    let mut page = Vec::new();
    clap_mangen::Man::new(Cli::command())
        .render(&mut page)
        .map_err(|e| io_error("cannot render the manual page", e))?;
    print(&page)
}

/// Writes `bytes` to stdout; a reader that went away is not an error.
fn print(bytes: &[u8]) -> Result<ExitCode, CliError> {
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(bytes).and_then(|()| stdout.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(io_error("cannot write to stdout", e))
        }
        _ => Ok(ExitCode::SUCCESS),
    }
}

fn io_error(what: &str, source: std::io::Error) -> CliError {
    CliError::Io {
        what: what.to_string(),
        source,
        code: 1,
    }
}
