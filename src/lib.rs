//! Rookery: an actor-based session runtime for LLM agents.
//!
//! A [`Host`] owns sessions; each session is a supervised `ractor` actor running the ReAct turn
//! loop (ask the model, approve each tool call, run approved calls concurrently, feed results
//! back) and writing a JSONL trace through its own trace actor.

#[warn(missing_docs)]
pub mod actors;
#[warn(missing_docs)]
pub mod approval;
#[warn(missing_docs)]
pub mod bench;
#[warn(missing_docs)]
pub mod cli;
#[warn(missing_docs)]
pub mod config;
#[warn(missing_docs)]
pub mod error;
#[warn(missing_docs)]
pub mod hooks;
#[warn(missing_docs)]
pub mod mcp;
#[warn(missing_docs)]
pub mod message;
#[warn(missing_docs)]
pub mod model;
pub mod process;
#[warn(missing_docs)]
pub mod redact;
#[warn(missing_docs)]
pub mod server;
pub mod tools;
#[warn(missing_docs)]
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
