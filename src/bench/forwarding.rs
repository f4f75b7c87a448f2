//! The forwarding workload of `rookery bench --forwarding N`: two cluster nodes in this process
//! on one Postgres store, each a real HTTP server on 127.0.0.1, a session created on node A,
//! and `GET /v1/sessions/{id}` sent N times to A (the owner) and N times to B (which forwards to
//! A), interleaved one by one over kept-alive connections, after a warm-up. The figure is the
//! p95 a forward adds: p95 through B minus p95 at A.
//!
//! It measures only; the CLI renders the figures. It leaves the session (closed) and no node
//! rows behind in the store.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::measure::percentile;
use super::model::BenchModel;
use super::{Workload, make_workspace};
use crate::Host;
use crate::config::AgentConfig;
use crate::error::RookeryError;
use crate::model::Model;
use crate::server::cluster::Cluster;
use crate::server::guard::GuardConfig;
use crate::server::state::{HibernationConfig, ServerConfig, ServerState};
use crate::server::{ConnectionLimits, serve};
use crate::store::nodes::{self, Registration};
use crate::store::{PgStore, StoreError, StoreOptions};

/// The added p95 the issue asks for on loopback.
pub const TARGET_ADDED_P95_MS: f64 = 1.0;

/// Requests of each kind sent before the measured ones.
const WARM_UP: usize = 50;

/// What to run.
#[derive(Debug, Clone)]
pub struct ForwardingSpec {
    /// The postgres store's URL.
    pub store_url: String,
    /// Measured requests of each kind.
    pub requests: usize,
    /// Where the nodes' homes and the workspace go.
    pub scratch: PathBuf,
}

/// The figures: each request's latency in microseconds, sorted.
#[derive(Debug, Clone, Default)]
pub struct ForwardingOutcome {
    /// At the owner.
    pub direct_us: Vec<u64>,
    /// Through the other node.
    pub forwarded_us: Vec<u64>,
}

impl ForwardingOutcome {
    /// The `p`th percentile at the owner, in ms.
    pub fn direct_ms(&self, p: f64) -> f64 {
        percentile(&self.direct_us, p) as f64 / 1000.0
    }

    /// The `p`th percentile through the other node, in ms.
    pub fn forwarded_ms(&self, p: f64) -> f64 {
        percentile(&self.forwarded_us, p) as f64 / 1000.0
    }

    /// What a forward adds at the 95th percentile, in ms.
    pub fn added_p95_ms(&self) -> f64 {
        self.forwarded_ms(95.0) - self.direct_ms(95.0)
    }
}

/// Why the workload could not run.
#[derive(Debug, thiserror::Error)]
pub enum ForwardingBenchError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A host, a session or a local file failed.
    #[error(transparent)]
    Rookery(#[from] RookeryError),
    /// A request failed or was answered wrongly.
    #[error("{0}")]
    Request(String),
}

/// One node: its server, its row and its heartbeats.
struct Node {
    base: String,
    state: Arc<ServerState>,
    store: PgStore,
    me: Registration,
    stop: CancellationToken,
    served: tokio::task::JoinHandle<std::io::Result<()>>,
}

async fn start_node(
    spec: &ForwardingSpec,
    name: String,
    token: &str,
    model: Arc<dyn Model>,
) -> Result<Node, ForwardingBenchError> {
    let options = StoreOptions {
        node: name.clone(),
        ..StoreOptions::default()
    };
    let store = PgStore::connect(&spec.store_url, options).await?;
    let home = spec.scratch.join(&name);
    let host = Host::start_with_store(home.clone(), store.clone()).await?;
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
        .await
        .map_err(|e| ForwardingBenchError::Request(format!("cannot listen: {e}")))?;
    let local = listener
        .local_addr()
        .map_err(|e| ForwardingBenchError::Request(format!("no local address: {e}")))?;
    let state = ServerState::new(
        host,
        ServerConfig {
            home,
            model: Some(model),
            launch: crate::message::launch::Launch::default(),
            config: AgentConfig::default(),
            auth: crate::server::credentials::Authenticator::Open,
            guard: GuardConfig::new(local, &[], &[], Duration::from_secs(30)),
            config_dir: None,
            max_sessions: 16,
            hooks: Arc::default(),
            permissions: Arc::default(),
            ring_bytes: crate::server::sse::RING_BYTES,
            hibernation: HibernationConfig {
                idle: None,
                max_resident: 16,
            },
            sandbox: Default::default(),
            stream_token_ttl: crate::server::stream_token::DEFAULT_TTL,
            store: Some(store.clone()),
        },
    );
    let base = format!("http://{local}");
    let me = nodes::register(&store, &base).await?;
    let cluster = Cluster::new(name, token.to_string(), store.clone())
        .map_err(|e| ForwardingBenchError::Request(e.to_string()))?;
    state.set_cluster(Arc::new(cluster));
    let stop = CancellationToken::new();
    nodes::keep_beating(store.clone(), me.clone(), stop.clone());
    let served = tokio::spawn(serve(
        listener,
        state.clone(),
        ConnectionLimits::for_nofile(None),
        stop.clone().cancelled_owned(),
    ));
    Ok(Node {
        base,
        state,
        store,
        me,
        stop,
        served,
    })
}

impl Node {
    async fn stop(self) {
        self.stop.cancel();
        let _ = self.served.await;
        let _ = nodes::deregister(&self.store, &self.me).await;
        drop(self.state);
    }
}

/// One timed `GET`, checked: 200 from node `want`.
async fn timed_get(
    client: &reqwest::Client,
    url: &str,
    want: &str,
) -> Result<u64, ForwardingBenchError> {
    let started = Instant::now();
    let resp = client
        .get(url)
        .send()
        .await
        .map_err(|e| ForwardingBenchError::Request(format!("GET {url}: {e}")))?;
    let status = resp.status();
    let node = resp
        .headers()
        .get("rookery-node")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    resp.bytes()
        .await
        .map_err(|e| ForwardingBenchError::Request(format!("GET {url}: {e}")))?;
    let took = started.elapsed().as_micros() as u64;
    if !status.is_success() || node != want {
        return Err(ForwardingBenchError::Request(format!(
            "GET {url}: {status} from node {node:?}, expected 200 from {want}"
        )));
    }
    Ok(took)
}

/// Runs the workload (see the module doc).
pub async fn run(spec: &ForwardingSpec) -> Result<ForwardingOutcome, ForwardingBenchError> {
    let ws = spec.scratch.join("workspace");
    make_workspace(&ws).map_err(|source| RookeryError::Setup {
        what: format!("cannot create the workspace {}", ws.display()),
        source,
    })?;
    let model: Arc<dyn Model> = Arc::new(BenchModel {
        workload: Workload::Read,
        turns: 0,
        latency: Duration::ZERO,
    });
    let token = uuid::Uuid::new_v4().simple().to_string();
    let tag = &token[..8];
    let a = start_node(spec, format!("bench-a-{tag}"), &token, model.clone()).await?;
    let b = match start_node(spec, format!("bench-b-{tag}"), &token, model).await {
        Ok(b) => b,
        Err(e) => {
            a.stop().await;
            return Err(e);
        }
    };
    let result = measure(spec, &a, &b, &ws).await;
    b.stop().await;
    a.stop().await;
    result
}

async fn measure(
    spec: &ForwardingSpec,
    a: &Node,
    b: &Node,
    ws: &std::path::Path,
) -> Result<ForwardingOutcome, ForwardingBenchError> {
    let client = reqwest::Client::builder()
        .no_proxy()
        .tcp_nodelay(true)
        .build()
        .map_err(|e| ForwardingBenchError::Request(e.to_string()))?;
    let created: serde_json::Value = client
        .post(format!("{}/v1/sessions", a.base))
        .json(&serde_json::json!({"workspace": ws}))
        .send()
        .await
        .and_then(|r| r.error_for_status())
        .map_err(|e| ForwardingBenchError::Request(format!("cannot create a session: {e}")))?
        .json()
        .await
        .map_err(|e| ForwardingBenchError::Request(format!("cannot create a session: {e}")))?;
    let id = created["session_id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let owner = a.me.node_id.clone();
    let at_a = format!("{}/v1/sessions/{id}", a.base);
    let via_b = format!("{}/v1/sessions/{id}", b.base);
    let mut out = ForwardingOutcome::default();
    for i in 0..WARM_UP + spec.requests {
        let direct = timed_get(&client, &at_a, &owner).await?;
        let forwarded = timed_get(&client, &via_b, &owner).await?;
        if i >= WARM_UP {
            out.direct_us.push(direct);
            out.forwarded_us.push(forwarded);
        }
    }
    out.direct_us.sort_unstable();
    out.forwarded_us.sort_unstable();
    let _ = client.delete(&at_a).send().await;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_added_p95_is_the_difference_of_the_p95s() {
        let out = ForwardingOutcome {
            direct_us: (1..=100).collect(),
            forwarded_us: (1..=100).map(|v| v + 400).collect(),
        };
        assert_eq!(out.direct_ms(95.0), 0.095);
        assert!((out.added_p95_ms() - 0.4).abs() < 1e-9);
    }
}
