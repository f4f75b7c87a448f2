//! The data of one `approval_grant` record: a grant for the session, as the trace keeps it and
//! a resume reads it back. It knows nothing of how a grant is matched (`approval/grants.rs`).

/// One grant of the session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// `grant-N`, unique within the session.
    pub grant_id: String,
    /// The allow rule, in Claude Code's syntax (`Bash(git status:*)`, `read_file`).
    pub rule: String,
    /// When it was granted (the timestamp of its `approval_grant` record).
    pub created_at: String,
}
