//! `rookery serve`: resolves the server's flags, binds the listener, prints
//! `listening on http://HOST:PORT` as the first stdout line and serves until SIGTERM or SIGINT,
//! then shuts down gracefully (exit 0).
//!
//! Start-up refusals exit 2 with one line on stderr: no model, a bad config, a missing token
//! variable, a non-loopback address without a token, an address that cannot be bound, a home
//! where no trace can be written. The HTTP API itself is `crate::server`.

use std::io::Write;
use std::net::SocketAddr;
use std::sync::Arc;

use tokio::signal::unix::{SignalKind, signal};

use super::ServeArgs;
use crate::Host;
use crate::config::AgentConfig;
use crate::error::ConfigError;
use crate::server::{self, ServerConfig, ServerState};
use crate::trace::paths;

/// The bearer token named by `--token-env`, if any; an unset or empty variable is an error.
fn token(args: &ServeArgs) -> Result<Option<String>, ConfigError> {
    let Some(var) = &args.token_env else {
        return Ok(None);
    };
    match std::env::var(var) {
        Ok(v) if !v.trim().is_empty() => Ok(Some(v.trim().to_string())),
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
            "refusing to listen on {listen} without a token: pass --token-env VAR or listen on a loopback address"
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
    let model =
        super::model_args::resolve_model(&args.model, &mut config).map_err(|e| e.to_string())?;
    let token = token(args).map_err(|e| e.to_string())?;
    let addrs = addresses(&args.listen, token.is_some())
        .await
        .map_err(|e| e.to_string())?;
    let listener = tokio::net::TcpListener::bind(addrs.as_slice())
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", args.listen))?;
    let home = paths::rookery_home(args.home.as_deref());
    check_home(&home)?;
    let host = Host::start(home.clone()).await.map_err(|e| e.to_string())?;
    let state = ServerState::new(
        host,
        ServerConfig {
            home,
            model,
            config,
            token,
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
    async fn non_loopback_needs_a_token() {
        assert!(addresses("127.0.0.1:0", false).await.is_ok());
        assert!(addresses("[::1]:0", false).await.is_ok());
        assert!(addresses("0.0.0.0:0", true).await.is_ok());
        let e = addresses("0.0.0.0:7878", false).await.unwrap_err();
        assert_eq!(
            e.to_string(),
            "refusing to listen on 0.0.0.0:7878 without a token: pass --token-env VAR or listen on a loopback address"
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
