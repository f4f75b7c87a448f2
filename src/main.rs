//! The `rookery` binary: parses arguments, sets up logging on stderr (`RUST_LOG` respected) and
//! hands over to `rookery::cli`. Usage errors exit 2 with one line on stderr.

use std::io::{IsTerminal, Write};

use clap::Parser;
use clap::error::ErrorKind;
use tracing_subscriber::EnvFilter;

fn main() {
    let cli = match rookery::cli::Cli::try_parse() {
        Ok(cli) => cli,
        // `rookery` (or `rookery sessions`) alone: the help with its subcommands, exit 2.
        Err(e) if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => e.exit(),
        Err(e) if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) => {
            e.exit()
        }
        Err(e) => {
            // One line: clap's first paragraph, joined, without its own "error: " prefix.
            let text = e.to_string();
            let para: Vec<&str> = text
                .lines()
                .take_while(|l| !l.trim().is_empty())
                .map(str::trim)
                .collect();
            let joined = para.join(" ");
            let reason = joined.strip_prefix("error: ").unwrap_or(&joined);
            let _ = writeln!(std::io::stderr(), "rookery: {reason} (see rookery --help)");
            std::process::exit(2);
        }
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
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            let _ = writeln!(
                std::io::stderr(),
                "rookery: cannot start the async runtime: {e}"
            );
            std::process::exit(2);
        }
    };
    let code = runtime.block_on(async {
        // Orphans of commands come back to us and are reaped (see `command/reaper.rs`).
        #[cfg(target_os = "linux")]
        if let Err(e) = rookery::actors::command::reaper::become_subreaper() {
            tracing::warn!("cannot become a child subreaper: {e}");
        }
        rookery::cli::dispatch(cli).await
    });
    runtime.shutdown_timeout(std::time::Duration::from_secs(2));
    std::process::exit(code);
}
