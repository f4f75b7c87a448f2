//! Texts the command supervisor builds: the command label, the `[background_task_done]`
//! completion notice (`docs/tools.md#background-notices`) and the `list_commands` lines. Pure functions, no I/O.

use std::time::Duration;

use crate::actors::background_notice::{self, NoticeKind};
use crate::process::ExitInfo;

/// The first line of a command, at most 120 characters (119 + `…` when longer).
pub use crate::actors::background_notice::label;

/// The user text a finished `run_in_background` command is reported with (`docs/tools.md#background-notices`).
/// `tail` is the rendered output tail (empty when the command printed nothing).
pub fn completion_notice(id: &str, label: &str, exit: &ExitInfo, tail: &str) -> String {
    background_notice::notice(
        NoticeKind::Command,
        id,
        exit.is_failure(),
        &exit.detail(),
        label,
        tail,
    )
}

/// One registered command as `list_commands` shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct CommandListing {
    /// The command's process id.
    pub process_id: String,
    /// `None` while running, else the exit.
    pub exit: Option<ExitInfo>,
    /// Time since the last register/input/poll/kill by id.
    pub idle: Duration,
    /// The command's first line (clipped).
    pub label: String,
}

impl CommandListing {
    /// `proc-12ab34cd  running  last used 3s ago  sleep 100`
    pub fn line(&self) -> String {
        let status = match &self.exit {
            None => "running".to_string(),
            Some(exit) => format!("exited ({})", exit.detail()),
        };
        format!(
            "{}  {}  last used {}s ago  {}",
            self.process_id,
            status,
            self.idle.as_secs(),
            self.label
        )
    }
}

/// The note exec_command adds when `open` commands are registered (60 or more).
pub fn crowded_note(open: usize, cap: usize) -> String {
    format!(
        "[note: {open} background commands are open (limit {cap}); starting more evicts the least recently used ones (exited ones first). Stop the ones you no longer need with kill_command]"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_is_first_line_capped() {
        assert_eq!(label("make test\nmake lint"), "make test");
        assert_eq!(label(""), "");
        let long = "x".repeat(130);
        let l = label(&long);
        assert_eq!(l.chars().count(), 120);
        assert!(l.ends_with("x…"));
        assert_eq!(label(&"y".repeat(120)), "y".repeat(120));
    }

    #[test]
    fn notice_text_is_exact() {
        let text = completion_notice(
            "proc-12ab34cd",
            "pnpm test",
            &ExitInfo::Code(3),
            "1 failing",
        );
        assert_eq!(
            text,
            "[background_task_done]\n\
             Automatic notification from the harness, not the user: a background task you started has finished.\n\
             kind: command\n\
             id: proc-12ab34cd\n\
             status: failed\n\
             detail: exit code 3\n\
             [/background_task_done]\n\
             \n\
             Background command failed: `pnpm test` (process_id proc-12ab34cd) — exit code 3\n\
             \n\
             1 failing"
        );
        let ok = completion_notice("proc-00000001", "true", &ExitInfo::Code(0), "");
        assert!(ok.contains("status: completed\ndetail: exit code 0\n"));
        assert!(ok.ends_with(
            "Background command finished: `true` (process_id proc-00000001) — exit code 0"
        ));
    }

    #[test]
    fn listing_lines() {
        let l = CommandListing {
            process_id: "proc-0000abcd".into(),
            exit: Some(ExitInfo::Signal(9)),
            idle: Duration::from_millis(3500),
            label: "sleep 9".into(),
        };
        assert_eq!(
            l.line(),
            "proc-0000abcd  exited (terminated by signal SIGKILL)  last used 3s ago  sleep 9"
        );
    }
}
