//! How a served session's last task ended, as `GET /v1/sessions` shows it (`last_task`), and
//! the log line each task end gets (`info`, or `warn` when it did not complete).
//!
//! Reads the session's own messages (the same ones its trace records: `request_end`, `abort`,
//! `task_end`); it must not change them, nor drive the session.

use std::sync::Mutex;

use serde_json::{Value, json};

use crate::message::{EventPayload, OmniMessage, StopReason};

/// The end of a session's last task: `{status, error: {code, message} | null}`, `null` before
/// its first task ends.
#[derive(Default)]
pub struct LastTask {
    ended: Mutex<Option<Value>>,
}

impl LastTask {
    /// The API's `last_task` value.
    pub fn view(&self) -> Value {
        self.ended
            .lock()
            .ok()
            .and_then(|v| v.clone())
            .unwrap_or(Value::Null)
    }

    fn set(&self, v: Value) {
        if let Ok(mut ended) = self.ended.lock() {
            *ended = Some(v);
        }
    }
}

/// Follows one session's stream: the error a failing request or an abort gave, until the
/// task's end says how it ended.
#[derive(Default)]
pub struct TaskWatch {
    error: Option<(String, String)>,
}

impl TaskWatch {
    /// Takes one message of session `id`'s stream; at the session's own `task_end` (not a
    /// subagent's), records it in `last` and logs it.
    pub fn observe(&mut self, msg: &OmniMessage, id: &str, last: &LastTask) {
        if msg.origin.is_some() {
            return;
        }
        match msg.as_event() {
            Some(EventPayload::RequestEnd {
                status,
                error_message,
                ..
            }) => {
                // A request that failed then succeeded on retry leaves no error.
                self.error = (*status != StopReason::Completed).then(|| {
                    let message = error_message.clone().unwrap_or_else(|| status.to_string());
                    (status.as_str().to_string(), message)
                });
            }
            Some(EventPayload::Abort { reason: Some(r) }) => {
                // The abort says why the task ended; a failed request's code stays.
                let code = self.error.take().map_or("aborted".to_string(), |(c, _)| c);
                self.error = Some((code, r.clone()));
            }
            Some(EventPayload::TaskEnd { status, .. }) => {
                let error = self.error.take();
                let error = match (*status, error) {
                    (StopReason::Completed, _) => None,
                    (_, Some(e)) => Some(e),
                    (s, None) => Some((s.as_str().to_string(), format!("the task {s}"))),
                };
                match &error {
                    None => tracing::info!(session = %id, status = %status, "task ended"),
                    Some((code, message)) => tracing::warn!(
                        session = %id, status = %status, code = %code, error = %message,
                        "task ended"
                    ),
                }
                let error = error.map(|(code, message)| json!({"code": code, "message": message}));
                last.set(json!({"status": status.as_str(), "error": error}));
            }
            _ => {}
        }
    }
}
