//! The HTTP floor of `rookery bench --floor --provider openai`: a bare hyper client that sends
//! the very request bodies a Rookery run sent (taken from the model's [`BodyLog`]) to the same
//! endpoint, one keep-alive connection per worker, each worker its session's K+1 requests in
//! order, and reads every stream to its end with a typed parse of each chunk (counting the
//! tool calls and final texts it sees).
//!
//! It measures what any client of that endpoint must pay; it runs no session, no tool and no
//! trace. Failures are reported as [`FloorError`].
//!
//! [`BodyLog`]: crate::model::openai::BodyLog

use std::borrow::Cow;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper::header::{CONTENT_TYPE, HOST};
use hyper_util::rt::TokioIo;
use serde::Deserialize;

use super::measure;

/// Why the floor could not run.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FloorError {
    /// The base URL is not an `http://` URL with a host.
    #[error("the base URL {0} is not an http:// URL with a host")]
    Url(String),
    /// The endpoint cannot be reached.
    #[error("cannot connect to {addr}: {source}")]
    Connect {
        /// The `host:port` dialled.
        addr: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The HTTP exchange failed.
    #[error("HTTP: {0}")]
    Http(#[from] hyper::Error),
    /// A request could not be built.
    #[error("cannot build a request: {0}")]
    Request(#[from] hyper::http::Error),
    /// The endpoint answered with a non-success status.
    #[error("the endpoint answered HTTP {0}")]
    Status(u16),
    /// A stream ended without its `[DONE]` line.
    #[error("a stream ended without [DONE]")]
    Unfinished,
    /// A stream chunk is not the expected JSON.
    #[error("a chunk does not parse: {0}")]
    Chunk(#[from] serde_json::Error),
    /// A worker task panicked or was cancelled.
    #[error("a worker stopped: {0}")]
    Join(#[from] tokio::task::JoinError),
}

/// What the floor measured.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct FloorOutcome {
    /// Wall time of all requests.
    pub wall: Duration,
    /// CPU seconds this process spent.
    pub cpu_s: f64,
    /// Requests made.
    pub requests: usize,
    /// Tool calls and final texts seen in the streams.
    pub tool_calls: usize,
    /// Final texts seen in the streams.
    pub texts: usize,
}

/// Where the requests go: `host:port` to connect to and the request path.
#[derive(Debug, Clone)]
struct Target {
    addr: String,
    path: String,
}

fn target(url: &str) -> Result<Target, FloorError> {
    let bad = || FloorError::Url(url.to_string());
    let rest = url.strip_prefix("http://").ok_or_else(bad)?;
    let (authority, path) = match rest.find('/') {
        Some(at) => (&rest[..at], &rest[at..]),
        None => (rest, "/"),
    };
    if authority.is_empty() {
        return Err(bad());
    }
    let addr = if authority.contains(':') && !authority.ends_with(']') {
        authority.to_string()
    } else {
        format!("{authority}:80")
    };
    Ok(Target {
        addr,
        path: path.to_string(),
    })
}

/// Sends `sessions[i]` in order on worker `i`'s connection to `url` (the full
/// `…/chat/completions` URL), all workers at once.
pub(crate) async fn run(url: &str, sessions: Vec<Vec<Bytes>>) -> Result<FloorOutcome, FloorError> {
    let target = target(url)?;
    let requests = sessions.iter().map(Vec::len).sum();
    let cpu0 = measure::self_usage();
    let started = Instant::now();
    let workers: Vec<_> = sessions
        .into_iter()
        .map(|bodies| tokio::spawn(worker(target.clone(), bodies)))
        .collect();
    let mut out = FloorOutcome {
        requests,
        ..FloorOutcome::default()
    };
    let mut first_error = None;
    for w in workers {
        match w.await.map_err(FloorError::from).and_then(|r| r) {
            Ok((calls, texts)) => {
                out.tool_calls += calls;
                out.texts += texts;
            }
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    out.wall = started.elapsed();
    out.cpu_s = measure::self_usage().cpu_since(&cpu0);
    match first_error {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

async fn worker(target: Target, bodies: Vec<Bytes>) -> Result<(usize, usize), FloorError> {
    let stream = tokio::net::TcpStream::connect(&target.addr)
        .await
        .map_err(|source| FloorError::Connect {
            addr: target.addr.clone(),
            source,
        })?;
    let _ = stream.set_nodelay(true);
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    let driver = tokio::spawn(conn);
    let (mut calls, mut texts) = (0, 0);
    for body in bodies {
        let request = Request::post(target.path.as_str())
            .header(HOST, target.addr.as_str())
            .header(CONTENT_TYPE, "application/json")
            .body(Full::new(body))?;
        let response = sender.send_request(request).await?;
        if !response.status().is_success() {
            return Err(FloorError::Status(response.status().as_u16()));
        }
        let mut reader = Reader::default();
        let mut body = response.into_body();
        while let Some(frame) = body.frame().await {
            if let Ok(data) = frame?.into_data() {
                reader.feed(&data)?;
            }
        }
        if !reader.done {
            return Err(FloorError::Unfinished);
        }
        calls += reader.tool_calls;
        texts += reader.texts;
        sender.ready().await?;
    }
    drop(sender);
    let _ = driver.await;
    Ok((calls, texts))
}

/// The fields of a chunk the floor reads (borrowed from the event text).
#[derive(Deserialize)]
struct Chunk<'a> {
    #[serde(borrow, default)]
    choices: Vec<Choice<'a>>,
}

#[derive(Deserialize)]
struct Choice<'a> {
    #[serde(borrow, default)]
    delta: Option<Delta<'a>>,
    #[serde(borrow, default)]
    finish_reason: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct Delta<'a> {
    #[serde(borrow, default)]
    content: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    tool_calls: Option<Vec<CallDelta<'a>>>,
}

#[derive(Deserialize)]
struct CallDelta<'a> {
    #[serde(borrow, default)]
    id: Option<Cow<'a, str>>,
}

/// Splits a body into `data:` events (LF line ends, as the mock writes them) and parses each.
#[derive(Default)]
struct Reader {
    buf: Vec<u8>,
    done: bool,
    tool_calls: usize,
    texts: usize,
}

impl Reader {
    fn feed(&mut self, bytes: &[u8]) -> Result<(), FloorError> {
        self.buf.extend_from_slice(bytes);
        let mut start = 0;
        while let Some(at) = find_blank_line(&self.buf[start..]) {
            let event = &self.buf[start..start + at];
            start += at + 2;
            let Some(data) = event.strip_prefix(b"data: ") else {
                continue;
            };
            if data == b"[DONE]" {
                self.done = true;
                continue;
            }
            let chunk: Chunk<'_> = serde_json::from_slice(data)?;
            for choice in &chunk.choices {
                if let Some(delta) = &choice.delta {
                    let new_calls = delta.tool_calls.iter().flatten();
                    self.tool_calls += new_calls.filter(|c| c.id.is_some()).count();
                    if delta.content.as_deref().is_some_and(|c| !c.is_empty()) {
                        self.texts += 1;
                    }
                }
                let _ = &choice.finish_reason;
            }
        }
        self.buf.drain(..start);
        Ok(())
    }
}

fn find_blank_line(bytes: &[u8]) -> Option<usize> {
    bytes.windows(2).position(|w| w == b"\n\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::Workload;
    use crate::bench::mock::sse_body;

    #[test]
    fn targets_of_base_urls() {
        let t = target("http://127.0.0.1:5000/v1/chat/completions").unwrap();
        assert_eq!(
            (t.addr.as_str(), t.path.as_str()),
            ("127.0.0.1:5000", "/v1/chat/completions")
        );
        assert_eq!(target("http://h/x").unwrap().addr, "h:80");
        assert!(target("https://h/x").is_err());
        assert!(target("http:///x").is_err());
    }

    #[test]
    fn the_reader_counts_calls_and_texts_in_any_split() {
        let mut body = sse_body(Workload::Read, 2, 0);
        body.push_str(&sse_body(Workload::Read, 2, 2));
        for piece in [1, 7, body.len()] {
            let mut r = Reader::default();
            for part in body.as_bytes().chunks(piece) {
                r.feed(part).unwrap();
            }
            assert!(r.done);
            assert_eq!((r.tool_calls, r.texts), (1, 1), "piece {piece}");
        }
        let mut r = Reader::default();
        assert!(r.feed(b"data: {not json\n\n").is_err());
    }
}
