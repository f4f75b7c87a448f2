//! The web console of `rookery serve`: a few static files built into the binary and served at
//! `/` (the page) and `/console/{file}` (its script modules and style sheet), with the headers
//! that keep a browser from running anything else on them.
//!
//! Parts: `console/index.html` (the page's frame), `console/app.js` (sign-in and the hash
//! router), `console/dom.js` (elements built from text, never from markup), `console/api.js`
//! (every API request, with the bearer token kept in `sessionStorage`), `console/list.js` (the
//! sessions list), `console/session.js` (a session's page and its controls),
//! `console/session_more.js` (fork, roll back, the queued tasks and the schedules),
//! `console/stream.js` (the event stream and its reconnects), `console/transcript.js`
//! (messages rendered as text, never as markup, each once, in timestamp order),
//! `console/style.css`. See `docs/guide/console.md`.
//!
//! It only serves those bytes: it reads no request body, needs no token (the page holds no data;
//! every API call it makes is authenticated like any client's) and never touches sessions. The
//! `Host` and `Origin` rules of `guard.rs` apply to these routes as to the API.

use std::sync::Arc;

use axum::Router;
use axum::extract::Path;
use axum::http::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, REFERRER_POLICY, X_CONTENT_TYPE_OPTIONS,
    X_FRAME_OPTIONS,
};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use super::error::ApiError;
use super::state::ServerState;

/// The Content-Security-Policy of every console file: its own files only, no inline script or
/// style, no framing, no `<base>` and forms posting nowhere else.
pub const CSP: &str =
    "default-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// One embedded file: its name under `/console/`, content type and bytes.
struct Asset {
    name: &'static str,
    content_type: &'static str,
    body: &'static str,
}

const JS: &str = "text/javascript; charset=utf-8";

/// The files, each built into the binary.
const ASSETS: &[Asset] = &[
    Asset {
        name: "index.html",
        content_type: "text/html; charset=utf-8",
        body: include_str!("console/index.html"),
    },
    Asset {
        name: "style.css",
        content_type: "text/css; charset=utf-8",
        body: include_str!("console/style.css"),
    },
    Asset {
        name: "app.js",
        content_type: JS,
        body: include_str!("console/app.js"),
    },
    Asset {
        name: "dom.js",
        content_type: JS,
        body: include_str!("console/dom.js"),
    },
    Asset {
        name: "api.js",
        content_type: JS,
        body: include_str!("console/api.js"),
    },
    Asset {
        name: "list.js",
        content_type: JS,
        body: include_str!("console/list.js"),
    },
    Asset {
        name: "session.js",
        content_type: JS,
        body: include_str!("console/session.js"),
    },
    Asset {
        name: "session_more.js",
        content_type: JS,
        body: include_str!("console/session_more.js"),
    },
    Asset {
        name: "stream.js",
        content_type: JS,
        body: include_str!("console/stream.js"),
    },
    Asset {
        name: "transcript.js",
        content_type: JS,
        body: include_str!("console/transcript.js"),
    },
];

/// The console's routes (`/` and `/console/{file}`), to merge into the server's router.
pub fn routes() -> Router<Arc<ServerState>> {
    Router::new()
        .route("/", get(index))
        .route("/console/{file}", get(file))
}

/// `GET /`: the console's page.
#[utoipa::path(get, path = "/", tag = "console", security(()),
    responses((status = 200, description = "The web console's page.", content_type = "text/html", body = String)))]
pub async fn index() -> Response {
    asset("index.html")
}

/// `GET /console/{file}`: one of the console's files.
#[utoipa::path(get, path = "/console/{file}", tag = "console", security(()),
    params(("file" = String, Path, description = "A file of the console (`app.js`, `style.css`, …).")),
    responses(
        (status = 200, description = "The file.", content(
            (String = "text/javascript"), (String = "text/css"), (String = "text/html"))),
        (status = 404, description = "not_found"),
    ))]
pub async fn file(Path(name): Path<String>) -> Response {
    asset(&name)
}

/// The named file with its headers, or 404 `not_found`.
fn asset(name: &str) -> Response {
    let Some(a) = ASSETS.iter().find(|a| a.name == name) else {
        return ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such console file")
            .into_response();
    };
    let mut resp = a.body.into_response();
    let h = resp.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static(a.content_type));
    h.insert(CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    h.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    // Served again after an upgrade of the binary, never from a stale cache.
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_module_the_page_loads_is_served_and_nothing_inline() {
        for a in ASSETS {
            let r = asset(a.name);
            assert_eq!(r.status(), StatusCode::OK, "{}", a.name);
            assert_eq!(r.headers()[CONTENT_SECURITY_POLICY], CSP);
        }
        assert_eq!(asset("../state.rs").status(), StatusCode::NOT_FOUND);
        // Every `import … from './x.js'` names a served file.
        for a in ASSETS.iter().filter(|a| a.name.ends_with(".js")) {
            for line in a.body.lines().filter(|l| l.starts_with("import ")) {
                let target = line
                    .rsplit_once("'./")
                    .and_then(|(_, rest)| rest.split_once('\''))
                    .map(|(t, _)| t)
                    .unwrap_or_else(|| panic!("{}: {line}", a.name));
                assert!(ASSETS.iter().any(|b| b.name == target), "{target}");
            }
        }
        let page = ASSETS[0].body;
        assert!(!page.contains("<script>") && !page.contains("style="));
        for handler in ["onclick=", "onload=", "onerror=", "onsubmit="] {
            assert!(!page.contains(handler), "no inline handler {handler}");
        }
    }
}
