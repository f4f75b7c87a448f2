//! Rookery: an actor-based session runtime for LLM agents.

pub mod error;
pub mod message;
pub mod model;
pub mod tools;
