//! A real terminal for CLI tests: `rookery` runs with stdin, stdout and stderr on the slave side
//! of a pseudo-terminal (80x24, `TERM=xterm` unless a test sets it), and everything it draws is
//! collected from the master side, where a test also types.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nix::fcntl::{FcntlArg, FdFlag, fcntl};
use nix::pty::{Winsize, openpty};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// How long a test waits for something to appear on the terminal or for the exit.
pub const TERMINAL_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Default)]
struct Screen {
    bytes: Vec<u8>,
    /// The slave side is closed everywhere (the reader saw the end).
    closed: bool,
}

type Shared = Arc<(Mutex<Screen>, Condvar)>;

/// A child running on a pseudo-terminal.
pub struct Terminal {
    child: Child,
    master: File,
    screen: Shared,
    reader: Option<JoinHandle<()>>,
}

fn cloexec(fd: &OwnedFd) {
    fcntl(fd, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC)).expect("FD_CLOEXEC");
}

impl Terminal {
    /// Spawns `cmd` with its three standard streams on a new terminal. `TERM` is `xterm`
    /// unless `cmd` sets it.
    pub fn spawn(mut cmd: Command) -> Terminal {
        let size = Winsize {
            ws_row: 24,
            ws_col: 80,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        let pty = openpty(Some(&size), None).expect("openpty");
        cloexec(&pty.master);
        cloexec(&pty.slave);
        if !cmd.get_envs().any(|(k, _)| k == "TERM") {
            cmd.env("TERM", "xterm");
        }
        let slave = pty.slave;
        cmd.stdin(Stdio::from(slave.try_clone().expect("dup slave")))
            .stdout(Stdio::from(slave.try_clone().expect("dup slave")))
            .stderr(Stdio::from(slave));
        let child = cmd.spawn().expect("spawn rookery on a terminal");
        // The command holds our copies of the slave: drop them, so the master sees the end
        // once the child (and anything it started) is gone.
        drop(cmd);
        let master = File::from(pty.master);
        let screen: Shared = Arc::default();
        let mut input = master.try_clone().expect("dup master");
        let shared = screen.clone();
        let reader = std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            loop {
                match input.read(&mut buf) {
                    Ok(n) if n > 0 => {
                        let (lock, cv) = &*shared;
                        lock.lock().unwrap().bytes.extend_from_slice(&buf[..n]);
                        cv.notify_all();
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    // EIO: every slave descriptor is closed.
                    _ => break,
                }
            }
            let (lock, cv) = &*shared;
            lock.lock().unwrap().closed = true;
            cv.notify_all();
        });
        Terminal {
            child,
            master,
            screen,
            reader: Some(reader),
        }
    }

    /// Everything drawn so far, with the terminal's `\r\n` turned back into `\n`.
    pub fn text(&self) -> String {
        let bytes = self.screen.0.lock().unwrap().bytes.clone();
        String::from_utf8_lossy(&bytes).replace("\r\n", "\n")
    }

    /// Waits until the drawn text satisfies `pred` (failing the test after
    /// [`TERMINAL_TIMEOUT`]) and returns it.
    pub fn wait_for(&mut self, what: &str, pred: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + TERMINAL_TIMEOUT;
        let (lock, cv) = &*self.screen;
        let mut screen = lock.lock().unwrap();
        loop {
            let text = String::from_utf8_lossy(&screen.bytes).replace("\r\n", "\n");
            if pred(&text) {
                return text;
            }
            let now = Instant::now();
            if now >= deadline || screen.closed {
                drop(screen);
                let _ = self.child.kill();
                panic!("the terminal never showed {what}; it shows:\n{text:?}");
            }
            screen = cv.wait_timeout(screen, deadline - now).unwrap().0;
        }
    }

    /// Types `bytes` on the terminal.
    pub fn type_in(&mut self, bytes: &[u8]) {
        self.master.write_all(bytes).expect("type on the terminal");
    }

    /// Sends SIGINT, as Ctrl-C in a shell does.
    pub fn interrupt(&self) {
        let pid = Pid::from_raw(i32::try_from(self.child.id()).expect("pid"));
        kill(pid, Signal::SIGINT).expect("SIGINT");
    }

    /// Waits for the exit; its code and everything drawn.
    pub fn finish(mut self) -> (Option<i32>, String) {
        let deadline = Instant::now() + TERMINAL_TIMEOUT;
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                break status;
            }
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                panic!("rookery did not exit; the terminal shows:\n{}", self.text());
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        // The last output is read once the slave is closed everywhere.
        let closed = {
            let (lock, cv) = &*self.screen;
            let mut screen = lock.lock().unwrap();
            while !screen.closed && Instant::now() < deadline {
                screen = cv
                    .wait_timeout(screen, Duration::from_millis(200))
                    .unwrap()
                    .0;
            }
            screen.closed
        };
        if closed && let Some(r) = self.reader.take() {
            let _ = r.join();
        }
        (status.code(), self.text())
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        // Only reached without `finish` when a test fails midway: never leave the child behind.
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
