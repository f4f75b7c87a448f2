//! `CliError`: every way a `rookery` subcommand can fail, and the one line and exit code each
//! gets. Subcommands return it; only `main` prints it (`rookery: <text>`), once.
//!
//! This is where library errors meet command-line wording: the configuration variants the CLI
//! has flags for are worded with those flags (`--provider vllm needs --base-url and --model`),
//! and start-up errors about a path add what to do about it. It must not print anything itself.

use std::io;
use std::process::ExitCode;

use crate::config::ConfigError;
use crate::error::{RookeryError, TraceOpenError};
use crate::model::error::ModelSetupError;
use crate::trace::catalog::CatalogError;

/// The failure of a subcommand.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// A bad configuration (exit 2).
    #[error("{}", config_text(.0))]
    Config(#[from] ConfigError),
    /// A usage error the parser cannot see, in the CLI's own words (exit 2).
    #[error("{0}")]
    Usage(String),
    /// The arguments do not parse (exit 2): clap's first paragraph on one line, pointing at the
    /// subcommand's `--help`.
    #[error("{}", parse_text(source, command))]
    Parse {
        /// clap's error.
        #[source]
        source: clap::Error,
        /// The (sub)command the arguments were for, e.g. `rookery run`.
        command: String,
    },
    /// The host, a session or a listener could not start (exit 2).
    #[error("{}", start_text(.0))]
    Start(#[source] RookeryError),
    /// Something failed after start-up (exit 1).
    #[error("{0}")]
    Failed(#[source] RookeryError),
    /// Recorded sessions that cannot be found or read (exit 2 for a home or id that does not
    /// fit, 1 for a file that cannot be read or deleted), with what to do next.
    #[error("{}", catalog_text(.0))]
    Catalog(#[from] crate::trace::catalog::CatalogError),
    /// The session's trace lost a record (exit 1): `trace write failed: <reason> (<path>)`.
    #[error("{0}")]
    TraceFailed(String),
    /// OpenTelemetry export could not start (exit 2).
    #[error("{0}")]
    Telemetry(#[from] crate::telemetry::TelemetryError),
    /// An I/O failure of the CLI itself, with what it was doing (exit 2 before start, 1 after).
    #[error("{what}: {source}")]
    Io {
        /// What the CLI was doing.
        what: String,
        /// The I/O error.
        #[source]
        source: io::Error,
        /// The exit code (2 before start, 1 after).
        code: u8,
    },
}

impl From<ModelSetupError> for CliError {
    fn from(e: ModelSetupError) -> Self {
        CliError::Config(e.into())
    }
}

impl CliError {
    /// The process exit code of this failure.
    pub fn exit_code(&self) -> ExitCode {
        ExitCode::from(match self {
            CliError::Failed(_) | CliError::TraceFailed(_) => 1,
            CliError::Catalog(CatalogError::Read { .. } | CatalogError::Remove { .. }) => 1,
            CliError::Io { code, .. } => *code,
            _ => 2,
        })
    }

    /// A start-up I/O failure (exit 2), e.g. signal handlers that cannot be installed.
    pub fn startup_io(what: impl Into<String>, source: io::Error) -> Self {
        CliError::Io {
            what: what.into(),
            source,
            code: 2,
        }
    }

    /// A parse error of `args` (the whole command line, program name first).
    pub fn parse<I, T>(source: clap::Error, args: I) -> Self
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString>,
    {
        CliError::Parse {
            source,
            command: command_path(args),
        }
    }

    /// A usage error in the CLI's words.
    pub fn usage(text: impl Into<String>) -> Self {
        CliError::Usage(text.into())
    }
}

/// A configuration error in command-line wording: the variants that stand for a flag name it.
pub fn config_text(e: &ConfigError) -> String {
    match e {
        ConfigError::Model(ModelSetupError::MissingEndpoint { provider }) => {
            format!("--provider {provider} needs --base-url and --model")
        }
        ConfigError::Model(ModelSetupError::MissingModel { provider }) => {
            format!("--provider {provider} needs --model")
        }
        ConfigError::Model(ModelSetupError::BadBaseUrl(url)) => {
            format!("--base-url must start with http:// or https:// (got \"{url}\")")
        }
        ConfigError::Model(ModelSetupError::BadKeyVariable) => {
            "--api-key-env must name an environment variable".into()
        }
        ConfigError::Model(ModelSetupError::ScriptedNeedsScript) => {
            "--provider scripted takes its turns from --script FILE".into()
        }
        ConfigError::ProjectKey { path, key, reason } => format!(
            "project config {} may not set {key}: {reason} (move it to your user config, or pass --config {} to vouch for it)",
            path.display(),
            path.display()
        ),
        other => other.to_string(),
    }
}

/// A catalog error, with the next step for an id that does not fit.
fn catalog_text(e: &CatalogError) -> String {
    let hint = match e {
        CatalogError::UnknownSession { .. } => " (rookery sessions list shows them)",
        CatalogError::AmbiguousSession { .. } => " (give more of the id)",
        _ => "",
    };
    format!("{e}{hint}")
}

/// A start-up error, with the fix when it is about a path the user chose.
fn start_text(e: &RookeryError) -> String {
    match e {
        RookeryError::Config(c) => config_text(c),
        RookeryError::TraceOpen(t @ TraceOpenError::Create { .. }) => {
            format!("{t} (pass --home DIR, or set ROOKERY_HOME, to a directory rookery can write)")
        }
        other => other.to_string(),
    }
}

/// clap's error as one line, pointing at the `--help` of the (sub)command it is about.
fn parse_text(e: &clap::Error, command: &str) -> String {
    let text = e.render().to_string();
    let para: Vec<&str> = text
        .lines()
        .take_while(|l| !l.trim().is_empty())
        .map(str::trim)
        .collect();
    let joined = para.join(" ");
    let reason = joined.strip_prefix("error: ").unwrap_or(&joined);
    format!("{reason} (see {command} --help)")
}

/// The subcommand path a command line names (`rookery sessions show` for `rookery sessions
/// show --json`): the leading words that are subcommand names, whatever options come between.
fn command_path<I, T>(args: I) -> String
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString>,
{
    use clap::CommandFactory;
    let mut cmd = crate::cli::Cli::command();
    let mut path = vec!["rookery".to_string()];
    for arg in args.into_iter().skip(1) {
        let arg = arg.into();
        let Some(word) = arg.to_str() else { continue };
        if word.starts_with('-') {
            continue;
        }
        match cmd.find_subcommand(word) {
            Some(sub) => {
                path.push(word.to_string());
                let sub = sub.clone();
                cmd = sub;
            }
            None => break,
        }
    }
    path.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn parse_error(args: &[&str]) -> String {
        match crate::cli::Cli::try_parse_from(args) {
            Ok(_) => panic!("{args:?} parsed"),
            Err(e) => CliError::parse(e, args).to_string(),
        }
    }

    #[test]
    fn usage_errors_point_at_the_subcommand_help() {
        let e = parse_error(&["rookery", "run", "--bogus", "x"]);
        assert!(e.ends_with("(see rookery run --help)"), "{e}");
        assert!(!e.contains('\n'), "{e}");
        let e = parse_error(&["rookery", "sessions", "show"]);
        assert!(e.ends_with("(see rookery sessions show --help)"), "{e}");
        let e = parse_error(&["rookery", "bogus"]);
        assert!(e.ends_with("(see rookery --help)"), "{e}");
        let e = parse_error(&["rookery", "run", "--approve"]);
        assert!(
            e.contains("[possible values: allow-all, deny-all, read-only, always-ask]")
                && e.ends_with("(see rookery run --help)"),
            "{e}"
        );
    }

    #[test]
    fn flag_variants_are_worded_with_their_flags() {
        assert_eq!(
            CliError::from(ModelSetupError::MissingEndpoint {
                provider: "vllm".into()
            })
            .to_string(),
            "--provider vllm needs --base-url and --model"
        );
        assert_eq!(
            config_text(
                &ModelSetupError::MissingModel {
                    provider: "anthropic".into()
                }
                .into()
            ),
            "--provider anthropic needs --model"
        );
        for (e, text) in [
            (
                ModelSetupError::BadBaseUrl("api.openai.com".into()),
                "--base-url must start with http:// or https:// (got \"api.openai.com\")",
            ),
            (
                ModelSetupError::BadKeyVariable,
                "--api-key-env must name an environment variable",
            ),
            (
                ModelSetupError::ScriptedNeedsScript,
                "--provider scripted takes its turns from --script FILE",
            ),
        ] {
            assert_eq!(config_text(&e.into()), text);
        }
        assert_eq!(
            config_text(&ConfigError::Workspace("/nope".into())),
            "workspace /nope does not exist or is not a directory"
        );
    }

    #[test]
    fn exit_codes() {
        assert_eq!(CliError::usage("x").exit_code(), ExitCode::from(2));
        assert_eq!(
            CliError::TraceFailed("trace write failed".into()).exit_code(),
            ExitCode::from(1)
        );
    }
}
