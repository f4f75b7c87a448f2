//! The texts of the openvaala command tools (`docs/tools-openvaala.md#command-tools`): the
//! header every result starts with (`command_id` / `status` / `exit_code` / `next_cursor`, a
//! blank line), the `[N bytes dropped]` line, the page budget that keeps a whole result within
//! 65,536 bytes, the `list_commands` blocks, and the argument parsing and clamping of the five
//! tools. No actors, and no I/O but [`bash_args`]'s look at where `cwd` really is (`realpath`,
//! never an open) for a `cwd` other than the workspace, which is why the `bash` tool then runs
//! it on the blocking pool.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Map, Value};

use crate::process::ExitInfo;
use crate::process::ring::RingPage;
use crate::tools::args::{
    MissingArg, finite_number, flag, opt_str, require_nonblank_str, require_str,
};
use crate::tools::canonical::{real_location, really_inside, under_workspace};

/// Bytes of result text one call returns at most ("64 KB").
pub const RESULT_BYTES: usize = 65_536;
/// Default and largest `wait_seconds`.
pub const DEFAULT_WAIT_S: f64 = 10.0;
/// Largest `wait_seconds`.
pub const MAX_WAIT_S: f64 = 600.0;
/// Default `wait_seconds` of write_stdin.
pub const DEFAULT_STDIN_WAIT_S: f64 = 2.0;
/// Default and largest `timeout_seconds` (0 = no limit).
pub const DEFAULT_TIMEOUT_S: f64 = 600.0;
/// Largest `timeout_seconds` (one week).
pub const MAX_TIMEOUT_S: f64 = 7.0 * 24.0 * 3600.0;

/// `status:` of a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// It still runs.
    Running,
    /// It ended by itself, whatever its exit code.
    Exited,
    /// It could not start or was killed (signal, `timeout_seconds`, `stop_command`).
    Failed,
}

impl Status {
    /// The status as the result text writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Running => "running",
            Status::Exited => "exited",
            Status::Failed => "failed",
        }
    }
}

/// The status and exit code of a command with this exit (`None`: still running).
pub fn status_of(exit: Option<&ExitInfo>) -> (Status, Option<i32>) {
    match exit {
        None => (Status::Running, None),
        Some(ExitInfo::Code(n)) => (Status::Exited, Some(*n)),
        Some(_) => (Status::Failed, None),
    }
}

/// Why a failed command failed, as the line after its output (`None` otherwise).
pub fn failure_note(exit: Option<&ExitInfo>) -> Option<String> {
    match exit? {
        ExitInfo::Code(_) => None,
        ExitInfo::Signal(s) => Some(format!("[killed by {}]", crate::process::signal_name(*s))),
        ExitInfo::SpawnError(m) => Some(format!("[could not start: {m}]")),
        ExitInfo::Failed(m) => Some(format!("[{m}]")),
    }
}

/// The header lines and the blank line after them.
pub fn header(id: &str, status: Status, exit_code: Option<i32>, next_cursor: u64) -> String {
    let mut h = format!("command_id: {id}\nstatus: {}\n", status.as_str());
    if let Some(code) = exit_code {
        h.push_str(&format!("exit_code: {code}\n"));
    }
    h.push_str(&format!("next_cursor: {next_cursor}\n\n"));
    h
}

/// The first output line of a read that starts after dropped bytes.
pub fn dropped_line(n: u64) -> String {
    format!("[{n} bytes dropped]\n")
}

/// Bytes of output a page may hold so that header, drop line, output and failure note stay
/// within [`RESULT_BYTES`] whatever the numbers in them.
pub fn page_budget(id: &str) -> usize {
    let worst = header(id, Status::Running, Some(i32::MIN), u64::MAX).len()
        + dropped_line(u64::MAX).len()
        + NOTE_RESERVE;
    RESULT_BYTES.saturating_sub(worst)
}

/// Room kept for the failure note at the end of a result.
const NOTE_RESERVE: usize = 512;

/// A whole result: the header, the drop line when bytes were dropped, the page, and for a
/// failed command whose output was read to its end, why it failed.
pub fn render(id: &str, exit: Option<&ExitInfo>, page: &RingPage, at_end: bool) -> String {
    let (status, code) = status_of(exit);
    let mut out = header(id, status, code, page.next);
    if page.dropped > 0 {
        out.push_str(&dropped_line(page.dropped));
    }
    out.push_str(&page.text);
    if at_end && let Some(note) = failure_note(exit) {
        if !out.ends_with('\n') && !out.ends_with("\n\n") {
            out.push('\n');
        }
        let room = RESULT_BYTES.saturating_sub(out.len());
        let mut note = note;
        if note.len() > room {
            let mut cut = room;
            while !note.is_char_boundary(cut) {
                cut -= 1;
            }
            note.truncate(cut);
        }
        out.push_str(&note);
    }
    out
}

/// One command as list_commands shows it: its header lines (no cursor) and its command line.
pub fn listing_block(id: &str, exit: Option<&ExitInfo>, label: &str) -> String {
    let (status, code) = status_of(exit);
    let mut b = format!("command_id: {id}\nstatus: {}\n", status.as_str());
    if let Some(code) = code {
        b.push_str(&format!("exit_code: {code}\n"));
    }
    b.push_str(&format!("command: {label}"));
    b
}

/// A number of seconds from `args[key]`: `default` when absent or not a number, clamped into
/// `0..=max`.
pub fn seconds(args: &Map<String, Value>, key: &str, default: f64, max: f64) -> Duration {
    let s = finite_number(args, key).unwrap_or(default).clamp(0.0, max);
    Duration::from_secs_f64(s)
}

/// The arguments of `bash`.
#[derive(Debug, Clone, PartialEq)]
pub struct BashArgs {
    /// The shell command line.
    pub command: String,
    /// The absolute working directory (inside the workspace).
    pub cwd: PathBuf,
    /// How long to wait for output before answering.
    pub wait: Duration,
    /// `None`: no limit.
    pub timeout: Option<Duration>,
    /// Run it under a pseudo-terminal.
    pub interactive: bool,
}

/// `path` with `.` and `..` resolved lexically.
fn normalize(path: &Path) -> PathBuf {
    crate::tools::profile::openvaala::read_file::normalize(path)
}

/// Whether `bash`'s `cwd` is the workspace itself (absent, empty or `.`): [`bash_args`] then
/// needs no look at the file system.
pub fn cwd_is_workspace(args: &Map<String, Value>) -> bool {
    matches!(opt_str(args, "cwd"), None | Some("" | "."))
}

/// Why `bash`'s arguments were refused (the text is the tool output).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BashArgsError {
    /// A required argument is missing.
    #[error(transparent)]
    Missing(#[from] MissingArg),
    /// `cwd` resolves outside the workspace.
    #[error("cwd \"{cwd}\" is outside the workspace {}.", .root.display())]
    OutsideWorkspace {
        /// The `cwd` as given.
        cwd: String,
        /// The workspace.
        root: PathBuf,
    },
}

/// Parses `bash`'s arguments. `cwd` must name a place inside `workspace`: relative to it, or
/// absolute through the workspace under any of its names (as given, canonical, or a symlink to
/// it), and its real location (symlinks resolved; for a missing directory, that of its deepest
/// existing one) must be inside the workspace too. The `cwd` returned is under `workspace` as
/// given. Looks at the file system (`realpath`) unless the `cwd` is the workspace itself (see
/// [`cwd_is_workspace`]): call it on the blocking pool then.
pub fn bash_args(workspace: &Path, args: &Map<String, Value>) -> Result<BashArgs, BashArgsError> {
    let command = require_nonblank_str(args, "command", "bash")?.to_string();
    let cwd_arg = opt_str(args, "cwd")
        .filter(|c| !c.is_empty())
        .unwrap_or(".");
    let root = normalize(workspace);
    let asked = normalize(&crate::tools::resolve_path(&root, cwd_arg));
    let cwd = under_workspace(&root, &asked).filter(|cwd| {
        cwd == &root || real_location(cwd).is_some_and(|real| really_inside(&root, &real))
    });
    let Some(cwd) = cwd else {
        return Err(BashArgsError::OutsideWorkspace {
            cwd: cwd_arg.to_string(),
            root,
        });
    };
    let timeout = seconds(args, "timeout_seconds", DEFAULT_TIMEOUT_S, MAX_TIMEOUT_S);
    Ok(BashArgs {
        command,
        cwd,
        wait: seconds(args, "wait_seconds", DEFAULT_WAIT_S, MAX_WAIT_S),
        timeout: (!timeout.is_zero()).then_some(timeout),
        interactive: flag(args, "interactive"),
    })
}

/// The `command_id` argument of a tool.
pub fn command_id<'a>(args: &'a Map<String, Value>, tool: &str) -> Result<&'a str, MissingArg> {
    require_nonblank_str(args, "command_id", tool).map(str::trim)
}

/// The `cursor` of read_command_output: a whole number of at least 0 (default 0); a string
/// of digits counts too.
pub fn cursor(args: &Map<String, Value>) -> u64 {
    if let Some(Value::String(text)) = args.get("cursor") {
        return text.trim().parse().unwrap_or(0);
    }
    finite_number(args, "cursor").map_or(0, |c| c.floor().clamp(0.0, u64::MAX as f64) as u64)
}

/// The `chars` of write_stdin (required, may be empty).
pub fn chars(args: &Map<String, Value>) -> Result<&str, MissingArg> {
    require_str(args, "chars", "write_stdin")
}

/// The error for a command id the session does not have.
pub fn unknown_command(id: &str) -> String {
    format!("Unknown command_id \"{id}\": list_commands shows this session's commands.")
}

/// The error of write_stdin on a command without a terminal.
pub fn not_interactive(id: &str) -> String {
    format!(
        "Command {id} is not interactive: write_stdin needs a command started by bash with interactive: true."
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn headers_are_exact() {
        assert_eq!(
            header("cmd-0000abcd", Status::Exited, Some(3), 12),
            "command_id: cmd-0000abcd\nstatus: exited\nexit_code: 3\nnext_cursor: 12\n\n"
        );
        assert_eq!(
            header("cmd-0000abcd", Status::Running, None, 0),
            "command_id: cmd-0000abcd\nstatus: running\nnext_cursor: 0\n\n"
        );
    }

    #[test]
    fn statuses_follow_how_the_command_ended() {
        assert_eq!(status_of(None), (Status::Running, None));
        assert_eq!(
            status_of(Some(&ExitInfo::Code(1))),
            (Status::Exited, Some(1))
        );
        assert_eq!(
            status_of(Some(&ExitInfo::Signal(9))),
            (Status::Failed, None)
        );
        assert_eq!(
            status_of(Some(&ExitInfo::Failed("timed out after 5 s".into()))),
            (Status::Failed, None)
        );
    }

    #[test]
    fn render_marks_drops_and_failures() {
        let page = RingPage {
            dropped: 42,
            text: "tail\n".into(),
            next: 100,
        };
        let exit = ExitInfo::Failed("timed out after 5 s".into());
        assert_eq!(
            render("cmd-1", Some(&exit), &page, true),
            "command_id: cmd-1\nstatus: failed\nnext_cursor: 100\n\n[42 bytes dropped]\ntail\n[timed out after 5 s]"
        );
        let page = RingPage {
            dropped: 0,
            text: "ok".into(),
            next: 2,
        };
        assert_eq!(
            render("cmd-1", Some(&ExitInfo::Code(0)), &page, true),
            "command_id: cmd-1\nstatus: exited\nexit_code: 0\nnext_cursor: 2\n\nok"
        );
    }

    #[test]
    fn a_full_page_stays_within_64_kb() {
        let id = "cmd-89abcdef";
        let budget = page_budget(id);
        let page = RingPage {
            dropped: u64::MAX - 1,
            text: "x".repeat(budget),
            next: u64::MAX,
        };
        let text = render(id, Some(&ExitInfo::Signal(9)), &page, true);
        assert!(text.len() <= RESULT_BYTES, "{}", text.len());
        assert!(budget > 64_800, "{budget}");
    }

    #[test]
    fn bash_arguments_default_clamp_and_fence() {
        let ws = Path::new("/w/p");
        let a = bash_args(ws, &obj(json!({"command": "ls"}))).unwrap();
        assert_eq!(a.cwd, PathBuf::from("/w/p"));
        assert_eq!(a.wait, Duration::from_secs(10));
        assert_eq!(a.timeout, Some(Duration::from_secs(600)));
        assert!(!a.interactive);
        let a = bash_args(
            ws,
            &obj(
                json!({"command": "ls", "cwd": "sub/../x", "wait_seconds": 9999,
                "timeout_seconds": 0, "interactive": true}),
            ),
        )
        .unwrap();
        assert_eq!(a.cwd, PathBuf::from("/w/p/x"));
        assert_eq!(a.wait, Duration::from_secs(600));
        assert_eq!(a.timeout, None);
        assert!(a.interactive);
        let a = bash_args(ws, &obj(json!({"command": "ls", "wait_seconds": -4}))).unwrap();
        assert_eq!(a.wait, Duration::ZERO);
        assert_eq!(
            bash_args(ws, &obj(json!({"command": "ls", "cwd": "/w"})))
                .err()
                .map(|e| e.to_string()),
            Some("cwd \"/w\" is outside the workspace /w/p.".to_string())
        );
        assert_eq!(
            bash_args(ws, &obj(json!({"command": " "})))
                .err()
                .map(|e| e.to_string()),
            Some("Missing required argument \"command\" for bash.".to_string())
        );
    }

    /// `dir/ws` (with `sub/`, `sublink -> sub` and `etclink -> dir/out`) and
    /// `dir/wslink -> ws`, canonical.
    fn symlinked_workspace(dir: &Path) -> (PathBuf, PathBuf) {
        let root = std::fs::canonicalize(dir).unwrap();
        let (ws, link) = (root.join("ws"), root.join("wslink"));
        std::fs::create_dir_all(ws.join("sub")).unwrap();
        std::fs::create_dir_all(root.join("out")).unwrap();
        std::os::unix::fs::symlink("sub", ws.join("sublink")).unwrap();
        std::os::unix::fs::symlink(root.join("out"), ws.join("etclink")).unwrap();
        std::os::unix::fs::symlink("ws", &link).unwrap();
        (ws, link)
    }

    fn cwd_of(ws: &Path, cwd: &Path) -> Result<PathBuf, BashArgsError> {
        let args = obj(json!({"command": "pwd", "cwd": cwd.display().to_string()}));
        bash_args(ws, &args).map(|a| a.cwd)
    }

    #[test]
    fn cwd_may_name_the_workspace_through_a_symlink() {
        let dir = tempfile::tempdir().unwrap();
        let (ws, link) = symlinked_workspace(dir.path());
        // The workspace as a session holds it (canonical) or as given (the link): either name
        // of it is inside, and the cwd comes back under the workspace as given.
        for (given, other) in [(&ws, &link), (&link, &ws)] {
            assert_eq!(cwd_of(given, other), Ok(given.to_path_buf()));
            assert_eq!(cwd_of(given, &other.join("sub")), Ok(given.join("sub")));
            assert_eq!(
                cwd_of(given, Path::new("sublink")),
                Ok(given.join("sublink"))
            );
            // A missing directory inside is a failed start later, not a refusal.
            assert_eq!(cwd_of(given, &other.join("new")), Ok(given.join("new")));
        }
    }

    #[test]
    fn only_a_cwd_other_than_the_workspace_needs_the_file_system() {
        for args in [json!({}), json!({"cwd": ""}), json!({"cwd": "."})] {
            assert!(cwd_is_workspace(&obj(args.clone())), "{args}");
        }
        for args in [
            json!({"cwd": "sub"}),
            json!({"cwd": "/tmp"}),
            json!({"cwd": "./"}),
        ] {
            assert!(!cwd_is_workspace(&obj(args.clone())), "{args}");
        }
    }

    #[test]
    fn cwd_through_a_symlink_out_of_the_workspace_is_outside() {
        let dir = tempfile::tempdir().unwrap();
        let (ws, link) = symlinked_workspace(dir.path());
        for given in [&ws, &link] {
            for cwd in ["etclink", "etclink/missing", "sub/../etclink"] {
                assert_eq!(
                    cwd_of(given, Path::new(cwd)).map_err(|e| e.to_string()),
                    Err(format!(
                        "cwd \"{cwd}\" is outside the workspace {}.",
                        given.display()
                    ))
                );
            }
        }
    }

    #[test]
    fn cursors_and_ids() {
        assert_eq!(cursor(&obj(json!({}))), 0);
        assert_eq!(cursor(&obj(json!({"cursor": 17.6}))), 17);
        assert_eq!(cursor(&obj(json!({"cursor": -5}))), 0);
        assert_eq!(cursor(&obj(json!({"cursor": "4096"}))), 4096);
        assert_eq!(
            command_id(&obj(json!({"command_id": " cmd-1 "})), "stop_command"),
            Ok("cmd-1")
        );
        assert!(command_id(&obj(json!({})), "stop_command").is_err());
    }

    #[test]
    fn listing_blocks() {
        assert_eq!(
            listing_block("cmd-1", Some(&ExitInfo::Code(2)), "make test"),
            "command_id: cmd-1\nstatus: exited\nexit_code: 2\ncommand: make test"
        );
        assert_eq!(
            listing_block("cmd-2", None, "sleep 9"),
            "command_id: cmd-2\nstatus: running\ncommand: sleep 9"
        );
    }
}
