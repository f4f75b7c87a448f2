//! Placeholder: the per-session command supervisor is being written.
use std::path::PathBuf;
use std::sync::Arc;

use ractor::{ActorCell, ActorRef};

use crate::error::RookeryError;

#[derive(Debug, Clone, PartialEq)]
pub enum CommandEvent {
    Evicted { process_id: String, status: String },
    Completed { notice_text: String },
}

pub type CommandEventSink = Arc<dyn Fn(CommandEvent) + Send + Sync>;

/// Handle on a session's command supervisor.
#[derive(Clone, Debug)]
pub struct CommandSupervisorHandle {
    actor: ActorRef<()>,
}

impl CommandSupervisorHandle {
    pub async fn spawn(
        _session_id: String,
        _workspace: PathBuf,
        _sink: CommandEventSink,
        _supervisor: Option<ActorCell>,
    ) -> Result<Self, RookeryError> {
        Err(RookeryError::Actor("placeholder".into()))
    }
    pub fn actor(&self) -> &ActorRef<()> {
        &self.actor
    }
    pub async fn shutdown(&self) {}
}
