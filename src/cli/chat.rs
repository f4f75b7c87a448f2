//! `rookery chat`: a REPL on one session (new, or `--resume ID`). Each input line is a task;
//! the transcript is printed as `rookery run` prints it. On a terminal, a line typed while a
//! task runs steers it (`SessionHandle::steer`; the prompt reads `steer> `); from a pipe, lines
//! wait their turn (a script feeds tasks in order). Ctrl-C aborts the running task (and quits when idle, exit 130), `/exit` or end of input
//! quits once the task before it has ended, and the last stdout line is
//! `rookery chat --resume <id>`.
//!
//! On a terminal, text and thinking stream as `rookery run` shows them (`live.rs`), without
//! the spinner.
//!
//! Approval questions are asked in the REPL itself (the next input line answers), so one reader
//! owns stdin. It uses the session API only; the turn loop and the trace are the library's.

use std::collections::VecDeque;
use std::io::{BufRead, IsTerminal, Write};
use std::process::ExitCode;
use std::sync::Arc;

use futures::future::BoxFuture;
use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio::sync::{mpsc, oneshot};

use super::approve_prompt::parse_answer;
use super::approve_prompt::question;
use super::live::{LiveView, TerminalStyle};
use super::run::resolve;
use super::status_line::StatusLine;
use super::{ChatArgs, CliError, render};
use crate::Host;
use crate::actors::session::SessionHandle;
use crate::approval::{ApprovalMode, ApprovalRequest, Approver, PolicyApprover};
use crate::message::{Decision, EventPayload};
use crate::server::state::read_trace_meta;
use crate::trace::catalog::{Catalog, CatalogError};
use crate::trace::paths;

type Question = (ApprovalRequest, oneshot::Sender<Decision>);

/// Forwards approval questions to the REPL loop.
struct ChatApprover {
    tx: mpsc::UnboundedSender<Question>,
}

impl Approver for ChatApprover {
    fn approve(&self, request: ApprovalRequest) -> BoxFuture<'static, Decision> {
        let (tx, rx) = oneshot::channel();
        let sent = self.tx.send((request, tx)).is_ok();
        Box::pin(async move {
            if !sent {
                return Decision::Deny;
            }
            rx.await.unwrap_or(Decision::Deny)
        })
    }
}

/// Lines of stdin, read on a plain thread (never blocks runtime shutdown). A line that is not
/// valid UTF-8 is reported on stderr and skipped; reading goes on.
fn stdin_lines() -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel(16);
    std::thread::spawn(move || {
        let stdin = std::io::stdin();
        read_lines(stdin.lock(), |line| tx.blocking_send(line).is_ok());
    });
    rx
}

/// Feeds each UTF-8 line of `input` (without its line ending) to `send` until the end of input,
/// a read error or `send` returning false. Other lines get a notice on stderr.
fn read_lines(mut input: impl BufRead, mut send: impl FnMut(String) -> bool) {
    let mut buf = Vec::new();
    let mut number = 0u64;
    loop {
        buf.clear();
        match input.read_until(b'\n', &mut buf) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                errln!("rookery: cannot read stdin: {e}");
                return;
            }
        }
        number += 1;
        if buf.last() == Some(&b'\n') {
            buf.pop();
            if buf.last() == Some(&b'\r') {
                buf.pop();
            }
        }
        match String::from_utf8(std::mem::take(&mut buf)) {
            Ok(line) => {
                if !send(line) {
                    return;
                }
            }
            Err(e) => errln!(
                "rookery: input line {number} is not valid UTF-8 (invalid byte at offset {}); ignored",
                e.utf8_error().valid_up_to()
            ),
        }
    }
}

/// `rookery chat`: one session, each input line a task, until `/exit` or end of input.
pub async fn chat(args: ChatArgs) -> Result<ExitCode, CliError> {
    let (int, term) = match (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) {
        (Ok(i), Ok(t)) => (i, t),
        (Err(e), _) | (_, Err(e)) => {
            return Err(CliError::startup_io("cannot install signal handlers", e));
        }
    };
    let mut session_args = args.session.clone();
    let home = paths::rookery_home(session_args.home.as_deref());
    let mut resume_id = args.resume.clone();
    let mut overrides = Vec::new();
    let store = session_args.store.connect().await?;
    if let (Some(store), Some(id)) = (&store, &args.resume) {
        // A stored session is named by its whole id; its workspace comes from its row.
        if session_args.workspace.is_none() {
            session_args.workspace = Some(super::store::stored_workspace(store, id).await?.into());
        }
        let meta = super::store::stored_last_meta(store, id).await?;
        overrides = super::reopen::fill_from_meta(meta, &mut session_args);
    } else if let Some(query) = &args.resume {
        let id = match Catalog::scan(&home).and_then(|c| c.resolve(query).map(|s| s.id.clone())) {
            Ok(id) => id,
            Err(CatalogError::UnknownSession { .. }) => {
                return Err(CliError::usage(format!(
                    "--resume {query}: no trace of that session under {}",
                    home.display()
                )));
            }
            Err(e) => return Err(CliError::usage(format!("--resume {query}: {e}"))),
        };
        let Some(trace) = paths::locate_trace(&home, &id) else {
            return Err(CliError::usage(format!(
                "--resume {id}: no trace of that session under {}",
                home.display()
            )));
        };
        if session_args.workspace.is_none() {
            session_args.workspace = read_trace_meta(&trace).map(|m| m.workspace.into());
        }
        overrides = super::reopen::fill_from_trace(&trace, &mut session_args);
        resume_id = Some(id);
    }
    let mut resolved = resolve(&session_args)?;
    if !overrides.is_empty() {
        resolved.options.launch.reopened_with = Some(overrides);
    }
    let (ask_tx, ask_rx) = mpsc::unbounded_channel();
    let asker = Arc::new(ChatApprover { tx: ask_tx });
    resolved.options.approver = Arc::new(match session_args.approve {
        Some(mode) => PolicyApprover::new(mode, asker),
        // Without --approve, a resumed session keeps the mode its trace recorded.
        None => PolicyApprover::inherited(ApprovalMode::AllowAll, asker),
    });
    let host = match store {
        Some(store) => Host::start_with_store(resolved.home.clone(), store).await,
        None => Host::start(resolved.home.clone()).await,
    }
    .map_err(CliError::Start)?;
    let opened = match &resume_id {
        Some(id) => host.resume_session(id, resolved.options).await,
        None => host.create_session(resolved.options).await,
    };
    let session = match opened {
        Ok(s) => s,
        Err(e) => {
            host.shutdown().await;
            return Err(CliError::Start(e));
        }
    };
    let interrupts = Interrupts { int, term };
    let code = repl(&session, ask_rx, interrupts, !args.hide_thinking).await;
    let _ = session.close().await;
    host.shutdown().await;
    errln!("trace: {}", session.trace_path().display());
    outln!("rookery chat --resume {}", session.id());
    if let Some(failure) = session.trace_failure() {
        return Err(CliError::TraceFailed(failure));
    }
    code
}

/// SIGINT and SIGTERM.
struct Interrupts {
    int: Signal,
    term: Signal,
}

impl Interrupts {
    /// True for SIGINT (Ctrl-C), false for SIGTERM.
    async fn recv(&mut self) -> bool {
        tokio::select! {
            _ = self.int.recv() => true,
            _ = self.term.recv() => false,
        }
    }
}

/// One input event: a line, or the end of input.
enum Input {
    Line(String),
    Eof,
}

struct Repl {
    running: bool,
    /// Lines typed ahead: answers to questions first, then tasks.
    input: VecDeque<Input>,
    asks: VecDeque<Question>,
    /// A question is on screen.
    asking: bool,
    prompt: bool,
    /// `/compact` of the idle session is running (it ends at its `compaction_end`).
    compacting: bool,
}

/// What the loop does after consuming input.
enum Step {
    Continue,
    Quit,
}

impl Repl {
    fn show_prompt(&self) {
        if self.prompt && self.input.is_empty() && !self.asking {
            errp!("{}", if self.running { "steer> " } else { "> " });
            let _ = std::io::stderr().flush();
        }
    }

    /// On a terminal, the next typed line steers the running task (`/exit` and blank lines
    /// wait for the task to end). False when nothing was steered.
    async fn steer_next(&mut self, session: &SessionHandle) -> bool {
        let Some(Input::Line(line)) = self.input.front() else {
            return false;
        };
        let text = line.trim().to_string();
        if !self.prompt || text.is_empty() || text == "/exit" {
            return false;
        }
        self.input.pop_front();
        if text.starts_with("/rollback") {
            // Never a steer: the model would read it as text.
            errln!("rookery: /rollback is refused while a task runs; type it again once it ended");
            self.show_prompt();
            return true;
        }
        match session.steer(text).await {
            Ok(crate::actors::session::SteerOutcome::Queued) => {
                errln!("rookery: steering the running task");
            }
            Ok(crate::actors::session::SteerOutcome::Started) => {}
            Err(e) => errln!("rookery: {e}"),
        }
        self.show_prompt();
        true
    }

    /// Asks the oldest live question, dropping those nobody waits for any more.
    fn ask_next(&mut self) {
        while self.asks.front().is_some_and(|(_, tx)| tx.is_closed()) {
            self.asks.pop_front();
        }
        self.asking = false;
        if let Some((req, _)) = self.asks.front() {
            errp!("{}", question(req));
            let _ = std::io::stderr().flush();
            self.asking = true;
        }
    }

    fn deny_all(&mut self) {
        for (_, tx) in self.asks.drain(..) {
            let _ = tx.send(Decision::Deny);
        }
        self.asking = false;
    }

    /// Consumes queued input as far as the session's state allows.
    async fn drive(&mut self, session: &SessionHandle) -> Step {
        loop {
            if self.asking {
                match self.input.pop_front() {
                    None => return Step::Continue,
                    Some(Input::Eof) => {
                        // No answer will come: deny, and quit once the task ends.
                        self.deny_all();
                        self.input.push_front(Input::Eof);
                        return Step::Continue;
                    }
                    Some(Input::Line(line)) => {
                        if !self.prompt {
                            errln!("{line}");
                        }
                        match parse_answer(&line) {
                            Some(d) => {
                                if let Some((_, tx)) = self.asks.pop_front() {
                                    let _ = tx.send(d);
                                }
                            }
                            None => errln!("Please answer y or n."),
                        }
                        self.ask_next();
                        continue;
                    }
                }
            }
            if self.running {
                if self.steer_next(session).await {
                    continue;
                }
                return Step::Continue;
            }
            let line = match self.input.pop_front() {
                None => return Step::Continue,
                Some(Input::Eof) => return Step::Quit,
                Some(Input::Line(line)) => line,
            };
            let text = line.trim();
            if text == "/exit" {
                return Step::Quit;
            }
            if text.is_empty() {
                self.show_prompt();
                continue;
            }
            if let Some(n) = text.strip_prefix("/rollback") {
                rollback_line(session, n).await;
                self.show_prompt();
                continue;
            }
            if text == "/compact" {
                match session.compact().await {
                    Ok(crate::actors::session::CompactStart::Started) => {
                        errln!("compacting the context...");
                        self.running = true;
                        self.compacting = true;
                    }
                    Ok(crate::actors::session::CompactStart::Scheduled) => {}
                    Err(e) => {
                        errln!("rookery: {e}");
                        self.show_prompt();
                    }
                }
                continue;
            }
            match session.start_task(text.to_string()).await {
                Ok(()) => {
                    self.running = true;
                    self.show_prompt();
                }
                Err(e) => {
                    errln!("rookery: {e}");
                    self.show_prompt();
                }
            }
        }
    }
}

/// `/rollback N`: drops the last N completed tasks from the context and says what it did.
async fn rollback_line(session: &SessionHandle, arg: &str) {
    let Ok(n) = arg.trim().parse::<u64>() else {
        errln!("rookery: usage: /rollback N (the number of completed tasks to drop)");
        return;
    };
    match session.rollback(n).await {
        Ok(r) => errln!(
            "rolled back {} task(s) ({} message(s)); files they changed are not reverted",
            r.dropped_tasks,
            r.dropped_messages
        ),
        Err(e) => errln!("rookery: {e}"),
    }
}

async fn repl(
    session: &SessionHandle,
    mut asks: mpsc::UnboundedReceiver<Question>,
    mut interrupts: Interrupts,
    show_thinking: bool,
) -> Result<ExitCode, CliError> {
    let mut rx = session.subscribe().await.map_err(CliError::Failed)?;
    let mut transcript = render::Transcript::default();
    // On a terminal the transcript streams; no spinner: the `steer> ` prompt owns the line.
    let mut view = std::io::stdout().is_terminal().then(|| {
        let style = TerminalStyle {
            spinner: false,
            ..TerminalStyle::detect()
        };
        LiveView::new(
            std::io::stdout(),
            style,
            StatusLine::disabled(),
            show_thinking,
        )
    });
    let mut lines = stdin_lines();
    let mut eof = false;
    let mut st = Repl {
        running: false,
        input: VecDeque::new(),
        asks: VecDeque::new(),
        asking: false,
        prompt: std::io::stdin().is_terminal(),
        compacting: false,
    };
    errln!(
        "session {}: one task per line; a line typed while a task runs steers it; /exit quits, Ctrl-C aborts a running task",
        session.id()
    );
    st.show_prompt();
    let mut stdout = std::io::stdout();
    loop {
        tokio::select! {
            msg = rx.recv() => {
                let Some(msg) = msg else { return Ok(ExitCode::from(1)) };
                if let Some(v) = view.as_mut() {
                    v.show(&msg);
                } else if let Some(text) = transcript.render(&msg) {
                    let _ = writeln!(stdout, "{text}");
                    let _ = stdout.flush();
                }
                if let Some(EventPayload::TaskEnd { .. }) = msg.as_event()
                    && !msg.has_origin()
                {
                    st.running = false;
                    st.deny_all();
                    st.show_prompt();
                }
                if let Some(EventPayload::CompactionEnd { status, error_message, .. }) = msg.as_event()
                    && !msg.has_origin()
                {
                    match error_message {
                        Some(e) => errln!("compaction {}: {e}", status.as_str()),
                        None => errln!("compaction {}", status.as_str()),
                    }
                    if st.compacting {
                        st.compacting = false;
                        st.running = false;
                        st.show_prompt();
                    }
                }
            }
            q = asks.recv() => {
                if let Some(q) = q {
                    st.asks.push_back(q);
                    if !st.asking {
                        st.ask_next();
                    }
                }
            }
            ctrl_c = interrupts.recv() => {
                if st.running {
                    errln!("\nrookery: interrupted; aborting the task");
                    st.input.clear();
                    st.deny_all();
                    let _ = session.abort();
                } else {
                    // Ctrl-C at the prompt quits, with the code shells give an interrupted command.
                    errln!();
                    return Ok(if ctrl_c {
                        ExitCode::from(super::run::EXIT_INTERRUPTED)
                    } else {
                        ExitCode::SUCCESS
                    });
                }
            }
            line = lines.recv(), if !eof => {
                match line {
                    Some(line) => st.input.push_back(Input::Line(line)),
                    None => {
                        eof = true;
                        st.input.push_back(Input::Eof);
                    }
                }
            }
        }
        if let Step::Quit = st.drive(session).await {
            return Ok(ExitCode::SUCCESS);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn questions_name_the_tool_and_subagent() {
        let mut r = ApprovalRequest {
            tool_call_id: "call_0".into(),
            name: "write_file".into(),
            arguments: "{\"file_path\":\"a\"}".into(),
            permission: None,
            origin: vec![],
        };
        assert_eq!(
            question(&r),
            "Allow write_file {\"file_path\":\"a\"}? [y]es / [n]o / [a]lways for this session "
        );
        r.origin = vec!["s1".into(), "s2".into()];
        assert_eq!(
            question(&r),
            "Allow write_file [subagent s1 > s2] {\"file_path\":\"a\"}? [y]es / [n]o / [a]lways for this session "
        );
    }

    #[test]
    fn a_non_utf8_line_is_skipped_and_reading_goes_on() {
        let input: &[u8] = b"first\r\n\xff\xfe bad\nthird\nlast";
        let mut got = Vec::new();
        read_lines(input, |l| {
            got.push(l);
            true
        });
        assert_eq!(got, vec!["first", "third", "last"]);
    }

    #[tokio::test]
    async fn the_chat_approver_waits_for_the_repl() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let a = ChatApprover { tx };
        let fut = a.approve(ApprovalRequest {
            tool_call_id: "call_1".into(),
            name: "read_file".into(),
            arguments: "{}".into(),
            permission: None,
            origin: vec![],
        });
        let (req, reply) = rx.recv().await.unwrap();
        assert_eq!(req.tool_call_id, "call_1");
        reply.send(Decision::Allow).unwrap();
        assert_eq!(fut.await, Decision::Allow);
        drop(rx);
        let fut = a.approve(req);
        assert_eq!(fut.await, Decision::Deny);
    }
}
