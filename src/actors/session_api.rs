//! What others may ask of a session: the options a session is created with and its status,
//! the answers of its requests (`TaskSummary`, `SteerOutcome`, `CompactStart`), the fan-out of
//! what it emits (`Subscribers`, `broadcast`, `MessageReceiver`), the inbox and fork request
//! types (`Inbox`, `ForkTurns`), the model choice (`ModelChoice`, `SwitchError`) and its
//! resolver (`spec`).
//!
//! It sits below both `actors/session/` and `actors/subagent_supervisor/`: it must not import
//! either of them, and it never runs a turn or records anything itself.

mod fanout;
mod inbox;
mod model_choice;
mod options;
mod outcomes;
pub mod spec;

use std::sync::{Arc, Mutex};

use crate::message::OmniMessage;

pub use fanout::{MessageReceiver, SUBSCRIBER_CAPACITY, TryRecvError};
pub(crate) use fanout::{MessageSender, channel as fanout_channel};
pub use inbox::{ForkTurns, Inbox};
pub use model_choice::{ModelChoice, SwitchError, Switched};
pub(crate) use options::session_meta;
pub use options::{SessionOptions, SessionStatus};
pub use outcomes::{CompactStart, SteerOutcome, TaskSummary, steering_text};
pub use spec::{ResolvedModel, SpecError, resolve_model};

/// The senders of every subscriber; shared with the host so it can report a crashed session.
pub(crate) type Subscribers = Arc<Mutex<Vec<MessageSender>>>;

/// Sends `msg` to every live subscriber without waiting (a full queue drops its oldest),
/// dropping closed ones.
pub(crate) fn broadcast(subs: &Subscribers, msg: &Arc<OmniMessage>) {
    if let Ok(mut subs) = subs.lock() {
        subs.retain(|s| s.send(msg.clone()));
    }
}
