//! `CommandSupervisorHandle`: the session's (and the command tools') way into its command
//! supervisor — spawn, start, lease, take, list and shutdown as calls on the actor. It holds no
//! state of its own besides the actor reference.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use ractor::rpc::CallResult;
use ractor::{Actor, ActorCell, ActorRef};

use super::lease::DropAction;
use super::{
    CommandEventSink, CommandLease, CommandListing, CommandOptions, CommandSupervisor,
    CommandSupervisorArgs, CommandSupervisorMsg, SHUTDOWN_WAIT, StartError, StartRequest, Started,
};
use crate::error::RookeryError;
use crate::process::ExitInfo;

/// The session's handle on its command supervisor.
#[derive(Clone)]
pub struct CommandSupervisorHandle {
    actor: ActorRef<CommandSupervisorMsg>,
    session_id: Arc<str>,
    /// `mode, network …` of the session's sandbox (`None`: unsandboxed), for the note a failed
    /// sandboxed command ends with.
    sandbox: Option<Arc<str>>,
}

impl fmt::Debug for CommandSupervisorHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CommandSupervisorHandle")
            .field("session_id", &self.session_id)
            .field("actor", &self.actor.get_id())
            .finish()
    }
}

impl CommandSupervisorHandle {
    /// Spawns the session's supervisor (unnamed), linked to `supervisor` when given.
    pub async fn spawn(
        session_id: String,
        workspace: PathBuf,
        sink: CommandEventSink,
        supervisor: Option<ActorCell>,
    ) -> Result<Self, RookeryError> {
        Self::spawn_with(
            session_id,
            workspace,
            sink,
            supervisor,
            CommandOptions::default(),
        )
        .await
    }

    /// [`Self::spawn`] with explicit options.
    pub async fn spawn_with(
        session_id: String,
        workspace: PathBuf,
        sink: CommandEventSink,
        supervisor: Option<ActorCell>,
        options: CommandOptions,
    ) -> Result<Self, RookeryError> {
        let sandbox = options
            .sandbox
            .as_ref()
            .map(|s| Arc::from(s.layout().describe()));
        let args = CommandSupervisorArgs {
            session_id: session_id.clone(),
            workspace,
            sink,
            options,
        };
        let (actor, _) = match supervisor {
            Some(cell) => Actor::spawn_linked(None, CommandSupervisor, args, cell).await?,
            None => Actor::spawn(None, CommandSupervisor, args).await?,
        };
        Ok(CommandSupervisorHandle {
            actor,
            session_id: session_id.into(),
            sandbox,
        })
    }

    /// The note a command that ran in the sandbox and exited with `exit` ends with: none when
    /// it succeeded, ran outside the sandbox (`escalated`) or the session has none.
    pub fn sandbox_note(&self, exit: &ExitInfo, escalated: bool) -> Option<String> {
        let policy = self.sandbox.as_deref().filter(|_| !escalated)?;
        exit.is_failure()
            .then(|| crate::tools::escalation::failure_note(policy))
    }

    /// The supervisor actor (e.g. to watch or kill it).
    pub fn actor(&self) -> &ActorRef<CommandSupervisorMsg> {
        &self.actor
    }

    /// Kills and reaps every command of the session, then stops the supervisor. Later starts
    /// fail with `command session manager disposed`; calling it twice is harmless.
    pub async fn shutdown(&self) {
        let _ = self.actor.call(CommandSupervisorMsg::Shutdown, None).await;
        let _ = self
            .actor
            .stop_and_wait(Some("session ended".into()), Some(SHUTDOWN_WAIT))
            .await;
    }

    /// Starts a command. `Err` displays as the `<msg>` of `[spawn error: <msg>]`.
    pub async fn start(&self, req: StartRequest) -> Result<Started, StartError> {
        // A command registered at once lives on when the call lets go of it.
        let background = req.background || req.style != super::CommandStyle::Windowed;
        match self
            .actor
            .call(|reply| CommandSupervisorMsg::Start { req, reply }, None)
            .await
        {
            Ok(CallResult::Success(Ok((id, actor, registered)))) => {
                let on_drop = if background {
                    DropAction::Nothing
                } else {
                    DropAction::Discard
                };
                Ok(Started {
                    lease: CommandLease::new(id, actor, self.actor.clone(), false, on_drop),
                    registered,
                })
            }
            Ok(CallResult::Success(Err(e))) => Err(e),
            _ => Err(StartError::Disposed),
        }
    }

    /// A registered command by id, for input_command (refreshes its last use and protects it
    /// from eviction while the lease lives). `None` when unknown.
    pub async fn lease(&self, id: &str) -> Option<CommandLease> {
        let id = id.to_string();
        let key = id.clone();
        match self
            .actor
            .call(|reply| CommandSupervisorMsg::Lease { id: key, reply }, None)
            .await
        {
            Ok(CallResult::Success(Some((actor, escalated)))) => Some(
                CommandLease::new(id, actor, self.actor.clone(), true, DropAction::Release)
                    .escalated(escalated),
            ),
            _ => None,
        }
    }

    /// A registered command by id, for kill_command: its completion notice is disarmed and it
    /// leaves the registry now; dropping the lease kills its group. Also returns the exit the
    /// supervisor already knows of. `None` when unknown.
    pub async fn take(&self, id: &str) -> Option<(CommandLease, Option<ExitInfo>)> {
        let id = id.to_string();
        let key = id.clone();
        match self
            .actor
            .call(|reply| CommandSupervisorMsg::Take { id: key, reply }, None)
            .await
        {
            Ok(CallResult::Success(Some((actor, exit)))) => Some((
                CommandLease::new(id, actor, self.actor.clone(), false, DropAction::Discard),
                exit,
            )),
            _ => None,
        }
    }

    /// The registered commands in registration order (does not refresh their use).
    pub async fn list(&self) -> Vec<CommandListing> {
        match self.actor.call(CommandSupervisorMsg::List, None).await {
            Ok(CallResult::Success(list)) => list,
            _ => Vec::new(),
        }
    }
}
