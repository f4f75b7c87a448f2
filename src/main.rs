//! The `rookery` binary: parses arguments, sets up logging on stderr (`RUST_LOG` respected) and
//! hands over to `rookery::cli`. Its one exit point is `main`: `run` returns the exit code or a
//! `CliError`, which is printed here, once, as `rookery: <reason>` (usage errors exit 2). It also
//! sets the process-wide malloc arena count (`one_malloc_arena`), which the library never does.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;

use clap::Parser;
use clap::error::ErrorKind;
use rookery::cli::CliError;
use tracing_subscriber::EnvFilter;

fn main() -> ExitCode {
    one_malloc_arena();
    match run() {
        Ok(code) => code,
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "rookery: {e}");
            e.exit_code()
        }
    }
}

fn run() -> Result<ExitCode, CliError> {
    let cli = match rookery::cli::Cli::try_parse() {
        Ok(cli) => cli,
        // `rookery` (or `rookery sessions`) alone: the help with its subcommands (exit 2);
        // `--help`, `--version` (exit 0).
        Err(e)
            if matches!(
                e.kind(),
                ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
                    | ErrorKind::DisplayHelp
                    | ErrorKind::DisplayVersion
            ) =>
        {
            let _ = e.print();
            return Ok(ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2)));
        }
        Err(e) => return Err(CliError::parse(e, std::env::args_os())),
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn")),
        )
        .with_writer(rookery::redact::LogWriter)
        .with_ansi(std::io::stderr().is_terminal())
        // A closed stderr must not turn a log line into a panic (and the panic hook's own log
        // line into an abort).
        .log_internal_errors(false)
        .init();
    std::panic::set_hook(Box::new(|info| {
        tracing::error!("panic: {info}");
    }));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::startup_io("cannot start the async runtime", e))?;
    let result = runtime.block_on(async {
        // Orphans of commands come back to us and are reaped (see `command/reaper.rs`).
        #[cfg(target_os = "linux")]
        if let Err(e) = rookery::actors::command::reaper::become_subreaper() {
            tracing::warn!("cannot become a child subreaper: {e}");
        }
        rookery::cli::dispatch(cli).await
    });
    runtime.shutdown_timeout(std::time::Duration::from_secs(2));
    result
}

/// glibc's malloc gives each thread that allocates its own arena (up to 8 per core), which
/// grows in `mprotect` steps and keeps its own free memory. The binary's threads share one
/// (measured: fewer syscalls and a lower peak RSS, no CPU cost we could see). The library
/// leaves this to its user; `MALLOC_ARENA_MAX` in the environment still decides when set.
fn one_malloc_arena() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        // SAFETY: mallopt only sets a malloc parameter; it runs before any thread exists.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, 1);
        }
    }
}
