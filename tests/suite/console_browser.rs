//! The web console of `rookery serve`, driven in headless Chromium over WebDriver (fantoccini
//! and Debian's `chromium` + `chromium-driver`): sign in, find a session created through the
//! API, start a task in `always-ask`, allow its call in the browser and see the output (an XSS
//! payload, shown as text, running nothing), steer, abort, and follow the session across a
//! restart of the server on the same port with the same `--token-env` token without a
//! duplicated or lost message. A cross-site page cannot drive the API with the same token.
//! Without a browser, the console's files carry their security headers and the server admits
//! its own origin only.
//!
//! Each server gets its own home, workspace and `$HOME`; Chromium its own profile. Every wait
//! is on a condition, bounded by a generous deadline. The helpers are in
//! `tests/common/browser.rs`.

use crate::common::browser::*;
use crate::common::serve::*;

use fantoccini::Locator;
use reqwest::StatusCode;
use serde_json::{Value, json};

/// What the scripted `read_file` shows: it would run script if the console rendered it as HTML.
const PAYLOAD: &str = "<img src=x onerror=\"window.__pwned=1;document.title='pwned'\"><script>window.__pwned=2</script>";

fn script() -> Value {
    json!({"turns": [
        {"text": "reading the payload",
         "tool_calls": [{"name": "read_file", "arguments": {"file_path": "payload.html"}}]},
        {"text": "payload shown"},
        {"tool_calls": [{"name": "exec_command", "arguments": {
            "description": "wait", "yield_time_ms": 60000,
            "cmd": "while [ ! -f go ]; do sleep 0.05; done; echo released"}}]},
        {"text": "steered answer"},
        {"tool_calls": [{"name": "exec_command", "arguments": {
            "description": "wait forever", "yield_time_ms": 60000,
            "cmd": "while [ ! -f never ]; do sleep 0.05; done"}}]},
        {"text": "after restart"}
    ]})
}

/// A page of another origin (the "cross-site page"): a server answering every request with
/// an empty HTML page.
async fn other_site() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        while let Ok((mut s, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = s.read(&mut buf).await;
                let body = "<!doctype html><title>elsewhere</title><p>another site</p>";
                let resp = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = s.write_all(resp.as_bytes()).await;
            });
        }
    });
    format!("http://{addr}/")
}

async fn session_count(server: &Server) -> usize {
    let (s, v) = server.call("GET", "/v1/sessions", None).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    v["sessions"].as_array().unwrap().len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_drives_a_session_in_headless_chromium() {
    let dir = sandbox(&script());
    std::fs::write(dir.path().join("ws/payload.html"), PAYLOAD).unwrap();
    let server = serve_on(dir, "127.0.0.1:0");
    let listen = server.base.strip_prefix("http://").unwrap().to_string();
    let (_driver, c) = browser().await;

    // Sign in; the session created through the API is listed by its full id.
    let id = server.create(Some("always-ask")).await;
    c.goto(&format!("{}/", server.base)).await.unwrap();
    sign_in(&c, TOKEN).await;
    let link = c
        .wait()
        .at_most(UI_WAIT)
        .for_element(Locator::LinkText(&id))
        .await
        .unwrap_or_else(|e| panic!("session {id} not listed: {e}"));
    let stored: Value = c
        .execute("return sessionStorage.getItem('rookery.token')", vec![])
        .await
        .unwrap();
    assert_eq!(stored, TOKEN, "the token is kept in sessionStorage");
    link.click().await.unwrap();
    until(
        &c,
        "the live stream",
        "return document.querySelector('.conn')?.dataset.state === 'live'",
    )
    .await;
    assert!(
        !c.current_url().await.unwrap().as_str().contains(TOKEN),
        "never in a URL"
    );

    // Start a task in always-ask; allow its call in the browser; its output (the XSS payload)
    // shows as text.
    compose(&c, "show the payload", "Start task").await;
    until(
        &c,
        "a pending approval",
        "return document.querySelector('.approval') !== null",
    )
    .await;
    button(&c, "Allow").await.click().await.unwrap();
    until(
        &c,
        "the task's end",
        "return [...document.querySelectorAll('.transcript .kind-task_end')].some(e => e.innerText.includes('completed'))",
    )
    .await;
    let outputs = texts(&c, "tool_call_output").await;
    assert_eq!(outputs.len(), 1, "{outputs:?}");
    assert!(outputs[0].contains(PAYLOAD), "shown as text: {outputs:?}");
    let inert = c
        .execute(
            "return [document.title, window.__pwned === undefined, \
             document.querySelectorAll('.transcript img, .transcript script').length]",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(inert, json!(["Rookery console", true, 0]), "nothing ran");
    let decisions = texts(&c, "approval_decision").await;
    assert!(
        decisions.iter().any(|d| d.contains("allow (api")),
        "{decisions:?}"
    );
    let png = c.screenshot().await.unwrap();
    assert!(png.starts_with(b"\x89PNG"), "a PNG screenshot");
    std::fs::create_dir_all(repo().join("target")).unwrap();
    std::fs::write(repo().join("target/console-session.png"), &png).unwrap();

    // The approval mode from the page; a steer while a command runs, delivered at the next turn.
    c.find(Locator::Css("select[aria-label='Approval mode']"))
        .await
        .unwrap()
        .select_by_value("allow-all")
        .await
        .unwrap();
    until(
        &c,
        "the mode change",
        "return [...document.querySelectorAll('.kind-approval_mode_changed')].some(e => e.innerText.includes('allow-all'))",
    )
    .await;
    compose(&c, "wait for go", "Start task").await;
    until(
        &c,
        "the running command",
        "return document.querySelectorAll('.transcript .kind-tool_call').length === 2",
    )
    .await;
    compose(&c, "mind the steer", "Steer").await;
    let info: Value = c
        .execute("return document.querySelector('.info').innerText", vec![])
        .await
        .unwrap();
    assert_eq!(info, "Steer: queued", "steered the running task");
    std::fs::write(server.ws().join("go"), "").unwrap();
    until(
        &c,
        "the steered answer",
        "return [...document.querySelectorAll('.transcript .kind-assistant')].some(e => e.innerText.includes('steered answer'))",
    )
    .await;
    assert_eq!(texts(&c, "steer").await.len(), 1);
    assert!(texts(&c, "steer").await[0].contains("mind the steer"));

    // Abort a task that would run forever.
    compose(&c, "run forever", "Start task").await;
    until(
        &c,
        "the third call",
        "return document.querySelectorAll('.transcript .kind-tool_call').length === 3",
    )
    .await;
    button(&c, "Abort").await.click().await.unwrap();
    until(
        &c,
        "the aborted task",
        "return [...document.querySelectorAll('.transcript .kind-task_end')].some(e => e.innerText.includes('aborted'))",
    )
    .await;

    // A cross-site page cannot drive the API, even with the token.
    let before = session_count(&server).await;
    let console = c.window().await.unwrap();
    let other = c.new_window(true).await.unwrap();
    c.switch_to_window(other.handle.clone()).await.unwrap();
    c.goto(&other_site().await).await.unwrap();
    let refused = c
        .execute_async(
            "const [api, token, done] = arguments;\
             (async () => {\
             const results = [];\
             try { const r = await fetch(api + '/v1/sessions', {method: 'POST',\
               headers: {authorization: 'Bearer ' + token, 'content-type': 'application/json'},\
               body: '{}'}); results.push('status ' + r.status); }\
             catch (e) { results.push('blocked'); }\
             try { await fetch(api + '/v1/sessions', {method: 'POST', mode: 'no-cors',\
               headers: {'content-type': 'text/plain'}, body: '{}'}); results.push('sent'); }\
             catch (e) { results.push('blocked'); }\
             done(results);\
             })();",
            vec![json!(server.base), json!(TOKEN)],
        )
        .await
        .unwrap();
    assert_eq!(refused[0], "blocked", "{refused}");
    assert_eq!(session_count(&server).await, before, "no session created");
    c.close_window().await.unwrap();
    c.switch_to_window(console).await.unwrap();

    // Restart on the same port with the same token: the page reconnects, shows what comes
    // next, and nothing twice.
    let dir = stop(server);
    until(
        &c,
        "the lost stream",
        "return document.querySelector('.conn')?.dataset.state !== 'live'",
    )
    .await;
    let server = serve_on(dir, &listen);
    assert_eq!(server.base, format!("http://{listen}"));
    server.task(&id, "after the restart").await;
    until(
        &c,
        "the answer after the restart",
        "return [...document.querySelectorAll('.transcript .kind-assistant')].some(e => e.innerText.includes('after restart'))",
    )
    .await;
    until(
        &c,
        "the live stream again",
        "return document.querySelector('.conn')?.dataset.state === 'live'",
    )
    .await;
    let users = texts(&c, "user").await;
    let prompts: Vec<&str> = users
        .iter()
        .map(|u| u.lines().last().unwrap_or_default())
        .collect();
    assert_eq!(
        prompts,
        [
            "show the payload",
            "wait for go",
            "run forever",
            "after the restart"
        ],
        "each prompt once, in order: {users:?}"
    );
    assert_eq!(texts(&c, "tool_call_output").await.len(), 3);
    assert_eq!(texts(&c, "tool_call").await.len(), 3);
    assert_eq!(texts(&c, "steer").await.len(), 1);
    let answers = texts(&c, "assistant").await;
    for a in ["payload shown", "steered answer", "after restart"] {
        assert_eq!(
            answers.iter().filter(|t| t.contains(a)).count(),
            1,
            "{a} once: {answers:?}"
        );
    }
    c.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_files_carry_security_headers_and_only_the_own_origin_passes() {
    let server = serve_on(sandbox(&json!({"turns": []})), "127.0.0.1:0");
    for (path, kind) in [
        ("/", "text/html"),
        ("/console/app.js", "text/javascript"),
        ("/console/style.css", "text/css"),
    ] {
        let r = server
            .client
            .get(format!("{}{path}", server.base))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK, "{path}");
        let h = r.headers();
        let csp = h["content-security-policy"].to_str().unwrap();
        assert!(
            csp.contains("default-src 'self'") && csp.contains("frame-ancestors 'none'"),
            "{csp}"
        );
        assert_eq!(h["x-content-type-options"], "nosniff");
        assert!(
            h["content-type"].to_str().unwrap().starts_with(kind),
            "{path}"
        );
    }
    let (s, _) = server
        .send(server.req(reqwest::Method::GET, "/console/nothing.js"))
        .await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    // The console's own origin passes without --allow-origin; another is refused, even with
    // the token, and a rebinding Host is refused before the Origin is looked at.
    let post = |origin: &str, host: Option<&str>| {
        let mut r = server
            .req(reqwest::Method::POST, "/v1/sessions")
            .header("origin", origin)
            .json(&json!({"workspace": server.ws()}));
        if let Some(h) = host {
            r = r.header("host", h);
        }
        r
    };
    let (s, v) = server.send(post(&server.base, None)).await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    let (s, v) = server.send(post("http://evil.example", None)).await;
    assert_eq!(s, StatusCode::FORBIDDEN, "{v}");
    assert_eq!(v["error"]["code"], "forbidden_origin");
    let port = server.base.rsplit(':').next().unwrap().to_string();
    let evil = format!("evil.example:{port}");
    let (s, v) = server
        .send(post(&format!("http://{evil}"), Some(&evil)))
        .await;
    assert_eq!(s, StatusCode::FORBIDDEN, "{v}");
    assert_eq!(v["error"]["code"], "forbidden_host");
    assert_eq!(session_count(&server).await, 1);
}

/// The sessions list of an admin on a server with several principals: each session's owner,
/// search and the status filter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_lists_every_principals_sessions_with_owner_search_and_filter() {
    use rookery::server::token_hash::TokenHash;
    let dir = sandbox(&json!({"turns": []}));
    let auth = dir.path().join("auth.yaml");
    std::fs::write(
        &auth,
        format!(
            "principals:\n  - name: alice\n    role: user\n    token_sha256: [\"{}\"]\n  - name: root\n    role: admin\n    token_sha256: [\"{}\"]\n",
            TokenHash::of("alice-secret-token"),
            TokenHash::of("root-secret-token")
        ),
    )
    .unwrap();
    let mut server = Server::start_with(dir, None, &["--auth", auth.to_str().unwrap()]);
    server.token = Some("alice-secret-token".into());
    let alices = server.create(None).await;
    server.token = Some("root-secret-token".into());
    let roots = server.create(None).await;
    let (_driver, c) = browser().await;
    c.goto(&format!("{}/", server.base)).await.unwrap();
    sign_in(&c, "root-secret-token").await;
    let rows = "return [...document.querySelectorAll('table.sessions tbody tr')]\
                .map(r => [...r.cells].map(td => td.innerText))";
    until(&c, "both sessions", &format!("{rows}.length === 2 || null")).await;
    let head: Value = c
        .execute(
            "return [...document.querySelectorAll('table.sessions th')].map(th => th.innerText)",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(
        head,
        json!([
            "Session",
            "Status",
            "Owner",
            "Workspace",
            "Last activity",
            "Approvals"
        ])
    );
    let listed: Vec<Vec<String>> =
        serde_json::from_value(c.execute(rows, vec![]).await.unwrap()).unwrap();
    let owner_of = |id: &str| {
        listed
            .iter()
            .find(|r| r[0] == id)
            .map(|r| (r[1].clone(), r[2].clone()))
    };
    assert_eq!(
        owner_of(&alices),
        Some(("idle".into(), "alice".into())),
        "{listed:?}"
    );
    assert_eq!(
        owner_of(&roots),
        Some(("idle".into(), "root".into())),
        "{listed:?}"
    );
    assert!(
        listed.iter().all(|r| !r[4].is_empty()),
        "last activity: {listed:?}"
    );
    let search = c
        .find(Locator::Css("input[aria-label='Search sessions']"))
        .await
        .unwrap();
    search.send_keys("alice").await.unwrap();
    let only = until(
        &c,
        "the search",
        &format!("const r = {}; return r.length === 1 ? r : null", &rows[7..]),
    )
    .await;
    assert_eq!(only[0][0], alices.as_str());
    search.clear().await.unwrap();
    c.find(Locator::Css("select[aria-label='Filter by status']"))
        .await
        .unwrap()
        .select_by_value("running")
        .await
        .unwrap();
    until(&c, "the filter", &format!("{rows}.length === 0")).await;
    c.close().await.unwrap();
}

/// A subagent's messages nested under the call that started it, a long output folded, and
/// Compact now with its compaction shown.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_nests_subagents_folds_long_outputs_and_compacts() {
    let dir = sandbox(&json!({
        "turns": [
            {"tool_calls": [{"name": "run_subagent", "arguments": {
                "description": "Helper", "prompt": "help me"}}]},
            {"tool_calls": [{"name": "exec_command", "arguments": {
                "description": "many lines", "cmd": "seq 1 60"}}]},
            {"text": "all done"},
            {"text": "the summary"}
        ],
        "children": [{"when_prompt_contains": "help me", "turns": [{"text": "child says hi"}]}]
    }));
    let server = serve_on(dir, "127.0.0.1:0");
    let id = server.create(Some("allow-all")).await;
    let (_driver, c) = browser().await;
    c.goto(&format!("{}/#/sessions/{id}", server.base))
        .await
        .unwrap();
    sign_in(&c, TOKEN).await;
    until(
        &c,
        "the live stream",
        "return document.querySelector('.conn')?.dataset.state === 'live'",
    )
    .await;
    compose(&c, "delegate", "Start task").await;
    until(
        &c,
        "the task's end",
        "return [...document.querySelectorAll('.transcript > .kind-task_end')].some(e => e.innerText.includes('completed'))",
    )
    .await;
    // The child's answer is inside the subagent box, which follows the run_subagent call (and
    // its approval decision).
    let nested = c
        .execute(
            "const box = document.querySelector('.transcript > details.subagent');\
             let call = box && box.previousElementSibling;\
             while (call && !call.classList.contains('kind-tool_call')) call = call.previousElementSibling;\
             return box && [!!call && call.innerText.includes('run_subagent'),\
               [...box.querySelectorAll('.kind-assistant')].map(e => e.innerText.includes('child says hi')),\
               [...document.querySelectorAll('.transcript > .kind-assistant')].some(e => e.innerText.includes('child says hi'))]",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(
        nested,
        json!([true, [true], false]),
        "nested under its call"
    );
    // The 60-line output is folded (closed until opened), the short ones are not.
    let folded = c
        .execute(
            "return [...document.querySelectorAll('.transcript .kind-tool_call_output')]\
               .map(e => { const d = e.querySelector('details.fold'); return d ? (d.open ? 'open' : 'folded') : 'plain'; })",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(folded, json!(["plain", "folded"]), "{folded}");
    button(&c, "Compact now").await.click().await.unwrap();
    until(
        &c,
        "the compaction",
        "return [...document.querySelectorAll('.transcript .kind-compaction')].some(e => e.innerText.includes('Compaction ended'))",
    )
    .await;
    c.close().await.unwrap();
}
