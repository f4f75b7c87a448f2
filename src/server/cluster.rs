//! A node of a cluster (`rookery serve --store postgres://… --node-id NAME --advertise URL
//! --cluster-token-env VAR`): its name, the cluster's shared secret, the store it finds the
//! other nodes in and the HTTP client it forwards with (`forward.rs`). `GET /v1/cluster` is
//! `cluster_route.rs`.
//!
//! It owns the node's identity and the check of the cluster token (constant time); it must not
//! decide where a request goes (`forward.rs` does) nor register or heartbeat the node (the
//! store's `nodes.rs`, started by the command line). It sits below `state.rs`, which holds it.

use std::time::Duration;

use axum::http::{HeaderMap, StatusCode};
use subtle::ConstantTimeEq;

use super::error::ApiError;
use crate::store::PgStore;

/// The header an inter-node request carries the cluster secret in.
pub const CLUSTER_TOKEN: &str = "rookery-cluster-token";

/// The header that marks a forwarded request (its value: the node that forwarded it).
pub const FORWARDED_BY: &str = "rookery-forwarded-by";

/// The header of every answer about a session: the node that served it.
pub const NODE: &str = "rookery-node";

/// How long connecting to another node may take before the request is answered 503.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// This node of the cluster (see the module doc).
pub struct Cluster {
    /// This node's `--node-id`.
    pub node_id: String,
    /// The store the nodes and the leases are in.
    pub store: PgStore,
    token: String,
    client: reqwest::Client,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("node_id", &self.node_id)
            .finish_non_exhaustive()
    }
}

/// The HTTP client to the other nodes cannot be built.
#[derive(Debug, thiserror::Error)]
#[error("cannot build the client to the other nodes: {0}")]
pub struct ClusterClientError(#[from] reqwest::Error);

impl Cluster {
    /// This node, named `node_id`, sharing `token` with the others, finding them in `store`.
    pub fn new(
        node_id: String,
        token: String,
        store: PgStore,
    ) -> Result<Cluster, ClusterClientError> {
        let client = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            // Inter-node traffic goes straight to the advertised address, never through a
            // proxy of the environment.
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .tcp_nodelay(true)
            .build()?;
        Ok(Cluster {
            node_id,
            store,
            token,
            client,
        })
    }

    /// The cluster secret (for redaction and for forwarded requests).
    pub fn token(&self) -> &str {
        &self.token
    }

    /// The client forwarded requests go out on.
    pub fn client(&self) -> &reqwest::Client {
        &self.client
    }

    /// Whether `headers` carry the cluster secret (compared in constant time).
    pub fn admits(&self, headers: &HeaderMap) -> bool {
        headers
            .get(CLUSTER_TOKEN)
            .is_some_and(|given| bool::from(given.as_bytes().ct_eq(self.token.as_bytes())))
    }
}

/// 401 `cluster_unauthorized`: a forwarded request without the right cluster token.
pub fn unauthorized() -> ApiError {
    ApiError::new(
        StatusCode::UNAUTHORIZED,
        "cluster_unauthorized",
        "a forwarded request needs the cluster's token in Rookery-Cluster-Token (the value of every node's --cluster-token-env variable)",
    )
}
