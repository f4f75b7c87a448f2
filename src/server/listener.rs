//! The connections of `rookery serve`: the accept loop, the cap on open connections, the
//! header-read and idle timeouts, and the connections' part of a graceful shutdown.
//!
//! Every accepted connection is served by hyper-util's HTTP/1 + HTTP/2 builder. HTTP/1 heads
//! are bounded by hyper's own `header_read_timeout` (driven by `TokioTimer`); a connection with
//! no request in progress for that long (one that sends nothing, half a head, half an HTTP/2
//! preface, or sits idle between keep-alive requests) is closed. A request counts as in
//! progress from its head until its response body is dropped, so a streaming response (SSE)
//! is never cut. Past `max_connections` a connection is answered 503 without waiting on the
//! client and closed at once, with a rate-limited warning.
//!
//! It owns the TCP side only: it must not look into requests (routes, auth, body deadlines
//! are elsewhere) and must never wait on a client it refuses.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// Default of `--header-timeout-ms`: a request head must be in within this long of the
/// connection opening or of the previous response ending.
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// The most connections the default cap allows, whatever the descriptor limit.
pub const MAX_DEFAULT_CONNECTIONS: usize = 10_000;
/// The default cap when the descriptor limit cannot be read.
pub const FALLBACK_CONNECTIONS: usize = 512;
/// How long an idle connection told to close may take to do so before it is dropped.
const IDLE_GRACE: Duration = Duration::from_secs(1);
/// At most one warning about refused connections per this long.
const REFUSAL_WARN_EVERY: Duration = Duration::from_secs(10);

/// The limits of the server's connections (`--header-timeout-ms`, `--max-connections`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// A connection with no request in progress for this long is closed; an HTTP/1 request
    /// head not complete within it closes its connection.
    pub header_timeout: Duration,
    /// Connections open at once; more are answered 503 and closed.
    pub max_connections: usize,
}

impl ConnectionLimits {
    /// The defaults for a process whose descriptor limit is `nofile`.
    pub fn for_nofile(nofile: Option<u64>) -> Self {
        ConnectionLimits {
            header_timeout: DEFAULT_HEADER_TIMEOUT,
            max_connections: default_max_connections(nofile),
        }
    }
}

/// Half the descriptor limit (the other half is for traces, commands and MCP servers), at
/// most [`MAX_DEFAULT_CONNECTIONS`]; [`FALLBACK_CONNECTIONS`] when the limit is unknown.
pub fn default_max_connections(nofile: Option<u64>) -> usize {
    match nofile {
        Some(n) => usize::try_from(n / 2)
            .unwrap_or(usize::MAX)
            .clamp(1, MAX_DEFAULT_CONNECTIONS),
        None => FALLBACK_CONNECTIONS,
    }
}

/// Accepts connections on `listener` and serves `app` on each until `stop` is cancelled; then
/// stops accepting, tells every connection to finish its requests and close, and returns once
/// they all have.
pub async fn run(
    mut listener: TcpListener,
    app: Router,
    limits: ConnectionLimits,
    stop: CancellationToken,
) {
    let slots = Arc::new(Semaphore::new(
        limits.max_connections.clamp(1, Semaphore::MAX_PERMITS),
    ));
    let builder = Arc::new(builder(limits.header_timeout));
    let busy = busy_response(limits.max_connections);
    let tracker = TaskTracker::new();
    let mut refusals = Refusals::default();
    loop {
        // axum's accept logs and backs off on errors such as EMFILE instead of spinning.
        let (stream, peer) = tokio::select! {
            accepted = axum::serve::Listener::accept(&mut listener) => accepted,
            () = stop.cancelled() => break,
        };
        match slots.clone().try_acquire_owned() {
            Ok(slot) => {
                let conn = Conn {
                    builder: builder.clone(),
                    app: app.clone(),
                    idle_limit: limits.header_timeout,
                    stop: stop.clone(),
                };
                tracker.spawn(async move {
                    conn.serve(stream, peer).await;
                    drop(slot);
                });
            }
            Err(_) => {
                refuse(&stream, &busy);
                refusals.note(limits.max_connections);
            }
        }
    }
    drop(listener);
    tracker.close();
    tracker.wait().await;
}

/// hyper-util's HTTP/1 + HTTP/2 builder with hyper's header-read timeout.
fn builder(header_timeout: Duration) -> auto::Builder<TokioExecutor> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout);
    builder.http2().timer(TokioTimer::new());
    builder
}

/// What one connection needs besides its socket.
struct Conn {
    builder: Arc<auto::Builder<TokioExecutor>>,
    app: Router,
    idle_limit: Duration,
    stop: CancellationToken,
}

impl Conn {
    async fn serve(self, stream: TcpStream, peer: SocketAddr) {
        let (activity, mut watch) = watch::channel(Activity::idle_now());
        let service = Tracked {
            inner: TowerToHyperService::new(self.app),
            activity: Arc::new(activity),
        };
        let conn = self
            .builder
            .serve_connection_with_upgrades(TokioIo::new(stream), service);
        let mut conn = std::pin::pin!(conn);
        let mut stopping = false;
        loop {
            tokio::select! {
                result = conn.as_mut() => {
                    if let Err(e) = result {
                        tracing::debug!("connection from {peer} ended: {e}");
                    }
                    return;
                }
                () = idle_for(&mut watch, self.idle_limit) => {
                    tracing::debug!("closing the connection from {peer}: no request for {:?}", self.idle_limit);
                    conn.as_mut().graceful_shutdown();
                    let _ = tokio::time::timeout(IDLE_GRACE, conn.as_mut()).await;
                    return;
                }
                () = self.stop.cancelled(), if !stopping => {
                    stopping = true;
                    conn.as_mut().graceful_shutdown();
                }
            }
        }
    }
}

/// Requests in progress on a connection, and since when it has had none.
#[derive(Debug, Clone, Copy)]
struct Activity {
    in_flight: usize,
    idle_since: Instant,
}

impl Activity {
    fn idle_now() -> Self {
        Activity {
            in_flight: 0,
            idle_since: Instant::now(),
        }
    }
}

/// Resolves once the connection has had no request in progress for `limit`.
async fn idle_for(watch: &mut watch::Receiver<Activity>, limit: Duration) {
    loop {
        let now = *watch.borrow_and_update();
        if now.in_flight == 0 {
            tokio::select! {
                () = tokio::time::sleep_until(now.idle_since + limit) => return,
                changed = watch.changed() => if changed.is_err() { return },
            }
        } else if watch.changed().await.is_err() {
            return;
        }
    }
}

/// A request in progress: from its head until its response body is dropped.
struct Busy(Arc<watch::Sender<Activity>>);

impl Busy {
    fn begin(activity: &Arc<watch::Sender<Activity>>) -> Self {
        activity.send_modify(|a| a.in_flight += 1);
        Busy(activity.clone())
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.send_modify(|a| {
            a.in_flight = a.in_flight.saturating_sub(1);
            if a.in_flight == 0 {
                a.idle_since = Instant::now();
            }
        });
    }
}

/// The router as a hyper service that marks each request busy until its response body ends.
#[derive(Clone)]
struct Tracked {
    inner: TowerToHyperService<Router>,
    activity: Arc<watch::Sender<Activity>>,
}

type ResponseFuture =
    Pin<Box<dyn Future<Output = Result<axum::response::Response, Infallible>> + Send>>;

impl hyper::service::Service<hyper::Request<Incoming>> for Tracked {
    type Response = axum::response::Response;
    type Error = Infallible;
    type Future = ResponseFuture;

    fn call(&self, req: hyper::Request<Incoming>) -> Self::Future {
        let busy = Busy::begin(&self.activity);
        let response = self.inner.call(req);
        Box::pin(async move {
            let response = response.await?;
            Ok(response.map(|body| {
                Body::new(body.map_frame(move |frame| {
                    let _held: &Busy = &busy;
                    frame
                }))
            }))
        })
    }
}

/// The answer to a connection over the cap: a whole HTTP/1 response, small enough for one
/// non-blocking write.
fn busy_response(max_connections: usize) -> Vec<u8> {
    let body = format!(
        "{{\"error\":{{\"code\":\"too_many_connections\",\"message\":\"the server has {max_connections} connections open (--max-connections); retry later\"}}}}"
    );
    format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\nretry-after: 1\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Answers a connection over the cap without waiting on it; dropping the stream closes it.
fn refuse(stream: &TcpStream, busy: &[u8]) {
    // What the client has sent already is read first, so that closing does not reset the
    // connection before the client reads the answer.
    let mut sink = [0u8; 2048];
    let _ = stream.try_read(&mut sink);
    let _ = stream.try_write(busy);
}

/// Refused connections since the last warning.
#[derive(Default)]
struct Refusals {
    count: u64,
    last_warning: Option<Instant>,
}

impl Refusals {
    fn note(&mut self, max_connections: usize) {
        self.count += 1;
        let now = Instant::now();
        if self
            .last_warning
            .is_some_and(|at| now.duration_since(at) < REFUSAL_WARN_EVERY)
        {
            return;
        }
        tracing::warn!(
            "refused {} connection(s) with 503: {max_connections} connections are open (--max-connections)",
            self.count
        );
        self.count = 0;
        self.last_warning = Some(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_cap_is_half_the_descriptor_limit_within_bounds() {
        assert_eq!(default_max_connections(Some(1024)), 512);
        assert_eq!(
            default_max_connections(Some(524_288)),
            MAX_DEFAULT_CONNECTIONS
        );
        assert_eq!(default_max_connections(Some(1)), 1);
        assert_eq!(default_max_connections(None), FALLBACK_CONNECTIONS);
    }

    #[test]
    fn the_busy_answer_is_a_whole_response() {
        let text = String::from_utf8(busy_response(8)).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 503 "), "{head}");
        assert!(head.contains(&format!("content-length: {}", body.len())));
        let v: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(v["error"]["code"], "too_many_connections");
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_is_idle_only_without_a_request_in_progress() {
        let (tx, mut rx) = watch::channel(Activity::idle_now());
        let tx = Arc::new(tx);
        let busy = Busy::begin(&tx);
        let limit = Duration::from_secs(10);
        let started = Instant::now();
        let waiter = tokio::spawn(async move {
            idle_for(&mut rx, limit).await;
            Instant::now()
        });
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert!(!waiter.is_finished(), "busy for a minute, yet idle");
        drop(busy);
        let idle_at = waiter.await.unwrap();
        assert_eq!(idle_at - started, Duration::from_secs(70));
    }
}
