//! Any node serves any session: the middleware in front of the session routes
//! (`/v1/sessions/{id}/…`, inside `auth::require_token`, outside `ownership::require_owner`).
//!
//! For a request naming session S: when this node holds S's lease, or nobody live does (a
//! hibernated session, a dead owner's), it is served here (a wake takes the lease); when a live
//! node B holds it, the request goes to B's advertised URL with the client's headers and the
//! cluster token, both bodies streamed through (an SSE stream too, never buffered whole), and
//! B's answer comes back as it is. A forwarded request carries `Rookery-Forwarded-By`; it is
//! refused 401 `cluster_unauthorized` without the right `Rookery-Cluster-Token`, and never
//! forwarded again (served here, or 503 `session_elsewhere` when yet another node holds S).
//! Every answer carries `Rookery-Node`: this node's id, or B's on a forwarded one. Creates and
//! lists stay on the node that received them.
//!
//! It only routes; it never opens a session nor takes a lease.

use std::sync::Arc;

use axum::body::{Body, HttpBody as _};
use axum::extract::rejection::RawPathParamsRejection;
use axum::extract::{RawPathParams, Request, State};
use axum::http::header::{self, HeaderName};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::cluster::{CLUSTER_TOKEN, Cluster, FORWARDED_BY, NODE, unauthorized};
use super::error::ApiError;
use super::state::ServerState;
use crate::store::nodes::Holder;

/// Where a request for a session is served.
#[derive(Debug, PartialEq, Eq)]
enum Place {
    /// Here.
    Here,
    /// At another live node.
    There(Holder),
}

/// The middleware (see the module doc).
pub async fn route(
    State(state): State<Arc<ServerState>>,
    params: Result<RawPathParams, RawPathParamsRejection>,
    req: Request,
    next: Next,
) -> Response {
    let Some(cluster) = state.cluster().cloned() else {
        return next.run(req).await;
    };
    let forwarded =
        req.headers().contains_key(FORWARDED_BY) || req.headers().contains_key(CLUSTER_TOKEN);
    if forwarded && !cluster.admits(req.headers()) {
        return stamped(unauthorized().into_response(), &cluster.node_id);
    }
    let id = params.ok().and_then(|p| {
        p.iter()
            .find(|(k, _)| *k == "id")
            .map(|(_, v)| v.to_string())
    });
    let Some(id) = id else {
        return stamped(next.run(req).await, &cluster.node_id);
    };
    // A forwarded request for a session resident here is served at once: the sender has just
    // found this node holding it (one store round trip less on every forward).
    let place = if forwarded && state.is_served(&id) {
        Ok(Place::Here)
    } else {
        place(&state, &cluster, &id).await
    };
    match place {
        Ok(Place::Here) => stamped(next.run(req).await, &cluster.node_id),
        Ok(Place::There(holder)) if forwarded => stamped(
            ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "session_elsewhere",
                format!(
                    "session {id} moved to node {} while this request was forwarded; send it again",
                    holder.node_id
                ),
            )
            .into_response(),
            &cluster.node_id,
        ),
        Ok(Place::There(holder)) => proxy(&cluster, &holder, req).await,
        Err(e) => stamped(e.into_response(), &cluster.node_id),
    }
}

/// Where session `id` is served: at the live holder of its lease, else here. When the store
/// cannot say, a session resident here is served here (its own writes then fail as they may);
/// any other answers 503 `store_unavailable`.
async fn place(state: &ServerState, cluster: &Cluster, id: &str) -> Result<Place, ApiError> {
    match crate::store::nodes::holder(&cluster.store, id).await {
        Ok(Some(holder)) if holder.node_id != cluster.node_id => Ok(Place::There(holder)),
        Ok(_) => Ok(Place::Here),
        Err(_) if state.is_served(id) => Ok(Place::Here),
        Err(e) => Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "store_unavailable",
            format!("the trace store cannot say which node holds session {id}: {e}; try again"),
        )),
    }
}

/// Headers that belong to one connection, not to the request or answer: never passed on.
fn hop_by_hop(name: &HeaderName) -> bool {
    [
        header::CONNECTION,
        header::TRANSFER_ENCODING,
        header::TE,
        header::TRAILER,
        header::UPGRADE,
        header::PROXY_AUTHORIZATION,
        header::PROXY_AUTHENTICATE,
        header::HOST,
    ]
    .contains(name)
        || name.as_str() == "keep-alive"
}

/// The request passed on to `holder`: its method, path, query, headers (the client's auth
/// among them; not the connection's own, not `Host`, which is the holder's) and body, streamed
/// (with its `Content-Length`, which the client's connection has checked).
async fn proxy(cluster: &Cluster, holder: &Holder, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let path = parts
        .uri
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_string();
    let url = format!("{}{path}", holder.advertise.trim_end_matches('/'));
    let mut headers = HeaderMap::with_capacity(parts.headers.len() + 2);
    for (name, value) in &parts.headers {
        if !hop_by_hop(name) && name != CLUSTER_TOKEN && name != FORWARDED_BY {
            headers.append(name.clone(), value.clone());
        }
    }
    match (
        HeaderValue::from_str(cluster.token()),
        HeaderValue::from_str(&cluster.node_id),
    ) {
        (Ok(token), Ok(me)) => {
            headers.insert(CLUSTER_TOKEN, token);
            headers.insert(FORWARDED_BY, me);
        }
        _ => {
            return stamped(
                ApiError::internal("the cluster token or node id is no valid header value")
                    .into_response(),
                &cluster.node_id,
            );
        }
    }
    let mut out = cluster
        .client()
        .request(parts.method, &url)
        .headers(headers);
    // A request without a body (a GET, most DELETEs) is sent without one, not as an empty
    // chunked stream.
    if body.size_hint().exact() != Some(0) {
        out = out.body(reqwest::Body::wrap_stream(body.into_data_stream()));
    }
    let answer = match out.send().await {
        Ok(a) => a,
        Err(e) => {
            // The URL may carry a stream token in its query: never logged.
            let e = e.without_url();
            tracing::warn!(
                "[cluster] cannot forward to node {} at {}: {e}",
                holder.node_id,
                holder.advertise
            );
            return stamped(
                ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "node_unreachable",
                    format!(
                        "node {} holds this session but cannot be reached at {}; try again (its lease moves once it expires)",
                        holder.node_id, holder.advertise
                    ),
                )
                .into_response(),
                &cluster.node_id,
            );
        }
    };
    let status = answer.status();
    let mut back = HeaderMap::with_capacity(answer.headers().len() + 1);
    for (name, value) in answer.headers() {
        // The body is passed on as a stream (chunked), whatever its length was.
        if !hop_by_hop(name) && name != header::CONTENT_LENGTH {
            back.append(name.clone(), value.clone());
        }
    }
    let mut response = Response::new(Body::from_stream(answer.bytes_stream()));
    *response.status_mut() = status;
    *response.headers_mut() = back;
    // The holder's answer names the holder; one that does not (it is no cluster node?) names it
    // from here.
    if !response.headers().contains_key(NODE) {
        return stamped(response, &holder.node_id);
    }
    response
}

/// `response` with `Rookery-Node: node` unless it names a node already.
fn stamped(mut response: Response, node: &str) -> Response {
    if !response.headers().contains_key(NODE)
        && let Ok(v) = HeaderValue::from_str(node)
    {
        response.headers_mut().insert(NODE, v);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_headers_are_not_passed_on() {
        for name in ["connection", "transfer-encoding", "host", "keep-alive"] {
            assert!(hop_by_hop(&HeaderName::from_static(name)), "{name}");
        }
        for name in [
            "authorization",
            "last-event-id",
            "content-type",
            "content-length",
        ] {
            assert!(!hop_by_hop(&HeaderName::from_static(name)), "{name}");
        }
    }

    #[test]
    fn an_answer_keeps_the_node_it_names() {
        let named = stamped(Response::new(Body::empty()), "a");
        assert_eq!(named.headers()[NODE], "a");
        assert_eq!(stamped(named, "b").headers()[NODE], "a");
    }
}
