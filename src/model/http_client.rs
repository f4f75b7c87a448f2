//! The HTTP client a provider endpoint is reached with, built once per model.
//!
//! Owns the one rule that depends on the endpoint's scheme. An `https://` endpoint gets the
//! platform's certificate verifier, which loads the system's certificate store when the client
//! is built (on Linux: every file of `/etc/ssl/certs`, about a thousand syscalls and tens of
//! milliseconds). A plain `http://` endpoint (a local server, a proxy on loopback) never needs
//! it, so its client is built without any root: nothing is read from disk. Such a client
//! refuses a redirect to `https://` with an error that says what to change, instead of failing
//! later on an unknown certificate issuer.
//!
//! It must not send anything: requests are the transport's job.

use std::time::Duration;

use reqwest::header::HeaderMap;
use reqwest::redirect::{Attempt, Policy};

/// As many redirects as reqwest's default policy follows.
const MAX_REDIRECTS: usize = 10;

/// Why a redirect was not followed.
#[derive(Debug, thiserror::Error)]
pub enum RedirectRefused {
    #[error(
        "the endpoint redirected to {to}, which is https; set base_url to the https URL (a plain \
         http endpoint is reached without the system's certificate store)"
    )]
    ToHttps { to: String },
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
    let builder = if is_plain_http(url) {
        builder
            .tls_certs_only(std::iter::empty())
            .redirect(Policy::custom(plain_http_redirect))
    } else {
        builder
    };
    builder.build()
}

/// `http://…`, in any case, as reqwest reads schemes.
fn is_plain_http(url: &str) -> bool {
    let url = url.trim_start();
    url.get(..7)
        .is_some_and(|scheme| scheme.eq_ignore_ascii_case("http://"))
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

    #[test]
    fn the_scheme_decides() {
        assert!(is_plain_http("http://127.0.0.1:8080/v1"));
        assert!(is_plain_http("  HTTP://localhost/v1"));
        assert!(!is_plain_http("https://api.openai.com/v1"));
        assert!(!is_plain_http("http:/"));
        assert!(!is_plain_http(""));
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
