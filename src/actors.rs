//! The actor tree: the `Host` (session directory) and one `SessionActor` per session.
//! Each actor owns its state; everything else talks to it through messages and handles.

pub mod background_notice;
pub mod command;
pub mod command_supervisor;
pub mod host;
pub mod node_lost; // the failover records of a session taken over from a dead node
pub mod session;
pub mod session_api;
pub mod spawn;
pub mod subagent_supervisor;
