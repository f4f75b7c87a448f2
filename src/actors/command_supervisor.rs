//! Placeholder: the per-session command supervisor is being written.

/// Handle on a session's command supervisor.
#[derive(Clone, Debug)]
pub struct CommandSupervisorHandle;
