//! Rookery: an actor-based session runtime for LLM agents.
//!
//! A [`Host`] owns sessions; each session is a supervised `ractor` actor running the ReAct turn
//! loop (ask the model, approve each tool call, run approved calls concurrently, feed results
//! back) and writing a JSONL trace through its own trace actor.
//!
//! # Cargo features
//!
//! All on by default (the `rookery` binary needs `cli`); a library user may leave them out with
//! `default-features = false` (docs/guide/library.md, "Cargo features"):
//!
//! - `server`: the HTTP API of `rookery serve` (`server`; axum, hyper).
//! - `cli`: the command line (`cli`; clap, indicatif, the binary's allocator). Brings `server`
//!   and `bench`, whose commands it has.
//! - `mcp`: MCP servers as tools (rmcp). Without it a config naming MCP servers is refused with
//!   "this build has no MCP support: rebuild with the `mcp` feature".
//! - `images`: decoding and scaling images for `read_file`, `read_image` and `describe_image`
//!   (image). Without it an image is refused with a text saying this build has no image support.
//! - `bench`: the standard workloads of `rookery bench` (`bench`) and its `--report` page
//!   (plotters). Brings `server`.
//! - `otel`: OpenTelemetry export over OTLP (`telemetry`; opentelemetry, opentelemetry_sdk,
//!   opentelemetry-otlp). Without it the spans are no-ops and `--otel` is refused with a text
//!   saying this build has no OpenTelemetry support.
//!
//! The core (host, sessions, tools, approvals, hooks, traces, the providers) is in every build.
//! A session on an OpenAI-compatible endpoint with no feature at all (in `Cargo.toml`:
//! `rookery = { path = "../rookery", default-features = false }`):
//!
//! ```no_run
//! use std::sync::Arc;
//!
//! use rookery::approval::{ApprovalMode, DenyAllApprover, PolicyApprover};
//! use rookery::model::build::build_model;
//! use rookery::model::model_config::ModelConfig;
//! use rookery::{Host, SessionOptions};
//!
//! #[tokio::main]
//! async fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     // Any OpenAI-compatible server; the key is read from the variable `api_key_env` names
//!     // (default `OPENAI_API_KEY`).
//!     let mut config = ModelConfig::openai("http://127.0.0.1:8000/v1", "my-model");
//!     config.api_key_env = Some("MY_PROVIDER_KEY".to_string());
//!     let model = build_model(&config)?;
//!
//!     let host = Host::start("/tmp/rookery-home").await?;
//!     let mut options = SessionOptions::new("/tmp/workspace", model);
//!     // The library default denies every tool call; allow them here.
//!     options.approver = Arc::new(PolicyApprover::new(
//!         ApprovalMode::AllowAll,
//!         Arc::new(DenyAllApprover),
//!     ));
//!     let session = host.create_session(options).await?;
//!     let summary = session.run_task("List the files here").await?;
//!     println!("{}: {:?}", summary.status, summary.final_text);
//!     session.close().await?;
//!     host.shutdown().await;
//!     Ok(())
//! }
//! ```

// `actors`, `bench`, `cli`, `process` and `server` are public for the `rookery` binary and the
// integration tests only: their items are not the library API (the types a library user needs
// are re-exported below and from `tools`, `model`, `approval`, `hooks`, `config`, `trace`), and
// they are hidden from the documentation and may change in any release.
#[doc(hidden)]
pub mod actors;
pub mod approval;
#[cfg(feature = "bench")]
#[doc(hidden)]
pub mod bench;
#[cfg(feature = "cli")]
#[doc(hidden)]
pub mod cli;
pub mod config;
pub mod error;
pub mod hooks;
pub mod mcp;
pub mod message;
pub mod model;
#[doc(hidden)]
pub mod process;
pub mod redact;
pub mod sandbox;
#[cfg(feature = "server")]
#[doc(hidden)]
pub mod server;
#[cfg(feature = "postgres")]
pub mod store;
pub mod telemetry;
pub mod tools;
pub mod trace;

pub use actors::host::Host;
pub use actors::session::{
    MessageReceiver, SessionHandle, SessionOptions, SessionStatus, SteerOutcome, TaskSummary,
};
pub use actors::session_api::{
    CompactStart, ForkTurns, Inbox, ModelChoice, OutputInvalid, OutputSchema, OutputSchemaError,
    RolledBack, SwitchError, Switched, TryRecvError,
};
pub use approval::{ApprovalMode, ApprovalRequest, Approver};
pub use config::AgentConfig;
pub use config::ConfigError;
pub use error::RookeryError;
pub use message::OmniMessage;
pub use model::Model;
pub use tools::{Permission, Tool, ToolContext, ToolDefinitionConfig, ToolRegistry, ToolResult};
