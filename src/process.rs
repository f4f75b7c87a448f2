//! The OS layer for processes rookery starts: spawning a command as the leader of its own
//! session and process group (`spawn.rs`, on Linux through `spawn_raw.rs`), the environment
//! policy (`env_policy.rs`), the group's kill (`group.rs`), the `ROOKERY_CMD` cookie sweeps of
//! a command's whole tree (`tree.rs`), the guard process that covers a killed rookery
//! (`guard.rs`), the keeper of a sandboxed session's namespaces (`sandbox_keeper.rs`, used by
//! `spawn_confined.rs`), subreaper reaping (`reaper.rs`), the output ring and tail (`ring.rs`) and the
//! spawn errors (`spawn_error.rs`). Commands, MCP servers and the binary's start-up use it.
//!
//! It owns processes, file descriptors and signals, nothing else: it never imports
//! `crate::actors` nor any area above it, knows nothing of sessions, registries, tools or
//! messages, and never reads or writes a command's streams (the command actor's tasks do).

pub mod env_policy;
pub mod group;
#[cfg(target_os = "linux")]
pub mod guard;
#[cfg(target_os = "linux")]
mod keeper_child;
#[cfg(target_os = "linux")]
mod keeper_protocol;
#[cfg(target_os = "linux")]
pub mod reaper;
pub mod ring;
#[cfg(target_os = "linux")]
mod sandbox_keeper;
pub mod spawn;
#[cfg(target_os = "linux")]
pub mod spawn_confined;
pub mod spawn_error;
#[cfg(target_os = "linux")]
pub mod spawn_raw;
#[cfg(target_os = "linux")]
pub mod tree;

pub use group::{KILL_GRACE, KillOnDrop, ProcessGroup, group_alive};
#[cfg(target_os = "linux")]
pub use group::{group_members, proc_stat};
#[cfg(target_os = "linux")]
pub use sandbox_keeper::keeper_pid;
pub use spawn::{
    ChildProc, ExitInfo, HARDENED_ENV, ProcessIo, STRIPPED_ENV, SpawnSpec, SpawnedProcess,
    signal_name, spawn_process,
};
pub use spawn_error::SpawnError;
