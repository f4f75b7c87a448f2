//! What others may ask of a session: its requests (`SessionRequest`), its address
//! (`SessionRef`) and public handle (`SessionHandle`), the options a session is created with
//! and its status, the answers of its requests (`TaskSummary`, `SteerOutcome`,
//! `CompactStart`), a task's output schema (`OutputSchema`), the fan-out of what it emits (`Subscribers`, `broadcast`,
//! `MessageReceiver`), the inbox and fork request types (`Inbox`, `ForkTurns`), how a child
//! session is started (`StartSession`), the crash report (`report_crash`), the model choice
//! (`ModelChoice`, `SwitchError`) and its resolver (`spec`).
//!
//! It sits below both the session (`actors/session/`) and the subagent supervisor: it must not
//! import either of them, and it never runs a turn or records anything itself.

mod crash;
mod fanout;
mod fork;
mod handle;
mod inbox;
mod model_choice;
mod options;
mod outcomes;
mod output_schema;
mod request;
mod rollback;
mod session_ref;
pub mod spec;
mod start;

use std::sync::{Arc, Mutex};

use crate::message::OmniMessage;

pub(crate) use crash::{report_crash, stop_trace};
pub use fanout::{MessageReceiver, SUBSCRIBER_CAPACITY, TryRecvError};
pub(crate) use fanout::{MessageSender, channel as fanout_channel};
pub use handle::SessionHandle;
pub use inbox::{ForkTurns, Inbox};
pub use model_choice::{ModelChoice, SwitchError, Switched};
pub(crate) use options::session_meta;
pub use options::{SessionOptions, SessionStatus};
pub use outcomes::{CompactStart, SteerOutcome, TaskSummary, steering_text};
pub use output_schema::{
    DEFAULT_MAX_OUTPUT_RETRIES, MAX_OUTPUT_RETRIES, MAX_REPORTED_ERRORS, MAX_SCHEMA_BYTES,
    OutputInvalid, OutputSchema, OutputSchemaError,
};
pub use request::SessionRequest;
pub use rollback::RolledBack;
pub use session_ref::SessionRef;
pub use spec::{ResolvedModel, SpecError, resolve_model};
pub use start::{MetaWrite, StartSession, StartedSession};

/// The senders of every subscriber; shared with the host so it can report a crashed session.
pub(crate) type Subscribers = Arc<Mutex<Vec<MessageSender>>>;

/// Sends `msg` to every live subscriber without waiting (a full queue drops its oldest),
/// dropping closed ones.
pub(crate) fn broadcast(subs: &Subscribers, msg: &Arc<OmniMessage>) {
    if let Ok(mut subs) = subs.lock() {
        subs.retain(|s| s.send(msg.clone()));
    }
}
