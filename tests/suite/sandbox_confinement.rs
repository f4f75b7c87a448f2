//! The kernel confinement of a sandboxed command, through the real spawn path
//! (`rookery::process::spawn_process` with a prepared `Confinement`) and real processes: writes
//! outside the writable roots, the hidden secrets, `/proc` of outside processes, the network,
//! signals and escape attempts all fail; ordinary work still runs. Each refusal is checked by
//! its outcome (the file is not there, the listener saw nothing, the process still lives), and
//! where it matters the same command is first shown to work without the sandbox.

use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rookery::process::{ProcessIo, SpawnSpec, spawn_process};
use rookery::sandbox::{Confinement, NetworkAccess, SandboxLayout, SandboxMode};
use tokio::io::AsyncReadExt;

const KEY: &str = "SECRET-SSH-KEY-7d1c";
const TOKEN: &str = "SECRET-SERVE-TOKEN-93ab";

/// A workspace, a fake HOME with `.ssh/id_rsa`, a fake rookery home with `serve.token`, the
/// session's temp dir and a file outside all of them, under one temp root.
struct Fixture {
    _root: tempfile::TempDir,
    root: PathBuf,
    ws: PathBuf,
    home: PathBuf,
    rookery_home: PathBuf,
    tmpdir: PathBuf,
    outside: PathBuf,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let ws = root.join("ws");
    let home = root.join("home");
    let rookery_home = root.join("rookery-home");
    let tmpdir = root.join("tmp");
    for d in [&ws, &home.join(".ssh"), &rookery_home, &tmpdir] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(home.join(".ssh/id_rsa"), KEY).unwrap();
    std::fs::write(rookery_home.join("serve.token"), TOKEN).unwrap();
    let outside = root.join("outside.txt");
    std::fs::write(&outside, "outside").unwrap();
    Fixture {
        _root: dir,
        root,
        ws,
        home,
        rookery_home,
        tmpdir,
        outside,
    }
}

fn confine(f: &Fixture, mode: SandboxMode, network: NetworkAccess) -> Arc<Confinement> {
    let mut writable = vec![f.tmpdir.clone()];
    if mode == SandboxMode::WorkspaceWrite {
        writable.push(f.ws.clone());
    }
    let layout = SandboxLayout {
        mode,
        network,
        workspace: f.ws.clone(),
        tmpdir: f.tmpdir.clone(),
        writable,
        deny_read: vec![f.home.join(".ssh"), f.rookery_home.clone()],
    };
    Arc::new(Confinement::prepare(layout).unwrap())
}

/// What a finished command did.
#[derive(Debug)]
struct Ran {
    code: Option<i32>,
    signal: Option<i32>,
    out: String,
}

fn spec(f: &Fixture, cmd: &str, sandbox: Option<&Arc<Confinement>>) -> SpawnSpec {
    SpawnSpec {
        cmd: cmd.to_string(),
        cwd: f.ws.clone(),
        tty: false,
        env: vec![("HOME".into(), f.home.display().to_string())],
        env_policy: Default::default(),
        sandbox: sandbox.cloned(),
    }
}

/// Runs `cmd` in the workspace (sandboxed with `sandbox`), stdout and stderr together.
async fn run(f: &Fixture, cmd: &str, sandbox: Option<&Arc<Confinement>>) -> Ran {
    let spawned = spawn_process(&spec(f, cmd, sandbox)).await.unwrap();
    let mut child = spawned.child;
    let (mut stdout, mut stderr) = match spawned.io {
        ProcessIo::Pipes { stdout, stderr, .. } => (stdout, stderr),
        ProcessIo::Pty { .. } => unreachable!(),
    };
    let (mut a, mut b) = (Vec::new(), Vec::new());
    let read = async {
        let (x, y) = tokio::join!(stdout.read_to_end(&mut a), stderr.read_to_end(&mut b));
        x.unwrap();
        y.unwrap();
    };
    tokio::time::timeout(Duration::from_secs(60), read)
        .await
        .expect("the command's output ends");
    let status = tokio::time::timeout(Duration::from_secs(60), child.wait())
        .await
        .unwrap()
        .unwrap();
    spawned.group.0.mark_reaped();
    a.extend_from_slice(&b);
    Ran {
        code: status.code(),
        signal: status.signal(),
        out: String::from_utf8_lossy(&a).into_owned(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workspace_write_writes_only_the_workspace_and_tmpdir() {
    let f = fixture();
    let conf = confine(&f, SandboxMode::WorkspaceWrite, NetworkAccess::Off);
    let out = f.root.join("escaped.txt");
    let in_home = f.home.join("planted");
    let cmd = format!(
        "echo in > inside.txt; echo t > \"$TMPDIR/t\"; echo out > {}; echo h > {}; \
         mkdir -p sub && echo deep > sub/x; echo done",
        out.display(),
        in_home.display()
    );
    let ran = run(&f, &cmd, Some(&conf)).await;
    assert!(ran.out.contains("done"), "{ran:?}");
    assert_eq!(
        std::fs::read_to_string(f.ws.join("inside.txt")).unwrap(),
        "in\n"
    );
    assert_eq!(
        std::fs::read_to_string(f.ws.join("sub/x")).unwrap(),
        "deep\n"
    );
    assert_eq!(std::fs::read_to_string(f.tmpdir.join("t")).unwrap(), "t\n");
    assert!(!out.exists(), "a write outside the workspace went through");
    assert!(!in_home.exists(), "a write into HOME went through");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_writes_only_tmpdir() {
    let f = fixture();
    let conf = confine(&f, SandboxMode::ReadOnly, NetworkAccess::Off);
    let ran = run(
        &f,
        "echo t > \"$TMPDIR/t\"; echo in > inside.txt; cat /etc/hostname >/dev/null && echo read",
        Some(&conf),
    )
    .await;
    assert!(ran.out.contains("read"), "{ran:?}");
    assert_eq!(std::fs::read_to_string(f.tmpdir.join("t")).unwrap(), "t\n");
    assert!(!f.ws.join("inside.txt").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_under_deny_read_are_hidden() {
    let f = fixture();
    let cmd = format!(
        "cat ~/.ssh/id_rsa; cat {}/serve.token; ls -a {} ~/.ssh | grep -q id_rsa && echo listed",
        f.rookery_home.display(),
        f.rookery_home.display()
    );
    let open = run(&f, &cmd, None).await;
    assert!(
        open.out.contains(KEY) && open.out.contains(TOKEN),
        "{open:?}"
    );
    for mode in [SandboxMode::ReadOnly, SandboxMode::WorkspaceWrite] {
        let conf = confine(&f, mode, NetworkAccess::On);
        let ran = run(&f, &cmd, Some(&conf)).await;
        assert!(!ran.out.contains(KEY), "{mode}: {ran:?}");
        assert!(!ran.out.contains(TOKEN), "{mode}: {ran:?}");
        assert!(!ran.out.contains("listed"), "{mode}: {ran:?}");
        assert_ne!(ran.code, Some(0), "{mode}: {ran:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proc_of_outside_processes_is_out_of_reach() {
    let f = fixture();
    let me = std::process::id();
    let cmd = format!(
        "cat /proc/$PPID/environ >/dev/null && echo ppid-environ; \
         cat /proc/{me}/environ >/dev/null && echo my-environ; \
         cat /proc/{me}/cmdline >/dev/null && echo my-cmdline; \
         cat /proc/1/cmdline >/dev/null && echo init-cmdline; \
         cat /proc/1/environ >/dev/null && echo init-environ; \
         echo count=$(ls /proc | grep -c '^[0-9]')"
    );
    let open = run(&f, &cmd, None).await;
    assert!(
        open.out.contains("my-environ") && open.out.contains("my-cmdline"),
        "{open:?}"
    );
    let conf = confine(&f, SandboxMode::WorkspaceWrite, NetworkAccess::Off);
    let ran = run(&f, &cmd, Some(&conf)).await;
    // The init shares rookery's memory: its command line and environment are rookery's.
    for leak in [
        "ppid-environ",
        "my-environ",
        "my-cmdline",
        "init-cmdline",
        "init-environ",
    ] {
        assert!(!ran.out.contains(leak), "{leak}: {ran:?}");
    }
    // Only the command's own processes (bash, ls, grep; the init is hidden).
    let count = ran.out.split("count=").nth(1).unwrap();
    let count: usize = count.lines().next().unwrap().trim().parse().unwrap();
    assert!(count <= 5, "{ran:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn network_off_refuses_tcp_and_host_unix_sockets() {
    let f = fixture();
    let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    tcp.set_nonblocking(true).unwrap();
    let port = tcp.local_addr().unwrap().port();
    let sock = f.root.join("host.sock");
    let unix = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    unix.set_nonblocking(true).unwrap();
    let cmd = format!(
        "(exec 3<>/dev/tcp/127.0.0.1/{port}) && echo tcp-connected; \
         python3 -c 'import socket; s=socket.socket(socket.AF_UNIX); s.connect(\"{}\"); print(\"unix-connected\")'; \
         python3 -c 'import socket; a,b=socket.socketpair(); a.send(b\"p\"); print(\"pair\", b.recv(1))'; \
         python3 -c 'import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM); print(\"udp-socket\")'",
        sock.display()
    );
    let conf = confine(&f, SandboxMode::WorkspaceWrite, NetworkAccess::Off);
    let ran = run(&f, &cmd, Some(&conf)).await;
    assert!(!ran.out.contains("tcp-connected"), "{ran:?}");
    assert!(!ran.out.contains("unix-connected"), "{ran:?}");
    assert!(!ran.out.contains("udp-socket"), "{ran:?}");
    assert!(
        ran.out.contains("pair b'p'"),
        "socketpair must keep working: {ran:?}"
    );
    assert_eq!(
        tcp.accept().unwrap_err().kind(),
        std::io::ErrorKind::WouldBlock,
        "the TCP listener saw a connection"
    );
    assert_eq!(
        unix.accept().unwrap_err().kind(),
        std::io::ErrorKind::WouldBlock,
        "the unix listener saw a connection"
    );

    let conf = confine(&f, SandboxMode::WorkspaceWrite, NetworkAccess::On);
    let ran = run(&f, &cmd, Some(&conf)).await;
    assert!(ran.out.contains("tcp-connected"), "{ran:?}");
    assert!(ran.out.contains("unix-connected"), "{ran:?}");
    assert!(
        tcp.accept().is_ok(),
        "network on: the TCP listener saw nothing"
    );
    assert!(
        unix.accept().is_ok(),
        "network on: the unix listener saw nothing"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outside_processes_cannot_be_signalled() {
    let f = fixture();
    let mut victim = std::process::Command::new("sleep")
        .arg("120")
        .spawn()
        .unwrap();
    let pid = victim.id();
    let open = run(&f, &format!("kill -0 {pid} && echo reachable"), None).await;
    assert!(open.out.contains("reachable"), "{open:?}");
    let conf = confine(&f, SandboxMode::WorkspaceWrite, NetworkAccess::On);
    let cmd = format!(
        "kill -TERM {pid}; kill -KILL {pid}; bash -c 'sh -c \"kill -KILL {pid}\"'; \
         kill -KILL {me}; echo tried",
        me = std::process::id()
    );
    let ran = run(&f, &cmd, Some(&conf)).await;
    assert!(ran.out.contains("tried"), "{ran:?}");
    assert!(
        victim.try_wait().unwrap().is_none(),
        "the outside process was killed"
    );
    victim.kill().unwrap();
    victim.wait().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sandbox_cannot_be_undone() {
    let f = fixture();
    let traceme = "python3 -c 'import ctypes,sys; l=ctypes.CDLL(None, use_errno=True); \
                   sys.exit(0 if l.ptrace(0,0,0,0)==0 else 1)' && echo traced";
    let cmd = format!(
        "unshare -r true && echo unshared; unshare -m true && echo unshared-m; \
         nsenter -t 1 -m true && echo entered; \
         mkdir -p \"$TMPDIR/m\"; mount -t tmpfs none \"$TMPDIR/m\" && echo mounted; \
         {traceme}; sleep 30 & gdb -batch -p $! 2>&1 | grep -q 'Attaching to process' && \
         ! gdb -batch -p $! 2>&1 | grep -qi 'not permitted' && echo gdb-attached; kill $!; \
         echo end"
    );
    let open = run(&f, traceme, None).await;
    assert!(open.out.contains("traced"), "{open:?}");
    let conf = confine(&f, SandboxMode::WorkspaceWrite, NetworkAccess::On);
    let ran = run(&f, &cmd, Some(&conf)).await;
    assert!(ran.out.contains("end"), "{ran:?}");
    for escaped in ["unshared", "entered", "mounted", "traced", "gdb-attached"] {
        assert!(!ran.out.contains(escaped), "{escaped}: {ran:?}");
    }
    assert!(!f.tmpdir.join("m").join("x").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_hard_link_to_a_file_outside_the_writable_roots() {
    let f = fixture();
    let cmd = format!("ln {} link && echo linked", f.outside.display());
    let open = run(&f, &cmd, None).await;
    assert!(open.out.contains("linked"), "{open:?}");
    std::fs::remove_file(f.ws.join("link")).unwrap();
    let conf = confine(&f, SandboxMode::WorkspaceWrite, NetworkAccess::Off);
    let ran = run(&f, &cmd, Some(&conf)).await;
    assert!(!ran.out.contains("linked"), "{ran:?}");
    assert!(!f.ws.join("link").exists());
    // Inside the writable roots, links and moves still work.
    let ran = run(
        &f,
        "echo a > a && ln a b && mv b \"$TMPDIR/c\" && cat \"$TMPDIR/c\"",
        Some(&conf),
    )
    .await;
    assert_eq!(ran.code, Some(0), "{ran:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ordinary_work_runs_in_workspace_write() {
    let f = fixture();
    let conf = confine(&f, SandboxMode::WorkspaceWrite, NetworkAccess::Off);
    let cmd = "git init -q . && echo x > f && git add f && \
               git -c user.email=a@b.c -c user.name=n commit -q -m first && \
               python3 -c 'open(\"py.txt\",\"w\").write(\"py\")' && \
               printf 'int main(void){return 0;}\\n' > m.c && cc m.c -o m && ./m && \
               git log --oneline | wc -l";
    let ran = run(&f, cmd, Some(&conf)).await;
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert_eq!(ran.out.trim(), "1", "{ran:?}");
    assert!(f.ws.join("m").exists() && f.ws.join("py.txt").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_codes_signals_and_the_group_kill_pass_through() {
    let f = fixture();
    let conf = confine(&f, SandboxMode::WorkspaceWrite, NetworkAccess::Off);
    let ran = run(&f, "echo hi; exit 7", Some(&conf)).await;
    assert_eq!((ran.code, ran.out.as_str()), (Some(7), "hi\n"));
    let ran = run(&f, "kill -TERM $$", Some(&conf)).await;
    assert_eq!(ran.signal, Some(libc::SIGTERM), "{ran:?}");

    // SIGINT to the group (an interrupt) reaches the command through the init.
    for (sig, name) in [(nix::sys::signal::Signal::SIGINT, libc::SIGINT)] {
        let spawned = spawn_process(&spec(&f, "echo up; exec sleep 60", Some(&conf)))
            .await
            .unwrap();
        let mut child = spawned.child;
        let ProcessIo::Pipes { mut stdout, .. } = spawned.io else {
            unreachable!()
        };
        let mut buf = [0u8; 3];
        stdout.read_exact(&mut buf).await.unwrap();
        assert!(spawned.group.0.signal(sig));
        let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(status.signal(), Some(name));
    }

    // The group's kill ends a command that ignores SIGTERM, and its background children.
    let spawned = spawn_process(&spec(
        &f,
        "trap '' TERM; sleep 60 & echo up; wait",
        Some(&conf),
    ))
    .await
    .unwrap();
    let mut child = spawned.child;
    let ProcessIo::Pipes { mut stdout, .. } = spawned.io else {
        unreachable!()
    };
    let mut buf = [0u8; 3];
    stdout.read_exact(&mut buf).await.unwrap();
    let mut done = spawned.group.0.done();
    let inner = spawned.group.0.clone();
    tokio::spawn(async move {
        let _ = child.wait().await;
        inner.mark_reaped();
    });
    drop(spawned.group);
    tokio::time::timeout(Duration::from_secs(30), done.wait_for(|d| *d))
        .await
        .unwrap()
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pty_command_runs_sandboxed() {
    let f = fixture();
    let conf = confine(&f, SandboxMode::WorkspaceWrite, NetworkAccess::Off);
    let mut s = spec(
        &f,
        "tty; echo x > /dev/tty; cat ~/.ssh/id_rsa; exit 3",
        Some(&conf),
    );
    s.tty = true;
    let spawned = spawn_process(&s).await.unwrap();
    let mut child = spawned.child;
    let ProcessIo::Pty { master } = spawned.io else {
        unreachable!()
    };
    let mut out = Vec::new();
    let read = async {
        loop {
            let mut guard = master.readable().await.unwrap();
            let mut buf = [0u8; 4096];
            match guard.try_io(|fd| {
                nix::unistd::read(fd.get_ref(), &mut buf).map_err(std::io::Error::from)
            }) {
                Ok(Ok(0)) | Ok(Err(_)) => break,
                Ok(Ok(n)) => out.extend_from_slice(&buf[..n]),
                Err(_would_block) => continue,
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(60), read)
        .await
        .unwrap();
    let status = child.wait().await.unwrap();
    let text = String::from_utf8_lossy(&out);
    assert_eq!(status.code(), Some(3), "{text}");
    assert!(text.contains("/dev/pts/"), "{text}");
    assert!(text.contains("x\r\n"), "{text}");
    assert!(!text.contains(KEY), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_confinement_that_cannot_be_applied_fails_the_spawn() {
    let f = fixture();
    let marker = f.ws.join("ran");
    // A deny_read path below a regular file can be neither hidden nor ignored.
    let layout = SandboxLayout {
        mode: SandboxMode::WorkspaceWrite,
        network: NetworkAccess::Off,
        workspace: f.ws.clone(),
        tmpdir: f.tmpdir.clone(),
        writable: vec![f.tmpdir.clone(), f.ws.clone()],
        deny_read: vec![f.outside.join("below-a-file")],
    };
    let conf = Arc::new(Confinement::prepare(layout).unwrap());
    let err = spawn_process(&spec(
        &f,
        &format!("touch {}", marker.display()),
        Some(&conf),
    ))
    .await
    .err()
    .expect("the spawn must fail");
    let text = err.to_string();
    assert!(
        text.starts_with("cannot start the command in its sandbox (hide a deny_read"),
        "{text}"
    );
    assert!(!marker.exists(), "the command ran unconfined");

    // A writable root that does not exist fails at prepare time.
    let layout = SandboxLayout {
        mode: SandboxMode::WorkspaceWrite,
        network: NetworkAccess::Off,
        workspace: f.ws.clone(),
        tmpdir: f.tmpdir.clone(),
        writable: vec![f.root.join("missing")],
        deny_read: Vec::new(),
    };
    let err = Confinement::prepare(layout).unwrap_err().to_string();
    assert!(err.contains("missing"), "{err}");
}

/// `Confinement::apply_in_child` from a `tokio::process::Command`'s `pre_exec` (how MCP stdio
/// servers are started): the same walls, without the PID namespace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_in_child_confines_a_tokio_command() {
    let f = fixture();
    let conf = confine(&f, SandboxMode::WorkspaceWrite, NetworkAccess::Off);
    let escaped = f.root.join("escaped");
    let script = format!(
        "echo in > inside; echo out > {}; cat ~/.ssh/id_rsa; \
         (exec 3<>/dev/tcp/127.0.0.1/9) 2>/dev/null; \
         python3 -c 'import socket; socket.socket(socket.AF_INET); print(\"ip-socket\")'; \
         unshare -r true && echo unshared; echo end",
        escaped.display()
    );
    let mut cmd = tokio::process::Command::new("bash");
    cmd.arg("-c")
        .arg(&script)
        .current_dir(&f.ws)
        .env("HOME", &f.home);
    let c = Arc::clone(&conf);
    // SAFETY: apply_in_child makes async-signal-safe system calls only.
    unsafe {
        cmd.pre_exec(move || c.apply_in_child());
    }
    let out = cmd.output().await.unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("end"), "{text}");
    assert_eq!(
        std::fs::read_to_string(f.ws.join("inside")).unwrap(),
        "in\n"
    );
    assert!(!escaped.exists(), "{text}");
    assert!(!text.contains(KEY), "{text}");
    assert!(!text.contains("ip-socket"), "{text}");
    assert!(!text.contains("unshared"), "{text}");
}

/// What a non-root user's sandbox must hold (its own uid mapped to itself in the user
/// namespace): confined writes, hidden secrets, no view of the init.
async fn non_root_checks() {
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    assert_ne!(uid, 0, "these checks are for a non-root user");
    let f = fixture();
    let conf = confine(&f, SandboxMode::WorkspaceWrite, NetworkAccess::Off);
    let cmd = format!(
        "echo uid=$(id -u); echo in > inside; echo out > {}; cat ~/.ssh/id_rsa; \
         cat /proc/1/cmdline >/dev/null && echo init-cmdline; unshare -r true && echo unshared; \
         echo end",
        f.root.join("escaped").display()
    );
    let ran = run(&f, &cmd, Some(&conf)).await;
    assert!(ran.out.contains(&format!("uid={uid}\n")), "{ran:?}");
    assert!(ran.out.contains("end"), "{ran:?}");
    assert_eq!(
        std::fs::read_to_string(f.ws.join("inside")).unwrap(),
        "in\n"
    );
    assert!(!f.root.join("escaped").exists(), "{ran:?}");
    for leak in [KEY, "init-cmdline", "unshared"] {
        assert!(!ran.out.contains(leak), "{leak}: {ran:?}");
    }
}

/// Run by [`as_a_non_root_user`] in this test binary, as `nobody`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run as a non-root user by as_a_non_root_user"]
async fn non_root_inner() {
    non_root_checks().await;
}

/// The sandbox as a non-root user: as root (CI), this test binary runs `non_root_inner` again
/// as `nobody` through `setpriv`; as another user, the checks run here.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn as_a_non_root_user() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        non_root_checks().await;
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let home = tempfile::tempdir().unwrap();
    let out = tokio::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(&exe)
        .args([
            "--exact",
            "suite::sandbox_confinement::non_root_inner",
            "--ignored",
            "--test-threads=1",
        ])
        .env("HOME", home.path())
        .current_dir("/")
        .output()
        .await
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    assert!(text.contains("1 passed"), "{text}");
}
