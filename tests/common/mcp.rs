//! Shared helpers of the MCP tests: the reference server `@modelcontextprotocol/server-everything`
//! installed with npm into a cache directory (pinned version), a `rookery run` driven line by
//! line, and process checks. Every wait is bounded.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The pinned version of the reference server.
pub const EVERYTHING_VERSION: &str = "2026.8.31";

/// Where the reference server is installed: `$ROOKERY_MCP_TEST_CACHE`, else
/// `target/mcp-test-cache/`.
pub fn cache_dir() -> PathBuf {
    match std::env::var_os("ROOKERY_MCP_TEST_CACHE") {
        Some(d) => PathBuf::from(d),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("target/mcp-test-cache"),
    }
    .join(format!("server-everything-{EVERYTHING_VERSION}"))
}

fn have(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// `dist/index.js` of the reference server, installed on first use (`npm install --prefix`).
/// Without npm or node the test fails saying how to get them.
pub fn everything() -> PathBuf {
    static INSTALL: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    static LOCK: Mutex<()> = Mutex::new(());
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    INSTALL
        .get_or_init(|| {
            let dir = cache_dir();
            let index = dir.join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
            if !have("node") || !have("npm") {
                return Err(format!(
                    "the MCP tests need Node.js 20+ and npm (not found on PATH): install them \
                     (Debian/Ubuntu: `apt-get install nodejs npm`), then run `npm install --prefix {} \
                     @modelcontextprotocol/server-everything@{EVERYTHING_VERSION}` or just rerun the tests",
                    dir.display()
                ));
            }
            if index.is_file() {
                return Ok(index);
            }
            std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            let out = Command::new("npm")
                .args(["install", "--no-audit", "--no-fund", "--prefix"])
                .arg(&dir)
                .arg(format!("@modelcontextprotocol/server-everything@{EVERYTHING_VERSION}"))
                .stdin(Stdio::null())
                .output()
                .map_err(|e| format!("npm install: {e}"))?;
            if !out.status.success() || !index.is_file() {
                return Err(format!(
                    "npm install of @modelcontextprotocol/server-everything@{EVERYTHING_VERSION} into {} failed: {}",
                    dir.display(),
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
            Ok(index)
        })
        .clone()
        .unwrap_or_else(|e| panic!("{e}"))
}

/// The pinned version of `@modelcontextprotocol/server-memory`.
pub const MEMORY_VERSION: &str = "2026.8.31";

/// `dist/index.js` of `@modelcontextprotocol/server-memory`, installed on first use like
/// [`everything`] (into `server-memory-<version>` beside it).
pub fn memory() -> PathBuf {
    static INSTALL: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    INSTALL
        .get_or_init(|| {
            let pkg = format!("@modelcontextprotocol/server-memory@{MEMORY_VERSION}");
            let dir = cache_dir().with_file_name(format!("server-memory-{MEMORY_VERSION}"));
            let index = dir.join("node_modules/@modelcontextprotocol/server-memory/dist/index.js");
            if index.is_file() {
                return Ok(index);
            }
            if !have("node") || !have("npm") {
                return Err(format!(
                    "the MCP tests need Node.js 20+ and npm (not found on PATH): install them, \
                     then run `npm install --prefix {} {pkg}` or just rerun the tests",
                    dir.display()
                ));
            }
            std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            let out = Command::new("npm")
                .args(["install", "--no-audit", "--no-fund", "--prefix"])
                .arg(&dir)
                .arg(&pkg)
                .stdin(Stdio::null())
                .output()
                .map_err(|e| format!("npm install: {e}"))?;
            if !out.status.success() || !index.is_file() {
                return Err(format!(
                    "npm install of {pkg} into {} failed: {}",
                    dir.display(),
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
            Ok(index)
        })
        .clone()
        .unwrap_or_else(|e| panic!("{e}"))
}

/// A temp workspace, home and `$HOME` for one run.
pub struct Sandbox {
    pub dir: tempfile::TempDir,
}

impl Sandbox {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        for d in ["ws", "home", "userhome"] {
            std::fs::create_dir_all(dir.path().join(d)).expect("mkdir");
        }
        Sandbox { dir }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    pub fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.path(name);
        std::fs::write(&p, text).expect("write");
        p
    }

    /// Starts `rookery run --json` with `--script script --mcp-config mcp` (plus `extra`).
    pub fn start(&self, script: &Value, mcp: &Value, extra: &[&str]) -> Run {
        let script = self.write("script.json", &script.to_string());
        let mcp = self.write("mcp.json", &mcp.to_string());
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_rookery"));
        // A user config of the real $HOME must not change the test.
        cmd.env("ROOKERY_NO_CONFIG", "1");
        cmd.arg("run")
            .arg("--workspace")
            .arg(self.path("ws"))
            .arg("--home")
            .arg(self.path("home"))
            .arg("--script")
            .arg(&script)
            .arg("--mcp-config")
            .arg(&mcp)
            .args(extra)
            .args(["--json", "go"])
            .env("HOME", self.path("userhome"))
            .env("RUST_LOG", "rookery=info")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn rookery");
        let (tx, rx) = channel();
        let stdout = child.stdout.take().expect("stdout");
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Ok(v) = serde_json::from_str::<Value>(&line)
                    && tx.send(v).is_err()
                {
                    return;
                }
            }
        });
        let stderr = child.stderr.take().expect("stderr");
        let err_text = std::sync::Arc::new(Mutex::new(String::new()));
        let sink = err_text.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Ok(mut s) = sink.lock() {
                    s.push_str(&line);
                    s.push('\n');
                }
            }
        });
        Run {
            child,
            rx,
            seen: Vec::new(),
            stderr: err_text,
        }
    }
}

/// A running `rookery run --json`.
pub struct Run {
    pub child: Child,
    rx: Receiver<Value>,
    pub seen: Vec<Value>,
    stderr: std::sync::Arc<Mutex<String>>,
}

/// The inner payload of a line.
pub fn payload(v: &Value) -> &Value {
    &v["payload"]
}

pub fn kind(v: &Value) -> &str {
    payload(v)["type"].as_str().unwrap_or("")
}

impl Run {
    pub fn stderr(&self) -> String {
        self.stderr.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// Waits (up to `secs`) for a line matching `pred`; returns it.
    pub fn wait_for(&mut self, secs: u64, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        if let Some(v) = self.seen.iter().find(|v| pred(v)) {
            return v.clone();
        }
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(v) => {
                    self.seen.push(v.clone());
                    if pred(&v) {
                        return v;
                    }
                }
                Err(RecvTimeoutError::Timeout) | Err(RecvTimeoutError::Disconnected) => panic!(
                    "no {what} within {secs}s; lines: {:#?}\nstderr: {}",
                    self.seen
                        .iter()
                        .map(|v| payload(v).clone())
                        .collect::<Vec<_>>(),
                    self.stderr()
                ),
            }
        }
    }

    /// The output of call `id` (waits for it).
    pub fn output(&mut self, id: &str) -> (String, String) {
        let v = self.wait_for(60, &format!("output of {id}"), |v| {
            kind(v) == "tool_call_output" && payload(v)["tool_call_id"] == id
        });
        (
            payload(&v)["output"].as_str().unwrap_or("").to_string(),
            payload(&v)["stop_reason"]
                .as_str()
                .unwrap_or("")
                .to_string(),
        )
    }

    /// Waits for the process to exit; returns its code and every line.
    pub fn finish(mut self) -> (i32, Vec<Value>) {
        self.wait_for(120, "task_end", |v| kind(v) == "task_end");
        let deadline = Instant::now() + Duration::from_secs(60);
        let code = loop {
            if let Some(s) = self.child.try_wait().expect("wait") {
                break s.code().unwrap_or(-1);
            }
            assert!(Instant::now() < deadline, "rookery did not exit");
            std::thread::sleep(Duration::from_millis(50));
        };
        while let Ok(v) = self.rx.recv_timeout(Duration::from_millis(500)) {
            self.seen.push(v);
        }
        (code, std::mem::take(&mut self.seen))
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Lines of one `type`.
pub fn of_kind<'a>(lines: &'a [Value], k: &str) -> Vec<&'a Value> {
    lines.iter().filter(|v| kind(v) == k).collect()
}

/// True while `pid` exists and is not a zombie.
pub fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with('Z')),
        Err(_) => false,
    }
}

/// Polls `cond` every 50 ms for up to `secs`.
pub fn eventually(secs: u64, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The pids a `pids` file lists (one per line, appended by each server start).
pub fn pids(file: &Path) -> Vec<i32> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

/// A free loopback port (bound, then released).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

pub fn kill9(pid: i32) {
    let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
}

/// A `tools/call` answer of the test MCP servers built with rmcp, from its JSON.
pub fn call_result(v: Value) -> Result<rmcp::model::CallToolResponse, rmcp::ErrorData> {
    serde_json::from_value::<rmcp::model::CallToolResult>(v)
        .map(Into::into)
        .map_err(|e| rmcp::ErrorData::internal_error(e.to_string(), None))
}
