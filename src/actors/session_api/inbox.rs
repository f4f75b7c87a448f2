//! The inbox a caller may watch (`Inbox`: what arrived for the session's model and what it has
//! been given) and which completed tasks a forked session starts with (`ForkTurns`).
//!
//! Plain data; the session owns the signal that carries it (`actors/session/inbox.rs`).

/// What arrived for the session's model and what it has been given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Inbox {
    /// Arrivals so far (steers, notices, reports, messages).
    pub arrived: u64,
    /// `arrived` as of the last input-assembly point.
    pub delivered: u64,
    /// The last arrival, e.g. `agent agent-1a2b3c4d reported (completed)`.
    pub last: String,
}

impl Inbox {
    /// Something arrived that the model has not been given yet.
    pub fn waiting(&self) -> bool {
        self.arrived > self.delivered
    }
}

/// Which of the parent's completed tasks a spawned agent starts with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ForkTurns {
    /// None of them.
    None,
    /// All of them.
    All,
    /// The last this many.
    Last(usize),
}
