//! The OpenAPI document of `rookery serve` against the server itself: every route of the
//! router (its paths read from the router, its methods from the live server's `Allow` answers)
//! is an operation of the document and every operation is a route; real answers of a live
//! server on 127.0.0.1 (successes, the event stream and errors) match the document's status,
//! content type and schema (`$ref`s resolved in the document); `--print-openapi` prints what
//! `GET /v1/openapi.json` serves, without starting a server.

use crate::common::serve as harness;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use eventsource_stream::Eventsource;
use futures::StreamExt;
use harness::*;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

/// The document and the checks of answers against it.
struct Contract {
    doc: Value,
}

impl Contract {
    /// The operation of `method` on the path template `path`.
    fn operation(&self, method: &str, path: &str) -> &Value {
        let op = &self.doc["paths"][path][method.to_ascii_lowercase()];
        assert!(op.is_object(), "{method} {path} is not in the document");
        op
    }

    /// Validates `value` against `schema` (a schema of the document: its `$ref`s point into it).
    fn validate(&self, schema: &Value, value: &Value) -> Result<(), String> {
        let mut root = self.doc.clone();
        root["$schema"] = json!("https://json-schema.org/draft/2020-12/schema");
        root["allOf"] = json!([schema]);
        let validator = jsonschema::draft202012::new(&root)
            .map_err(|e| format!("the document's schema does not compile: {e}"))?;
        let errors: Vec<String> = validator
            .iter_errors(value)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect();
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors.join("; "))
        }
    }

    /// Checks one answer: its status is documented for the operation, its content type is the
    /// documented one (none for a response without content), and its body meets the schema.
    fn check(&self, method: &str, path: &str, status: StatusCode, ctype: &str, body: &str) {
        let op = self.operation(method, path);
        let response = &op["responses"][status.as_str()];
        assert!(
            response.is_object(),
            "{method} {path} answered {status}, which the document does not list: {body}"
        );
        let Some(content) = response.get("content").and_then(Value::as_object) else {
            assert!(
                body.is_empty(),
                "{method} {path} {status}: the document has no content, the answer has {body:?}"
            );
            return;
        };
        let essence = ctype.split(';').next().unwrap_or_default().trim();
        let media = content.get(essence).unwrap_or_else(|| {
            panic!(
                "{method} {path} {status}: content type {ctype:?} is not one of {:?}",
                content.keys().collect::<Vec<_>>()
            )
        });
        if essence != "application/json" {
            return;
        }
        let value: Value = serde_json::from_str(body)
            .unwrap_or_else(|e| panic!("{method} {path} {status}: not JSON ({e}): {body}"));
        if let Err(e) = self.validate(&media["schema"], &value) {
            panic!("{method} {path} {status}: the answer does not meet the document: {e}\n{value}");
        }
    }
}

/// Sends `r` and checks the answer against the operation `method path` of the document;
/// returns the status and the JSON body (`null` when empty).
async fn checked(
    contract: &Contract,
    method: &str,
    path: &str,
    r: reqwest::RequestBuilder,
) -> (StatusCode, Value) {
    let resp = tokio::time::timeout(WAIT, r.send())
        .await
        .expect("answer in time")
        .expect("request");
    let status = resp.status();
    let ctype = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let body = resp.text().await.unwrap();
    contract.check(method, path, status, &ctype, &body);
    let v = serde_json::from_str(&body).unwrap_or(Value::Null);
    (status, v)
}

/// The paths of the router, read from its `Debug` text (axum lists no routes otherwise; the
/// part before `fallback_router`): text without the known paths fails, so a change of that
/// text cannot pass unseen.
async fn router_paths() -> BTreeSet<String> {
    use rookery::server::{ServerConfig, ServerState};
    let dir = tempfile::tempdir().unwrap();
    let host = rookery::Host::start(dir.path().to_path_buf())
        .await
        .unwrap();
    let state = ServerState::new(
        host,
        ServerConfig {
            home: dir.path().to_path_buf(),
            model: None,
            launch: rookery::message::launch::Launch::default(),
            config: rookery::config::AgentConfig::default(),
            auth: rookery::server::credentials::Authenticator::Open,
            guard: rookery::server::guard::GuardConfig::new(
                std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
                &[],
                &[],
                Duration::from_secs(30),
            ),
            config_dir: None,
            max_sessions: 4,
            hooks: Arc::default(),
            permissions: Arc::default(),
            ring_bytes: rookery::server::sse::RING_BYTES,
            hibernation: rookery::server::state::HibernationConfig {
                idle: None,
                max_resident: 4,
            },
            sandbox: Default::default(),
            stream_token_ttl: Duration::from_secs(60),
            store: None,
        },
    );
    let text = format!("{:?}", rookery::server::router(state.clone()));
    state.shutdown().await;
    let re = regex::Regex::new(r#"RouteId\(\d+\): "(/[^"]*)""#).unwrap();
    // The fallback router's own paths (the 404 of every other path) are no routes.
    let routes = text.split("fallback_router:").next().unwrap_or_default();
    let paths: BTreeSet<String> = re
        .captures_iter(routes)
        .map(|c| c[1].to_string())
        .filter(|p| !p.contains("__private__"))
        .collect();
    assert!(
        paths.contains("/v1/sessions") && paths.contains("/healthz"),
        "the router's Debug text no longer lists its paths as `RouteId(n): \"/path\"` \
         (an axum upgrade?): update router_paths. Found {paths:?} in {text}"
    );
    paths
}

/// The methods a path answers, from the server's `Allow` header on a method no route has.
async fn methods_of(server: &Server, path: &str) -> BTreeSet<String> {
    let concrete = regex::Regex::new(r"\{[^}]+\}")
        .unwrap()
        .replace_all(path, "probe");
    let probe = Method::from_bytes(b"ROUTEWALK").unwrap();
    let resp = tokio::time::timeout(WAIT, server.req(probe, &concrete).send())
        .await
        .expect("answer in time")
        .expect("request");
    assert_eq!(
        resp.status(),
        StatusCode::METHOD_NOT_ALLOWED,
        "ROUTEWALK {concrete}"
    );
    let allow = resp.headers()["allow"].to_str().unwrap().to_string();
    allow
        .split(',')
        .map(|m| m.trim().to_ascii_lowercase())
        .filter(|m| !m.is_empty() && m != "head")
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_is_in_the_document_and_every_operation_is_a_route() {
    let server = Server::start(&tool_then_text());
    let (status, doc) = server.call("GET", "/v1/openapi.json", None).await;
    assert_eq!(status, StatusCode::OK, "{doc}");
    let mut routes = BTreeSet::new();
    for path in router_paths().await {
        for method in methods_of(&server, &path).await {
            routes.insert((path.clone(), method));
        }
    }
    let mut documented = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            documented.insert((path.clone(), method.clone()));
        }
    }
    let missing: Vec<_> = routes.difference(&documented).collect();
    assert!(
        missing.is_empty(),
        "routes without an operation in the document (annotate their handlers with \
         #[utoipa::path] and list them in src/server/openapi.rs): {missing:?}"
    );
    let extra: Vec<_> = documented.difference(&routes).collect();
    assert!(
        extra.is_empty(),
        "operations of the document that no route serves: {extra:?}"
    );
    assert!(routes.len() >= 23, "{routes:?}");
}

#[test]
fn print_openapi_prints_the_served_document_without_a_server() {
    let dir = sandbox(&tool_then_text());
    let out = command(
        dir.path(),
        &["serve", "--print-openapi", "--listen", "256.0.0.1:1"],
    )
    .output()
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(printed["openapi"], "3.1.0");
    assert!(!dir.path().join("user-home/.rookery").exists());
    let server = Server::start_in(dir, None);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (status, served) = rt.block_on(server.call("GET", "/v1/openapi.json", None));
    assert_eq!(status, StatusCode::OK);
    assert_eq!(printed, served);
    let anonymous = rt.block_on(
        server
            .client
            .get(format!("{}/v1/openapi.json", server.base))
            .send(),
    );
    assert_eq!(anonymous.unwrap().status(), StatusCode::UNAUTHORIZED);
}

/// An `always-ask` script: a shell call that waits for an approval, then an answer.
fn asking_script() -> Value {
    json!({"turns": [
        {"text": "listing", "tool_calls": [{"name": "exec_command", "arguments": {
            "description": "List", "cmd": "ls"}}]},
        {"text": "done"},
        {"text": "again"},
        {"text": "more"}
    ]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_answers_match_the_document() {
    let server = Server::start(&asking_script());
    let (status, doc) = server.call("GET", "/v1/openapi.json", None).await;
    assert_eq!(status, StatusCode::OK, "{doc}");
    let c = Contract { doc };
    let s = &server;
    let get = |path: &str| s.req(Method::GET, path);
    let post = |path: &str, body: Value| s.req(Method::POST, path).json(&body);

    checked(&c, "GET", "/healthz", get("/healthz")).await;
    checked(&c, "GET", "/metrics", get("/metrics")).await;
    checked(&c, "GET", "/v1/openapi.json", get("/v1/openapi.json")).await;

    // Sessions.
    let (st, v) = checked(
        &c,
        "POST",
        "/v1/sessions",
        post(
            "/v1/sessions",
            json!({"workspace": s.ws(), "approval_mode": "always-ask"}),
        ),
    )
    .await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
    let id = v["session_id"].as_str().unwrap().to_string();
    let one = format!("/v1/sessions/{id}");
    let (st, _) = checked(&c, "GET", "/v1/sessions/{id}", get(&one)).await;
    assert_eq!(st, StatusCode::OK);
    checked(&c, "GET", "/v1/sessions", get("/v1/sessions?limit=1")).await;

    // A task that waits for an approval, decided through the API.
    let (st, v) = checked(
        &c,
        "POST",
        "/v1/sessions/{id}/tasks",
        post(&format!("{one}/tasks"), json!({"text": "list"})),
    )
    .await;
    assert_eq!(st, StatusCode::ACCEPTED, "{v}");
    let after = v["events_after"].as_u64().unwrap();
    let pending = s.wait_pending(&id, 1).await;
    checked(
        &c,
        "GET",
        "/v1/sessions/{id}/approvals",
        get(&format!("{one}/approvals")),
    )
    .await;
    let (st, v) = checked(
        &c,
        "POST",
        "/v1/sessions/{id}/tasks",
        post(
            &format!("{one}/tasks"),
            json!({"text": "again", "if_busy": "enqueue"}),
        ),
    )
    .await;
    assert_eq!(v["status"], "queued", "{v}");
    assert_eq!(st, StatusCode::ACCEPTED);
    checked(&c, "GET", "/v1/sessions/{id}", get(&one)).await;
    let queued = format!("{one}/queue/{}", v["entry_id"].as_str().unwrap());
    let (st, _) = checked(
        &c,
        "DELETE",
        "/v1/sessions/{id}/queue/{entry_id}",
        s.req(Method::DELETE, &queued),
    )
    .await;
    assert_eq!(st, StatusCode::NO_CONTENT);
    let (st, v) = checked(
        &c,
        "POST",
        "/v1/sessions/{id}/tasks",
        post(&format!("{one}/tasks"), json!({"text": "again"})),
    )
    .await;
    assert_eq!(
        (st, v["error"]["code"].as_str()),
        (StatusCode::CONFLICT, Some("session_busy"))
    );
    let approval = format!(
        "{one}/approvals/{}",
        pending[0]["approval_id"].as_str().unwrap()
    );
    let (st, _) = checked(
        &c,
        "POST",
        "/v1/sessions/{id}/approvals/{approval_id}",
        post(&approval, json!({"decision": "allow_for_session"})),
    )
    .await;
    assert_eq!(st, StatusCode::NO_CONTENT);

    // The event stream: each event's id, name and data as the document's StreamEvent says.
    let resp = get(&format!("{one}/events"))
        .header("Last-Event-ID", after.to_string())
        .send()
        .await
        .unwrap();
    let ctype = resp.headers()["content-type"].to_str().unwrap().to_string();
    c.check("GET", "/v1/sessions/{id}/events", resp.status(), &ctype, "");
    let mut stream = resp.bytes_stream().eventsource();
    let event_schema = json!({"$ref": "#/components/schemas/StreamEvent"});
    loop {
        let ev = tokio::time::timeout(WAIT, stream.next())
            .await
            .expect("task_end in time")
            .expect("stream open")
            .expect("valid SSE");
        let data: Value = serde_json::from_str(&ev.data).unwrap();
        let event = json!({"id": ev.id.parse::<u64>().unwrap(), "event": ev.event, "data": data});
        if let Err(e) = c.validate(&event_schema, &event) {
            panic!("an event does not meet StreamEvent: {e}\n{event}");
        }
        if data["payload"]["type"] == "task_end" && data.get("origin").is_none() {
            break;
        }
    }
    drop(stream);

    let (st, v) = checked(
        &c,
        "GET",
        "/v1/sessions/{id}/grants",
        get(&format!("{one}/grants")),
    )
    .await;
    assert_eq!(st, StatusCode::OK);
    let grant = v["grants"][0]["grant_id"].as_str().unwrap().to_string();
    let (st, _) = checked(
        &c,
        "DELETE",
        "/v1/sessions/{id}/grants/{grant_id}",
        s.req(Method::DELETE, &format!("{one}/grants/{grant}")),
    )
    .await;
    assert_eq!(st, StatusCode::NO_CONTENT);
    checked(
        &c,
        "GET",
        "/v1/sessions/{id}/messages",
        get(&format!("{one}/messages?limit=2")),
    )
    .await;
    checked(
        &c,
        "POST",
        "/v1/sessions/{id}/stream_token",
        s.req(Method::POST, &format!("{one}/stream_token")),
    )
    .await;
    let (st, _) = checked(
        &c,
        "PUT",
        "/v1/sessions/{id}/approval_mode",
        s.req(Method::PUT, &format!("{one}/approval_mode"))
            .json(&json!({"mode": "allow-all"})),
    )
    .await;
    assert_eq!(st, StatusCode::NO_CONTENT);
    let (st, v) = checked(
        &c,
        "POST",
        "/v1/sessions/{id}/steer",
        post(&format!("{one}/steer"), json!({"text": "go on"})),
    )
    .await;
    assert_eq!(st, StatusCode::ACCEPTED, "{v}");
    checked(
        &c,
        "POST",
        "/v1/sessions/{id}/abort",
        s.req(Method::POST, &format!("{one}/abort")),
    )
    .await;
    s.wait_listed(&id, "idle").await;
    let (st, v) = checked(
        &c,
        "POST",
        "/v1/sessions/{id}/fork",
        s.req(Method::POST, &format!("{one}/fork")),
    )
    .await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
    checked(
        &c,
        "POST",
        "/v1/sessions/{id}/compact",
        s.req(Method::POST, &format!("{one}/compact")),
    )
    .await;
    s.wait_listed(&id, "idle").await;
    checked(
        &c,
        "POST",
        "/v1/sessions/{id}/rollback",
        post(&format!("{one}/rollback"), json!({"tasks": 1})),
    )
    .await;
    let (st, _) = checked(
        &c,
        "DELETE",
        "/v1/sessions/{id}",
        s.req(Method::DELETE, &one),
    )
    .await;
    assert_eq!(st, StatusCode::NO_CONTENT);
    let (st, v) = checked(
        &c,
        "POST",
        "/v1/sessions/{id}/resume",
        s.req(Method::POST, &format!("{one}/resume")),
    )
    .await;
    assert_eq!((st, &v["resumed"]), (StatusCode::OK, &json!(true)), "{v}");

    // Errors, each in the error shape with a documented status.
    let errors: Vec<(&str, &str, reqwest::RequestBuilder, &str)> = vec![
        (
            "GET",
            "/v1/sessions/{id}",
            get("/v1/sessions/nope"),
            "unknown_session",
        ),
        (
            "GET",
            "/v1/sessions",
            s.client.get(format!("{}/v1/sessions", s.base)),
            "unauthorized",
        ),
        (
            "POST",
            "/v1/sessions",
            s.req(Method::POST, "/v1/sessions")
                .header("content-type", "application/json")
                .body("{"),
            "bad_json",
        ),
        (
            "POST",
            "/v1/sessions",
            s.req(Method::POST, "/v1/sessions")
                .header("content-type", "text/plain")
                .body("{}"),
            "unsupported_media_type",
        ),
        (
            "POST",
            "/v1/sessions",
            post("/v1/sessions", json!({"workspace": "/no/such/dir"})),
            "invalid_workspace",
        ),
        (
            "POST",
            "/v1/sessions",
            post("/v1/sessions", json!({"sandbox": {"mode": "all"}})),
            "invalid_sandbox",
        ),
        (
            "GET",
            "/v1/sessions",
            get("/v1/sessions?limit=0"),
            "invalid_request",
        ),
        (
            "GET",
            "/v1/sessions/{id}/messages",
            get(&format!("{one}/messages?cursor=zzz")),
            "invalid_cursor",
        ),
        (
            "POST",
            "/v1/sessions/{id}/approvals/{approval_id}",
            post(
                &format!("{one}/approvals/nope"),
                json!({"decision": "allow"}),
            ),
            "unknown_approval",
        ),
        (
            "DELETE",
            "/v1/sessions/{id}/grants/{grant_id}",
            s.req(Method::DELETE, &format!("{one}/grants/nope")),
            "unknown_grant",
        ),
        (
            "POST",
            "/v1/sessions/{id}/tasks",
            post(&format!("{one}/tasks"), json!({"text": " "})),
            "invalid_request",
        ),
        (
            "GET",
            "/v1/sessions/{id}/events",
            get(&format!("{one}/events?last_event_id=x")),
            "invalid_request",
        ),
        (
            "POST",
            "/v1/sessions/{id}/rollback",
            post(&format!("{one}/rollback"), json!({"tasks": 99})),
            "invalid_request",
        ),
    ];
    for (method, path, r, code) in errors {
        let (st, v) = checked(&c, method, path, r).await;
        assert_eq!(v["error"]["code"], code, "{method} {path} {st}: {v}");
        let example = &c.operation(method, path)["responses"][st.as_str()]["content"]["application/json"]
            ["examples"][code]["value"];
        assert_eq!(
            example["error"]["code"], code,
            "{method} {path}: no example of {code}"
        );
    }
}

/// The `.rs` files under `dir`, recursively.
fn rust_files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn every_error_code_of_the_server_has_an_example_in_the_document() {
    let dir = sandbox(&tool_then_text());
    let out = command(dir.path(), &["serve", "--print-openapi"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut documented = BTreeSet::new();
    for item in doc["paths"].as_object().unwrap().values() {
        for op in item.as_object().unwrap().values() {
            for response in op["responses"].as_object().unwrap().values() {
                let examples = &response["content"]["application/json"]["examples"];
                for (code, example) in examples.as_object().into_iter().flatten() {
                    assert_eq!(example["value"]["error"]["code"], code.as_str());
                    documented.insert(code.clone());
                }
            }
        }
    }
    // The fallbacks' codes belong to no operation: the document's description names them.
    let description = doc["info"]["description"].as_str().unwrap();
    for code in ["not_found", "method_not_allowed"] {
        assert!(description.contains(code), "{description}");
        documented.insert(code.to_string());
    }
    let made = regex::Regex::new(
        r#"(?:ApiError::new|Self::new)\(\s*StatusCode::\w+,\s*"([a-z_]+)"|bad_request\(\s*"([a-z_]+)"|\\"code\\":\\"([a-z_]+)\\""#,
    )
    .unwrap();
    let mut files = Vec::new();
    rust_files(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/server"),
        &mut files,
    );
    let mut answered = BTreeSet::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        // Unit tests build errors of their own.
        let text = text.split("#[cfg(test)]").next().unwrap();
        for c in made.captures_iter(text) {
            let code = c.iter().skip(1).flatten().next().unwrap().as_str();
            answered.insert(code.to_string());
        }
    }
    assert!(
        answered.len() >= 40,
        "the scan found too few codes: {answered:?}"
    );
    let missing: Vec<_> = answered.difference(&documented).collect();
    assert!(
        missing.is_empty(),
        "error codes the server answers without an example in the document (add them to \
         ERROR_CODES in src/server/openapi_errors.rs and name them on their routes): {missing:?}"
    );
}
