//! `CommandLease`: what a tool call holds while it works with one command — the command actor to
//! read from and write to, plus what the supervisor must do when the call lets go (nothing,
//! release a reader mark, or discard the command and kill its group). The release runs from
//! `Drop`, so a cancelled or panicked tool call still ends its lease.
//!
//! The collect loop lives here: it streams output chunk by chunk for a window without ever
//! losing text (the command actor keeps unread output until a read is answered).

use std::time::Duration;

use ractor::ActorRef;
use ractor::rpc::CallResult;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::CommandSupervisorMsg;
use crate::actors::command::{CommandMsg, PageReply, ReadReply};
use crate::process::ExitInfo;

/// What the supervisor does when the lease is dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum DropAction {
    Nothing,
    Release,
    Discard,
}

/// How a collect window ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Collected {
    /// The command is over (all its output was passed on).
    Exited(ExitInfo),
    /// The window ended with the command still running.
    Running,
    /// The call was cancelled (user abort or tool timeout).
    Cancelled,
}

/// A tool call's hold on one command.
pub struct CommandLease {
    id: String,
    actor: ActorRef<CommandMsg>,
    supervisor: ActorRef<CommandSupervisorMsg>,
    reader: bool,
    on_drop: DropAction,
    /// The command runs outside the session's sandbox.
    escalated: bool,
}

fn gone() -> ExitInfo {
    ExitInfo::Failed("the command's actor stopped".to_string())
}

impl CommandLease {
    pub(super) fn new(
        id: String,
        actor: ActorRef<CommandMsg>,
        supervisor: ActorRef<CommandSupervisorMsg>,
        reader: bool,
        on_drop: DropAction,
    ) -> Self {
        CommandLease {
            id,
            actor,
            supervisor,
            reader,
            on_drop,
            escalated: false,
        }
    }

    /// The command's `proc-xxxxxxxx` id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Marks the lease's command as one running outside the session's sandbox.
    pub(super) fn escalated(mut self, escalated: bool) -> Self {
        self.escalated = escalated;
        self
    }

    /// Whether the command runs outside the session's sandbox (no sandbox note on its exit).
    pub fn is_escalated(&self) -> bool {
        self.escalated
    }

    /// Streams output to `emit` as it arrives, for up to `window`, ending early when the
    /// command is over or `cancel` fires.
    pub async fn collect(
        &self,
        window: Duration,
        cancel: &CancellationToken,
        emit: &mut (dyn FnMut(String) + Send),
    ) -> Collected {
        let deadline = Instant::now() + window;
        loop {
            let now = Instant::now();
            if now >= deadline {
                return Collected::Running;
            }
            let wait = deadline - now;
            let call = self
                .actor
                .call(|reply| CommandMsg::Read { wait, reply }, None);
            let res = tokio::select! {
                // An answer that is already there wins over a cancel: its text is passed on.
                biased;
                r = call => r,
                _ = cancel.cancelled() => return Collected::Cancelled,
            };
            match res {
                Ok(CallResult::Success(ReadReply { text, exit })) => {
                    if !text.is_empty() {
                        emit(text);
                    }
                    if let Some(exit) = exit {
                        return Collected::Exited(exit);
                    }
                }
                _ => return Collected::Exited(gone()),
            }
        }
    }

    /// Unread output and the exit if the process has exited, without waiting.
    pub async fn drain(&self) -> ReadReply {
        match self.actor.call(CommandMsg::Drain, None).await {
            Ok(CallResult::Success(reply)) => reply,
            _ => ReadReply {
                text: String::new(),
                exit: Some(gone()),
            },
        }
    }

    /// At most `max` bytes of output from the absolute offset `cursor` (nothing is consumed),
    /// after waiting up to `wait` for output past the cursor or, with `until_exit`, for the end.
    pub async fn read_at(
        &self,
        cursor: u64,
        max: usize,
        wait: Duration,
        until_exit: bool,
    ) -> PageReply {
        let call = self.actor.call(
            |reply| CommandMsg::ReadAt {
                cursor,
                max,
                wait,
                until_exit,
                reply,
            },
            None,
        );
        match call.await {
            Ok(CallResult::Success(reply)) => reply,
            _ => PageReply {
                exit: Some(gone()),
                ..PageReply::default()
            },
        }
    }

    /// Stops the command and every process it started; it stays registered, its exit
    /// `Failed(reason)`.
    pub fn kill(&self, reason: impl Into<String>) {
        let _ = self.actor.cast(CommandMsg::Kill {
            reason: reason.into(),
        });
    }

    /// Queues bytes for the command's stdin (dropped silently once stdin is closed).
    pub fn write(&self, bytes: Vec<u8>) {
        let _ = self.actor.cast(CommandMsg::Write(bytes));
    }

    /// SIGINT to the command's process group.
    pub fn interrupt(&self) {
        let _ = self.actor.cast(CommandMsg::Interrupt);
    }

    /// Registers a foreground command that outlived its window (admission may evict another).
    /// Returns the number of registered commands, or `None` when the command is already gone.
    pub async fn register(mut self) -> Option<usize> {
        let id = self.id.clone();
        let res = self
            .supervisor
            .call(|reply| CommandSupervisorMsg::Register { id, reply }, None)
            .await;
        match res {
            Ok(CallResult::Success(Some(n))) => {
                self.on_drop = DropAction::Nothing;
                Some(n)
            }
            _ => None,
        }
    }

    /// Removes the command from the registry and kills its group.
    pub fn remove(mut self) {
        self.on_drop = DropAction::Discard;
    }
}

impl Drop for CommandLease {
    fn drop(&mut self) {
        if self.on_drop == DropAction::Nothing && !self.reader {
            return;
        }
        let _ = self.supervisor.cast(CommandSupervisorMsg::LeaseEnded {
            id: self.id.clone(),
            reader: self.reader,
            discard: self.on_drop == DropAction::Discard,
        });
    }
}
