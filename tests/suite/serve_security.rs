//! End-to-end tests of the security of `rookery serve`, driving the built binary on 127.0.0.1:
//! the generated token file (mode 0600, new at every start, needed by every route but
//! `/healthz`), `--no-auth`, the browser rules (415 for non-JSON bodies, 403 for a foreign
//! `Origin` or `Host` on POST, GET, SSE and metrics, CORS only for allowed origins) and session
//! configs that never read a server path (inline, `--config-dir` names, no `/etc/passwd` content
//! in any answer). Limits are in `serve_limits.rs`.
//!
//! Each server gets its own temporary home, workspace and `$HOME`. Every wait is bounded.

use crate::common::serve as harness;

use std::os::unix::fs::PermissionsExt;

use harness::*;
use reqwest::{Method, StatusCode};
use rookery::message::Payload;
use serde_json::{Value, json};

fn no_cors(resp: &reqwest::Response) {
    for h in resp.headers().keys() {
        assert!(
            !h.as_str().starts_with("access-control-"),
            "unexpected CORS header {h}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_generated_token_file_is_private_new_at_every_start_and_needed() {
    let server = Server::start(&tool_then_text());
    let home = server.dir.path().join("home");
    let file = home.join("serve.token");
    let token = server.token.clone().unwrap();
    assert_eq!(token.len(), 64, "256 bits in hex");
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let stderr = server.stderr();
    assert!(
        stderr.contains(&format!("token: {}\n", file.display())),
        "{stderr}"
    );
    assert!(!stderr.contains(&token), "the token must not be printed");
    let bare = reqwest::Client::new();
    let health = bare.get(format!("{}/healthz", server.base)).send().await;
    assert_eq!(health.unwrap().status(), StatusCode::OK);
    for path in ["/v1/sessions", "/metrics"] {
        let (s, v) = server
            .send(bare.get(format!("{}{path}", server.base)))
            .await;
        assert_eq!(s, StatusCode::UNAUTHORIZED, "{path}");
        assert_eq!(v["error"]["code"], "unauthorized");
    }
    let (s, _) = server
        .send(
            bare.post(format!("{}/v1/sessions", server.base))
                .json(&json!({"workspace": server.ws()})),
        )
        .await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    let id = server.create(None).await;
    assert_eq!(server.status_of(&id).await, "idle");

    // A restart makes a new token and replaces the file; the old one no longer works.
    let server = Server::start_in(server.kill9(), None);
    let new_token = server.token.clone().unwrap();
    assert_ne!(new_token, token);
    assert_eq!(read_token_file(&home), new_token);
    let (s, _) = server
        .send(
            bare.get(format!("{}/v1/sessions", server.base))
                .bearer_auth(&token),
        )
        .await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    assert_eq!(server.status_of(&id).await, "idle");
    let left: Vec<String> = std::fs::read_dir(&home)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("token"))
        .collect();
    assert_eq!(left, ["serve.token"]);

    // --no-auth on loopback: no token needed, no token file written.
    let dir = sandbox(&tool_then_text());
    let server = Server::start_with(dir, None, &["--no-auth"]);
    assert!(!server.dir.path().join("home/serve.token").exists());
    let (s, v) = server
        .send(bare.get(format!("{}/v1/sessions", server.base)))
        .await;
    assert_eq!(
        (s, v),
        (StatusCode::OK, json!({"sessions": [], "next_cursor": null}))
    );
    // Without --config-dir a name is refused, and so is a path.
    for (config, expect) in [
        ("dev", "this server has no --config-dir"),
        ("/etc/passwd", "paths are not accepted"),
    ] {
        let (s, v) = server
            .call(
                "POST",
                "/v1/sessions",
                Some(json!({"workspace": server.ws(), "config": config})),
            )
            .await;
        assert_eq!(s, StatusCode::BAD_REQUEST);
        assert!(
            v["error"]["message"].as_str().unwrap().contains(expect),
            "{v}"
        );
    }
    // --no-auth and --token-env exclude each other.
    let script = server.dir.path().join("script.json");
    let out = command(
        server.dir.path(),
        &[
            "serve",
            "--script",
            script.to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
            "--no-auth",
            "--token-env",
            "X",
        ],
    )
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
}

/// The requests a web page can make on its own: all refused, whether or not a token is needed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn browser_requests_from_other_sites_are_refused() {
    for extra in [&["--no-auth"][..], &[][..]] {
        let server = Server::start_with(sandbox(&tool_then_text()), None, extra);
        let id = server.create(None).await;
        let port = server.base.rsplit(':').next().unwrap().to_string();
        let body = json!({"workspace": server.ws()}).to_string();
        let evil_host = format!("evil.example:{port}");
        let task_path = format!("/v1/sessions/{id}/tasks");
        let cases = [
            ("/v1/sessions", "text/plain", body.as_str()),
            (
                task_path.as_str(),
                "text/plain;charset=UTF-8",
                "{\"text\":\"run\"}",
            ),
            (
                task_path.as_str(),
                "application/x-www-form-urlencoded",
                "{\"text\":\"run\"}",
            ),
            (
                task_path.as_str(),
                "multipart/form-data; boundary=x",
                "{\"text\":\"run\"}",
            ),
        ];
        // A "simple" cross-site request: text/plain body.
        for (path, ct, b) in cases {
            let r = server
                .req(Method::POST, path)
                .header("Content-Type", ct)
                .body(b.to_string());
            let (s, v) = server.send(r).await;
            assert_eq!(s, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{path} {extra:?}");
            assert_eq!(v["error"]["code"], "unsupported_media_type");
            let r = server
                .req(Method::POST, path)
                .header("Content-Type", ct)
                .header("Origin", "http://evil.example")
                .body(b.to_string());
            let (s, v) = server.send(r).await;
            assert_eq!(s, StatusCode::FORBIDDEN, "{path} {extra:?}");
            assert_eq!(v["error"]["code"], "forbidden_origin");
        }
        // So is a body without a length (streamed over HTTP/2 here).
        let h2 = reqwest::Client::builder()
            .http2_prior_knowledge()
            .build()
            .unwrap();
        let chunks: Vec<Result<&'static str, std::io::Error>> =
            vec![Ok("{\"text\":"), Ok("\"run\"}")];
        let mut r = h2
            .post(format!("{}{task_path}", server.base))
            .header("Content-Type", "text/plain")
            .body(reqwest::Body::wrap_stream(futures::stream::iter(chunks)));
        if let Some(t) = &server.token {
            r = r.bearer_auth(t);
        }
        let resp = r.send().await.unwrap();
        assert_eq!(resp.version(), reqwest::Version::HTTP_2);
        assert_eq!(resp.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
        // No Content-Type at all is refused too.
        let r = server
            .req(Method::POST, &task_path)
            .body("{\"text\":\"run\"}");
        assert_eq!(server.send(r).await.0, StatusCode::UNSUPPORTED_MEDIA_TYPE);
        // A foreign Origin or Host on POST, GET, SSE and metrics.
        let reads = [
            (Method::GET, "/v1/sessions".to_string()),
            (Method::GET, format!("/v1/sessions/{id}")),
            (Method::GET, format!("/v1/sessions/{id}/events")),
            (Method::GET, format!("/v1/sessions/{id}/approvals")),
            (Method::GET, "/metrics".to_string()),
            (Method::POST, format!("/v1/sessions/{id}/abort")),
            (Method::OPTIONS, "/v1/sessions".to_string()),
        ];
        for (method, path) in &reads {
            for (header, value, code) in [
                ("Origin", "http://evil.example", "forbidden_origin"),
                ("Origin", "null", "forbidden_origin"),
                ("Host", evil_host.as_str(), "forbidden_host"),
            ] {
                let resp = server
                    .req(method.clone(), path)
                    .header(header, value)
                    .header("Access-Control-Request-Method", "POST")
                    .send()
                    .await
                    .unwrap();
                assert_eq!(
                    resp.status(),
                    StatusCode::FORBIDDEN,
                    "{method} {path} {value}"
                );
                no_cors(&resp);
                let v: Value = resp.json().await.unwrap();
                assert_eq!(v["error"]["code"], code, "{method} {path} {value}");
            }
        }
        let r = server
            .req(Method::POST, "/v1/sessions")
            .header("Host", evil_host.as_str())
            .json(&json!({"workspace": server.ws()}));
        let (s, v) = server.send(r).await;
        assert_eq!(
            (s, v["error"]["code"].clone()),
            (StatusCode::FORBIDDEN, json!("forbidden_host"))
        );
        // Nothing of the refused requests happened: one session, no task ran.
        let (_, list) = server.call("GET", "/v1/sessions", None).await;
        assert_eq!(list["sessions"].as_array().unwrap().len(), 1, "{list}");
        let text = std::fs::read_to_string(server.trace(&id)).unwrap();
        assert!(!text.contains("request_begin"), "{text}");
        // The usual client still works, with no CORS headers; /healthz answers any Host.
        let resp = server
            .req(Method::GET, "/v1/sessions")
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::OK);
        no_cors(&resp);
        let resp = server
            .req(Method::GET, "/healthz")
            .header("Host", evil_host.as_str())
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::OK);
        for host in [format!("localhost:{port}"), format!("[::1]:{port}")] {
            let resp = server
                .req(Method::GET, "/v1/sessions")
                .header("Host", host.as_str())
                .send()
                .await
                .unwrap();
            assert_eq!(resp.status(), StatusCode::OK, "{host}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allowed_origins_get_cors_and_allowed_hosts_get_in() {
    let server = Server::start_with(
        sandbox(&tool_then_text()),
        None,
        &[
            "--allow-origin",
            "http://app.example:3000",
            "--allow-origin",
            "https://ui.example",
            "--allow-host",
            "rookery.test",
        ],
    );
    let port = server.base.rsplit(':').next().unwrap().to_string();
    // Preflight: answered without a token.
    let resp = reqwest::Client::new()
        .request(Method::OPTIONS, format!("{}/v1/sessions", server.base))
        .header("Origin", "http://app.example:3000")
        .header("Access-Control-Request-Method", "POST")
        .header(
            "Access-Control-Request-Headers",
            "authorization, content-type",
        )
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::NO_CONTENT);
    let h = resp.headers();
    assert_eq!(h["access-control-allow-origin"], "http://app.example:3000");
    let allowed_headers = h["access-control-allow-headers"].to_str().unwrap();
    assert!(allowed_headers.contains("authorization") && allowed_headers.contains("content-type"));
    assert!(
        h["access-control-allow-methods"]
            .to_str()
            .unwrap()
            .contains("POST")
    );
    // The real request carries the CORS answer; the token is still needed.
    let resp = server
        .req(Method::POST, "/v1/sessions")
        .header("Origin", "https://ui.example")
        .json(&json!({"workspace": server.ws()}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::CREATED);
    assert_eq!(
        resp.headers()["access-control-allow-origin"],
        "https://ui.example"
    );
    let resp = reqwest::Client::new()
        .get(format!("{}/v1/sessions", server.base))
        .header("Origin", "https://ui.example")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
    // Another origin is still refused; an allowed host name gets in.
    let resp = server
        .req(Method::GET, "/v1/sessions")
        .header("Origin", "http://app.example:3001")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::FORBIDDEN);
    no_cors(&resp);
    let resp = server
        .req(Method::GET, "/v1/sessions")
        .header("Host", format!("rookery.test:{port}"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
}

/// The lines of `/etc/passwd`, to prove none of it is ever answered.
fn passwd_pieces() -> Vec<String> {
    let text = std::fs::read_to_string("/etc/passwd").unwrap();
    let mut pieces: Vec<String> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(str::to_string)
        .collect();
    pieces.push("root:".to_string());
    pieces.push("/bin/".to_string());
    pieces.push("nologin".to_string());
    pieces
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_configs_are_inline_or_named_and_never_read_a_server_path() {
    let dir = sandbox(&tool_then_text());
    let configs = dir.path().join("configs");
    std::fs::create_dir(&configs).unwrap();
    std::fs::write(
        configs.join("dev.yaml"),
        "system_prompt: From the config dir\n",
    )
    .unwrap();
    std::fs::write(configs.join("short.yml"), "system_prompt: A yml one\n").unwrap();
    std::fs::copy("/etc/passwd", configs.join("passwd.yaml")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", configs.join("link.yaml")).unwrap();
    nix::unistd::mkfifo(&configs.join("fifo.yaml"), nix::sys::stat::Mode::S_IRWXU).unwrap();
    std::fs::write(configs.join("bad.yaml"), "max_turns: [1, 2]\n").unwrap();
    let configs_arg = configs.to_str().unwrap().to_string();
    let server = Server::start_with(dir, None, &["--config-dir", &configs_arg]);
    let ws = server.ws();
    let mut answers = Vec::new();
    let refused = [
        (json!("/etc/passwd"), "paths are not accepted"),
        (json!("/etc/shadow"), "paths are not accepted"),
        (json!("/dev/zero"), "paths are not accepted"),
        (json!("../../../../etc/passwd"), "paths are not accepted"),
        (json!("dev.yaml"), "paths are not accepted"),
        (json!("passwd"), "config \"passwd\": invalid"),
        (json!("link"), "is a symbolic link"),
        (json!("fifo"), "is not a regular file"),
        (json!("nope"), "no config named \"nope\""),
        (json!(42), "must be a JSON object"),
        (
            json!({"max_turns": "many"}),
            "config: max_turns: invalid type",
        ),
        (
            json!({"model": {"provider": "openai", "base_url": "http://evil.example", "model": "m", "api_key_env": "AWS_SECRET_ACCESS_KEY"}}),
            "model section",
        ),
        (json!({"tools": {"builtin": ["read_fiel"]}}), "read_fiel"),
    ];
    for (config, expect) in &refused {
        let (s, v) = server
            .call(
                "POST",
                "/v1/sessions",
                Some(json!({"workspace": ws, "config": config})),
            )
            .await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{config}: {v}");
        assert_eq!(v["error"]["code"], "invalid_config", "{config}: {v}");
        let message = v["error"]["message"].as_str().unwrap();
        assert!(message.contains(expect), "{config}: {message}");
        answers.push(v.to_string());
    }
    let (s, v) = server
        .call(
            "POST",
            "/v1/sessions",
            Some(json!({"workspace": ws, "config": "bad"})),
        )
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert_eq!(
        v["error"]["message"],
        "config \"bad\": max_turns: invalid type: sequence, expected i64 at line 1 column 12"
    );
    // The FIFO blocked nothing: the server still answers at once.
    let resp = server.req(Method::GET, "/healthz").send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    // Inline and named configs work; their system prompt reaches the session.
    for (config, prompt) in [
        (
            json!({"system_prompt": "Inline prompt", "max_turns": 3}),
            "Inline prompt",
        ),
        (json!("dev"), "From the config dir"),
        (json!("short"), "A yml one"),
    ] {
        let (s, v) = server
            .call(
                "POST",
                "/v1/sessions",
                Some(json!({"workspace": ws, "config": config})),
            )
            .await;
        assert_eq!(s, StatusCode::CREATED, "{v}");
        let id = v["session_id"].as_str().unwrap().to_string();
        let after = server.task(&id, "go").await;
        let events = server.events_until_task_end(&id, after).await;
        assert_eq!(events.last().unwrap().1["payload"]["status"], "completed");
        let records = settled_trace(&server.trace(&id)).await;
        let Payload::SessionMeta(meta) = &records[0].payload else {
            panic!("no session_meta");
        };
        assert_eq!(meta.system_prompt, prompt);
        // Resume refuses a path the same way.
        server
            .call("DELETE", &format!("/v1/sessions/{id}"), None)
            .await;
        let (s, v) = server
            .call(
                "POST",
                &format!("/v1/sessions/{id}/resume"),
                Some(json!({"config": "/etc/passwd"})),
            )
            .await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
        answers.push(v.to_string());
        let (s, v) = server
            .call(
                "POST",
                &format!("/v1/sessions/{id}/resume"),
                Some(json!({"config": "passwd"})),
            )
            .await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
        answers.push(v.to_string());
        let (s, v) = server
            .call(
                "POST",
                &format!("/v1/sessions/{id}/resume"),
                Some(json!({"config": "dev"})),
            )
            .await;
        assert_eq!(s, StatusCode::OK, "{v}");
    }
    for answer in &answers {
        for piece in passwd_pieces() {
            assert!(!answer.contains(&piece), "{piece:?} leaked in {answer}");
        }
    }
}
