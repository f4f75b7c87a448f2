//! The terminal approver of the CLI: asks `Allow …? [y]es / [n]o / [a]lways for this session`
//! on stderr and reads the answer from stdin, one question at a time. With no terminal on stdin it denies, with a one-line notice.
//!
//! While a question is on screen the terminal view's spinner is paused, so it never draws over
//! the question or the typed answer.
//!
//! It only answers questions; the mode (which calls to ask about) is `PolicyApprover`'s job.

use std::io::{BufRead, IsTerminal, Write};
use std::sync::Arc;

use futures::future::BoxFuture;
use tokio::sync::Mutex;

use super::status_line::StatusLine;
use crate::approval::{ApprovalRequest, Approver};
use crate::message::Decision;

/// The longest wait for the terminal view to show the line of a call before asking about it.
const CALL_LINE_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Asks on the terminal.
#[derive(Default)]
pub struct TerminalApprover {
    one_at_a_time: Arc<Mutex<()>>,
    status: StatusLine,
}

impl TerminalApprover {
    /// An approver that pauses `status` (the run's spinner) while it asks.
    pub fn with_status(status: StatusLine) -> Self {
        TerminalApprover {
            one_at_a_time: Arc::default(),
            status,
        }
    }
}

/// `y`, `yes` and an empty line allow; `n`, `no` deny; `a`, `always` allow for the session;
/// anything else asks again (`None`).
pub fn parse_answer(line: &str) -> Option<Decision> {
    match line.trim().to_ascii_lowercase().as_str() {
        "" | "y" | "yes" => Some(Decision::Allow),
        "n" | "no" => Some(Decision::Deny),
        "a" | "always" => Some(Decision::AllowForSession),
        _ => None,
    }
}

/// The question for one approval: `Allow <tool> [subagent …] <arguments>? [y]es / [n]o /
/// [a]lways for this session `.
pub fn question(request: &ApprovalRequest) -> String {
    let who = if request.origin.is_empty() {
        String::new()
    } else {
        format!(" [subagent {}]", request.origin.join(" > "))
    };
    let mut args = request.arguments.clone();
    if args.chars().count() > 400 {
        args = args.chars().take(400).collect::<String>() + "…";
    }
    format!(
        "Allow {}{who} {args}? [y]es / [n]o / [a]lways for this session ",
        request.name
    )
}

fn ask_blocking(request: &ApprovalRequest) -> Decision {
    let stdin = std::io::stdin();
    if !stdin.is_terminal() {
        errln!(
            "rookery: no terminal to ask on; denied {} ({}). Use --approve allow-all to run tools unattended.",
            request.name,
            request.tool_call_id
        );
        return Decision::Deny;
    }
    loop {
        errp!("{}", question(request));
        let _ = std::io::stderr().flush();
        let mut line = String::new();
        match stdin.lock().read_line(&mut line) {
            Ok(0) | Err(_) => return Decision::Deny,
            Ok(_) => {
                if let Some(d) = parse_answer(&line) {
                    return d;
                }
                errln!("Please answer y, n or a.");
            }
        }
    }
}

impl Approver for TerminalApprover {
    fn approve(&self, request: ApprovalRequest) -> BoxFuture<'static, Decision> {
        let lock = self.one_at_a_time.clone();
        let status = self.status.clone();
        Box::pin(async move {
            let _guard = lock.lock().await;
            // The call's line first, then its question (a subagent's calls are not shown).
            if request.origin.is_empty() {
                status.shown(&request.tool_call_id, CALL_LINE_WAIT).await;
            }
            let _paused = status.pause();
            tokio::task::spawn_blocking(move || ask_blocking(&request))
                .await
                .unwrap_or(Decision::Deny)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers() {
        assert_eq!(parse_answer("\n"), Some(Decision::Allow));
        assert_eq!(parse_answer("YES"), Some(Decision::Allow));
        assert_eq!(parse_answer("n"), Some(Decision::Deny));
        assert_eq!(parse_answer("maybe"), None);
        assert_eq!(parse_answer("a\n"), Some(Decision::AllowForSession));
    }

    #[test]
    fn colliding_call_ids_are_asked_apart() {
        // A parent's and its subagent's call can share a tool call id; each question names
        // its origin, and each answer resolves the future of the request it was asked for.
        let parent = ApprovalRequest {
            tool_call_id: "call_1".into(),
            name: "exec_command".into(),
            arguments: "{\"cmd\":\"make\"}".into(),
            permission: None,
            origin: vec![],
        };
        let child = ApprovalRequest {
            name: "read_file".into(),
            arguments: "{\"file_path\":\"a\"}".into(),
            origin: vec!["session-child".into()],
            ..parent.clone()
        };
        assert_eq!(
            question(&parent),
            "Allow exec_command {\"cmd\":\"make\"}? [y]es / [n]o / [a]lways for this session "
        );
        assert_eq!(
            question(&child),
            "Allow read_file [subagent session-child] {\"file_path\":\"a\"}? [y]es / [n]o / [a]lways for this session "
        );
    }
}
