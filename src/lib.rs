//! Rookery: an actor-based session runtime for LLM agents.
//!
//! A [`Host`] owns sessions; each session is a supervised `ractor` actor running the ReAct turn
//! loop (ask the model, approve each tool call, run approved calls concurrently, feed results
//! back) and writing a JSONL trace through its own trace actor.

pub mod actors;
pub mod approval;
#[cfg(feature = "bench")]
pub mod bench;
#[cfg(feature = "cli")]
pub mod cli;
pub mod config;
pub mod error;
pub mod hooks;
pub mod mcp;
pub mod message;
pub mod model;
pub mod process;
pub mod redact;
pub mod sandbox;
#[cfg(feature = "server")]
pub mod server;
pub mod tools;
pub mod trace;

pub use actors::host::Host;
pub use actors::session::{
    MessageReceiver, SessionHandle, SessionOptions, SessionStatus, SteerOutcome, TaskSummary,
};
pub use approval::{ApprovalMode, ApprovalRequest, Approver};
pub use config::AgentConfig;
pub use config::ConfigError;
pub use error::RookeryError;
pub use message::OmniMessage;
pub use model::Model;
