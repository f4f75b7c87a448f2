//! The requests `rookery bench --failover N` sends its nodes (`failover.rs`): an HTTP client
//! with the nodes' bearer token, the wait until `GET /v1/cluster` lists every node, a session
//! created with its first task, and a new task sent until it is accepted (202), refused ones
//! (409, 503) sent again every [`RETRY_BACKOFF`].
//!
//! It owns the requests and the checks of their answers; a 202's time is counted from the kill
//! instant its caller passes. It must not read the store nor start or stop a node.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::failover::RETRY_BACKOFF;

/// An HTTP client of the nodes (cheap to clone).
#[derive(Clone)]
pub(super) struct Api {
    /// The client (no proxy, a timeout per request).
    pub(super) client: reqwest::Client,
    /// The nodes' bearer token.
    pub(super) token: String,
}

impl Api {
    /// Sends `body` (or nothing) to `url`; the status, the `Rookery-Node` and the JSON body.
    pub(super) async fn send(
        &self,
        method: reqwest::Method,
        url: &str,
        body: Option<&Value>,
    ) -> Result<(reqwest::StatusCode, String, Value), String> {
        let mut req = self
            .client
            .request(method.clone(), url)
            .bearer_auth(&self.token);
        if let Some(body) = body {
            req = req.json(body);
        }
        let resp = req
            .send()
            .await
            .map_err(|e| format!("{method} {url}: {e}"))?;
        let status = resp.status();
        let node = resp
            .headers()
            .get("rookery-node")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        let text = resp
            .text()
            .await
            .map_err(|e| format!("{method} {url}: {e}"))?;
        let v = serde_json::from_str(&text).unwrap_or(Value::String(text));
        Ok((status, node, v))
    }
}

/// Waits until `GET {base}/v1/cluster` lists every node of `all`.
pub(super) async fn wait_listed(api: &Api, base: &str, all: &[String]) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    let url = format!("{base}/v1/cluster");
    let mut last = String::new();
    while Instant::now() < deadline {
        match api.send(reqwest::Method::GET, &url, None).await {
            Ok((status, _, v)) if status.is_success() => {
                let listed: Vec<&str> = v["nodes"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|n| n["node_id"].as_str())
                    .collect();
                if all.iter().all(|id| listed.contains(&id.as_str())) {
                    return Ok(());
                }
                last = format!("it lists {listed:?}");
            }
            Ok((status, _, v)) => last = format!("{status} {v}"),
            Err(e) => last = e,
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Err(format!(
        "GET {url} did not list the {} nodes within 30 s: {last}",
        all.len()
    ))
}

/// Creates a session in `ws` on `base` and sends it its first task; its id.
pub(super) async fn create(api: &Api, base: &str, ws: &std::path::Path) -> Result<String, String> {
    let url = format!("{base}/v1/sessions");
    let (status, _, v) = api
        .send(reqwest::Method::POST, &url, Some(&json!({"workspace": ws})))
        .await?;
    let id = match v["session_id"].as_str() {
        Some(id) if status == reqwest::StatusCode::CREATED => id.to_string(),
        _ => return Err(format!("POST {url}: {status} {v}")),
    };
    let url = format!("{base}/v1/sessions/{id}/tasks");
    let (status, _, v) = api
        .send(
            reqwest::Method::POST,
            &url,
            Some(&json!({"text": "Run the first task."})),
        )
        .await?;
    if status != reqwest::StatusCode::ACCEPTED {
        return Err(format!("POST {url}: {status} {v}"));
    }
    Ok(id)
}

/// A 202: the requests sent, the time from the kill, the node that took the task and the event
/// id its events follow.
pub(super) type Accepted = (u32, Duration, String, i64);

/// Sends session `id` its new task through `base` until 202 (see [`Accepted`]).
pub(super) async fn accept(
    api: &Api,
    base: &str,
    id: &str,
    killed: Instant,
    deadline: Instant,
) -> Result<Accepted, String> {
    let url = format!("{base}/v1/sessions/{id}/tasks");
    let body = json!({"text": "Run the task after the failover."});
    let mut attempts = 0u32;
    loop {
        attempts += 1;
        let last = match api.send(reqwest::Method::POST, &url, Some(&body)).await {
            Ok((reqwest::StatusCode::ACCEPTED, node, v)) => {
                let took = killed.elapsed();
                let after = v["events_after"]
                    .as_i64()
                    .ok_or_else(|| format!("POST {url}: 202 without events_after: {v}"))?;
                return Ok((attempts, took, node, after));
            }
            Ok((status, _, v))
                if status == reqwest::StatusCode::CONFLICT
                    || status == reqwest::StatusCode::SERVICE_UNAVAILABLE =>
            {
                format!("{status} {v}")
            }
            Ok((status, _, v)) => return Err(format!("POST {url}: {status} {v}")),
            Err(e) => e,
        };
        if Instant::now() > deadline {
            return Err(format!(
                "POST {url}: not accepted {:.1} s after the kill ({attempts} requests), last: {last}",
                killed.elapsed().as_secs_f64()
            ));
        }
        tokio::time::sleep(RETRY_BACKOFF).await;
    }
}
