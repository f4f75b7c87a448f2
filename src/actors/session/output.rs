//! The one way out of a session: every message it streams to its subscribers or records in its
//! trace goes through `emit`/`record_only`, which scrub the session's secrets first (a
//! partial's text across the pieces of its stream, see `partials.rs`).
//!
//! It serializes and scrubs; it decides nothing about what is recorded (callers do).

use std::sync::Arc;

use super::{SessionState, broadcast, secrets};
use crate::message::OmniMessage;
use crate::trace::writer::{TraceMsg, record_line};

impl SessionState {
    /// Streams `msg` to subscribers and, if `record` and recordable, appends it to the trace.
    /// Secrets are scrubbed from both.
    pub(crate) fn emit(&self, msg: OmniMessage, record: bool) {
        if let Some(r) = &self.redactor
            && msg.as_model().is_some_and(|p| p.is_partial())
        {
            // A partial is never recorded; its text is scrubbed across the stream's pieces.
            let out = match self.partials.lock() {
                Ok(mut open) => open.scrub(r, msg),
                Err(_) => vec![secrets::scrub(r, msg, false).0],
            };
            for m in out {
                // Its other fields (a tool's name, images) are scrubbed whole.
                let m = secrets::scrub(r, m, false).0;
                self.otel.observe(&m);
                broadcast(&self.subscribers, &Arc::new(m));
            }
            return;
        }
        let record = record && msg.is_recordable();
        let msg = match &self.redactor {
            Some(r) => {
                let (msg, line) = secrets::scrub(r, msg, record);
                if let Some(line) = line {
                    let _ = self.trace.cast(TraceMsg::AppendLine(line));
                }
                msg
            }
            None => {
                if record {
                    self.record_only(&msg);
                }
                msg
            }
        };
        self.otel.observe(&msg);
        broadcast(&self.subscribers, &Arc::new(msg));
    }

    /// Appends to the trace without streaming (the task's own input). The record is serialized
    /// here, so the trace actor only writes: the two work in parallel. Secrets are scrubbed.
    pub(crate) fn record_only(&self, msg: &OmniMessage) {
        if let Some(line) = record_line(msg) {
            let line = match &self.redactor {
                Some(r) => r.redact_bytes(&line).unwrap_or(line),
                None => line,
            };
            let _ = self.trace.cast(TraceMsg::AppendLine(line));
        }
    }

    /// `msg` with the session's secrets scrubbed (a tool output before the model sees it).
    pub(crate) fn scrubbed(&self, msg: OmniMessage) -> OmniMessage {
        match &self.redactor {
            Some(r) => secrets::scrub(r, msg, false).0,
            None => msg,
        }
    }

    /// What the session's commands may inherit.
    pub(crate) fn env_policy(&self) -> Arc<crate::process::env_policy::EnvPolicy> {
        secrets::env_policy(&self.options)
    }
}
