//! What `POST /v1/sessions/{id}/tasks {text, if_busy}` does when a task already runs:
//! `reject` (409 `session_busy`, the default), `enqueue` (the session's queue: the task runs
//! after the current one), `interrupt` (the current task is aborted, every call paired as an
//! abort does, then this one starts) or `steer` (the text joins the running task).
//!
//! It runs each served session's queue (`task_queue.rs`, at most [`QUEUE_CAPACITY`] entries,
//! 429 `queue_full` beyond) with its one drainer, which starts the queue's head whenever the
//! session is idle, in queue order. `task_queued` / `task_dequeued` are streamed to the
//! session's event log only (never recorded). A queue is the served session's: it is gone when
//! the session is closed or the server stops. It never runs a turn itself.

use std::sync::Arc;

use axum::http::StatusCode;

use super::error::ApiError;
use super::state::{ServerState, SessionEntry};
use super::task_queue::{QUEUE_CAPACITY, Queued};
use crate::error::RookeryError;
use crate::message::{EventPayload, OmniMessage};

/// Interrupts that may lose the race for the idle session before the request gives up.
const INTERRUPT_TRIES: usize = 3;

/// What a task does when the session is busy (`if_busy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IfBusy {
    /// 409 `session_busy`.
    Reject,
    /// Runs after the current task (and the ones queued before it).
    Enqueue,
    /// Aborts the current task, then starts.
    Interrupt,
    /// Joins the running task as a steer.
    Steer,
}

impl IfBusy {
    /// Parses `if_busy` (absent: `reject`); an unknown value is 400 `invalid_request`.
    pub fn parse(value: Option<&str>) -> Result<IfBusy, ApiError> {
        match value {
            None | Some("reject") => Ok(IfBusy::Reject),
            Some("enqueue") => Ok(IfBusy::Enqueue),
            Some("interrupt") => Ok(IfBusy::Interrupt),
            Some("steer") => Ok(IfBusy::Steer),
            Some(other) => Err(ApiError::bad_request(
                "invalid_request",
                format!("unknown if_busy \"{other}\" (use reject, enqueue, interrupt or steer)"),
            )),
        }
    }
}

/// What a task request did.
pub enum Started {
    /// The task runs now.
    Now,
    /// The task is queued as this entry.
    Queued(String),
    /// The text joined the running task (`steer`).
    Steered,
}

fn event(payload: EventPayload) -> OmniMessage {
    OmniMessage::event(payload)
}

/// Starts `text` on `entry`'s session under `policy` (`reject` on a busy session is 409
/// `session_busy`).
pub async fn start(
    state: &Arc<ServerState>,
    entry: &Arc<SessionEntry>,
    text: &str,
    policy: IfBusy,
) -> Result<Started, ApiError> {
    started(state, entry, text, policy)
        .await
        .map_err(|e| e.into_api(state, entry))
}

/// Why a task request failed: the session's error, or a full queue.
enum Refused {
    Session(RookeryError),
    QueueFull,
}

impl From<RookeryError> for Refused {
    fn from(e: RookeryError) -> Self {
        Refused::Session(e)
    }
}

impl Refused {
    fn into_api(self, state: &ServerState, entry: &SessionEntry) -> ApiError {
        match self {
            Refused::Session(e) => state.call_error(entry, e),
            Refused::QueueFull => ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "queue_full",
                format!(
                    "session {} already has {QUEUE_CAPACITY} queued tasks; wait for one to start or cancel one (DELETE …/queue/{{entry_id}})",
                    entry.id()
                ),
            ),
        }
    }
}

async fn started(
    state: &Arc<ServerState>,
    entry: &Arc<SessionEntry>,
    text: &str,
    policy: IfBusy,
) -> Result<Started, Refused> {
    match policy {
        IfBusy::Reject => {
            entry.handle.start_task(text).await?;
            Ok(Started::Now)
        }
        IfBusy::Steer => match entry.handle.steer(text).await? {
            crate::actors::session::SteerOutcome::Queued => Ok(Started::Steered),
            crate::actors::session::SteerOutcome::Started => Ok(Started::Now),
        },
        IfBusy::Interrupt => Ok(interrupt(state, entry, text).await.map(|()| Started::Now)?),
        IfBusy::Enqueue => enqueue(state, entry, text).await,
    }
}

/// `interrupt`: with the queue held (its drainer cannot take the idle session), aborts the
/// running task, waits for it to end and starts `text`.
async fn interrupt(
    state: &Arc<ServerState>,
    entry: &Arc<SessionEntry>,
    text: &str,
) -> Result<(), RookeryError> {
    let _queue = entry.queue.inner.lock().await;
    let mut tries = 0;
    loop {
        match entry.handle.start_task(text).await {
            Err(RookeryError::SessionBusy(_)) if tries < INTERRUPT_TRIES => {
                tries += 1;
                state.abort(entry)?;
                entry.handle.wait_idle().await?;
            }
            other => return other,
        }
    }
}

/// `enqueue`: starts `text` at once when the session is idle and nothing waits before it;
/// else queues it (429 `queue_full` beyond [`QUEUE_CAPACITY`]) and makes sure a drainer runs.
async fn enqueue(
    state: &Arc<ServerState>,
    entry: &Arc<SessionEntry>,
    text: &str,
) -> Result<Started, Refused> {
    let mut inner = entry.queue.inner.lock().await;
    if inner.entries.is_empty() {
        match entry.handle.start_task(text).await {
            Ok(()) => return Ok(Started::Now),
            Err(RookeryError::SessionBusy(_)) => {}
            Err(e) => return Err(e.into()),
        }
    }
    if inner.entries.len() >= QUEUE_CAPACITY {
        return Err(Refused::QueueFull);
    }
    inner.next_id += 1;
    let entry_id = format!("q-{}", inner.next_id);
    inner.entries.push_back(Queued {
        entry_id: entry_id.clone(),
        text: text.to_string(),
    });
    entry.log.push(&event(EventPayload::TaskQueued {
        entry_id: entry_id.clone(),
        text: text.to_string(),
    }));
    if !inner.draining {
        inner.draining = true;
        tokio::spawn(drain(state.clone(), entry.clone()));
    }
    Ok(Started::Queued(entry_id))
}

/// Starts the queue's head each time the session is idle, until the queue is empty (or the
/// session cannot take tasks any more: the entries left are dropped as `failed`).
async fn drain(state: Arc<ServerState>, entry: Arc<SessionEntry>) {
    loop {
        let mut inner = entry.queue.inner.lock().await;
        let Some(head) = inner.entries.front().cloned() else {
            inner.draining = false;
            return;
        };
        match entry.handle.start_task(head.text.as_str()).await {
            Ok(()) => {
                inner.entries.pop_front();
                state.metrics.task_started();
                entry.log.push(&event(EventPayload::TaskDequeued {
                    entry_id: head.entry_id,
                    reason: "started".to_string(),
                }));
            }
            Err(RookeryError::SessionBusy(_)) => {}
            Err(e) => {
                tracing::warn!(session = %entry.id(), "queued tasks dropped: {e}");
                for q in inner.entries.drain(..) {
                    entry.log.push(&event(EventPayload::TaskDequeued {
                        entry_id: q.entry_id,
                        reason: "failed".to_string(),
                    }));
                }
                inner.draining = false;
                return;
            }
        }
        drop(inner);
        if entry.handle.wait_idle().await.is_err() {
            // The session is gone; its queue goes with it.
            if let Ok(mut inner) = entry.queue.inner.try_lock() {
                inner.entries.clear();
                inner.draining = false;
            }
            return;
        }
    }
}

/// `DELETE /v1/sessions/{id}/queue/{entry_id}`: 204, or 404 `unknown_queue_entry`.
pub async fn cancel(entry: &SessionEntry, entry_id: &str) -> Result<(), ApiError> {
    let mut inner = entry.queue.inner.lock().await;
    let Some(at) = inner.entries.iter().position(|q| q.entry_id == entry_id) else {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "unknown_queue_entry",
            format!(
                "no queued task {entry_id} in session {} (it started, was cancelled, or never was)",
                entry.id()
            ),
        ));
    };
    inner.entries.remove(at);
    entry.log.push(&event(EventPayload::TaskDequeued {
        entry_id: entry_id.to_string(),
        reason: "cancelled".to_string(),
    }));
    Ok(())
}
