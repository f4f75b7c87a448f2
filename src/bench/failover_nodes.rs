//! The `rookery serve` node processes of `rookery bench --failover N`: each started from this
//! program's own executable on a free loopback port with its own home, the store's URL, the
//! client token and the cluster secret in its environment (never on its command line, where
//! `ps` would show them), ready once it printed `listening on …` (it registered itself first).
//!
//! A node gets SIGKILL when this process dies (the parent-death signal) and when the set is
//! dropped, so no error path leaves one running; [`NodeSet::stop`] ends the live ones with
//! SIGTERM (their clean stop), then SIGKILL after a grace period, and reaps them all.
//!
//! It owns the processes only: what the nodes are asked and what is measured is `failover.rs`.

use std::io::{Read, Seek, SeekFrom};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::process::{Child, Command};

/// The variable that carries the client token to the nodes.
pub const TOKEN_ENV: &str = "ROOKERY_BENCH_TOKEN";
/// The variable that carries the cluster secret to the nodes.
pub const CLUSTER_TOKEN_ENV: &str = "ROOKERY_BENCH_CLUSTER_TOKEN";

/// How long a node may take to print its address.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a node may take to stop after SIGTERM before it gets SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(10);
/// The end of a node's stderr quoted when it fails.
const STDERR_TAIL: u64 = 4 << 10;

/// Why a node could not be started.
#[derive(Debug, thiserror::Error)]
pub enum NodeStartError {
    /// No free port, no directory, or the process could not be spawned.
    #[error("{what}: {source}")]
    Io {
        /// What failed.
        what: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The node ended or never printed its address.
    #[error("node {node} did not start: {why}{}", tail_text(.stderr_tail))]
    NotReady {
        /// The node's name.
        node: String,
        /// What happened.
        why: String,
        /// The end of its stderr.
        stderr_tail: String,
    },
}

fn tail_text(tail: &str) -> String {
    if tail.trim().is_empty() {
        "; it wrote nothing on stderr".to_string()
    } else {
        format!("; the end of its stderr:\n{}", tail.trim_end())
    }
}

/// What every node of the set shares.
#[derive(Debug, Clone)]
pub struct NodeSetup {
    /// The program to run (`rookery`).
    pub exe: PathBuf,
    /// The postgres store's URL (given in `$ROOKERY_STORE`).
    pub store_url: String,
    /// The scripted model's script.
    pub script: PathBuf,
    /// `$HOME` of the nodes (the sessions' shells read it): an empty directory.
    pub shell_home: PathBuf,
    /// Where each node's home and stderr go (`<dir>/<node>/`).
    pub dir: PathBuf,
    /// `--lease-ttl`, in seconds.
    pub lease_ttl_secs: u64,
    /// `--max-sessions`.
    pub max_sessions: usize,
    /// The client token.
    pub token: String,
    /// The cluster secret.
    pub cluster_token: String,
}

/// One running node.
#[derive(Debug)]
pub struct Node {
    /// Its `--node-id`.
    pub id: String,
    /// Its process id.
    pub pid: u32,
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    child: Child,
    stderr: PathBuf,
    /// Reaped already (killed with SIGKILL by the bench).
    reaped: bool,
}

impl Node {
    /// The last bytes of its stderr.
    pub fn stderr_tail(&self) -> String {
        read_tail(&self.stderr)
    }

    /// SIGKILL to the node's own pid, reaped; the instant comes from the caller.
    pub async fn kill9(&mut self) -> std::io::Result<()> {
        self.child.start_kill()?;
        self.child.wait().await?;
        self.reaped = true;
        Ok(())
    }
}

fn read_tail(path: &Path) -> String {
    let Ok(mut f) = std::fs::File::open(path) else {
        return String::new();
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let _ = f.seek(SeekFrom::Start(len.saturating_sub(STDERR_TAIL)));
    let mut buf = Vec::new();
    let _ = f.take(STDERR_TAIL).read_to_end(&mut buf);
    String::from_utf8_lossy(&buf).into_owned()
}

/// The nodes of one run, killed when dropped.
#[derive(Debug, Default)]
pub struct NodeSet {
    /// The nodes, in start order (`nodes[0]` is A).
    pub nodes: Vec<Node>,
}

fn free_port() -> std::io::Result<u16> {
    TcpListener::bind(("127.0.0.1", 0))?
        .local_addr()
        .map(|a| a.port())
}

impl NodeSet {
    /// Starts node `id` and waits for its address.
    pub async fn start(&mut self, setup: &NodeSetup, id: &str) -> Result<(), NodeStartError> {
        let io = |what: String| move |source| NodeStartError::Io { what, source };
        let dir = setup.dir.join(id);
        let home = dir.join("home");
        std::fs::create_dir_all(&home).map_err(io(format!("cannot create {}", home.display())))?;
        let stderr_path = dir.join("stderr.log");
        let stderr = std::fs::File::create(&stderr_path)
            .map_err(io(format!("cannot create {}", stderr_path.display())))?;
        let port = free_port().map_err(io("no free loopback port".to_string()))?;
        let base = format!("http://127.0.0.1:{port}");
        let mut cmd = Command::new(&setup.exe);
        cmd.arg("serve")
            .arg("--listen")
            .arg(format!("127.0.0.1:{port}"))
            .arg("--home")
            .arg(&home)
            .arg("--script")
            .arg(&setup.script)
            .arg("--sandbox")
            .arg("off")
            .arg("--node-id")
            .arg(id)
            .arg("--advertise")
            .arg(&base)
            .arg("--cluster-token-env")
            .arg(CLUSTER_TOKEN_ENV)
            .arg("--token-env")
            .arg(TOKEN_ENV)
            .arg("--lease-ttl")
            .arg(setup.lease_ttl_secs.to_string())
            .arg("--max-sessions")
            .arg(setup.max_sessions.to_string())
            .env("ROOKERY_STORE", &setup.store_url)
            .env(TOKEN_ENV, &setup.token)
            .env(CLUSTER_TOKEN_ENV, &setup.cluster_token)
            .env("HOME", &setup.shell_home)
            .env_remove("ROOKERY_HOME")
            .current_dir(&setup.shell_home)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .kill_on_drop(true);
        die_with_this_process(&mut cmd);
        let mut child = cmd.spawn().map_err(io(format!("cannot start node {id}")))?;
        let pid = child.id().unwrap_or(0);
        let stdout = child.stdout.take();
        let mut node = Node {
            id: id.to_string(),
            pid,
            base: base.clone(),
            child,
            stderr: stderr_path,
            reaped: false,
        };
        let not_ready = |node: &Node, why: String| NodeStartError::NotReady {
            node: node.id.clone(),
            why,
            stderr_tail: node.stderr_tail(),
        };
        let Some(stdout) = stdout else {
            return Err(not_ready(&node, "no stdout".to_string()));
        };
        let mut lines = BufReader::new(stdout);
        let mut first = String::new();
        let read = tokio::time::timeout(START_TIMEOUT, lines.read_line(&mut first)).await;
        let want = format!("listening on {base}");
        match read {
            Ok(Ok(n)) if n > 0 && first.trim() == want => {}
            Ok(Ok(0)) => {
                let status = node.child.wait().await;
                node.reaped = true;
                let status = status.map_or_else(|e| e.to_string(), |s| s.to_string());
                return Err(not_ready(&node, format!("it ended ({status})")));
            }
            Ok(Ok(_)) => {
                return Err(not_ready(
                    &node,
                    format!("it printed {:?}, not {want:?}", first.trim()),
                ));
            }
            Ok(Err(e)) => return Err(not_ready(&node, format!("cannot read its stdout: {e}"))),
            Err(_) => {
                return Err(not_ready(
                    &node,
                    format!("no address within {}s", START_TIMEOUT.as_secs()),
                ));
            }
        }
        // Whatever else it prints is read and dropped, so it never blocks on a full pipe.
        tokio::spawn(async move {
            let mut sink = [0u8; 4096];
            let mut out = lines.into_inner();
            while matches!(out.read(&mut sink).await, Ok(n) if n > 0) {}
        });
        self.nodes.push(node);
        Ok(())
    }

    /// Ends every live node: SIGTERM, then SIGKILL after the grace period; all reaped.
    pub async fn stop(&mut self) {
        for node in self.nodes.iter_mut().filter(|n| !n.reaped) {
            if let Ok(pid) = i32::try_from(node.pid)
                && pid > 0
            {
                // SAFETY: kill(2) on the pid of a child this set has not reaped yet (so the
                // pid is still ours, a zombie at worst).
                unsafe {
                    libc::kill(pid, libc::SIGTERM);
                }
            }
        }
        for node in self.nodes.iter_mut().filter(|n| !n.reaped) {
            if tokio::time::timeout(STOP_GRACE, node.child.wait())
                .await
                .is_err()
            {
                let _ = node.child.start_kill();
                let _ = node.child.wait().await;
            }
            node.reaped = true;
        }
    }
}

impl Drop for NodeSet {
    fn drop(&mut self) {
        for node in self.nodes.iter_mut().filter(|n| !n.reaped) {
            let _ = node.child.start_kill();
            let _ = node.child.try_wait();
        }
    }
}

/// SIGKILL to the child when this process dies, whatever the way.
fn die_with_this_process(cmd: &mut Command) {
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: the closure runs between fork and exec and makes only async-signal-safe raw
    // system calls (prctl, getppid); the errors it builds do not allocate.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            // This process may have died before prctl took effect.
            if libc::getppid() != parent {
                return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        });
    }
}
