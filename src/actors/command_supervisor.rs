//! `CommandSupervisor`: one per session, the only owner of the registry of background commands
//! (at most 64, LRU eviction, exited ones first) and the parent of every `CommandActor` of the
//! session, registered or still in its foreground window. It admits, leases, evicts and removes
//! commands, turns finished `run_in_background` commands into completion notices and evictions
//! into events (both through the session's [`CommandEventSink`]), and kills every group on
//! shutdown — or, through the `KillOnDrop` guards of its state, when it is stopped or killed.
//!
//! Its `handle` never waits for a process: spawning is a quick fork/exec, reads happen between
//! tools and command actors, and shutdown waits for the reaping in a spawned task. It does not
//! deliver notices to the model (the session does) and builds no tool output.

mod eviction;
mod handle;
mod idle;
mod lease;
pub mod notice;
pub mod openvaala;
mod start_error;
pub mod tools;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ractor::{Actor, ActorProcessingErr, ActorRef, MessagingErr, RpcReplyPort, SupervisionEvent};
use tokio::sync::watch;

use crate::actors::command::{CommandActor, CommandArgs, CommandMsg};
use crate::process::env_policy::EnvPolicy;
use crate::process::{self, KillOnDrop};
use crate::process::{ExitInfo, SpawnSpec};
pub use handle::CommandSupervisorHandle;
pub use lease::{Collected, CommandLease};
pub use notice::CommandListing;
pub use start_error::StartError;

/// Most registered commands per session.
pub const MAX_COMMANDS: usize = 64;
/// From this many registered commands on, exec_command warns the model.
pub const CROWDED_AT: usize = 60;
/// How long `shutdown` waits for the groups to be gone.
pub(crate) const SHUTDOWN_WAIT: Duration = Duration::from_secs(5);

/// What the session learns from its commands.
#[derive(Debug, Clone, PartialEq)]
pub enum CommandEvent {
    /// A registered command was evicted to admit another (`status`: `running` | `exited`).
    Evicted {
        /// The command's process id.
        process_id: String,
        /// `running` or `exited`.
        status: String,
    },
    /// A `run_in_background` command finished: the exact `[background_task_done]` user text.
    Completed {
        /// The notice, as the model will read it.
        notice_text: String,
    },
}

/// Where the supervisor sends its events (called from inside the actor: keep it quick).
pub type CommandEventSink = Arc<dyn Fn(CommandEvent) + Send + Sync>;

/// Tunables of a supervisor (the defaults are the contract; tests shrink them).
#[derive(Debug, Clone)]
pub struct CommandOptions {
    /// Most registered commands (default 64).
    pub capacity: usize,
    /// Extra environment of every command (the hardened keys still win).
    pub env: Vec<(String, String)>,
    /// Which inherited variables commands may see.
    pub env_policy: Arc<EnvPolicy>,
    /// Registered commands untouched this long are stopped and removed (`commands.idle_reap`,
    /// default 10 days).
    pub idle_reap: Duration,
    /// The session's sandbox: every command runs under its confinement (with `TMPDIR` set to
    /// its private temp dir) unless its call was approved to run outside it.
    pub sandbox: Option<Arc<crate::sandbox::SessionSandbox>>,
}

impl Default for CommandOptions {
    fn default() -> Self {
        CommandOptions {
            capacity: MAX_COMMANDS,
            env: Vec::new(),
            env_policy: Arc::default(),
            idle_reap: crate::config::idle_reap::DEFAULT_IDLE_REAP,
            sandbox: None,
        }
    }
}

/// A command to start.
#[derive(Debug, Clone)]
pub struct StartRequest {
    /// The shell command line (run with `bash -lc`).
    pub cmd: String,
    /// Absolute working directory.
    pub cwd: PathBuf,
    /// Run it under a pseudo-terminal.
    pub tty: bool,
    /// Register at once and arm the completion notice (`run_in_background`).
    pub background: bool,
    /// Which tool surface started it.
    pub style: CommandStyle,
    /// Run outside the session's sandbox (a `require_escalated` call the gate approved).
    pub escalated: bool,
    /// The W3C `traceparent` of the call that starts it, set as `TRACEPARENT` in its
    /// environment (OpenTelemetry export on), so an instrumented command continues the trace.
    pub traceparent: Option<String>,
}

/// How a command is registered, by the tool surface that starts it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum CommandStyle {
    /// Held by its call for a window: `proc-` ids, registered when it outlives its window or
    /// runs in the background, with a completion notice then (the penguin profile's).
    #[default]
    Windowed,
    /// Registered at once: `cmd-` ids, no completion notice, stopped after `timeout` (none: no
    /// limit) (the openvaala profile's).
    Detached {
        /// Stop the command after this long (`None`: no limit).
        timeout: Option<Duration>,
    },
}

/// A started command.
pub struct Started {
    /// For a foreground command: dropping it kills the command unless it was registered.
    pub lease: CommandLease,
    /// Registered commands after admission (background starts only).
    pub registered: Option<usize>,
}

type StartReply = Result<(String, ActorRef<CommandMsg>, Option<usize>), StartError>;

/// Messages of a [`CommandSupervisor`]: the session's requests and its commands' reports.
pub enum CommandSupervisorMsg {
    /// Starts a command.
    Start {
        /// What to start.
        req: StartRequest,
        /// The id, the command's actor and, when registered at once, how many commands are
        /// registered now.
        reply: RpcReplyPort<StartReply>,
    },
    /// A registered command by id, marked as being read (refreshes its last use).
    Lease {
        /// The command's process id.
        id: String,
        /// The command's actor, if registered, and whether it runs outside the sandbox.
        reply: RpcReplyPort<Option<(ActorRef<CommandMsg>, bool)>>,
    },
    /// A registered command by id for kill_command: disarmed and unregistered at once.
    Take {
        /// The command's process id.
        id: String,
        /// The command's actor and its exit (if over), if registered.
        reply: RpcReplyPort<Option<(ActorRef<CommandMsg>, Option<ExitInfo>)>>,
    },
    /// Registers a foreground command that outlived its window.
    Register {
        /// The command's process id.
        id: String,
        /// How many commands are registered now, or `None` when the id is unknown.
        reply: RpcReplyPort<Option<usize>>,
    },
    /// A lease on a command ended (its `CommandLease` was dropped).
    LeaseEnded {
        /// The command's process id.
        id: String,
        /// The lease counted as a reader of the command.
        reader: bool,
        /// The command is to be removed (a foreground command its caller gave up).
        discard: bool,
    },
    /// A command is over.
    Finished {
        /// The command's process id.
        id: String,
        /// How it ended.
        exit: ExitInfo,
        /// The last part of its output (for the completion notice).
        tail: String,
    },
    /// The registered commands, as `list_commands` shows them.
    List(RpcReplyPort<Vec<CommandListing>>),
    /// Kills every command; answers when done.
    Shutdown(RpcReplyPort<()>),
    /// The idle reaper's tick (`idle.rs`).
    Sweep,
}

struct Entry {
    actor: ActorRef<CommandMsg>,
    label: String,
    registered: bool,
    /// Registration order.
    seq: u64,
    /// Logical clock of the last use (ties impossible).
    last_used: u64,
    last_used_at: Instant,
    readers: usize,
    notify: bool,
    exit: Option<ExitInfo>,
    /// Runs outside the session's sandbox (an approved `require_escalated` call).
    escalated: bool,
    done: watch::Receiver<bool>,
    /// Output chunks the command produced, and how many the last sweep saw.
    outputs: Arc<std::sync::atomic::AtomicU64>,
    seen_outputs: u64,
    /// Kills the group when the entry goes (also when the supervisor dies).
    _group: KillOnDrop,
}

/// The state of a [`CommandSupervisor`]: the session's commands and their registry.
pub struct CommandSupervisorState {
    session_id: String,
    workspace: PathBuf,
    sink: CommandEventSink,
    options: CommandOptions,
    entries: HashMap<String, Entry>,
    clock: u64,
    disposed: bool,
    /// Stops the idle reaper's ticks with the supervisor.
    _sweeper: Option<idle::Sweeper>,
}

/// The actor owning one session's background commands: starts them, registers up to the
/// capacity (evicting the least recently used), reaps idle ones and kills them all with the
/// session.
pub struct CommandSupervisor;

/// What a [`CommandSupervisor`] is started with.
pub struct CommandSupervisorArgs {
    pub(crate) session_id: String,
    pub(crate) workspace: PathBuf,
    pub(crate) sink: CommandEventSink,
    pub(crate) options: CommandOptions,
}

impl Actor for CommandSupervisor {
    type Msg = CommandSupervisorMsg;
    type State = CommandSupervisorState;
    type Arguments = CommandSupervisorArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<CommandSupervisorMsg>,
        args: CommandSupervisorArgs,
    ) -> Result<CommandSupervisorState, ActorProcessingErr> {
        let sweeper = idle::Sweeper::start(&myself, args.options.idle_reap);
        Ok(CommandSupervisorState {
            session_id: args.session_id,
            workspace: args.workspace,
            sink: args.sink,
            options: args.options,
            entries: HashMap::new(),
            clock: 0,
            disposed: false,
            _sweeper: Some(sweeper),
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<CommandSupervisorMsg>,
        msg: CommandSupervisorMsg,
        state: &mut CommandSupervisorState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            CommandSupervisorMsg::Start { req, reply } => {
                let res = state.start(&myself, req).await;
                // A caller that went away before the answer cannot discard its foreground
                // command any more: do it here.
                if let Err(MessagingErr::SendErr(Ok((id, _, None)))) = reply.send(res) {
                    state.remove(&id);
                }
            }
            CommandSupervisorMsg::Lease { id, reply } => {
                let tick = state.tick();
                let actor = state
                    .entries
                    .get_mut(&id)
                    .filter(|e| e.registered)
                    .map(|e| {
                        e.touch(tick);
                        e.readers += 1;
                        (e.actor.clone(), e.escalated)
                    });
                let _ = reply.send(actor);
            }
            CommandSupervisorMsg::Take { id, reply } => {
                let found = state
                    .entries
                    .get_mut(&id)
                    .filter(|e| e.registered)
                    .map(|e| {
                        e.notify = false;
                        e.registered = false;
                        (e.actor.clone(), e.exit.clone())
                    });
                let _ = reply.send(found);
            }
            CommandSupervisorMsg::Register { id, reply } => {
                let n = state.entries.contains_key(&id).then(|| state.admit(&id));
                let _ = reply.send(n);
            }
            CommandSupervisorMsg::LeaseEnded {
                id,
                reader,
                discard,
            } => {
                if let Some(e) = state.entries.get_mut(&id)
                    && reader
                {
                    e.readers = e.readers.saturating_sub(1);
                }
                if discard {
                    state.remove(&id);
                }
                state.trim(None);
            }
            CommandSupervisorMsg::Finished { id, exit, tail } => state.finished(&id, exit, &tail),
            CommandSupervisorMsg::Sweep => state.sweep(),
            CommandSupervisorMsg::List(reply) => {
                let mut list: Vec<(&u64, CommandListing)> = state
                    .entries
                    .iter()
                    .filter(|(_, e)| e.registered)
                    .map(|(id, e)| {
                        (
                            &e.seq,
                            CommandListing {
                                process_id: id.clone(),
                                exit: e.exit.clone(),
                                idle: e.last_used_at.elapsed(),
                                label: e.label.clone(),
                            },
                        )
                    })
                    .collect();
                list.sort_by_key(|(seq, _)| **seq);
                let _ = reply.send(list.into_iter().map(|(_, l)| l).collect());
            }
            CommandSupervisorMsg::Shutdown(reply) => {
                state.disposed = true;
                let waits: Vec<watch::Receiver<bool>> =
                    state.entries.values().map(|e| e.done.clone()).collect();
                let n = waits.len();
                for (_, e) in state.entries.drain() {
                    e.actor.stop(Some("session ended".into()));
                }
                tracing::debug!(session = %state.session_id, commands = n, "commands shut down");
                tokio::spawn(async move {
                    let all =
                        futures::future::join_all(waits.into_iter().map(|mut rx| async move {
                            let _ = rx.wait_for(|done| *done).await;
                        }));
                    if tokio::time::timeout(SHUTDOWN_WAIT, all).await.is_err() {
                        tracing::warn!("some command groups were still alive after shutdown");
                    }
                    let _ = reply.send(());
                });
            }
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        _myself: ActorRef<CommandSupervisorMsg>,
        evt: SupervisionEvent,
        state: &mut CommandSupervisorState,
    ) -> Result<(), ActorProcessingErr> {
        let (cell, why) = match evt {
            SupervisionEvent::ActorFailed(cell, err) => {
                (cell, format!("the command's actor failed: {err}"))
            }
            SupervisionEvent::ActorTerminated(cell, _, _) => {
                (cell, "the command's actor stopped".to_string())
            }
            _ => return Ok(()),
        };
        let found = state
            .entries
            .iter()
            .find(|(_, e)| e.actor.get_id() == cell.get_id())
            .map(|(id, _)| id.clone());
        if let Some(id) = found {
            tracing::warn!(session = %state.session_id, %id, "{why}");
            if let Some(e) = state.entries.get_mut(&id) {
                e._group.0.kill();
            }
            state.finished(&id, ExitInfo::Failed(why), "");
        }
        Ok(())
    }
}

impl Entry {
    fn touch(&mut self, tick: u64) {
        self.last_used = tick;
        self.last_used_at = Instant::now();
    }
}

impl CommandSupervisorState {
    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    fn new_id(&self, style: CommandStyle) -> String {
        let prefix = match style {
            CommandStyle::Windowed => "proc",
            CommandStyle::Detached { .. } => "cmd",
        };
        loop {
            let id = format!("{prefix}-{:08x}", rand::random::<u32>());
            if !self.entries.contains_key(&id) {
                return id;
            }
        }
    }

    fn registered_count(&self) -> usize {
        self.entries.values().filter(|e| e.registered).count()
    }

    async fn start(
        &mut self,
        myself: &ActorRef<CommandSupervisorMsg>,
        req: StartRequest,
    ) -> StartReply {
        if self.disposed {
            return Err(StartError::Disposed);
        }
        let id = self.new_id(req.style);
        let (timeout, register) = match req.style {
            CommandStyle::Windowed => (None, req.background),
            CommandStyle::Detached { timeout } => (timeout, true),
        };
        let sandbox = self.options.sandbox.as_ref().filter(|_| !req.escalated);
        let mut env = self.options.env.clone();
        if let Some(s) = sandbox {
            env.push(("TMPDIR".into(), s.layout().tmpdir.display().to_string()));
        }
        if let Some(tp) = &req.traceparent {
            env.push((crate::telemetry::traceparent::ENV.into(), tp.clone()));
        }
        let spec = SpawnSpec {
            cmd: req.cmd.clone(),
            cwd: if req.cwd.as_os_str().is_empty() {
                self.workspace.clone()
            } else {
                req.cwd.clone()
            },
            tty: req.tty,
            env,
            env_policy: self.options.env_policy.clone(),
            sandbox: sandbox.map(|s| s.confinement().clone()),
        };
        let spawned = process::spawn_process(&spec).await?;
        let group = spawned.group.0.clone();
        let sup = myself.clone();
        let fid = id.clone();
        let outputs = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let args = CommandArgs {
            outputs: outputs.clone(),
            id: id.clone(),
            process: spawned,
            on_finish: Box::new(move |exit, tail| {
                let _ = sup.cast(CommandSupervisorMsg::Finished {
                    id: fid,
                    exit,
                    tail,
                });
            }),
            timeout,
        };
        let (actor, _) = Actor::spawn_linked(None, CommandActor, args, myself.get_cell())
            .await
            .map_err(StartError::Actor)?;
        tracing::debug!(session = %self.session_id, %id, pgid = group.pgid(), background = req.background, "command started");
        let tick = self.tick();
        self.entries.insert(
            id.clone(),
            Entry {
                actor: actor.clone(),
                label: notice::label(&req.cmd),
                registered: false,
                seq: 0,
                last_used: tick,
                last_used_at: Instant::now(),
                readers: 0,
                notify: req.background && req.style == CommandStyle::Windowed,
                exit: None,
                escalated: req.escalated,
                done: group.done(),
                outputs,
                seen_outputs: 0,
                _group: KillOnDrop(group),
            },
        );
        let registered = register.then(|| self.admit(&id));
        Ok((id, actor, registered))
    }

    /// Registers `id` (refreshing its use) and evicts down to the capacity.
    fn admit(&mut self, id: &str) -> usize {
        let tick = self.tick();
        if let Some(e) = self.entries.get_mut(id) {
            if !e.registered {
                e.seq = tick;
            }
            e.registered = true;
            e.touch(tick);
        }
        self.trim(Some(id));
        self.registered_count()
    }

    /// Evicts down to the capacity by the rule of [`eviction::choose`] (exited first, then least
    /// recently used; never `protect`, never one being read): stops each victim and reports it.
    fn trim(&mut self, protect: Option<&str>) {
        let snapshot: Vec<eviction::EntryView<'_>> = self
            .entries
            .iter()
            .map(|(id, e)| eviction::EntryView {
                id,
                registered: e.registered,
                reading: e.readers > 0,
                exited: e.exit.is_some(),
                last_used: e.last_used,
            })
            .collect();
        let choice = eviction::choose(&snapshot, self.options.capacity, protect);
        for victim in choice.victims {
            if let Some(e) = self.entries.remove(&victim) {
                let status = if e.exit.is_some() {
                    "exited"
                } else {
                    "running"
                };
                tracing::debug!(session = %self.session_id, id = %victim, status, "command evicted");
                e.actor.stop(Some("evicted".into()));
                (self.sink)(CommandEvent::Evicted {
                    process_id: victim,
                    status: status.to_string(),
                });
            }
        }
        if choice.still_over {
            tracing::warn!(session = %self.session_id, "registry over capacity: every command is busy");
        }
    }

    /// Forgets `id`, stops its actor and kills its group (no notice).
    fn remove(&mut self, id: &str) {
        if let Some(e) = self.entries.remove(id) {
            e.actor.stop(Some("removed".into()));
        }
    }

    fn finished(&mut self, id: &str, exit: ExitInfo, tail: &str) {
        let Some(e) = self.entries.get_mut(id) else {
            return;
        };
        if e.exit.is_none() {
            e.exit = Some(exit.clone());
        }
        if std::mem::take(&mut e.notify) {
            let mut text = notice::completion_notice(id, &e.label, &exit, tail);
            // A sandboxed command that failed says so, as its foreground result would.
            if let Some(s) = self.options.sandbox.as_ref().filter(|_| !e.escalated)
                && exit.is_failure()
            {
                text.push('\n');
                text.push_str(&crate::tools::escalation::failure_note(
                    &s.layout().describe(),
                ));
            }
            (self.sink)(CommandEvent::Completed { notice_text: text });
        }
    }
}
