//! Many users on one `rookery serve` (`--auth FILE`), through the built binary: two users and
//! an admin authenticated by hashed static tokens; a user gets 404 `unknown_session` on every
//! route of another's session (exactly as for an id that does not exist) and lists only its
//! own; the admin sees all with their owners; workspace roots refuse `..` and symlink escapes;
//! `max_sessions` admits exactly N of N+10 parallel creates; a file with a plain token instead
//! of a hash refuses the start.

use crate::common::serve as harness;

use std::process::Stdio;

use harness::*;
use reqwest::StatusCode;
use serde_json::{Value, json};

pub(crate) const ALICE: &str = "alice-token-0123456789";
pub(crate) const BOB: &str = "bob-token-0123456789";
pub(crate) const ROOT: &str = "root-token-0123456789";

/// `rookery auth hash-token` of `token`, through the binary.
pub(crate) fn hash(token: &str) -> String {
    use std::io::Write;
    let mut child = std::process::Command::new(BIN)
        .args(["auth", "hash-token"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    writeln!(child.stdin.take().unwrap(), "{token}").unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let line = String::from_utf8(out.stdout).unwrap().trim().to_string();
    assert!(line.starts_with("sha256:") && line.len() == 71, "{line}");
    line
}

/// An auth file for alice and bob (users) and root (admin), with `extra` YAML for each user
/// and `top` at the top level.
pub(crate) fn auth_file(dir: &std::path::Path, top: &str, alice: &str, bob: &str) -> String {
    let text = format!(
        "{top}\nprincipals:\n  - name: alice\n    token_sha256: [\"{}\"]\n{alice}\n  - name: bob\n    role: user\n    token_sha256: [\"{}\"]\n{bob}\n  - name: root\n    role: admin\n    token_sha256: [\"{}\"]\n",
        hash(ALICE),
        hash(BOB),
        hash(ROOT)
    );
    let path = dir.join("auth.yaml");
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_string()
}

pub(crate) fn start(dir: tempfile::TempDir, auth: &str) -> Server {
    Server::start_with(dir, None, &["--auth", auth])
}

pub(crate) async fn call_as(
    s: &Server,
    token: &str,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let mut r = s
        .client
        .request(method.parse().unwrap(), format!("{}{path}", s.base))
        .bearer_auth(token);
    if let Some(b) = body {
        r = r.json(&b);
    }
    s.send(r).await
}

pub(crate) async fn create_as(s: &Server, token: &str, ws: &std::path::Path) -> String {
    let (status, v) = call_as(
        s,
        token,
        "POST",
        "/v1/sessions",
        Some(json!({"workspace": ws, "approval_mode": "always-ask"})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{v}");
    v["session_id"].as_str().unwrap().to_string()
}

/// Every session route, as (method, path, body), for session `id`.
fn routes(id: &str) -> Vec<(&'static str, String, Option<Value>)> {
    vec![
        ("GET", format!("/v1/sessions/{id}"), None),
        ("GET", format!("/v1/sessions/{id}/events"), None),
        (
            "POST",
            format!("/v1/sessions/{id}/tasks"),
            Some(json!({"text": "hi"})),
        ),
        (
            "POST",
            format!("/v1/sessions/{id}/tasks"),
            Some(json!({"nope": 1})),
        ),
        (
            "POST",
            format!("/v1/sessions/{id}/steer"),
            Some(json!({"text": "hi"})),
        ),
        ("GET", format!("/v1/sessions/{id}/approvals"), None),
        (
            "POST",
            format!("/v1/sessions/{id}/approvals/appr-1"),
            Some(json!({"decision": "allow"})),
        ),
        (
            "PUT",
            format!("/v1/sessions/{id}/approval_mode"),
            Some(json!({"mode": "allow-all"})),
        ),
        ("GET", format!("/v1/sessions/{id}/grants"), None),
        ("DELETE", format!("/v1/sessions/{id}/grants/grant-1"), None),
        ("POST", format!("/v1/sessions/{id}/abort"), None),
        ("POST", format!("/v1/sessions/{id}/compact"), None),
        ("POST", format!("/v1/sessions/{id}/resume"), None),
        ("GET", format!("/v1/sessions/{id}/messages"), None),
        ("POST", format!("/v1/sessions/{id}/stream_token"), None),
        ("POST", format!("/v1/sessions/{id}/fork"), None),
        (
            "POST",
            format!("/v1/sessions/{id}/rollback"),
            Some(json!({"tasks": 1})),
        ),
        ("DELETE", format!("/v1/sessions/{id}/queue/q-1"), None),
        (
            "POST",
            format!("/v1/sessions/{id}/schedules"),
            Some(json!({"cron": "* * * * *", "text": "hi"})),
        ),
        ("GET", format!("/v1/sessions/{id}/schedules"), None),
        ("DELETE", format!("/v1/sessions/{id}/schedules/sch-1"), None),
        ("DELETE", format!("/v1/sessions/{id}"), None),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn users_see_only_their_own_sessions_and_the_admin_all() {
    let dir = sandbox(&json!({"turns": [{"text": "done"}]}));
    let auth = auth_file(dir.path(), "", "", "");
    let s = start(dir, &auth);
    let ws = s.ws();
    let a = create_as(&s, ALICE, &ws).await;
    let b = create_as(&s, BOB, &ws).await;

    // Lists: each user its own, the admin both, each with its owner.
    let (_, v) = call_as(&s, ALICE, "GET", "/v1/sessions", None).await;
    let listed: Vec<(&str, &str)> = v["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["session_id"].as_str().unwrap(),
                e["owner"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(listed, vec![(a.as_str(), "alice")]);
    let (_, v) = call_as(&s, ROOT, "GET", "/v1/sessions", None).await;
    let mut owners: Vec<(String, String)> = v["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["session_id"].as_str().unwrap().into(),
                e["owner"].as_str().unwrap().into(),
            )
        })
        .collect();
    owners.sort_by(|x, y| x.1.cmp(&y.1));
    assert_eq!(
        owners,
        vec![(a.clone(), "alice".into()), (b.clone(), "bob".into())]
    );

    // Every route of bob's session answers alice exactly as for an id that does not exist.
    let missing = "session-2020-01-01-00-00-00-0000dead";
    for ((method, path, body), (_, missing_path, _)) in routes(&b).into_iter().zip(routes(missing))
    {
        let (status, v) = call_as(&s, ALICE, method, &path, body.clone()).await;
        let (m_status, m_v) = call_as(&s, ALICE, method, &missing_path, body).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{method} {path}: {v}");
        assert_eq!(
            v["error"]["code"], "unknown_session",
            "{method} {path}: {v}"
        );
        assert_eq!(v["error"]["message"], format!("unknown session {b}"));
        assert_eq!(m_status, status, "{method} {missing_path}: {m_v}");
        assert_eq!(
            m_v["error"]["message"]
                .as_str()
                .unwrap()
                .replace(missing, &b),
            v["error"]["message"].as_str().unwrap(),
            "{method}: same answer as for an unknown id"
        );
    }
    // Nothing of it happened: bob's session is there, idle, in its mode, not deleted.
    let (status, v) = call_as(&s, BOB, "GET", &format!("/v1/sessions/{b}"), None).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(
        (v["status"].as_str(), v["approval_mode"].as_str()),
        (Some("idle"), Some("always-ask"))
    );
    assert_eq!(v["owner"], "bob");

    // Their own: 200; the admin: anyone's.
    let (status, v) = call_as(&s, ALICE, "GET", &format!("/v1/sessions/{a}"), None).await;
    assert_eq!(
        (status, v["owner"].as_str()),
        (StatusCode::OK, Some("alice")),
        "{v}"
    );
    let (status, v) = call_as(&s, ROOT, "GET", &format!("/v1/sessions/{b}"), None).await;
    assert_eq!(
        (status, v["owner"].as_str()),
        (StatusCode::OK, Some("bob")),
        "{v}"
    );
    let (status, _) = call_as(
        &s,
        ROOT,
        "PUT",
        &format!("/v1/sessions/{b}/approval_mode"),
        Some(json!({"mode": "read-only"})),
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT);

    // The SSE stream of bob's session is refused to alice, served to bob.
    let resp = s
        .client
        .get(format!("{}/v1/sessions/{b}/events", s.base))
        .bearer_auth(ALICE)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);
    let resp = s
        .client
        .get(format!("{}/v1/sessions/{b}/events", s.base))
        .bearer_auth(BOB)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    drop(resp);

    // Bad credentials: one 401 body whatever is wrong.
    let mut bodies = Vec::new();
    for token in [
        "",
        "alice-token",
        &hash(ALICE),
        "root-token-012345678",
        "Bearer",
    ] {
        let (status, v) = call_as(&s, token, "GET", "/v1/sessions", None).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{token:?}");
        assert_eq!(v["error"]["code"], "unauthorized");
        bodies.push(v);
    }
    assert!(bodies.windows(2).all(|w| w[0] == w[1]), "{bodies:?}");

    // The owner is recorded in the trace's session_meta.
    let trace = std::fs::read_to_string(s.trace(&b)).unwrap();
    let first: Value = serde_json::from_str(trace.lines().next().unwrap()).unwrap();
    assert_eq!(first["payload"]["owner"], "bob", "{first}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_sessions_admits_exactly_n_of_parallel_creates() {
    let dir = sandbox(&json!({"turns": [{"text": "done"}]}));
    let auth = auth_file(dir.path(), "max_sessions: 3", "", "    max_sessions: 1");
    let s = start(dir, &auth);
    let ws = s.ws();
    let attempts = (0..13).map(|_| {
        call_as(
            &s,
            ALICE,
            "POST",
            "/v1/sessions",
            Some(json!({"workspace": ws})),
        )
    });
    let results = futures::future::join_all(attempts).await;
    let created = results
        .iter()
        .filter(|(st, _)| *st == StatusCode::CREATED)
        .count();
    assert_eq!(created, 3, "{results:?}");
    for (status, v) in results.iter().filter(|(st, _)| *st != StatusCode::CREATED) {
        assert_eq!(*status, StatusCode::TOO_MANY_REQUESTS, "{v}");
        assert_eq!(v["error"]["code"], "quota_exceeded");
        assert_eq!(v["error"]["limit"], "max_sessions");
        assert_eq!(v["error"]["current"], 3);
    }
    // Bob's own limit; the admin has the default.
    create_as(&s, BOB, &ws).await;
    let (status, v) = call_as(
        &s,
        BOB,
        "POST",
        "/v1/sessions",
        Some(json!({"workspace": ws})),
    )
    .await;
    assert_eq!(
        (status, v["error"]["current"].as_u64()),
        (StatusCode::TOO_MANY_REQUESTS, Some(1))
    );
    // A deleted session frees its place.
    let (_, v) = call_as(&s, ALICE, "GET", "/v1/sessions", None).await;
    let one = v["sessions"][0]["session_id"].as_str().unwrap().to_string();
    let (status, _) = call_as(&s, ALICE, "DELETE", &format!("/v1/sessions/{one}"), None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    create_as(&s, ALICE, &ws).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workspace_roots_refuse_dotdot_and_symlink_escapes() {
    let dir = sandbox(&json!({"turns": [{"text": "done"}]}));
    let root = dir.path().join("roots");
    for d in ["alice/proj", "bob"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    std::os::unix::fs::symlink(root.join("bob"), root.join("alice/to-bob")).unwrap();
    let alice_roots = format!(
        "    workspace_roots: [\"{}\"]",
        root.join("alice").display()
    );
    let auth = auth_file(dir.path(), "", &alice_roots, "");
    let s = start(dir, &auth);
    create_as(&s, ALICE, &root.join("alice/proj")).await;
    create_as(&s, ALICE, &root.join("alice/proj/../proj")).await;
    for escape in [
        root.join("alice/../bob"),
        root.join("alice/to-bob"),
        root.join("alice/proj/../../bob"),
        root.join("bob"),
    ] {
        let (status, v) = call_as(
            &s,
            ALICE,
            "POST",
            "/v1/sessions",
            Some(json!({"workspace": escape})),
        )
        .await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{}: {v}", escape.display());
        assert_eq!(v["error"]["code"], "workspace_not_allowed");
    }
    // A fork is a new session of the caller's: its own workspace must be inside the roots too.
    let own = create_as(&s, ALICE, &root.join("alice/proj")).await;
    let run = call_as(
        &s,
        ALICE,
        "POST",
        &format!("/v1/sessions/{own}/tasks"),
        Some(json!({"text": "go"})),
    )
    .await;
    assert_eq!(run.0, StatusCode::ACCEPTED, "{}", run.1);
    wait_status(&s, ALICE, &own, "idle").await;
    let (status, v) = call_as(
        &s,
        ALICE,
        "POST",
        &format!("/v1/sessions/{own}/fork"),
        Some(json!({"workspace": root.join("bob")})),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{v}");
    assert_eq!(v["error"]["code"], "workspace_not_allowed");
    // A stream token acts as the one who asked for it, on that session's events only.
    let (status, v) = call_as(
        &s,
        ALICE,
        "POST",
        &format!("/v1/sessions/{own}/stream_token"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{v}");
    let token = v["stream_token"].as_str().unwrap().to_string();
    let events = s
        .client
        .get(format!(
            "{}/v1/sessions/{own}/events?stream_token={token}",
            s.base
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(events.status(), StatusCode::OK);
    drop(events);
    let list = s
        .client
        .get(format!("{}/v1/sessions?stream_token={token}", s.base))
        .send()
        .await
        .unwrap();
    assert_eq!(list.status(), StatusCode::UNAUTHORIZED);
    // Bob has no roots.
    create_as(&s, BOB, &root.join("bob")).await;
}

#[test]
fn an_auth_file_with_a_plain_token_refuses_the_start() {
    let dir = sandbox(&json!({"turns": []}));
    let path = dir.path().join("auth.yaml");
    std::fs::write(
        &path,
        "principals:\n  - name: alice\n    token_sha256: [\"alice-token\"]\n",
    )
    .unwrap();
    let home = dir.path().join("home");
    let out = command(
        dir.path(),
        &[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--home",
            home.to_str().unwrap(),
            "--auth",
            path.to_str().unwrap(),
        ],
    )
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("principal \"alice\": token_sha256[0]: not a token hash")
            && !err.contains("alice-token"),
        "{err}"
    );
    assert!(out.stdout.is_empty(), "never listened");
}

/// Polls `GET /v1/sessions/{id}` as `token` until its status is `want`.
pub(crate) async fn wait_status(s: &Server, token: &str, id: &str, want: &str) {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let (_, v) = call_as(s, token, "GET", &format!("/v1/sessions/{id}"), None).await;
        if v["status"] == want {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{id} never {want}: {v}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}
