//! `SessionRef`: the address of a session, through which its requests are sent. A subagent
//! supervisor reaches its parent session through one; a `SessionHandle` holds one.
//!
//! It only sends [`SessionRequest`]s; it never names the session's internal messages.

use ractor::{ActorCell, DerivedActorRef};
use tokio::sync::watch;

use super::{ForkTurns, Inbox, SessionRequest};
use crate::error::RookeryError;
use crate::message::ModelPayload;

/// Sends requests to one session.
#[derive(Clone, Debug)]
pub struct SessionRef(pub(crate) DerivedActorRef<SessionRequest>);

impl std::ops::Deref for SessionRef {
    type Target = ActorCell;

    /// The session actor's cell (its id and status).
    fn deref(&self) -> &ActorCell {
        &self.0
    }
}

impl SessionRef {
    /// Sends `request` without waiting for an answer.
    pub(crate) fn cast(&self, request: SessionRequest) -> Result<(), RookeryError> {
        self.0.cast(request).map_err(RookeryError::from)
    }

    /// Delivers a `[background_task_done]` text at the next input-assembly point.
    pub fn notice(&self, text: String) -> Result<(), RookeryError> {
        self.cast(SessionRequest::Notice(text))
    }

    /// Delivers a collaborating agent's text (a report or a message); `what` describes it for
    /// `wait_agent`.
    pub fn agent_input(&self, text: String, what: String) -> Result<(), RookeryError> {
        self.cast(SessionRequest::AgentInput { text, what })
    }

    /// Wakes the session's `wait_agent` (a message was queued for it elsewhere).
    pub fn poke(&self, what: String) -> Result<(), RookeryError> {
        self.cast(SessionRequest::Poke(what))
    }

    /// A receiver of the session's inbox: what arrived for its model (`wait_agent`).
    pub async fn inbox(&self) -> Result<watch::Receiver<Inbox>, RookeryError> {
        Ok(ractor::call!(self.0, SessionRequest::Inbox)?)
    }

    /// The history of the session's completed tasks chosen by `turns` (oldest first).
    pub async fn fork_history(&self, turns: ForkTurns) -> Result<Vec<ModelPayload>, RookeryError> {
        Ok(ractor::call!(self.0, SessionRequest::Fork, turns)?)
    }
}
