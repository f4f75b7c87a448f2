//! A throw-away Postgres for the store tests: `initdb` and `postgres` from Debian's
//! `postgresql` package into a temp dir, on a free loopback port, run as the `postgres` user
//! when the tests run as root (Postgres refuses root). The server gets SIGINT when the value is
//! dropped, and through `setpriv --pdeathsig INT` when the test process dies. A machine without
//! the package fails the test with the command that installs it; nothing is skipped.

use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a fresh cluster may take to accept connections on a loaded machine.
const READY_TIMEOUT: Duration = Duration::from_secs(60);

pub const INSTALL_HINT: &str = "the store tests need Postgres (Debian's `postgresql` package): \
     apt-get update && apt-get install -y postgresql";

/// A running throw-away Postgres.
pub struct TestPostgres {
    dir: tempfile::TempDir,
    bin: PathBuf,
    child: Option<Child>,
    pub port: u16,
}

/// `/usr/lib/postgresql/<newest major>/bin`, where Debian installs `initdb` and `postgres`.
fn bin_dir() -> PathBuf {
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let major = e.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").exists().then_some((major, bin))
        })
        .collect();
    found.sort();
    match found.pop() {
        Some((_, bin)) => bin,
        None => panic!("no initdb under /usr/lib/postgresql/*/bin: {INSTALL_HINT}"),
    }
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// `program` run as the `postgres` user when we are root.
fn as_postgres(program: &Path) -> Command {
    if is_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(program);
        c
    } else {
        Command::new(program)
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

impl TestPostgres {
    /// Creates and starts a cluster; returns once it accepts connections.
    pub fn start() -> TestPostgres {
        let bin = bin_dir();
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))
            .expect("chmod the temp dir");
        let data = dir.path().join("data");
        let sock = dir.path().join("sock");
        for d in [&data, &sock] {
            std::fs::create_dir(d).expect("mkdir");
            if is_root() {
                let ok = Command::new("chown")
                    .args(["postgres:postgres"])
                    .arg(d)
                    .status()
                    .expect("chown")
                    .success();
                assert!(ok, "chown postgres {}: {INSTALL_HINT}", d.display());
            }
        }
        let out = as_postgres(&bin.join("initdb"))
            .arg("-D")
            .arg(&data)
            .args(["-U", "rookery", "-A", "trust", "-E", "UTF8", "--locale=C"])
            .arg("--no-sync")
            .output()
            .unwrap_or_else(|e| panic!("cannot run initdb: {e}: {INSTALL_HINT}"));
        assert!(
            out.status.success(),
            "initdb failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut pg = TestPostgres {
            dir,
            bin,
            child: None,
            port: free_port(),
        };
        pg.launch();
        pg
    }

    /// Starts the server on the cluster (again, after [`Self::stop`]).
    pub fn launch(&mut self) {
        let data = self.dir.path().join("data");
        let sock = self.dir.path().join("sock");
        let mut cmd = Command::new("setpriv");
        cmd.args(["--pdeathsig", "INT", "--"]);
        if is_root() {
            cmd.args(["runuser", "-u", "postgres", "--"]);
        }
        let child = cmd
            .arg(self.bin.join("postgres"))
            .arg("-D")
            .arg(&data)
            .args(["-p", &self.port.to_string()])
            .arg("-k")
            .arg(&sock)
            .args(["-c", "listen_addresses=127.0.0.1", "-c", "fsync=off"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(self.dir.path().join("server.log")).expect("log"))
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start postgres: {e}: {INSTALL_HINT}"));
        self.child = Some(child);
        self.wait_ready();
    }

    fn wait_ready(&mut self) {
        let deadline = Instant::now() + READY_TIMEOUT;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        loop {
            let url = self.url();
            let ok = rt.block_on(async move {
                match tokio_postgres::connect(&url, tokio_postgres::NoTls).await {
                    Ok((client, conn)) => {
                        tokio::spawn(conn);
                        client.simple_query("SELECT 1").await.is_ok()
                    }
                    Err(_) => false,
                }
            });
            if ok {
                return;
            }
            if let Some(Ok(Some(status))) = self.child.as_mut().map(Child::try_wait) {
                panic!(
                    "postgres exited ({status}): {}",
                    std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
                );
            }
            assert!(
                Instant::now() < deadline,
                "postgres did not accept connections within {READY_TIMEOUT:?}: {}",
                std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The URL of the cluster's `postgres` database.
    pub fn url(&self) -> String {
        format!("postgres://rookery@127.0.0.1:{}/postgres", self.port)
    }

    /// Stops the server (fast shutdown) and waits for it; the cluster stays.
    pub fn stop(&mut self) {
        let data = self.dir.path().join("data");
        if let Ok(pid) = std::fs::read_to_string(data.join("postmaster.pid"))
            && let Some(pid) = pid
                .lines()
                .next()
                .and_then(|l| l.trim().parse::<i32>().ok())
        {
            // SAFETY: kill has no memory preconditions; the pid is our postmaster's.
            unsafe {
                libc::kill(pid, libc::SIGINT);
            }
        }
        if let Some(mut child) = self.child.take() {
            let _ = child.wait();
        }
    }

    /// Runs `sql` and returns the rows as text (for assertions).
    pub fn query(&self, sql: &str) -> Vec<Vec<Option<String>>> {
        let url = self.url();
        let sql = sql.to_string();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async move {
            let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                .await
                .expect("connect");
            tokio::spawn(conn);
            let messages = client.simple_query(&sql).await.expect("query");
            messages
                .into_iter()
                .filter_map(|m| match m {
                    tokio_postgres::SimpleQueryMessage::Row(r) => {
                        Some((0..r.len()).map(|i| r.get(i).map(str::to_string)).collect())
                    }
                    _ => None,
                })
                .collect()
        })
    }
}

impl Drop for TestPostgres {
    fn drop(&mut self) {
        self.stop();
    }
}
