//! The figures of the server's sessions as `/metrics` shows them ([`collect`]): sessions by
//! status, live commands and subagents, pending approvals, SSE clients and trace bytes, and the
//! per-principal counts; and, with OpenTelemetry export on, a task that hands the same figures
//! to the exporter every few seconds ([`start_otel_gauges`]), so a collector sees what a
//! Prometheus scrape would.
//!
//! It only reads: it asks resident sessions for their status and counts, never wakes one.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use super::metrics::Gauges;
use super::metrics_principal::{PrincipalGauge, owner_label};
use super::state::ServerState;
use crate::actors::session::SessionStatus;
use crate::telemetry::metrics::{ServerGauges, metrics_on, set_server_gauges};

/// How often the exporter's copy of the gauges is brought up to date.
const OTEL_GAUGE_PERIOD: Duration = Duration::from_secs(5);

/// The server-wide gauges and the per-principal counts of the resident sessions.
pub async fn collect(state: &ServerState) -> (Gauges, BTreeMap<String, PrincipalGauge>) {
    let list = state.list();
    let statuses = futures::future::join_all(list.iter().map(|e| e.handle.status())).await;
    let mut g = Gauges {
        trace_bytes: state.host.trace_bytes(),
        ..Gauges::default()
    };
    let mut by_principal = BTreeMap::new();
    for (e, s) in list.iter().zip(&statuses) {
        let owner = e.handle.meta().owner.as_deref();
        let label = owner_label(state.cfg.principals(), owner);
        let p: &mut PrincipalGauge = by_principal.entry(label).or_default();
        p.resident += 1;
        p.running += u64::from(matches!(s, Ok(SessionStatus::Running)));
    }
    for s in statuses {
        match s {
            Ok(SessionStatus::Idle) => g.sessions_idle += 1,
            Ok(SessionStatus::Running) => g.sessions_running += 1,
            Ok(SessionStatus::Failed) => g.sessions_failed += 1,
            Err(_) => {}
        }
    }
    let counts = futures::future::join_all(list.iter().map(|e| e.handle.live_counts())).await;
    for (commands, subagents) in counts.into_iter().flatten() {
        g.live_commands += commands as u64;
        g.live_subagents += subagents as u64;
    }
    for e in &list {
        g.approvals_pending += e.approvals.pending_count() as u64;
        g.sse_clients += e.log.clients() as u64;
    }
    // A hibernated session keeps its log, and its clients, until it is woken.
    g.sse_clients += state.hibernated_clients() as u64;
    (g, by_principal)
}

/// With metric export on, keeps the exporter's copy of the gauges current: at once, then every
/// 5 seconds, for as long as the runtime runs. Does nothing with export off.
pub fn start_otel_gauges(state: &Arc<ServerState>) {
    if !metrics_on() {
        return;
    }
    let state = Arc::downgrade(state);
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(OTEL_GAUGE_PERIOD);
        loop {
            tick.tick().await;
            let Some(state) = state.upgrade() else { return };
            let (g, _) = collect(&state).await;
            set_server_gauges(ServerGauges {
                sessions_idle: g.sessions_idle,
                sessions_running: g.sessions_running,
                sessions_failed: g.sessions_failed,
                approvals_pending: g.approvals_pending,
                trace_bytes: g.trace_bytes,
                sse_clients: g.sse_clients,
                live_commands: g.live_commands,
                live_subagents: g.live_subagents,
            });
        }
    });
}
