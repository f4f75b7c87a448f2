//! `--node-id NAME`, `--advertise URL` and `--cluster-token-env VAR`: the flags that make
//! `rookery serve --store postgres://…` a node of a cluster, and the node's start (its
//! registration and heartbeats in the store, the server's [`Cluster`]).
//!
//! All three are required with a postgres store and refused without one; a start that lacks
//! one, or whose token variable is unset, empty or short, is refused (exit 2) with a line that
//! says what to pass. It owns the flags and their checks; the nodes table is the store's
//! (`store/nodes.rs`), the routing the server's (`server/forward.rs`).

use std::sync::Arc;

use clap::Args;
use tokio_util::sync::CancellationToken;

use super::CliError;
use crate::server::ServerState;
use crate::server::cluster::Cluster;
use crate::store::PgStore;
use crate::store::nodes::{self, Registration};

/// The fewest characters a cluster token may have.
pub const MIN_TOKEN_CHARS: usize = 16;

/// The longest node id.
const MAX_NODE_ID: usize = 64;

/// The cluster flags of `rookery serve`.
#[derive(Debug, Clone, Default, Args)]
pub struct ClusterArgs {
    /// With a postgres store (required there): this node's name in the cluster, unique among
    /// the live nodes (letters, digits, `.`, `_`, `-`).
    #[arg(long, value_name = "NAME")]
    pub node_id: Option<String>,
    /// With a postgres store (required there): the URL the other nodes reach this one at
    /// (`http://HOST:PORT`), to forward its sessions' requests.
    #[arg(long, value_name = "URL")]
    pub advertise: Option<String>,
    /// With a postgres store (required there): the environment variable holding the secret the
    /// nodes share (at least 16 characters), sent in `Rookery-Cluster-Token` by forwarded
    /// requests.
    #[arg(long, value_name = "VAR")]
    pub cluster_token_env: Option<String>,
}

/// The checked flags of a node.
#[derive(Clone)]
pub struct NodeSettings {
    /// `--node-id`.
    pub node_id: String,
    /// `--advertise`, without a trailing `/`.
    pub advertise: String,
    /// The value of `--cluster-token-env`'s variable.
    pub token: String,
}

impl std::fmt::Debug for NodeSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeSettings")
            .field("node_id", &self.node_id)
            .field("advertise", &self.advertise)
            .finish_non_exhaustive()
    }
}

impl ClusterArgs {
    /// The node's settings with a postgres store (`postgres`), `None` without one; a missing,
    /// empty or malformed flag is a usage error.
    pub fn resolve(&self, postgres: bool) -> Result<Option<NodeSettings>, CliError> {
        if !postgres {
            let given = [
                ("--node-id", self.node_id.is_some()),
                ("--advertise", self.advertise.is_some()),
                ("--cluster-token-env", self.cluster_token_env.is_some()),
            ];
            return match given.iter().find(|(_, set)| *set) {
                Some((flag, _)) => Err(CliError::usage(format!(
                    "{flag}: only with a postgres store (--store postgres://… or $ROOKERY_STORE)"
                ))),
                None => Ok(None),
            };
        }
        let missing = |flag: &str, what: &str| {
            CliError::usage(format!(
                "{flag} is required with a postgres store: {what} (a node of a cluster needs --node-id NAME, --advertise URL and --cluster-token-env VAR)"
            ))
        };
        let node_id = self
            .node_id
            .as_deref()
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .ok_or_else(|| missing("--node-id", "this node's name"))?;
        check_node_id(node_id)?;
        let advertise = self
            .advertise
            .as_deref()
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .ok_or_else(|| missing("--advertise", "the URL the other nodes reach this one at"))?;
        let advertise = check_advertise(advertise)?;
        let var = self
            .cluster_token_env
            .as_deref()
            .filter(|v| !v.is_empty())
            .ok_or_else(|| {
                missing(
                    "--cluster-token-env",
                    "the variable holding the secret the nodes share",
                )
            })?;
        let token = std::env::var(var).unwrap_or_default().trim().to_string();
        if token.is_empty() {
            return Err(CliError::usage(format!(
                "--cluster-token-env {var}: the environment variable {var} is not set or empty"
            )));
        }
        if token.chars().count() < MIN_TOKEN_CHARS {
            return Err(CliError::usage(format!(
                "--cluster-token-env {var}: the cluster token must have at least {MIN_TOKEN_CHARS} characters"
            )));
        }
        if axum::http::HeaderValue::from_str(&token).is_err() {
            return Err(CliError::usage(format!(
                "--cluster-token-env {var}: the cluster token must be visible ASCII (it is sent as a header)"
            )));
        }
        Ok(Some(NodeSettings {
            node_id: node_id.to_string(),
            advertise,
            token,
        }))
    }
}

fn check_node_id(id: &str) -> Result<(), CliError> {
    let ok = id.len() <= MAX_NODE_ID
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if ok {
        Ok(())
    } else {
        Err(CliError::usage(format!(
            "--node-id {}: use at most {MAX_NODE_ID} letters, digits, `.`, `_` or `-`",
            crate::server::error::shown(id)
        )))
    }
}

/// `http(s)://HOST[:PORT]` with no path, query or credentials; returned without a trailing `/`.
fn check_advertise(url: &str) -> Result<String, CliError> {
    let bad = |why: &str| {
        CliError::usage(format!(
            "--advertise {}: {why} (use http://HOST:PORT, the address the other nodes reach this one at)",
            crate::server::error::shown(url)
        ))
    };
    let parsed = url::Url::parse(url).map_err(|e| bad(&e.to_string()))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(bad("not an http or https URL"));
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(bad("no host"));
    }
    if parsed.path() != "/" || parsed.query().is_some() || parsed.fragment().is_some() {
        return Err(bad("a path, query or fragment is not allowed"));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(bad("credentials in the URL are not allowed"));
    }
    Ok(parsed.as_str().trim_end_matches('/').to_string())
}

/// A running node: its row in the store and the heartbeats that keep it live.
pub struct Node {
    store: PgStore,
    me: Registration,
    beats: CancellationToken,
}

impl Node {
    /// Registers the node in `store` (named by the store's options, the `--node-id`), starts
    /// its heartbeats and makes `state` route its session requests across the cluster.
    pub async fn join(
        settings: NodeSettings,
        store: PgStore,
        state: &ServerState,
    ) -> Result<Node, CliError> {
        let me = nodes::register(&store, &settings.advertise)
            .await
            .map_err(|e| match e {
                crate::store::StoreError::NodeTaken(_) => CliError::usage(e.to_string()),
                e => CliError::Start(e.into()),
            })?;
        let cluster = Cluster::new(settings.node_id, settings.token, store.clone())
            .map_err(|e| CliError::usage(e.to_string()))?;
        state.set_cluster(Arc::new(cluster));
        let beats = CancellationToken::new();
        nodes::keep_beating(store.clone(), me.clone(), beats.clone());
        Ok(Node { store, me, beats })
    }

    /// Stops the heartbeats and removes the node's row (a clean shutdown).
    pub async fn leave(self) {
        self.beats.cancel();
        if let Err(e) = nodes::deregister(&self.store, &self.me).await {
            tracing::warn!("[cluster] cannot remove node {}: {e}", self.me.node_id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(node: Option<&str>, adv: Option<&str>, var: Option<&str>) -> ClusterArgs {
        ClusterArgs {
            node_id: node.map(str::to_string),
            advertise: adv.map(str::to_string),
            cluster_token_env: var.map(str::to_string),
        }
    }

    fn usage(r: Result<Option<NodeSettings>, CliError>) -> String {
        match r {
            Err(e) => e.to_string(),
            Ok(s) => panic!("accepted: {s:?}"),
        }
    }

    #[test]
    fn without_a_store_the_flags_are_refused_and_with_one_required() {
        assert!(args(None, None, None).resolve(false).unwrap().is_none());
        let e = usage(args(Some("a"), None, None).resolve(false));
        assert!(
            e.starts_with("--node-id: only with a postgres store"),
            "{e}"
        );
        let e = usage(args(None, None, None).resolve(true));
        assert!(
            e.starts_with("--node-id is required with a postgres store"),
            "{e}"
        );
        let e = usage(args(Some("a"), None, None).resolve(true));
        assert!(e.starts_with("--advertise is required"), "{e}");
        let e = usage(args(Some("a"), Some("http://127.0.0.1:1"), None).resolve(true));
        assert!(e.starts_with("--cluster-token-env is required"), "{e}");
        let e = usage(
            args(
                Some("a"),
                Some("http://127.0.0.1:1"),
                Some("ROOKERY_TEST_CLUSTER_TOKEN_UNSET"),
            )
            .resolve(true),
        );
        assert!(e.contains("is not set or empty"), "{e}");
    }

    #[test]
    fn node_ids_and_advertised_urls_are_checked() {
        assert!(check_node_id("node-a.1_x").is_ok());
        assert!(check_node_id("a b").is_err());
        assert!(check_node_id(&"x".repeat(65)).is_err());
        assert_eq!(
            check_advertise("http://127.0.0.1:7878/").unwrap(),
            "http://127.0.0.1:7878"
        );
        for bad in [
            "127.0.0.1:7878",
            "ftp://h",
            "http://h:1/api",
            "http://u:p@h:1",
            "http://h:1/?q",
        ] {
            assert!(check_advertise(bad).is_err(), "{bad}");
        }
    }
}
