//! `rookery serve`: resolves the server's flags, binds the listener, prints
//! `listening on http://HOST:PORT` as the first stdout line and serves until SIGTERM or SIGINT,
//! then shuts down gracefully (exit 0).
//!
//! Authentication is on by default: the token is `$VAR` of `--token-env VAR`, else a random
//! one written to `<home>/serve.token` (stderr names the path, never the token). Start-up
//! refusals exit 2 with one line on stderr: no model, a bad config, a missing token variable,
//! `--no-auth` on a non-loopback address, an unusable `--config-dir`, an address that cannot be
//! bound, a home where no trace can be written. The HTTP API itself is `crate::server`.

use std::io::Write;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::signal::unix::{SignalKind, signal};

use super::ServeArgs;
use crate::Host;
use crate::config::AgentConfig;
use crate::error::ConfigError;
use crate::server::guard::GuardConfig;
use crate::server::session_config::ConfigDir;
use crate::server::{self, ServerConfig, ServerState};
use crate::trace::paths;

/// Where the token comes from.
enum Token {
    /// `--no-auth`.
    Off,
    /// `--token-env VAR`.
    FromEnv(String),
    /// Generated for this start, to be written to the token file.
    Generated(String),
}

impl Token {
    fn value(&self) -> Option<String> {
        match self {
            Token::Off => None,
            Token::FromEnv(t) | Token::Generated(t) => Some(t.clone()),
        }
    }
}

/// The bearer token: off with `--no-auth`, `$VAR` with `--token-env VAR` (an unset or empty
/// variable is an error), else a fresh random one.
fn token(args: &ServeArgs) -> Result<Token, ConfigError> {
    if args.no_auth {
        return Ok(Token::Off);
    }
    let Some(var) = &args.token_env else {
        return Ok(Token::Generated(server::token::generate()));
    };
    match std::env::var(var) {
        Ok(v) if !v.trim().is_empty() => Ok(Token::FromEnv(v.trim().to_string())),
        _ => Err(ConfigError::Other(format!(
            "--token-env {var}: the environment variable {var} is not set or empty"
        ))),
    }
}

/// Resolves `--listen`; refuses an address that is not loopback when there is no token.
async fn addresses(listen: &str, has_token: bool) -> Result<Vec<SocketAddr>, ConfigError> {
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host(listen)
        .await
        .map_err(|e| ConfigError::Other(format!("--listen {listen}: {e}")))?
        .collect();
    if addrs.is_empty() {
        return Err(ConfigError::Other(format!(
            "--listen {listen}: the address resolves to nothing"
        )));
    }
    if !has_token && addrs.iter().any(|a| !a.ip().is_loopback()) {
        return Err(ConfigError::Other(format!(
            "refusing --no-auth on {listen}: without a token the server listens on loopback addresses only"
        )));
    }
    Ok(addrs)
}

/// Refuses a home where no trace can be written, naming it and the reason (not at the first
/// session, with a 500).
fn check_home(home: &std::path::Path) -> Result<(), String> {
    let traces = home.join("traces");
    let probe = traces.join(format!(".rookery-probe-{}", std::process::id()));
    std::fs::create_dir_all(&traces)
        .and_then(|()| std::fs::File::create(&probe))
        .and_then(|_| std::fs::remove_file(&probe))
        .map_err(|e| {
            format!(
                "cannot create traces under {}: {}",
                home.display(),
                crate::trace::health::io_reason(&e)
            )
        })
}

async fn start(args: &ServeArgs) -> Result<(tokio::net::TcpListener, Arc<ServerState>), String> {
    let mut config = match &args.config {
        Some(path) => AgentConfig::from_file(path).map_err(|e| e.to_string())?,
        None => AgentConfig::default(),
    };
    if let Some(p) = args.tools_profile {
        config.set_profile(p).map_err(|e| e.to_string())?;
    }
    let model =
        super::model_args::resolve_model(&args.model, &mut config).map_err(|e| e.to_string())?;
    let hooks = match &args.hooks {
        Some(path) => crate::hooks::HooksConfig::from_file(path).map_err(|e| e.to_string())?,
        None => crate::hooks::HooksConfig::default(),
    };
    let hooks = std::sync::Arc::new(hooks);
    config.hooks = std::sync::Arc::new(config.hooks.merged(&hooks));
    let token = token(args).map_err(|e| e.to_string())?;
    if args.max_sessions == 0 {
        return Err("--max-sessions must be at least 1".to_string());
    }
    let config_dir = match &args.config_dir {
        Some(dir) => {
            Some(ConfigDir::open(dir).map_err(|e| format!("--config-dir {}: {e}", dir.display()))?)
        }
        None => None,
    };
    let addrs = addresses(&args.listen, token.value().is_some())
        .await
        .map_err(|e| e.to_string())?;
    let listener = tokio::net::TcpListener::bind(addrs.as_slice())
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", args.listen))?;
    let local = listener
        .local_addr()
        .map_err(|e| format!("cannot read the listening address: {e}"))?;
    server::fd_limit::check(args.max_sessions);
    let home = paths::rookery_home(args.home.as_deref());
    check_home(&home)?;
    if let Token::Generated(t) = &token {
        let path = server::token::write_token_file(&home, t).map_err(|e| {
            format!(
                "cannot write the token file {}: {e}",
                home.join(server::token::TOKEN_FILE).display()
            )
        })?;
        eprintln!("token: {}", path.display());
    }
    let host = Host::start(home.clone()).await.map_err(|e| e.to_string())?;
    let state = ServerState::new(
        host,
        ServerConfig {
            home,
            model,
            config,
            token: token.value(),
            guard: GuardConfig::new(
                local,
                &args.allow_host,
                &args.allow_origin,
                Duration::from_millis(args.body_timeout_ms.max(1)),
            ),
            config_dir,
            max_sessions: args.max_sessions,
            hooks,
        },
    );
    Ok((listener, state))
}

pub async fn serve(args: ServeArgs) -> i32 {
    // Installed first, so a signal during start-up still means a clean stop.
    let (mut int, mut term) = match (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) {
        (Ok(i), Ok(t)) => (i, t),
        (Err(e), _) | (_, Err(e)) => {
            errln!("rookery: cannot install signal handlers: {e}");
            return 2;
        }
    };
    let (listener, state) = match start(&args).await {
        Ok(s) => s,
        Err(e) => {
            errln!("rookery: {e}");
            return 2;
        }
    };
    let local = match listener.local_addr() {
        Ok(a) => a,
        Err(e) => {
            errln!("rookery: cannot read the listening address: {e}");
            return 2;
        }
    };
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
    match server::serve(listener, state, stop).await {
        Ok(()) => 0,
        Err(e) => {
            errln!("rookery: server error: {e}");
            1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    }
}
