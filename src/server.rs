//! The multi-session HTTP + SSE host behind `rookery serve`: an axum router over a [`Host`],
//! with bearer-token auth, browser-safety checks, per-session event logs with `Last-Event-ID`
//! replay, approvals answered through the API, session resume and Prometheus metrics.
//!
//! Layout: `routes.rs` (handlers), `state.rs` (served sessions, their pumps, the session cap),
//! `sse.rs` (event log and fan-out), `sse_trace.rs` (a replay from before the ring, read
//! from the trace), `sse_store.rs` (the event ids the store's `seq` on `serve --store`), `approver.rs` (API approvals), `guard.rs` (Host, Origin,
//! CORS, content type), `auth.rs` and `credentials.rs` (who a request acts as), `principal.rs` and `auth_file.rs`
//! (the principals of `--auth FILE`), `token_hash.rs`, `jwt.rs` (JWT bearer tokens), `ownership.rs` (a user's sessions
//! only), `workspace.rs` (workspace roots), `token.rs` (the generated token file), `session_config.rs`
//! and `config_error.rs` (request configs), `fd_limit.rs`, `access_log.rs` (a log line per request), `last_task.rs` (how
//! the last task ended), `messages.rs` and `session_list.rs` (paged reads, `paging.rs`), `trace_download.rs`,
//! `stream_token.rs` (tokens for `EventSource`; `stream_token_signed.rs` a cluster's signed ones), `console.rs` (the web console's files), `webhooks.rs` and
//! `webhook_delivery.rs` (signed event POSTs, queued and retried), `schedules.rs`,
//! `schedule_spec.rs`, `schedule_files.rs` with `schedule_index.rs` (the `files` backend's),
//! `schedule_store.rs` (the store's, shared by a cluster), `schedule_runner.rs` and
//! `schedule_routes.rs` (tasks on a cron pattern), `listener.rs` (the accept loop,
//! connection cap and header/idle timeouts), `metrics.rs`, `metrics_collect.rs` (the figures, also for OTLP) and `metrics_principal.rs`, `error.rs` (error shape, JSON
//! bodies), `openapi.rs` with `openapi_shapes.rs` and `openapi_errors.rs` (the OpenAPI document),
//! `cluster.rs`, `cluster_route.rs` and `forward.rs` (a node of a cluster: `/v1/cluster`,
//! session requests sent to the node holding the session). The server drives sessions only through the library API; it
//! never writes traces itself. Signal handling and the command line live in `cli/serve.rs`.
//!
//! [`Host`]: crate::Host

pub mod access_log;
pub mod approval_routes;
pub mod approver;
pub mod auth;
pub mod auth_file;
pub mod busy;
#[cfg(feature = "postgres")]
pub mod cluster;
#[cfg(feature = "postgres")]
pub mod cluster_route;
pub mod compact;
pub mod config_error;
pub mod console;
pub mod create_route;
pub mod credentials;
pub mod error;
pub mod fd_limit;
pub mod fork;
#[cfg(feature = "postgres")]
pub mod forward;
pub mod grants;
pub mod guard;
pub mod guard_config;
pub mod jwt;
pub mod last_task;
pub mod listener;
pub mod messages;
#[cfg(feature = "postgres")]
pub mod messages_stored; // the pages of /messages read from the postgres store
pub mod metrics;
pub mod metrics_collect;
pub mod metrics_principal;
pub mod openapi;
pub mod openapi_errors;
pub mod openapi_shapes;
pub mod ownership;
pub mod paging;
pub mod principal;
pub mod reopen;
pub mod rollback;
pub mod routes;
pub mod schedule_files;
pub mod schedule_index;
pub mod schedule_routes;
pub mod schedule_runner;
pub mod schedule_spec;
#[cfg(feature = "postgres")]
pub mod schedule_store;
pub mod schedules;
pub mod session_config;
pub mod session_list;
pub mod sse;
#[cfg(feature = "postgres")]
pub mod sse_store;
pub mod sse_trace;
pub mod state;
#[cfg(feature = "postgres")]
pub mod stored_records;
pub mod stream_token;
pub mod stream_token_route;
pub mod stream_token_signed;
pub mod task_queue;
pub mod task_schema;
pub mod token;
pub mod token_hash;
pub mod trace_download;
pub mod webhook_delivery;
pub mod webhooks;
pub mod workspace;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

pub use approver::ApiApprover;
pub use error::ApiError;
pub use listener::ConnectionLimits;
pub use routes::router;
pub use state::{ServerConfig, ServerState};

/// How long shutdown may take before the process gives up waiting (the contract is 5 s in all,
/// and the binary's runtime may still wait up to 2 s for blocking tasks afterwards).
pub const SHUTDOWN_BUDGET: Duration = Duration::from_millis(2500);

/// Serves `state` on `listener` with the connection `limits` until `shutdown` resolves, then
/// stops accepting, closes every session (running tasks are aborted, traces flushed) and
/// returns within [`SHUTDOWN_BUDGET`].
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: Arc<ServerState>,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let stop = tokio_util::sync::CancellationToken::new();
    let app = router(state.clone());
    let mut server = tokio::spawn(listener::run(listener, app, limits, stop.clone()));
    tokio::select! {
        result = &mut server => {
            // The accept loop ended on its own (it panicked): close the sessions and report.
            state.shutdown().await;
            return result.map_err(|e| std::io::Error::other(e.to_string()));
        }
        _ = shutdown => {}
    }
    tracing::info!("shutting down");
    stop.cancel();
    let started = tokio::time::Instant::now();
    // Closing the sessions also ends their SSE streams, which lets the connections finish.
    if tokio::time::timeout(SHUTDOWN_BUDGET, state.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("sessions did not all close in time");
    }
    let left = SHUTDOWN_BUDGET.saturating_sub(started.elapsed());
    match tokio::time::timeout(left.max(Duration::from_millis(100)), &mut server).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(std::io::Error::other(e.to_string())),
        Err(_) => {
            tracing::warn!("connections still open at shutdown; closing them");
            server.abort();
            Ok(())
        }
    }
}
