//! How a supervisor below the session starts a child session without knowing the session
//! actor: the session hands it a [`StartSession`] function, which returns a
//! [`StartedSession`].
//!
//! Only the types; the function itself is built by the session (`actors/session/services.rs`)
//! over `actors/spawn.rs`.

use std::sync::Arc;

use futures::future::BoxFuture;
use ractor::ActorCell;

use super::{SessionHandle, SessionOptions, Subscribers};
use crate::error::RookeryError;
use crate::trace::hub::TraceHandle;

/// A started session and the parts its supervisor keeps.
pub struct StartedSession {
    pub handle: SessionHandle,
    pub trace: TraceHandle,
    pub subscribers: Subscribers,
}

/// Starts a session with the given id and options, linked to the given supervisor (its trace
/// written at once).
pub type StartSession = Arc<
    dyn Fn(
            ActorCell,
            String,
            SessionOptions,
        ) -> BoxFuture<'static, Result<StartedSession, RookeryError>>
        + Send
        + Sync,
>;
