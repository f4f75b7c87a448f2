//! The `rookery` binary: parses arguments, sets up logging on stderr (`RUST_LOG` respected; JSON
//! lines with `serve --log-format json`) and
//! hands over to `rookery::cli`. Its one exit point is `main`: `run` returns the exit code or a
//! `CliError`, which is printed here, once, as `rookery: <reason>` (usage errors exit 2). It also
//! chooses the process's allocator (mimalloc, tuned by `tune_allocator`), which the library never
//! does. Before anything else it hardens the process (`rookery::cli::startup`: the environment
//! moved off `/proc/<pid>/environ` by a re-exec, non-dumpable, SIGXFSZ caught).

use std::io::{IsTerminal, Write};
use std::process::ExitCode;

use clap::Parser;
use clap::error::ErrorKind;
use rookery::cli::CliError;
use tracing_subscriber::EnvFilter;

/// mimalloc instead of glibc's malloc: on the standard workloads (`rookery bench`, read N = 100
/// with the built-in model and over loopback HTTP) it measured 19–46 % less CPU; glibc with one
/// arena serialized the runtime's threads on its lock, with one arena per thread it grew by
/// `mprotect` steps. It costs peak RSS (docs/guide/performance.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    // SAFETY: the first statement of `main`: the process has one thread.
    #[cfg(target_os = "linux")]
    let startup = unsafe { rookery::cli::startup::harden() };
    #[cfg(not(target_os = "linux"))]
    let startup: Vec<String> = Vec::new();
    match run(startup) {
        Ok(code) => code,
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "rookery: {e}");
            e.exit_code()
        }
    }
}

fn run(startup: Vec<impl std::fmt::Display>) -> Result<ExitCode, CliError> {
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
    let logs = tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn")),
        )
        .with_writer(rookery::redact::LogWriter)
        // A closed stderr must not turn a log line into a panic (and the panic hook's own log
        // line into an abort).
        .log_internal_errors(false);
    // `serve --log-format json`: one JSON object a line, for a log shipper.
    if cli.json_logs() {
        logs.json().with_current_span(true).init();
    } else {
        logs.with_ansi(std::io::stderr().is_terminal()).init();
    }
    for problem in startup {
        tracing::warn!("{problem}");
    }
    std::panic::set_hook(Box::new(|info| {
        tracing::error!("panic: {info}");
    }));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::startup_io("cannot start the async runtime", e))?;
    let result = runtime.block_on(async {
        // Orphans of commands come back to us and are reaped (see `process/reaper.rs`).
        #[cfg(target_os = "linux")]
        if let Err(e) = rookery::process::reaper::become_subreaper() {
            tracing::warn!("cannot become a child subreaper: {e}");
        }
        // The command runs on a worker thread, as a served request does: the sessions, the
        // host and the command talk to each other without waking the main thread on every
        // event. The main thread only waits for the end.
        match tokio::spawn(rookery::cli::dispatch(cli)).await {
            Ok(result) => result,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            // Cancelled: only a runtime shutting down does that, and it waits for this.
            Err(e) => Err(CliError::Io {
                what: "the command's task ended without a result".to_string(),
                source: std::io::Error::other(e),
                code: 1,
            }),
        }
    });
    runtime.shutdown_timeout(std::time::Duration::from_secs(2));
    result
}

/// Commits arena memory on demand instead of eagerly: with mimalloc's default a 6 s `yes` flood
/// through a command peaked at 55.6 MB (release build; the memory tests bound it at 64 MiB),
/// with this at 45.8 MB (glibc: 27.8 MB). `MIMALLOC_ARENA_EAGER_COMMIT` in the environment still
/// decides. (`MIMALLOC_PURGE_DELAY=0`, which returns freed memory at once, brought the flood to
/// 31.2 MB but cost about 20 % more CPU over HTTP in page faults: not the default.)
///
/// And commits a thread's first segment as a whole, as mimalloc does its later ones
/// (`eager_commit_delay` 0 instead of 1): on demand, that first segment grew by one `mprotect`
/// per 64 KiB, about 180 calls in read N = 100 over HTTP (0.18 per tool call). A commit only
/// makes the range usable; pages still become resident when touched, so the peak RSS of that
/// run measured the same; the release build's 6 s flood peaked higher, at 37.5–39.6 MB
/// instead of 33.2–36.9 MB (the debug build's, which the memory tests bound, the same at about
/// 51 MB). `MIMALLOC_EAGER_COMMIT_DELAY` still decides.
///
/// It runs from `.init_array`, before `main` and before the first allocation: the first arena
/// is reserved by the first `malloc`, and its commit mode is fixed then. It allocates nothing.
#[cfg(target_os = "linux")]
extern "C" fn tune_allocator() {
    // The options' numbers in mimalloc v2's `mi_option_e` (the sys crate does not name them).
    const ARENA_EAGER_COMMIT: libmimalloc_sys::mi_option_t = 4;
    const EAGER_COMMIT_DELAY: libmimalloc_sys::mi_option_t = 14;
    // SAFETY: `getenv` reads the environment the loader set up (no thread exists yet);
    // `mi_option_set` sets one option and is called before any thread exists, as it must.
    unsafe {
        if libc::getenv(c"MIMALLOC_ARENA_EAGER_COMMIT".as_ptr()).is_null() {
            libmimalloc_sys::mi_option_set(ARENA_EAGER_COMMIT, 0);
        }
        if libc::getenv(c"MIMALLOC_EAGER_COMMIT_DELAY".as_ptr()).is_null() {
            libmimalloc_sys::mi_option_set(EAGER_COMMIT_DELAY, 0);
        }
    }
}

#[cfg(target_os = "linux")]
#[used]
#[unsafe(link_section = ".init_array")]
static TUNE_ALLOCATOR: extern "C" fn() = tune_allocator;
