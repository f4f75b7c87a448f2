//! Replaying recorded provider streams: the loopback server that plays them and the harness
//! that runs a session against it and checks what the trace holds.

pub mod harness;
pub mod server;
