//! The session sandbox: what a session's processes and file tools may touch, and the kernel
//! confinement (Landlock, seccomp, namespaces) that enforces it on every process a session starts.
//!
//! `policy` is the plain-data setting (`off | read-only | workspace-write`, network, roots) that
//! configs, the CLI, the HTTP API and `session_meta` carry; `layout` is that policy resolved
//! against one session's paths; `session` one session's temp dir, layout and confinement, set
//! up once; `confinement` is the per-session, built-once filter set that the process layer
//! applies between fork and exec (`landlock_rules`, `seccomp_filter` and `namespaces` are its
//! pieces); `probe` says once whether this machine can enforce it.
//!
//! This is the lowest area: it imports nothing from the crate. It must not spawn processes
//! itself (the process layer does; `probe` only clones its short-lived test child) nor know
//! about sessions, tools or approval.

mod confinement;
mod error;
mod landlock_rules;
mod layout;
mod namespaces;
mod policy;
mod probe;
mod seccomp_filter;
mod session;
pub mod sys;

pub use confinement::{ChildFailure, Confinement, KeeperSlot, step};
pub use error::SandboxError;
pub use layout::{PathDenied, SandboxLayout, real_path};
pub use policy::{NetworkAccess, SandboxMode, SandboxPolicy, SandboxRequest};
pub use probe::check;
pub use session::{SessionSandbox, probe};
