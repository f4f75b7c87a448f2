//! `GET /v1/cluster`: the live nodes of the cluster this server is a node of (`cluster.rs`),
//! each with the count of sessions it holds, read from the store.
//!
//! It only reads; it never registers a node nor touches a session.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde_json::{Value, json};

use super::error::ApiError;
use super::state::ServerState;

/// `GET /v1/cluster`: the live nodes.
#[utoipa::path(get, path = "/v1/cluster", tag = "server",
    responses(
        (status = 200, description = "The live nodes of the cluster (heartbeat within one lease TTL), by id.", body = super::openapi_shapes::ClusterNodes),
        (status = 404, description = "cluster_off"),
        (status = 503, description = "store_unavailable"),
    ))]
pub async fn nodes(State(state): State<Arc<ServerState>>) -> Result<Json<Value>, ApiError> {
    let Some(cluster) = state.cluster() else {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "cluster_off",
            "this server is no cluster node (start it with --store postgres://… --node-id NAME --advertise URL --cluster-token-env VAR)",
        ));
    };
    let nodes = crate::store::nodes::live(&cluster.store)
        .await
        .map_err(|e| {
            ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "store_unavailable",
                format!("{e}; try again"),
            )
        })?;
    let nodes: Vec<Value> = nodes
        .into_iter()
        .map(|n| {
            json!({
                "node_id": n.node_id,
                "advertise": n.advertise,
                "last_heartbeat": n.last_heartbeat,
                "resident_sessions": n.resident_sessions,
            })
        })
        .collect();
    Ok(Json(json!({"node_id": cluster.node_id, "nodes": nodes})))
}

/// The part of the OpenAPI document a build with the store adds.
#[derive(utoipa::OpenApi)]
#[openapi(paths(nodes))]
pub struct ClusterDoc;
