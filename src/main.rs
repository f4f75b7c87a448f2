//! The `rookery` binary: parses arguments, sets up logging on stderr (`RUST_LOG` respected) and
//! hands over to `rookery::cli`.

use clap::Parser;
use tracing_subscriber::EnvFilter;

fn main() {
    let cli = rookery::cli::Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
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
            eprintln!("rookery: cannot start the async runtime: {e}");
            std::process::exit(2);
        }
    };
    let code = runtime.block_on(rookery::cli::dispatch(cli));
    runtime.shutdown_timeout(std::time::Duration::from_secs(2));
    std::process::exit(code);
}
