//! `CommandActor`: one spawned command (one OS process group). It owns the output ring, the
//! completion tail, the stdin queue and the exit status; it answers drains and reads at a
//! cursor (parking a reader until output, exit or its window ends), forwards stdin writes and
//! Ctrl-C, stops the command on request or when its time limit passes, and reports the final
//! exit once to whoever spawned it.
//!
//! `handle` never awaits a process, a pipe or a timer: readers, the waiter, the stdin writer and
//! every timer are spawned tasks that cast back. The timers are kept in the state and aborted
//! with the actor, so a stopped command's mailboxes are freed at once, not when its last read
//! window or time limit would have ended. The group is killed (SIGTERM, SIGKILL after
//! 1 s) in `post_stop` and by the [`crate::process::KillOnDrop`] guard in the state, so a killed or
//! panicked actor leaves no process behind. It knows nothing of the registry or of tools.
//!
//! Output is pulled, never pushed: a reader task holds one credit of [`OUTPUT_CREDITS`] per
//! chunk in the mailbox and the actor hands it back when the chunk is in the ring, so a command
//! that prints faster than the actor stores is slowed by the full kernel pipe, and the memory
//! of a command is its ring plus at most `OUTPUT_CREDITS` chunks of [`READ_BUF`] bytes.

mod io_tasks;

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinHandle;

use crate::process::ring::{OutputRing, RingPage, TailBuffer};
use crate::process::{ExitInfo, KillOnDrop, ProcessIo, SpawnedProcess, group};
use io_tasks::{read_pty, read_stream, write_pipe, write_pty};

/// After the foreground process exited while other group members still hold the output: end
/// the drain after this long without output…
const DRAIN_QUIET: Duration = Duration::from_millis(20);
/// …and at most this long after the exit.
const DRAIN_CAP: Duration = Duration::from_millis(50);
/// When no group member is left, the pipes reach EOF at once; this only bounds a process that
/// left the group (setsid) while keeping the pipes open.
const DRAIN_EOF_CAP: Duration = Duration::from_secs(1);

/// Bytes read from a pipe or the pty master at once.
pub const READ_BUF: usize = 64 * 1024;
/// Chunks of output a command may have in flight to its actor (read but not yet in the ring).
pub const OUTPUT_CREDITS: usize = 4;

/// Called once with the final exit and the rendered output tail.
pub type FinishFn = Box<dyn FnOnce(ExitInfo, String) + Send + Sync>;

/// What the actor is started with.
pub struct CommandArgs {
    /// The command's process id (as `run_command` returns it).
    pub id: String,
    /// The started process and its output streams.
    pub process: SpawnedProcess,
    /// Called once with the exit and the output's tail when the command is over.
    pub on_finish: FinishFn,
    /// Counts output chunks (the supervisor's idle reaper counts output as use).
    pub outputs: Arc<std::sync::atomic::AtomicU64>,
    /// Stops the command (and every process it started) when it runs longer.
    pub timeout: Option<Duration>,
}

/// The answer to a [`CommandMsg::ReadAt`]: a page of output at a cursor and, once the command
/// is over and its output complete, its exit.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PageReply {
    /// The output at the cursor.
    pub page: RingPage,
    /// The exit, once the command is over and its output complete.
    pub exit: Option<ExitInfo>,
    /// The command runs under a pseudo-terminal.
    pub tty: bool,
    /// Absolute offset right after the newest byte of output.
    pub end: u64,
}

/// The answer to a read: text drained from the ring and, once the command is over and
/// everything was read, its exit.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReadReply {
    /// The output drained.
    pub text: String,
    /// The exit, once the command is over and everything was read.
    pub exit: Option<ExitInfo>,
}

/// Messages of a [`CommandActor`]: reads, input and kills from its users, and the reports of its
/// own output, exit and timer tasks.
pub enum CommandMsg {
    /// Unread output now if any (or the exit); otherwise waits up to `wait` for some.
    Read {
        /// The longest wait for output.
        wait: Duration,
        /// Where the answer goes.
        reply: RpcReplyPort<ReadReply>,
    },
    /// Unread output and the exit status if the process has exited, at once.
    Drain(RpcReplyPort<ReadReply>),
    /// At most `max` bytes of output from the absolute offset `cursor`, consuming nothing. Waits
    /// up to `wait` first: for output past the cursor, or (`until_exit`) for the command's end.
    ReadAt {
        /// The absolute output offset to read from.
        cursor: u64,
        /// The most bytes to return.
        max: usize,
        /// The longest wait first.
        wait: Duration,
        /// Wait for the command's end rather than for more output.
        until_exit: bool,
        /// Where the answer goes.
        reply: RpcReplyPort<PageReply>,
    },
    /// Stops the command and every process it started; its exit becomes `Failed(reason)`.
    Kill {
        /// Why it was killed (the exit's text).
        reason: String,
    },
    /// Bytes for stdin (silently dropped once stdin is closed).
    Write(Vec<u8>),
    /// SIGINT to the process group.
    Interrupt,
    // From the actor's own tasks.
    /// Bytes the command wrote, ending on a character boundary.
    Output(Vec<u8>),
    /// One of the output streams reached its end.
    StreamEnd,
    /// The process exited.
    Exited {
        /// How it ended.
        exit: ExitInfo,
        /// Other processes of its group still run (they may still write output).
        others_alive: bool,
    },
    /// The wait of the `Read` numbered so is over.
    ReadTimeout(u64),
    /// The wait of the `ReadAt` numbered so is over.
    ReadAtTimeout(u64),
    /// The quiet time after the exit is over (for the drain of that generation): finish.
    DrainTimer(u64),
}

/// A parked [`CommandMsg::ReadAt`].
struct PageWaiter {
    n: u64,
    cursor: u64,
    max: usize,
    until_exit: bool,
    port: RpcReplyPort<PageReply>,
}

/// Aborts a task when dropped.
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The state of a [`CommandActor`]: its output ring, exit, waiting readers and timers.
pub struct CommandState {
    id: String,
    ring: OutputRing,
    tail: TailBuffer,
    exit: Option<ExitInfo>,
    exited_at: Option<Instant>,
    others_alive: bool,
    open_streams: u8,
    finished: bool,
    waiters: VecDeque<(u64, RpcReplyPort<ReadReply>)>,
    page_waiters: Vec<PageWaiter>,
    next_waiter: u64,
    tty: bool,
    /// Why the command was stopped (`Kill`), when it was.
    killed: Option<String>,
    drain_gen: u64,
    stdin: Option<mpsc::UnboundedSender<Vec<u8>>>,
    group: KillOnDrop,
    on_finish: Option<FinishFn>,
    tasks: Vec<AbortOnDrop>,
    /// The pending timers (the time limit, read windows, the drain): each holds a reference to
    /// this actor until it fires, so they are aborted with the actor rather than keeping its
    /// mailboxes alive for the rest of a long time limit.
    timers: Vec<AbortOnDrop>,
    /// Returned to the readers as their chunks reach the ring (backpressure).
    credits: Arc<Semaphore>,
    outputs: Arc<std::sync::atomic::AtomicU64>,
}

/// The actor owning one running command: its output, its input and its exit.
pub struct CommandActor;

impl Actor for CommandActor {
    type Msg = CommandMsg;
    type State = CommandState;
    type Arguments = CommandArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<CommandMsg>,
        args: CommandArgs,
    ) -> Result<CommandState, ActorProcessingErr> {
        let SpawnedProcess {
            mut child,
            io,
            group,
        } = args.process;
        let pgid = group.0.pgid();
        let waiter_group = group.0.clone();
        let me = myself.clone();
        // Not aborted with the actor: it must reap the leader whatever happens.
        tokio::spawn(async move {
            let exit = match child.wait().await {
                Ok(status) => ExitInfo::from_status(status),
                Err(e) => ExitInfo::Failed(format!("cannot wait for the command: {e}")),
            };
            waiter_group.mark_reaped();
            let others_alive = group::group_alive_from_task(pgid).await;
            let _ = me.cast(CommandMsg::Exited { exit, others_alive });
        });

        let timers: Vec<AbortOnDrop> = args
            .timeout
            .map(|limit| {
                send_later(
                    &myself,
                    limit,
                    CommandMsg::Kill {
                        reason: format!("timed out after {} s", limit.as_secs()),
                    },
                )
            })
            .into_iter()
            .collect();
        let tty = matches!(io, ProcessIo::Pty { .. });
        let (tx, rx) = mpsc::unbounded_channel::<Vec<u8>>();
        let credits = Arc::new(Semaphore::new(OUTPUT_CREDITS));
        let mut tasks = Vec::new();
        let open_streams = match io {
            ProcessIo::Pipes {
                stdin,
                stdout,
                stderr,
            } => {
                tasks.push(AbortOnDrop(tokio::spawn(read_stream(
                    stdout,
                    myself.clone(),
                    credits.clone(),
                ))));
                tasks.push(AbortOnDrop(tokio::spawn(read_stream(
                    stderr,
                    myself,
                    credits.clone(),
                ))));
                tasks.push(AbortOnDrop(tokio::spawn(write_pipe(stdin, rx))));
                2
            }
            ProcessIo::Pty { master } => {
                tasks.push(AbortOnDrop(tokio::spawn(read_pty(
                    master.clone(),
                    myself,
                    credits.clone(),
                ))));
                tasks.push(AbortOnDrop(tokio::spawn(write_pty(master, rx))));
                1
            }
        };
        Ok(CommandState {
            id: args.id,
            ring: OutputRing::default(),
            tail: TailBuffer::default(),
            exit: None,
            exited_at: None,
            others_alive: false,
            open_streams,
            finished: false,
            waiters: VecDeque::new(),
            page_waiters: Vec::new(),
            next_waiter: 0,
            tty,
            killed: None,
            drain_gen: 0,
            stdin: Some(tx),
            group,
            on_finish: Some(args.on_finish),
            tasks,
            timers,
            credits,
            outputs: args.outputs,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<CommandMsg>,
        msg: CommandMsg,
        state: &mut CommandState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            CommandMsg::Read { wait, reply } => {
                if !state.ring.is_empty() || state.finished {
                    let _ = reply.send(state.take_reply());
                } else {
                    let n = state.next_waiter;
                    state.next_waiter += 1;
                    state.waiters.push_back((n, reply));
                    state.later(&myself, wait, CommandMsg::ReadTimeout(n));
                }
            }
            CommandMsg::Drain(reply) => {
                let text = state.ring.drain();
                let _ = reply.send(ReadReply {
                    text,
                    exit: state.exit.clone(),
                });
            }
            CommandMsg::ReadAt {
                cursor,
                max,
                wait,
                until_exit,
                reply,
            } => {
                let ready =
                    state.finished || wait.is_zero() || (!until_exit && state.ring.end() > cursor);
                if ready {
                    let _ = reply.send(state.page(cursor, max));
                } else {
                    let n = state.next_waiter;
                    state.next_waiter += 1;
                    state.page_waiters.push(PageWaiter {
                        n,
                        cursor,
                        max,
                        until_exit,
                        port: reply,
                    });
                    state.later(&myself, wait, CommandMsg::ReadAtTimeout(n));
                }
            }
            CommandMsg::Kill { reason } => {
                if state.exit.is_none() && state.killed.is_none() {
                    tracing::debug!(id = %state.id, %reason, "stopping the command");
                    state.killed = Some(reason);
                    state.group.0.kill();
                }
            }
            CommandMsg::ReadAtTimeout(n) => {
                if let Some(pos) = state.page_waiters.iter().position(|w| w.n == n) {
                    let w = state.page_waiters.swap_remove(pos);
                    let _ = w.port.send(state.page(w.cursor, w.max));
                }
            }
            CommandMsg::Write(bytes) => {
                if let Some(tx) = &state.stdin
                    && tx.send(bytes).is_err()
                {
                    state.stdin = None;
                }
            }
            CommandMsg::Interrupt => {
                let sent = state.group.0.signal(Signal::SIGINT);
                tracing::debug!(id = %state.id, sent, "SIGINT to the process group");
            }
            CommandMsg::Output(bytes) => {
                state
                    .outputs
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                // The chunk is stored: its reader may read the next one.
                state.credits.add_permits(1);
                state.tail.push(&String::from_utf8_lossy(&bytes));
                state.ring.push(&bytes);
                if state.exit.is_some() && !state.finished && state.others_alive {
                    state.arm_drain_timer(&myself, DRAIN_QUIET);
                }
                state.serve_one_waiter();
                state.serve_page_waiters(false);
            }
            CommandMsg::StreamEnd => {
                state.open_streams = state.open_streams.saturating_sub(1);
                if state.open_streams == 0 && state.exit.is_some() {
                    state.finish();
                }
            }
            CommandMsg::Exited { exit, others_alive } => {
                tracing::debug!(id = %state.id, ?exit, others_alive, "command exited");
                let exit = match &state.killed {
                    Some(reason) => ExitInfo::Failed(reason.clone()),
                    None => exit,
                };
                state.exit = Some(exit);
                state.exited_at = Some(Instant::now());
                state.others_alive = others_alive;
                if state.open_streams == 0 {
                    state.finish();
                } else if others_alive {
                    state.arm_drain_timer(&myself, DRAIN_QUIET);
                } else {
                    state.arm_drain_timer(&myself, DRAIN_EOF_CAP);
                }
            }
            CommandMsg::ReadTimeout(n) => {
                if let Some(pos) = state.waiters.iter().position(|(w, _)| *w == n)
                    && let Some((_, port)) = state.waiters.remove(pos)
                {
                    let _ = port.send(ReadReply::default());
                }
            }
            CommandMsg::DrainTimer(generation) => {
                if generation == state.drain_gen && !state.finished {
                    state.finish();
                }
            }
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<CommandMsg>,
        state: &mut CommandState,
    ) -> Result<(), ActorProcessingErr> {
        state.group.0.kill();
        state.tasks.clear();
        state.timers.clear();
        Ok(())
    }
}

impl CommandState {
    /// Everything unread, with the exit once the command is over.
    fn take_reply(&mut self) -> ReadReply {
        ReadReply {
            text: self.ring.drain(),
            exit: if self.finished {
                self.exit.clone()
            } else {
                None
            },
        }
    }

    /// The page at `cursor`, with the exit once the command is over.
    fn page(&self, cursor: u64, max: usize) -> PageReply {
        PageReply {
            page: self.ring.read_at(cursor, max),
            exit: if self.finished {
                self.exit.clone()
            } else {
                None
            },
            tty: self.tty,
            end: self.ring.end(),
        }
    }

    /// Answers the parked page reads that can be answered: those waiting for output past their
    /// cursor, or every one once the command is over (`all`).
    fn serve_page_waiters(&mut self, all: bool) {
        let end = self.ring.end();
        let waiting = std::mem::take(&mut self.page_waiters);
        for w in waiting {
            if w.port.is_closed() {
                continue;
            }
            if all || (!w.until_exit && end > w.cursor) {
                let _ = w.port.send(self.page(w.cursor, w.max));
            } else {
                self.page_waiters.push(w);
            }
        }
    }

    /// Hands the unread output to the oldest reader still waiting.
    fn serve_one_waiter(&mut self) {
        while let Some((_, port)) = self.waiters.pop_front() {
            if port.is_closed() {
                continue;
            }
            let _ = port.send(self.take_reply());
            return;
        }
    }

    /// Casts `msg` to this actor after `delay`; the timer goes with the actor. Timers that
    /// already fired are forgotten here, so the list holds only pending ones.
    fn later(&mut self, myself: &ActorRef<CommandMsg>, delay: Duration, msg: CommandMsg) {
        self.timers.retain(|t| !t.0.is_finished());
        self.timers.push(send_later(myself, delay, msg));
    }

    /// (Re)starts the post-exit drain timer: `quiet` from now, never past the cap after exit.
    fn arm_drain_timer(&mut self, myself: &ActorRef<CommandMsg>, quiet: Duration) {
        let cap = if self.others_alive {
            DRAIN_CAP
        } else {
            DRAIN_EOF_CAP
        };
        let elapsed = self.exited_at.map_or(Duration::ZERO, |t| t.elapsed());
        let left = cap.saturating_sub(elapsed);
        if left.is_zero() {
            self.finish();
            return;
        }
        self.drain_gen += 1;
        let generation = self.drain_gen;
        self.later(myself, quiet.min(left), CommandMsg::DrainTimer(generation));
    }

    /// The command is over: report the exit once, then answer every reader.
    fn finish(&mut self) {
        if self.finished {
            return;
        }
        self.finished = true;
        let exit = self
            .exit
            .clone()
            .unwrap_or_else(|| ExitInfo::Failed("exit status unknown".to_string()));
        // The supervisor hears of the exit before any reader does: a tool that saw the exit
        // and then lists the commands finds it there too (the supervisor's mailbox is FIFO).
        if let Some(f) = self.on_finish.take() {
            f(exit, self.tail.render());
        }
        while let Some((_, port)) = self.waiters.pop_front() {
            if !port.is_closed() {
                let _ = port.send(self.take_reply());
            }
        }
        self.serve_page_waiters(true);
    }
}

/// Casts `msg` to `actor` after `delay` (from a spawned task, aborted when dropped).
fn send_later(actor: &ActorRef<CommandMsg>, delay: Duration, msg: CommandMsg) -> AbortOnDrop {
    let actor = actor.clone();
    AbortOnDrop(tokio::spawn(async move {
        tokio::time::sleep(delay).await;
        let _ = actor.cast(msg);
    }))
}
