//! The harness of `tests/serve.rs`: a `rookery serve` child process in a temporary sandbox
//! (home, workspace, `$HOME`, script), an HTTP client with the server's token, SSE reading up
//! to a task's end, and trace helpers. Every wait is bounded.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use eventsource_stream::Eventsource;
use futures::StreamExt;
use reqwest::StatusCode;
use rookery::message::{EventPayload, OmniMessage};
use serde_json::{Value, json};
use tempfile::TempDir;

pub const BIN: &str = env!("CARGO_BIN_EXE_rookery");
pub const WAIT: Duration = Duration::from_secs(20);

pub struct Server {
    pub child: Child,
    pub _stdout: BufReader<ChildStdout>,
    pub base: String,
    pub client: reqwest::Client,
    pub dir: TempDir,
    pub token: Option<String>,
}

pub fn sandbox(script: &Value) -> TempDir {
    let dir = tempfile::tempdir().unwrap();
    for sub in ["ws", "home", "user-home"] {
        std::fs::create_dir(dir.path().join(sub)).unwrap();
    }
    std::fs::write(dir.path().join("ws/a.txt"), "alpha\n").unwrap();
    std::fs::write(dir.path().join("ws/b.txt"), "beta\n").unwrap();
    std::fs::write(dir.path().join("script.json"), script.to_string()).unwrap();
    dir
}

pub fn command(dir: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(BIN);
    c.args(args);
    // `serve` sandboxes its sessions by default; these servers run theirs unsandboxed unless a
    // test names a mode (tests/suite/sandbox_sessions.rs does).
    if args.first() == Some(&"serve") && !args.contains(&"--sandbox") {
        c.args(["--sandbox", "off"]);
    }
    c.env("HOME", dir.join("user-home"))
        .env_remove("ROOKERY_HOME")
        .env_remove("RUST_LOG")
        .current_dir(dir.join("ws"))
        .stdin(Stdio::null());
    c
}

impl Server {
    pub fn start(script: &Value) -> Server {
        Self::start_in(sandbox(script), None)
    }

    pub fn start_in(dir: TempDir, token: Option<&str>) -> Server {
        Self::start_with(dir, token, &[])
    }

    /// Starts `rookery serve` with `extra` flags. Without `token` the server generates one and
    /// the client reads it from `<home>/serve.token` (unless `--no-auth` is among `extra`).
    pub fn start_with(dir: TempDir, token: Option<&str>, extra: &[&str]) -> Server {
        Self::start_limited(dir, token, extra, None)
    }

    /// Like `start_with`; with `nofile`, the server runs under `ulimit -n <nofile>` (soft and
    /// hard).
    pub fn start_limited(
        dir: TempDir,
        token: Option<&str>,
        extra: &[&str],
        nofile: Option<u64>,
    ) -> Server {
        Self::start_env(dir, token, extra, nofile, &[])
    }

    /// Like `start_limited`, with the variables `env` set for the server. `--listen ADDR` in
    /// `extra` replaces the default free port.
    pub fn start_env(
        dir: TempDir,
        token: Option<&str>,
        extra: &[&str],
        nofile: Option<u64>,
        env: &[(&str, &str)],
    ) -> Server {
        let p = dir.path();
        let home = p.join("home");
        let script = p.join("script.json");
        let mut args = vec![
            "serve",
            "--home",
            home.to_str().unwrap(),
            "--script",
            script.to_str().unwrap(),
        ];
        // A free port unless `extra` names the address (a restart on the same port).
        if !extra.contains(&"--listen") {
            args.extend(["--listen", "127.0.0.1:0"]);
        }
        if token.is_some() {
            args.extend(["--token-env", "TEST_ROOKERY_TOKEN"]);
        }
        args.extend(extra);
        if !args.contains(&"--sandbox") {
            args.extend(["--sandbox", "off"]);
        }
        let mut c = command(p, &args);
        if let Some(n) = nofile {
            let mut wrapped = Command::new("bash");
            wrapped
                .arg("-c")
                .arg(format!("ulimit -n {n} && exec \"$0\" \"$@\""))
                .arg(BIN)
                .args(&args)
                .env("HOME", p.join("user-home"))
                .env_remove("ROOKERY_HOME")
                .env_remove("RUST_LOG")
                .current_dir(p.join("ws"))
                .stdin(Stdio::null());
            c = wrapped;
        }
        if let Some(t) = token {
            c.env("TEST_ROOKERY_TOKEN", t);
        }
        c.envs(env.iter().copied());
        let stderr = std::fs::File::create(p.join("stderr.txt")).unwrap();
        let mut child = c
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("spawn rookery serve");
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).expect("first stdout line");
        let base = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
            .to_string();
        assert!(base.starts_with("http://127.0.0.1:"), "{base}");
        let token = match token {
            Some(t) => Some(t.to_string()),
            None if extra.contains(&"--no-auth") || extra.contains(&"--auth") => None,
            None => Some(read_token_file(&home)),
        };
        Server {
            child,
            _stdout: stdout,
            base,
            client: reqwest::Client::new(),
            dir,
            token,
        }
    }

    pub fn ws(&self) -> PathBuf {
        self.dir.path().join("ws")
    }

    pub fn req(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let r = self.client.request(method, format!("{}{path}", self.base));
        match &self.token {
            Some(t) => r.bearer_auth(t),
            None => r,
        }
    }

    pub async fn send(&self, r: reqwest::RequestBuilder) -> (StatusCode, Value) {
        let resp = tokio::time::timeout(WAIT, r.send())
            .await
            .expect("response in time")
            .expect("request");
        let status = resp.status();
        let text = resp.text().await.unwrap();
        let body = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        };
        (status, body)
    }

    pub async fn call(&self, method: &str, path: &str, body: Option<Value>) -> (StatusCode, Value) {
        let mut r = self.req(method.parse().unwrap(), path);
        if let Some(b) = body {
            r = r.json(&b);
        }
        self.send(r).await
    }

    /// The listed entry of session `id` once its status is `want` (polled until [`WAIT`]).
    pub async fn wait_listed(&self, id: &str, want: &str) -> Value {
        let deadline = Instant::now() + WAIT;
        loop {
            let (_, v) = self.call("GET", "/v1/sessions", None).await;
            if let Some(e) = v["sessions"]
                .as_array()
                .unwrap()
                .iter()
                .find(|e| e["session_id"] == id && e["status"] == want)
            {
                return e.clone();
            }
            assert!(Instant::now() < deadline, "{id} never became {want}: {v}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The text of `GET /metrics`.
    pub async fn metrics_text(&self) -> String {
        let resp = self.req(reqwest::Method::GET, "/metrics").send().await;
        resp.unwrap().text().await.unwrap()
    }

    /// The value of the metric line `series N` (`series` with its labels, if any).
    pub async fn metric(&self, series: &str) -> u64 {
        let text = self.metrics_text().await;
        text.lines()
            .find_map(|l| {
                l.strip_prefix(series)?
                    .strip_prefix(' ')?
                    .trim()
                    .parse()
                    .ok()
            })
            .unwrap_or_else(|| panic!("no {series} in\n{text}"))
    }

    pub async fn create(&self, mode: Option<&str>) -> String {
        let mut body = json!({"workspace": self.ws()});
        if let Some(m) = mode {
            body["approval_mode"] = json!(m);
        }
        let (status, v) = self.call("POST", "/v1/sessions", Some(body)).await;
        assert_eq!(status, StatusCode::CREATED, "{v}");
        v["session_id"].as_str().unwrap().to_string()
    }

    /// Starts a task; returns the last event id before it.
    pub async fn task(&self, id: &str, text: &str) -> u64 {
        let (status, v) = self
            .call(
                "POST",
                &format!("/v1/sessions/{id}/tasks"),
                Some(json!({"text": text})),
            )
            .await;
        assert_eq!(status, StatusCode::ACCEPTED, "{v}");
        v["events_after"].as_u64().unwrap()
    }

    /// The event stream of session `id` from `Last-Event-ID: after` (200, `text/event-stream`).
    pub async fn events_from(&self, id: &str, after: u64) -> reqwest::Response {
        let resp = self
            .req(reqwest::Method::GET, &format!("/v1/sessions/{id}/events"))
            .header("Last-Event-ID", after.to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::OK);
        assert_eq!(resp.headers()["content-type"], "text/event-stream");
        resp
    }

    /// Events `(id, message)` after `after`, up to and including the session's own `task_end`.
    pub async fn events_until_task_end(&self, id: &str, after: u64) -> Vec<(u64, Value)> {
        let resp = self.events_from(id, after).await;
        read_events(resp, |_, v| {
            v["payload"]["type"] == "task_end" && v.get("origin").is_none()
        })
        .await
        .into_iter()
        // An event without its own id (a partial, on the store) carries the last one over.
        .scan(after, |last, (id, v)| {
            *last = id.unwrap_or(*last);
            Some((*last, v))
        })
        .collect()
    }

    pub async fn status_of(&self, id: &str) -> String {
        let (s, v) = self.call("GET", &format!("/v1/sessions/{id}"), None).await;
        assert_eq!(s, StatusCode::OK, "{v}");
        v["status"].as_str().unwrap().to_string()
    }

    pub async fn wait_pending(&self, id: &str, n: usize) -> Vec<Value> {
        let deadline = Instant::now() + WAIT;
        loop {
            let (_, v) = self
                .call("GET", &format!("/v1/sessions/{id}/approvals"), None)
                .await;
            let list = v["approvals"].as_array().unwrap().clone();
            if list.len() >= n {
                return list;
            }
            assert!(Instant::now() < deadline, "approvals never reached {n}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub fn trace(&self, id: &str) -> PathBuf {
        rookery::trace::paths::locate_trace(&self.dir.path().join("home"), id).expect("trace")
    }

    pub fn pid(&self) -> nix::unistd::Pid {
        nix::unistd::Pid::from_raw(self.child.id() as i32)
    }

    /// `kill -9`s the server and hands back its directory.
    pub fn kill9(mut self) -> TempDir {
        nix::sys::signal::kill(self.pid(), nix::sys::signal::Signal::SIGKILL).unwrap();
        let _ = self.child.wait();
        std::mem::replace(&mut self.dir, tempfile::tempdir().unwrap())
    }

    pub fn stderr(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("stderr.txt")).unwrap_or_default()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The generated token of a server started with `home` (the file is written before the
/// server prints its address).
pub fn read_token_file(home: &Path) -> String {
    let text = std::fs::read_to_string(home.join("serve.token")).expect("serve.token");
    let token = text.trim().to_string();
    assert!(token.len() >= 32, "token too short: {} chars", token.len());
    token
}

pub fn payload_type(v: &Value) -> String {
    v["payload"]["type"]
        .as_str()
        .unwrap_or(v["type"].as_str().unwrap_or("?"))
        .to_string()
}

/// The trace's records once it ends with `task_end` (the writer is asynchronous). A torn tail
/// is a write in progress, seen by this reader while the file grows: read again. A malformed
/// line before the tail is a defect.
pub async fn settled_trace(path: &Path) -> Vec<OmniMessage> {
    let deadline = Instant::now() + WAIT;
    loop {
        let read = rookery::trace::reader::read_trace(path).unwrap();
        assert!(read.skipped_lines.is_empty(), "{path:?}");
        if !read.torn_tail
            && matches!(
                read.records.last().and_then(|r| r.as_event()),
                Some(EventPayload::TaskEnd { .. })
            )
        {
            return read.records;
        }
        assert!(
            Instant::now() < deadline,
            "trace never ended whole (torn tail: {}): {path:?}",
            read.torn_tail
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub fn tool_then_text() -> Value {
    json!({"turns": [
        {"text": "reading", "delay_ms": 50,
         "tool_calls": [{"name": "read_file", "arguments": {"file_path": "a.txt"}}]},
        {"text": "done"}
    ]})
}

/// The texts of the context a resume of the trace at `path` rebuilds, in order.
pub fn context_texts(path: &Path) -> Vec<String> {
    rookery::trace::resume::resume_from_file(path)
        .unwrap()
        .history
        .iter()
        .filter_map(|m| match m {
            rookery::message::ModelPayload::Text { text, .. } => Some(text.clone()),
            _ => None,
        })
        .collect()
}

/// Runs task `text` in session `id` to its end, its trace settled.
pub async fn run_settled(server: &Server, id: &str, text: &str) {
    let after = server.task(id, text).await;
    server.events_until_task_end(id, after).await;
    settled_trace(&server.trace(id)).await;
}

/// Reads the SSE stream `resp` until `last` says an event (its id, `None` when it has none, and
/// its message) is the last one; fails when that takes longer than [`WAIT`].
pub async fn read_events(
    resp: reqwest::Response,
    mut last: impl FnMut(Option<u64>, &Value) -> bool,
) -> Vec<(Option<u64>, Value)> {
    let mut stream = resp.bytes_stream().eventsource();
    let mut out = Vec::new();
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let ev = tokio::time::timeout_at(deadline, stream.next())
            .await
            .unwrap_or_else(|_| panic!("the last event never came: {out:#?}"))
            .expect("stream open")
            .expect("valid SSE");
        let v: Value = serde_json::from_str(&ev.data).unwrap();
        let id = ev.id.parse().ok();
        let end = last(id, &v);
        out.push((id, v));
        if end {
            return out;
        }
    }
}
