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

/// Why a request of the bench failed.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    /// The request could not be sent or its answer not read.
    #[error("{method} {url}: {source}")]
    Send {
        /// The method.
        method: reqwest::Method,
        /// The URL.
        url: String,
        /// The cause.
        #[source]
        source: reqwest::Error,
    },
    /// The answer was not the one expected.
    #[error("{request}: {status} {body}")]
    Answer {
        /// The method and URL.
        request: String,
        /// Its status.
        status: reqwest::StatusCode,
        /// Its body.
        body: Value,
    },
    /// `GET /v1/cluster` did not list every node in time.
    #[error("GET {url} did not list the {nodes} nodes within 30 s: {last}")]
    NotListed {
        /// The URL.
        url: String,
        /// The nodes expected.
        nodes: usize,
        /// What the last try saw.
        last: String,
    },
    /// A new task was refused until the deadline.
    #[error(
        "POST {url}: not accepted {secs:.1} s after the kill ({attempts} requests), last: {last}"
    )]
    NotAccepted {
        /// The URL.
        url: String,
        /// Seconds since the kill.
        secs: f64,
        /// Requests sent.
        attempts: u32,
        /// The last refusal.
        last: String,
    },
}

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
    ) -> Result<(reqwest::StatusCode, String, Value), RequestError> {
        let mut req = self
            .client
            .request(method.clone(), url)
            .bearer_auth(&self.token);
        if let Some(body) = body {
            req = req.json(body);
        }
        let failed = |source| RequestError::Send {
            method: method.clone(),
            url: url.to_string(),
            source,
        };
        let resp = req.send().await.map_err(failed)?;
        let status = resp.status();
        let node = resp
            .headers()
            .get("rookery-node")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        let text = resp.text().await.map_err(failed)?;
        let v = serde_json::from_str(&text).unwrap_or(Value::String(text));
        Ok((status, node, v))
    }
}

/// Waits until `GET {base}/v1/cluster` lists every node of `all`.
pub(super) async fn wait_listed(api: &Api, base: &str, all: &[String]) -> Result<(), RequestError> {
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
            Err(e) => last = e.to_string(),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Err(RequestError::NotListed {
        url,
        nodes: all.len(),
        last,
    })
}

/// Creates a session in `ws` on `base` and sends it its first task; its id.
pub(super) async fn create(
    api: &Api,
    base: &str,
    ws: &std::path::Path,
) -> Result<String, RequestError> {
    let url = format!("{base}/v1/sessions");
    let (status, _, v) = api
        .send(reqwest::Method::POST, &url, Some(&json!({"workspace": ws})))
        .await?;
    let id = match v["session_id"].as_str() {
        Some(id) if status == reqwest::StatusCode::CREATED => id.to_string(),
        _ => {
            return Err(RequestError::Answer {
                request: format!("POST {url}"),
                status,
                body: v,
            });
        }
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
        return Err(RequestError::Answer {
            request: format!("POST {url}"),
            status,
            body: v,
        });
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
) -> Result<Accepted, RequestError> {
    let url = format!("{base}/v1/sessions/{id}/tasks");
    let body = json!({"text": "Run the task after the failover."});
    let mut attempts = 0u32;
    loop {
        attempts += 1;
        let last = match api.send(reqwest::Method::POST, &url, Some(&body)).await {
            Ok((status @ reqwest::StatusCode::ACCEPTED, node, v)) => {
                let took = killed.elapsed();
                let Some(after) = v["events_after"].as_i64() else {
                    return Err(RequestError::Answer {
                        request: format!("POST {url} (no events_after)"),
                        status,
                        body: v,
                    });
                };
                return Ok((attempts, took, node, after));
            }
            Ok((status, _, v))
                if status == reqwest::StatusCode::CONFLICT
                    || status == reqwest::StatusCode::SERVICE_UNAVAILABLE =>
            {
                format!("{status} {v}")
            }
            Ok((status, _, v)) => {
                return Err(RequestError::Answer {
                    request: format!("POST {url}"),
                    status,
                    body: v,
                });
            }
            Err(e) => e.to_string(),
        };
        if Instant::now() > deadline {
            return Err(RequestError::NotAccepted {
                url,
                secs: killed.elapsed().as_secs_f64(),
                attempts,
                last,
            });
        }
        tokio::time::sleep(RETRY_BACKOFF).await;
    }
}
