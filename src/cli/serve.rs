//! `rookery serve`: resolves the server's flags, binds the listener, prints
//! `listening on http://HOST:PORT` as the first stdout line and serves until SIGTERM or SIGINT,
//! then shuts down gracefully (exit 0).
//!
//! Authentication is on by default: the principals of `--auth FILE`, else one token, `$VAR` of
//! `--token-env VAR` or a random one written to `<home>/serve.token` (stderr names the path,
//! never the token). Start-up refusals exit 2 with one line on stderr: a bad config or auth
//! file, a bad webhook flag or a missing webhook secret (`webhook_args.rs`), a missing token
//! variable,
//! `--no-auth` on a non-loopback address, an unusable `--config-dir`, an address that cannot be
//! bound, a home where no trace (or no schedule index) can be written, a postgres store without
//! the cluster flags (`cluster_args.rs`). The HTTP API itself is `crate::server`.

use std::io::Write;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use tokio::signal::unix::{SignalKind, signal};

use super::cluster_args::Node;
use super::{CliError, ServeArgs};
use crate::Host;
use crate::config::AgentConfig;
use crate::config::ConfigError;
use crate::error::{RookeryError, TraceOpenError};
use crate::server::guard::GuardConfig;
use crate::server::session_config::ConfigDir;
use crate::server::{self, ConnectionLimits, ServerConfig, ServerState};
use crate::trace::paths;

/// Where the token comes from.
enum Token {
    /// `--no-auth`.
    Off,
    /// `--auth FILE`: the principals' hashed tokens, and the JWT keys if any.
    Principals(
        Arc<server::principal::Principals>,
        Option<Arc<server::jwt::JwtVerifier>>,
    ),
    /// `--token-env VAR`.
    FromEnv(String),
    /// Generated for this start, to be written to the token file.
    Generated(String),
}

impl Token {
    /// Whether requests need a credential.
    fn required(&self) -> bool {
        !matches!(self, Token::Off)
    }

    fn authenticator(self) -> server::credentials::Authenticator {
        use server::credentials::Authenticator;
        match self {
            Token::Off => Authenticator::Open,
            Token::Principals(p, jwt) => Authenticator::Principals(p, jwt),
            Token::FromEnv(t) | Token::Generated(t) => Authenticator::Token(t),
        }
    }
}

/// The bearer token: off with `--no-auth`, `$VAR` with `--token-env VAR` (an unset or empty
/// variable is an error), else a fresh random one.
fn token(args: &ServeArgs) -> Result<Token, CliError> {
    if args.no_auth {
        return Ok(Token::Off);
    }
    if let Some(path) = &args.auth {
        let principals =
            server::auth_file::load(path).map_err(|e| CliError::usage(e.to_string()))?;
        let jwt = server::jwt::JwtVerifier::from_options(&jwt_options(args))
            .map_err(|e| CliError::usage(e.to_string()))?;
        return Ok(Token::Principals(Arc::new(principals), jwt.map(Arc::new)));
    }
    let Some(var) = &args.token_env else {
        return Ok(Token::Generated(server::token::generate()));
    };
    match std::env::var(var) {
        Ok(v) if !v.trim().is_empty() => Ok(Token::FromEnv(v.trim().to_string())),
        _ => Err(CliError::usage(format!(
            "--token-env {var}: the environment variable {var} is not set or empty"
        ))),
    }
}

/// The JWT flags (the secret read from its variable).
fn jwt_options(args: &ServeArgs) -> server::jwt::JwtOptions {
    server::jwt::JwtOptions {
        jwks: args.jwt_jwks.clone(),
        hs256_secret: args
            .jwt_hs256_secret_env
            .as_ref()
            .map(|var| (var.clone(), std::env::var(var).ok())),
        issuer: args.jwt_issuer.clone(),
        audience: args.jwt_audience.clone(),
        role_claim: args.jwt_role_claim.clone(),
    }
}

/// Resolves `--listen`; refuses an address that is not loopback when there is no token.
async fn addresses(listen: &str, has_token: bool) -> Result<Vec<SocketAddr>, CliError> {
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host(listen)
        .await
        .map_err(|e| CliError::usage(listen_error(listen, &e)))?
        .collect();
    if addrs.is_empty() {
        return Err(CliError::usage(format!(
            "--listen {listen}: the address resolves to nothing"
        )));
    }
    if !has_token && addrs.iter().any(|a| !a.ip().is_loopback()) {
        return Err(CliError::usage(format!(
            "refusing --no-auth on {listen}: without a token the server listens on loopback addresses only"
        )));
    }
    Ok(addrs)
}

/// Whether the flags or the config name a model (else the server only resumes).
fn has_model(args: &ServeArgs, config: &AgentConfig) -> bool {
    let m = &args.model;
    m.script.is_some()
        || m.provider.is_some()
        || m.base_url.is_some()
        || m.model.is_some()
        || m.api_key_env.is_some()
        || config.model.is_some()
}

/// `--listen ADDR` that does not resolve, with the expected shape (`7878` alone is no address).
fn listen_error(listen: &str, e: &std::io::Error) -> String {
    let port_only = !listen.contains(':');
    let hint = if port_only {
        format!(" (use HOST:PORT, e.g. 127.0.0.1:{listen})")
    } else {
        " (use HOST:PORT, e.g. 127.0.0.1:7878)".to_string()
    };
    format!("--listen {listen}: {e}{hint}")
}

/// Refuses a home where no trace can be written, naming it and the reason (not at the first
/// session, with a 500).
fn check_home(home: &std::path::Path) -> Result<(), TraceOpenError> {
    let traces = home.join("traces");
    let probe = traces.join(format!(".rookery-probe-{}", std::process::id()));
    crate::trace::private::prepare(home)
        .and_then(|()| std::fs::File::create(&probe))
        .and_then(|_| std::fs::remove_file(&probe))
        .map_err(|source| TraceOpenError::Create {
            home: home.to_path_buf(),
            source,
        })
}

/// The connection limits of `--header-timeout-ms` and `--max-connections` (default: from the
/// descriptor limit `nofile`); a zero is refused.
fn connection_limits(args: &ServeArgs, nofile: Option<u64>) -> Result<ConnectionLimits, CliError> {
    if args.header_timeout_ms == 0 {
        return Err(CliError::usage(
            "--header-timeout-ms must be at least 1 (connections with no request in progress are closed after it)",
        ));
    }
    let mut limits = ConnectionLimits::for_nofile(nofile);
    limits.header_timeout = Duration::from_millis(args.header_timeout_ms);
    match args.max_connections {
        Some(0) => return Err(CliError::usage("--max-connections must be at least 1")),
        Some(n) => {
            if let Some(limit) = nofile.filter(|&l| n as u64 >= l) {
                tracing::warn!(
                    "--max-connections {n} is not below the descriptor limit ({limit}): connections may exhaust it"
                );
            }
            limits.max_connections = n;
        }
        None => {}
    }
    Ok(limits)
}

/// The sandbox of served sessions and the loosest one a client may ask for: the flags over
/// the config's `sandbox:`, whose mode defaults to `workspace-write` here (only an explicit
/// `--sandbox off` serves unsandboxed). A mode this machine cannot enforce refuses the start.
fn serve_sandbox(
    args: &ServeArgs,
    config: &AgentConfig,
) -> Result<crate::sandbox::SandboxPolicy, CliError> {
    use crate::sandbox::{SandboxMode, SandboxRequest};
    let mut base = config.sandbox.clone();
    if base.is_off() {
        base.mode = SandboxMode::WorkspaceWrite;
    }
    let policy = SandboxRequest {
        mode: args.sandbox,
        network: args.sandbox_network,
    }
    .apply(&base);
    if !policy.is_off() {
        crate::sandbox::probe(&policy).map_err(|e| {
            CliError::usage(format!(
                "{e} (serve defaults to --sandbox workspace-write; pass --sandbox off to serve sessions unsandboxed)"
            ))
        })?;
    }
    Ok(policy)
}

/// The listener, the served state and the connection limits.
type Started = (
    tokio::net::TcpListener,
    Arc<ServerState>,
    ConnectionLimits,
    Option<Node>,
);

async fn start(args: &ServeArgs) -> Result<Started, CliError> {
    let mut config = match &args.config {
        Some(path) => AgentConfig::from_file(path)?,
        None => AgentConfig::default(),
    };
    if let Some(p) = args.tools_profile {
        config.set_profile(p)?;
    }
    if let Some(path) = &args.mcp_config {
        config.add_mcp_config(path)?;
    }
    // Without a model the server still resumes recorded sessions, each with its own.
    let model = if has_model(args, &config) {
        Some(super::model_args::resolve_model(&args.model, &mut config)?)
    } else {
        errln!(
            "rookery: no model configured: sessions recorded under the home resume with the model they recorded; new sessions are refused (pass --script FILE or --provider … to serve them)"
        );
        None
    };
    let launch = match model {
        Some(_) => super::run::launch_from(&args.model, args.config.as_deref(), &config),
        None => crate::message::launch::Launch::default(),
    };
    let hooks = match &args.hooks {
        Some(path) => crate::hooks::HooksConfig::from_file(path).map_err(ConfigError::from)?,
        None => crate::hooks::HooksConfig::default(),
    };
    let settings = match &args.settings {
        Some(path) => crate::config::settings::Settings::from_file(path)?,
        None => Default::default(),
    };
    let hooks = hooks.merged(&settings.hooks);
    let permissions = std::sync::Arc::new(settings.permissions);
    config.permissions = std::sync::Arc::new(config.permissions.merged(&permissions));
    let hooks = std::sync::Arc::new(hooks);
    config.hooks = std::sync::Arc::new(config.hooks.merged(&hooks));
    let token = token(args)?;
    let node = args.cluster.resolve(args.store.is_postgres()?)?;
    let webhooks = args.webhooks.config()?;
    if args.max_sessions == 0 {
        return Err(CliError::usage("--max-sessions must be at least 1"));
    }
    // The cap follows the descriptor limit once raised (raising it again is a no-op).
    let limits = connection_limits(args, server::fd_limit::raise_nofile_limit())?;
    let config_dir = match &args.config_dir {
        Some(dir) => Some(
            ConfigDir::open(dir)
                .map_err(|e| CliError::usage(format!("--config-dir {}: {e}", dir.display())))?,
        ),
        None => None,
    };
    let addrs = addresses(&args.listen, token.required()).await?;
    let listener = tokio::net::TcpListener::bind(addrs.as_slice())
        .await
        .map_err(|e| CliError::startup_io(format!("cannot listen on {}", args.listen), e))?;
    let local = listener
        .local_addr()
        .map_err(|e| CliError::startup_io("cannot read the listening address", e))?;
    server::fd_limit::check(args.max_sessions);
    let home = paths::rookery_home(args.home.as_deref());
    check_home(&home).map_err(|e| CliError::Start(RookeryError::TraceOpen(e)))?;
    let sandbox = serve_sandbox(args, &config)?;
    if let Token::Generated(t) = &token {
        let path = server::token::write_token_file(&home, t).map_err(|e| {
            CliError::startup_io(
                format!(
                    "cannot write the token file {}",
                    home.join(server::token::TOKEN_FILE).display()
                ),
                e,
            )
        })?;
        eprintln!("token: {}", path.display());
    }
    // The store is connected (and migrated) before the host starts on it; `None`: the files.
    let store = args
        .store
        .connect_as(node.as_ref().map(|n| n.node_id.as_str()))
        .await?;
    let host = match store.clone() {
        Some(store) => Host::start_with_store(home.clone(), store).await,
        None => Host::start(home.clone()).await,
    }
    .map_err(CliError::Start)?;
    let state = ServerState::new(
        host,
        ServerConfig {
            home,
            model,
            launch,
            config,
            auth: token.authenticator(),
            guard: GuardConfig::new(
                local,
                &args.allow_host,
                &args.allow_origin,
                Duration::from_millis(args.body_timeout_ms.max(1)),
            ),
            config_dir,
            max_sessions: args.max_sessions,
            hooks,
            permissions,
            ring_bytes: args.sse_ring_bytes,
            stream_token_ttl: Duration::from_millis(args.stream_token_ttl_ms),
            hibernation: server::state::HibernationConfig {
                idle: (args.idle_hibernate > 0).then(|| Duration::from_secs(args.idle_hibernate)),
                max_resident: args.max_resident.max(1),
            },
            sandbox,
            store,
        },
    );
    if let Some(cfg) = webhooks {
        let w = server::webhooks::Webhooks::start(cfg)
            .map_err(|e| CliError::usage(format!("cannot start the webhook client: {e}")))?;
        state.set_webhooks(w);
    }
    // On the store the schedules are the cluster's, in its `schedules` table; else the home's.
    let schedules = match state.cfg.store().cloned() {
        Some(store) => server::schedules::Schedules::open_store(store, args.schedule_minute_ms)
            .await
            .map_err(|e| CliError::Start(e.into()))?,
        None => server::schedules::Schedules::open(state.cfg.home.clone(), args.schedule_minute_ms)
            .map_err(|e| CliError::usage(e.to_string()))?,
    };
    state.set_schedules(schedules.clone());
    server::schedule_runner::start(&schedules, &state);
    server::metrics_collect::start_otel_gauges(&state);
    state.start_hibernation();
    let node = match (node, state.cfg.store().cloned()) {
        (Some(settings), Some(store)) => Some(Node::join(settings, store, &state).await?),
        _ => None,
    };
    Ok((listener, state, limits, node))
}

/// `rookery serve --print-openapi`: the document on stdout, no server, no home touched.
fn print_openapi() -> Result<ExitCode, CliError> {
    let json = server::openapi::document_json().map_err(|e| {
        CliError::Failed(RookeryError::InvalidInput(format!(
            "the OpenAPI document cannot be built: {e}"
        )))
    })?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{json}")
        .and_then(|()| out.flush())
        .map_err(|source| CliError::Io {
            what: "cannot print the OpenAPI document".to_string(),
            source,
            code: 1,
        })?;
    Ok(ExitCode::SUCCESS)
}

/// `rookery serve`: serves sessions over HTTP + SSE until SIGINT or SIGTERM.
pub async fn serve(args: ServeArgs) -> Result<ExitCode, CliError> {
    if args.print_openapi {
        return print_openapi();
    }
    // Installed first, so a signal during start-up still means a clean stop.
    let (mut int, mut term) = match (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) {
        (Ok(i), Ok(t)) => (i, t),
        (Err(e), _) | (_, Err(e)) => {
            return Err(CliError::startup_io("cannot install signal handlers", e));
        }
    };
    let (listener, state, limits, node) = start(&args).await?;
    let local = listener
        .local_addr()
        .map_err(|e| CliError::startup_io("cannot read the listening address", e))?;
    {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "listening on http://{local}");
        let _ = out.flush();
    }
    let stop = async move {
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
    };
    let served = server::serve(listener, state, limits, stop).await;
    if let Some(node) = node {
        node.leave().await;
    }
    served.map_err(|source| CliError::Io {
        what: "server error".to_string(),
        source,
        code: 1,
    })?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn serve_args(flags: &[&str]) -> ServeArgs {
        let argv = ["rookery", "serve"]
            .into_iter()
            .chain(flags.iter().copied());
        match crate::cli::Cli::try_parse_from(argv).unwrap().command {
            crate::cli::Command::Serve(args) => *args,
            _ => unreachable!(),
        }
    }

    #[test]
    fn connection_limits_come_from_the_flags_or_the_descriptor_limit() {
        let limits = connection_limits(&serve_args(&[]), Some(4096)).unwrap();
        assert_eq!(limits.header_timeout, Duration::from_secs(10));
        assert_eq!(limits.max_connections, 2048);
        let args = serve_args(&["--header-timeout-ms", "250", "--max-connections", "8"]);
        let limits = connection_limits(&args, Some(4096)).unwrap();
        assert_eq!(limits.header_timeout, Duration::from_millis(250));
        assert_eq!(limits.max_connections, 8);
        let zero = connection_limits(&serve_args(&["--header-timeout-ms", "0"]), None);
        assert!(
            zero.unwrap_err()
                .to_string()
                .starts_with("--header-timeout-ms must be at least 1"),
        );
        let zero = connection_limits(&serve_args(&["--max-connections", "0"]), None);
        assert_eq!(
            zero.unwrap_err().to_string(),
            "--max-connections must be at least 1"
        );
    }

    #[tokio::test]
    async fn no_auth_needs_loopback() {
        assert!(addresses("127.0.0.1:0", false).await.is_ok());
        assert!(addresses("[::1]:0", false).await.is_ok());
        assert!(addresses("0.0.0.0:0", true).await.is_ok());
        let e = addresses("0.0.0.0:7878", false).await.unwrap_err();
        assert_eq!(
            e.to_string(),
            "refusing --no-auth on 0.0.0.0:7878: without a token the server listens on loopback addresses only"
        );
        assert!(
            addresses("not an address", false)
                .await
                .unwrap_err()
                .to_string()
                .starts_with("--listen not an address: ")
        );
        let e = addresses("7878", true).await.unwrap_err().to_string();
        assert!(
            e.starts_with("--listen 7878: ") && e.ends_with("(use HOST:PORT, e.g. 127.0.0.1:7878)"),
            "{e}"
        );
    }
}
