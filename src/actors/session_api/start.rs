//! How a supervisor below the session starts a child session without knowing the session
//! actor: the session hands it a [`StartSession`] function, which returns a
//! [`StartedSession`].
//!
//! Only the types (and when a new session's `session_meta` is written, [`MetaWrite`]); the
//! function itself is built by `actors/spawn.rs` and handed to the session when it starts.

use std::sync::Arc;

use futures::future::BoxFuture;
use ractor::ActorCell;

use super::{SessionHandle, SessionOptions, Subscribers};
use crate::error::RookeryError;
use crate::trace::hub::TraceHandle;

/// A started session and the parts its supervisor keeps.
pub struct StartedSession {
    /// The session.
    pub handle: SessionHandle,
    /// Its trace file's handle.
    pub trace: TraceHandle,
    /// Its subscribers (the host forwards to them).
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

/// When a new session's `session_meta` goes to disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetaWrite {
    /// At once: the trace is readable from the session's start.
    AtOnce,
    /// With the first records of the task its creator starts next (one write instead of two).
    /// Until the session handles its first message other than a `Subscribe`, its meta is
    /// queued: a crash in between leaves an empty trace file.
    WithFirstTask,
}
