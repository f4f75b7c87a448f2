//! The helpers of the web console's browser tests (`tests/suite/console_browser.rs`): a
//! chromedriver with a headless Chromium session (fantoccini), a `rookery serve` on a chosen
//! port with a fixed `--token-env` token (to restart it on the same port), and waits on
//! conditions in the page. A missing Chromium fails the test, saying how to install it.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};
use tempfile::TempDir;

use super::serve::{Server, WAIT};

/// How long a browser-side condition may take (a loaded 2-core machine, a browser starting).
pub const UI_WAIT: Duration = Duration::from_secs(60);
/// The bearer token of the servers these tests start (`--token-env`).
pub const TOKEN: &str = "console-test-token-0123456789abcdef0123456789";
/// How to get what the tests need, said by every failure to find it.
pub const INSTALL: &str = "apt-get install chromium chromium-driver";

/// The repository (where `target/` is).
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The first of `candidates` that exists, or a failure saying how to install it.
pub fn need(candidates: &[&str]) -> PathBuf {
    candidates
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!("{candidates:?} not found: the console tests need Chromium (run `{INSTALL}`)")
        })
}

/// A port nothing listens on now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A running chromedriver, killed on drop with the browser it started.
pub struct Driver {
    child: Child,
    /// The WebDriver URL.
    pub url: String,
    _profile: TempDir,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // A test that failed never closed its browser, and Chromium outlives a killed
        // chromedriver: end every process that runs with this test's profile or home.
        let mark = self._profile.path().to_string_lossy().into_owned();
        let Ok(procs) = std::fs::read_dir("/proc") else {
            return;
        };
        for entry in procs.flatten() {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
                continue;
            };
            let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
                continue;
            };
            if String::from_utf8_lossy(&cmdline).contains(&mark) {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
    }
}

/// Starts chromedriver and a headless Chromium session on it.
pub async fn browser() -> (Driver, Client) {
    let driver_bin = need(&["/usr/bin/chromedriver", "/usr/lib/chromium/chromedriver"]);
    let chromium = need(&["/usr/bin/chromium", "/usr/bin/chromium-browser"]);
    let profile = tempfile::tempdir().unwrap();
    let port = free_port();
    let child = Command::new(driver_bin)
        .arg(format!("--port={port}"))
        // Chromium's crash database and config go to the test's own directory.
        .env("HOME", profile.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start chromedriver ({e}); run `{INSTALL}`"));
    let driver = Driver {
        child,
        url: format!("http://127.0.0.1:{port}"),
        _profile: profile,
    };
    let http = reqwest::Client::new();
    let deadline = Instant::now() + UI_WAIT;
    loop {
        let ready = http.get(format!("{}/status", driver.url)).send().await;
        if let Ok(r) = ready
            && r.status().is_success()
        {
            break;
        }
        assert!(Instant::now() < deadline, "chromedriver never answered");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".into(),
        json!({
            "binary": chromium,
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1280,1000",
                     format!("--user-data-dir={}", driver._profile.path().display())],
        }),
    );
    let client = ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
        .capabilities(caps)
        .connect(&driver.url)
        .await
        .unwrap_or_else(|e| panic!("cannot open a Chromium session ({e}); run `{INSTALL}`"));
    (driver, client)
}

/// `rookery serve` on `listen` with the test token from `--token-env`.
pub fn serve_on(dir: TempDir, listen: &str) -> Server {
    Server::start_env(dir, Some(TOKEN), &["--listen", listen], None, &[])
}

/// Stops `server` with SIGTERM (its traces flushed) and hands back its directory.
pub fn stop(mut server: Server) -> TempDir {
    nix::sys::signal::kill(server.pid(), nix::sys::signal::Signal::SIGTERM).unwrap();
    let deadline = Instant::now() + WAIT;
    while server.child.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "the server did not stop");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::mem::replace(&mut server.dir, tempfile::tempdir().unwrap())
}

/// Runs `script` (a function body) in the page until it returns something other than
/// `null`/`false`; returns that.
pub async fn until(c: &Client, what: &str, script: &str) -> Value {
    let deadline = Instant::now() + UI_WAIT;
    loop {
        let v = c.execute(script, vec![]).await.unwrap();
        if !v.is_null() && v != Value::Bool(false) {
            return v;
        }
        if Instant::now() >= deadline {
            let text = c
                .execute("return document.body.innerText", vec![])
                .await
                .unwrap_or_default();
            panic!("the console never showed {what}; the page says:\n{text}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The texts of the transcript's messages of `kind` (`user`, `tool_call_output`, …).
pub fn texts_of(kind: &str) -> String {
    format!(
        "return [...document.querySelectorAll('.transcript .kind-{kind}')].map(e => e.innerText)"
    )
}

pub async fn texts(c: &Client, kind: &str) -> Vec<String> {
    let v = c.execute(&texts_of(kind), vec![]).await.unwrap();
    serde_json::from_value(v).unwrap()
}

pub async fn button(c: &Client, label: &str) -> fantoccini::elements::Element {
    c.wait()
        .at_most(UI_WAIT)
        .for_element(Locator::XPath(&format!(
            "//button[normalize-space()='{label}']"
        )))
        .await
        .unwrap_or_else(|e| panic!("no button {label}: {e}"))
}

/// Types `text` into the composer and presses `label` (Start task or Steer).
pub async fn compose(c: &Client, text: &str, label: &str) {
    let area = c
        .find(Locator::Css("textarea[aria-label='Task or steer text']"))
        .await
        .unwrap();
    area.clear().await.unwrap();
    area.send_keys(text).await.unwrap();
    button(c, label).await.click().await.unwrap();
    until(
        c,
        "the composer emptied",
        "return document.querySelector('textarea').value === ''",
    )
    .await;
}

/// Fills in the sign-in form with `token` and sends it.
pub async fn sign_in(c: &Client, token: &str) {
    c.wait()
        .at_most(UI_WAIT)
        .for_element(Locator::Id("token"))
        .await
        .unwrap_or_else(|e| panic!("no sign-in form ({e}): did the page's modules load?"))
        .send_keys(token)
        .await
        .unwrap();
    button(c, "Sign in").await.click().await.unwrap();
}
