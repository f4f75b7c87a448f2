//! A served session's queue of tasks waiting for it to be idle (`if_busy: enqueue`): its
//! entries, in the order they will run, and the view `GET …/sessions/{id}` shows.
//!
//! Plain data under one async lock; `busy.rs` decides what goes in and out and starts the
//! tasks. It must not import the server's state.

use std::collections::VecDeque;

use serde_json::{Value, json};

/// Entries a session's queue holds at most.
pub const QUEUE_CAPACITY: usize = 32;

/// One queued task.
#[derive(Debug, Clone)]
pub(super) struct Queued {
    /// `q-N`.
    pub(super) entry_id: String,
    /// The task's text.
    pub(super) text: String,
}

/// The queue's entries and its drainer's flag.
#[derive(Debug, Default)]
pub(super) struct Inner {
    /// The entries, in the order they will run.
    pub(super) entries: VecDeque<Queued>,
    /// A drainer is running (at most one per session).
    pub(super) draining: bool,
    /// The number of the last entry id given.
    pub(super) next_id: u64,
}

/// A served session's queue of tasks waiting for it to be idle.
#[derive(Debug, Default)]
pub struct TaskQueue {
    /// Held only across quick session calls (a start, an abort), never across a task.
    pub(super) inner: tokio::sync::Mutex<Inner>,
}

impl TaskQueue {
    /// `[{entry_id, text}]`, in the order they will run.
    pub async fn view(&self) -> Value {
        let inner = self.inner.lock().await;
        Value::Array(
            inner
                .entries
                .iter()
                .map(|q| json!({"entry_id": q.entry_id, "text": q.text}))
                .collect(),
        )
    }
}
