//! Failing fast where retrying cannot help: until a session's model server has answered once
//! (an event stream, since the session was started or resumed), a failure that says nothing
//! is serving the API there ends the task at once, not after a minute of retries, with one
//! message that names what was tried and what to check.
//!
//! Those failures: a refused connection ("is a server listening at …?"), a host name that does
//! not resolve, `https://` spoken to a plain-HTTP port ("this is an HTTP port: use http://…"),
//! an HTTP 501 or 505, and an HTML page where the API should answer. Once the server has
//! answered properly, the same failures keep their usual meaning (retried: a server restarting).
//!
//! It only recognizes and rewords outcomes of the transport (`transport.rs`); it sends nothing.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use super::chunks::clip;
use crate::message::StopReason;
use crate::model::ModelOutcome;

/// Characters of an HTML page or error body kept in the message.
const BODY_MAX: usize = 200;

/// Whether one session's model server has answered properly yet; shared by its requests.
#[derive(Debug, Clone, Default)]
pub(crate) struct FirstContact(Arc<AtomicBool>);

impl FirstContact {
    /// The server answered with an event stream: from now on failures are retried as usual.
    pub(crate) fn answered(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    pub(crate) fn has_answered(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    /// Makes `outcome` final with `message` when `nobody` applies and the server never answered.
    pub(crate) fn settle(&self, outcome: &mut ModelOutcome, nobody: Option<String>) {
        let Some(message) = nobody else { return };
        // An auth failure is final anyway and its own message says more.
        if self.has_answered() || outcome.status == StopReason::Auth {
            return;
        }
        tracing::debug!(%message, "model server not reachable before its first answer; not retried");
        outcome.permanent = true;
        outcome.retry_after_ms = None;
        outcome.error_message = Some(message);
    }
}

/// The message for a connection that failed in a way no retry mends, when it is one: `url` is
/// the request's URL, `chain` the error with its sources.
pub(crate) fn connect_failure(url: &reqwest::Url, chain: &str, refused: bool) -> Option<String> {
    let post = format!("POST {url}");
    let host = url.host_str().unwrap_or("?");
    let port = url.port_or_known_default().unwrap_or(0);
    if refused {
        return Some(format!(
            "connection refused ({post}): is a server listening at {host}:{port}? \
             (not retried: no server has answered yet)"
        ));
    }
    if chain.contains("dns error") || chain.contains("failed to lookup address") {
        return Some(format!(
            "cannot resolve the host name \"{host}\" ({post}): check the base URL's host \
             (not retried: no server has answered yet)"
        ));
    }
    if url.scheme() == "https"
        && (chain.contains("InvalidContentType") || chain.contains("corrupt message"))
    {
        let mut plain = url.clone();
        let _ = plain.set_scheme("http");
        let base = plain.as_str().trim_end_matches("/chat/completions");
        let base = base.trim_end_matches("/messages");
        return Some(format!(
            "TLS failed: the server at {host}:{port} answered in plain HTTP ({post}): this is an \
             HTTP port: use http:// (base URL {base}) (not retried)"
        ));
    }
    None
}

/// The message for an answer that is not the API's, when it is one: HTTP 501/505, or an HTML
/// page (of any status).
pub(crate) fn foreign_answer(
    url: &reqwest::Url,
    status: u16,
    content_type: Option<&str>,
    body: &str,
) -> Option<String> {
    let html = content_type.is_some_and(|t| t.to_ascii_lowercase().contains("text/html"));
    if !(html || status == 501 || status == 505) {
        return None;
    }
    let text = clip(
        &body.split_whitespace().collect::<Vec<_>>().join(" "),
        BODY_MAX,
    );
    if (200..300).contains(&status) {
        // The wording of any answer that is not an event stream, and what to check.
        let kind = clip(content_type.unwrap_or_default(), 100);
        return Some(format!(
            "the server answered HTTP {status} with Content-Type \"{kind}\", not an event stream: \
             {text}; this is not the model API (POST {url}): check the base URL (not retried: no \
             server has answered yet)"
        ));
    }
    let what = if html {
        format!("HTTP {status} with an HTML page")
    } else {
        format!("HTTP {status}")
    };
    Some(format!(
        "{what} from POST {url}: this is not the model API; check the base URL (and that the \
         server there speaks it) (not retried: no server has answered yet): {text}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(u: &str) -> reqwest::Url {
        reqwest::Url::parse(u).unwrap()
    }

    #[test]
    fn failures_before_the_first_answer_are_final_and_after_it_keep_their_meaning() {
        let contact = FirstContact::default();
        let mut o = ModelOutcome::error(StopReason::Failed, "connection error: x");
        o.retry_after_ms = Some(5);
        contact.settle(&mut o, Some("nobody".into()));
        assert!(o.permanent);
        assert_eq!(
            (o.error_message.as_deref(), o.retry_after_ms),
            (Some("nobody"), None)
        );
        contact.answered();
        let mut o = ModelOutcome::error(StopReason::Failed, "connection error: x");
        contact.clone().settle(&mut o, Some("nobody".into()));
        assert!(!o.permanent);
        assert_eq!(o.error_message.as_deref(), Some("connection error: x"));
    }

    #[test]
    fn messages_say_what_was_tried_and_what_to_check() {
        let u = url("http://127.0.0.1:9/v1/chat/completions");
        let m = connect_failure(&u, "", true).unwrap();
        assert!(m.contains("is a server listening at 127.0.0.1:9?"), "{m}");
        assert!(
            m.contains("POST http://127.0.0.1:9/v1/chat/completions"),
            "{m}"
        );
        let u = url("https://127.0.0.1:8080/v1/chat/completions");
        let m = connect_failure(
            &u,
            "received corrupt message of type InvalidContentType",
            false,
        )
        .unwrap();
        assert!(m.contains("this is an HTTP port: use http://"), "{m}");
        assert!(m.contains("base URL http://127.0.0.1:8080/v1)"), "{m}");
        let u = url("https://nowhere.invalid/v1/messages");
        let m = connect_failure(&u, "client error (Connect): dns error: failed", false).unwrap();
        assert!(m.contains("\"nowhere.invalid\""), "{m}");
        assert_eq!(connect_failure(&u, "connection reset", false), None);
        let page = format!("<html><body>{}</body></html>", "x".repeat(5000));
        let m = foreign_answer(&u, 501, Some("text/html; charset=utf-8"), &page).unwrap();
        assert!(m.starts_with("HTTP 501 with an HTML page from POST"), "{m}");
        assert!(m.len() < 600, "{}", m.len());
        assert!(foreign_answer(&u, 505, None, "").is_some());
        let m = foreign_answer(&u, 200, Some("text/html"), "<html>\n<h1>nginx</h1>").unwrap();
        assert!(
            m.starts_with("the server answered HTTP 200 with Content-Type \"text/html\", not an event stream: <html> <h1>nginx</h1>; this is not the model API"),
            "{m}"
        );
        assert_eq!(
            foreign_answer(&u, 502, Some("application/json"), "{}"),
            None
        );
    }
}
