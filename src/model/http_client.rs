//! The HTTP client a provider endpoint is reached with, built once per model.
//!
//! Owns the rules that depend on the endpoint's scheme and host. An `https://` endpoint gets the
//! platform's certificate verifier, which loads the system's certificate store when the client
//! is built (on Linux: every file of `/etc/ssl/certs`, about a thousand syscalls and tens of
//! milliseconds). A plain `http://` endpoint (a local server, a proxy on loopback) never needs
//! it, so its client is built without any root: nothing is read from disk. Such a client
//! refuses a redirect to `https://` with an error that says what to change, instead of failing
//! later on an unknown certificate issuer. A connection to this machine's loopback (and no
//! proxy in the environment) is made without TCP keepalive probes and user timeout, which only
//! ever detect a peer lost on a network.
//!
//! It must not send anything: requests are the transport's job.

use std::time::Duration;

use reqwest::Url;
use reqwest::header::HeaderMap;
use reqwest::redirect::{Attempt, Policy};
use url::Host;

/// As many redirects as reqwest's default policy follows.
const MAX_REDIRECTS: usize = 10;

/// Why a redirect was not followed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RedirectRefused {
    /// A redirect from `http://` to `https://` (the client has no roots for it).
    #[error(
        "the endpoint redirected to {to}, which is https; set base_url to the https URL (a plain \
         http endpoint is reached without the system's certificate store)"
    )]
    ToHttps {
        /// The redirect's target URL.
        to: String,
    },
    /// More redirects in a row than the client follows (10).
    #[error("too many redirects (more than {MAX_REDIRECTS})")]
    TooMany,
}

/// The client for the endpoint at `url`: with the system's roots for `https://` (and anything
/// that does not parse, which then fails on the request with the client's own error), without
/// any for `http://`.
pub(crate) fn endpoint_client(
    url: &str,
    connect_timeout: Duration,
    headers: HeaderMap,
) -> Result<reqwest::Client, reqwest::Error> {
    let builder = reqwest::Client::builder()
        .connect_timeout(connect_timeout)
        .default_headers(headers);
    let parsed = parse_endpoint(url);
    let builder = if parsed.as_ref().is_some_and(is_loopback) && !proxy_in_environment() {
        // Keepalive probes and the user timeout find a peer that vanished without a word (a
        // dropped route, a NAT that forgot the flow); on loopback the kernel answers for the
        // peer at once, so they would only cost five `setsockopt` calls per connection.
        builder
            .tcp_keepalive(None)
            .tcp_keepalive_interval(None)
            .tcp_keepalive_retries(None)
            .tcp_user_timeout(None)
    } else {
        builder
    };
    let builder = if parsed.as_ref().is_some_and(is_plain_http) {
        builder
            .tls_certs_only(std::iter::empty())
            .redirect(Policy::custom(plain_http_redirect))
    } else {
        builder
    };
    builder.build()
}

/// The endpoint's URL, which both rules read (one that does not parse gets neither, and fails
/// on the request with the client's own error).
fn parse_endpoint(url: &str) -> Option<Url> {
    Url::parse(url.trim()).ok()
}

/// `http://…` (the parsed scheme is lower case).
fn is_plain_http(url: &Url) -> bool {
    url.scheme() == "http"
}

/// Whether the endpoint's host is this machine: a loopback address (`127.0.0.0/8`, `::1`) or
/// `localhost` (which RFC 6761 reserves for it; the parser has lower-cased the name).
fn is_loopback(url: &Url) -> bool {
    match url.host() {
        Some(Host::Ipv4(ip)) => ip.is_loopback(),
        Some(Host::Ipv6(ip)) => ip.is_loopback(),
        Some(Host::Domain(name)) => {
            let name = name.trim_end_matches('.');
            name == "localhost" || name.ends_with(".localhost")
        }
        None => false,
    }
}

/// Whether a proxy may be configured for plain HTTP (reqwest reads these variables): the
/// connection then goes to the proxy, which may be anywhere.
fn proxy_in_environment() -> bool {
    ["http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"]
        .iter()
        .any(|name| std::env::var_os(name).is_some_and(|v| !v.is_empty()))
}

fn plain_http_redirect(attempt: Attempt<'_>) -> reqwest::redirect::Action {
    if attempt.url().scheme() == "https" {
        let to = attempt.url().to_string();
        attempt.error(RedirectRefused::ToHttps { to })
    } else if attempt.previous().len() > MAX_REDIRECTS {
        attempt.error(RedirectRefused::TooMany)
    } else {
        attempt.follow()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    /// The error and its sources, as the transport prints them.
    fn chain(e: &dyn std::error::Error) -> String {
        let mut text = e.to_string();
        let mut source = e.source();
        while let Some(s) = source {
            text = format!("{text}: {s}");
            source = s.source();
        }
        text
    }

    fn plain(url: &str) -> bool {
        parse_endpoint(url).is_some_and(|u| is_plain_http(&u))
    }

    #[test]
    fn loopback_hosts_are_told_apart() {
        for url in [
            "http://127.0.0.1:8080/v1",
            "http://127.3.4.5/v1",
            "http://[::1]:11434/v1",
            "http://localhost:11434/v1",
            " HTTP://LocalHost./v1",
            "http://ollama.localhost/v1",
            "https://localhost/v1",
        ] {
            assert!(
                parse_endpoint(url).is_some_and(|u| is_loopback(&u)),
                "{url}"
            );
        }
        for url in [
            "http://10.0.0.1/v1",
            "https://api.openai.com/v1",
            "http://localhost.example.com/v1",
            "http://[2001:db8::1]/v1",
            "not a url",
            "",
        ] {
            assert!(
                !parse_endpoint(url).is_some_and(|u| is_loopback(&u)),
                "{url}"
            );
        }
    }

    /// `SO_KEEPALIVE` of this process's socket connected from `client` (found by its local
    /// address among our descriptors).
    fn keepalive_of_socket_from(client: std::net::SocketAddr) -> Option<bool> {
        use std::os::fd::FromRawFd;
        for entry in std::fs::read_dir("/proc/self/fd").ok()?.flatten() {
            let Some(fd) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<i32>().ok())
            else {
                continue;
            };
            // SAFETY: the descriptor stays open during the loop (the client the test still
            // holds keeps its pooled connection) and is never closed here (`ManuallyDrop`).
            let stream =
                std::mem::ManuallyDrop::new(unsafe { std::net::TcpStream::from_raw_fd(fd) });
            if stream.local_addr().ok() != Some(client) {
                continue;
            }
            let mut on: libc::c_int = -1;
            let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
            // SAFETY: reads one int option of an open socket into `on`.
            let r = unsafe {
                libc::getsockopt(
                    fd,
                    libc::SOL_SOCKET,
                    libc::SO_KEEPALIVE,
                    (&raw mut on).cast(),
                    &mut len,
                )
            };
            return (r == 0).then_some(on != 0);
        }
        None
    }

    /// A server on `ip` that records the address of each connection and answers `200 ok`,
    /// keeping the connection open.
    async fn recording(
        ip: std::net::IpAddr,
    ) -> (
        String,
        tokio::sync::mpsc::UnboundedReceiver<std::net::SocketAddr>,
    ) {
        let listener = TcpListener::bind((ip, 0)).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Ok((mut socket, peer)) = listener.accept().await {
                let _ = tx.send(peer);
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 4096];
                    let _ = socket.read(&mut buf).await;
                    let reply = "HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
                    let _ = socket.write_all(reply.as_bytes()).await;
                    let _ = socket.read(&mut buf).await;
                });
            }
        });
        (format!("http://{addr}/v1"), rx)
    }

    /// On loopback the client's socket has no keepalive; to another address of this machine
    /// (when it has one) it keeps reqwest's.
    #[tokio::test]
    async fn only_a_loopback_connection_goes_without_keepalive() {
        if proxy_in_environment() {
            return; // the rule does not apply (and requests would go to the proxy)
        }
        let (url, mut peers) = recording([127, 0, 0, 1].into()).await;
        let client = endpoint_client(&url, Duration::from_secs(5), HeaderMap::new()).unwrap();
        let reply = client.get(&url).send().await.unwrap();
        assert_eq!(reply.text().await.unwrap(), "ok");
        let peer = peers.recv().await.unwrap();
        assert_eq!(keepalive_of_socket_from(peer), Some(false));

        // The address this machine would route from (nothing is sent by a UDP `connect`).
        let probe = std::net::UdpSocket::bind("0.0.0.0:0").unwrap();
        let routed = probe
            .connect("10.255.255.254:9")
            .and_then(|()| probe.local_addr())
            .map(|a| a.ip());
        let Some(ip) = routed
            .ok()
            .filter(|ip| !ip.is_loopback() && !ip.is_unspecified())
        else {
            return; // no other address to compare with
        };
        let (url, mut peers) = recording(ip).await;
        let client = endpoint_client(&url, Duration::from_secs(5), HeaderMap::new()).unwrap();
        let reply = client.get(&url).send().await.unwrap();
        assert_eq!(reply.text().await.unwrap(), "ok");
        let peer = peers.recv().await.unwrap();
        assert_eq!(keepalive_of_socket_from(peer), Some(true));
    }

    #[test]
    fn the_scheme_decides() {
        assert!(plain("http://127.0.0.1:8080/v1"));
        assert!(plain("  HTTP://localhost/v1"));
        assert!(!plain("https://api.openai.com/v1"));
        assert!(!plain("http:/"));
        assert!(!plain(""));
    }

    /// A real server on 127.0.0.1 that answers every request with `status` and `headers`.
    async fn answering(status: &'static str, headers: String) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let headers = headers.clone();
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 4096];
                    let _ = socket.read(&mut buf).await;
                    let reply = format!(
                        "HTTP/1.1 {status}\r\n{headers}content-length: 2\r\nconnection: close\r\n\r\nok"
                    );
                    let _ = socket.write_all(reply.as_bytes()).await;
                });
            }
        });
        format!("http://{addr}")
    }

    #[tokio::test]
    async fn a_plain_http_client_talks_http() {
        let base = answering("200 OK", String::new()).await;
        let client = endpoint_client(&base, Duration::from_secs(5), HeaderMap::new()).unwrap();
        let response = client.post(format!("{base}/v1")).send().await.unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(response.text().await.unwrap(), "ok");
    }

    #[tokio::test]
    async fn a_redirect_to_https_is_refused_with_what_to_change() {
        let base = answering(
            "308 Permanent Redirect",
            "location: https://127.0.0.1:1/v1/chat/completions\r\n".to_string(),
        )
        .await;
        let client = endpoint_client(&base, Duration::from_secs(5), HeaderMap::new()).unwrap();
        let err = client.post(format!("{base}/v1")).send().await.unwrap_err();
        assert!(err.is_redirect(), "{err:?}");
        let chain = chain(&err);
        assert!(chain.contains("set base_url to the https URL"), "{chain}");
        assert!(
            chain.contains("https://127.0.0.1:1/v1/chat/completions"),
            "{chain}"
        );
    }

    #[tokio::test]
    async fn a_redirect_loop_stops() {
        let base = answering("307 Temporary Redirect", "location: /again\r\n".to_string()).await;
        let client = endpoint_client(&base, Duration::from_secs(5), HeaderMap::new()).unwrap();
        let err = client.get(format!("{base}/v1")).send().await.unwrap_err();
        assert!(err.is_redirect(), "{err:?}");
        assert!(chain(&err).contains("too many redirects"), "{err:?}");
    }
}
