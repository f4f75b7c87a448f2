//! The conversation of a session: the history sent with each request and how much of it is
//! committed, the carry-over into the next task, the bounds of the running and the completed
//! tasks in the history, and the steers and notices waiting for the next input-assembly point.
//!
//! Its fields are private; its methods are named for what happens to the conversation and keep
//! its invariants: the committed part never exceeds the history; a request's input sits after
//! the committed part until the request completes (then all of it is committed) or the next
//! request replaces it; a completed task's span is non-empty and lies in the committed part; a
//! compaction replaces the context and forgets every span. Queued steers and notices leave in
//! arrival order, each exactly once.
//!
//! Every file of the session reads it; only the effects executor (`effects.rs`) writes it: the
//! session holds it in `effects::ExecutorOwned`, which lends the others `&Conversation` only.
//! It decides nothing about the turn loop and does no I/O; it imports nothing of the session.

use std::collections::HashSet;
use std::sync::Arc;

use crate::actors::session_api::ForkTurns;
use crate::message::ModelPayload;

/// The conversation of a session (see the module's header).
#[derive(Debug, Default)]
pub(crate) struct Conversation {
    /// The committed turns, then (while a request is out) that request's input. Shared with
    /// the request, so a request costs no copy of it.
    history: Arc<Vec<ModelPayload>>,
    /// How much of `history` is committed (completed turns).
    committed: usize,
    /// The next task's first input (what an ended task left over).
    carry_over: Vec<ModelPayload>,
    /// Where the running (or last started) task's input begins in `history`.
    task_start: usize,
    /// `(start, end)` of every completed task in `history` (`fork_turns`).
    completed_tasks: Vec<(usize, usize)>,
    /// Steers received while a task runs, waiting for the next input-assembly point.
    pending_steers: Vec<ModelPayload>,
    /// `[background_task_done]` notices and agent inputs waiting for the next input-assembly
    /// point.
    pending_notices: Vec<ModelPayload>,
}

impl Conversation {
    /// A conversation whose whole `history` is committed (a new session's forked history, or a
    /// resumed session's), with the next task's `carry_over` and the spans of the tasks
    /// completed in `history`.
    pub(super) fn new(
        history: Arc<Vec<ModelPayload>>,
        carry_over: Vec<ModelPayload>,
        completed_tasks: Vec<(usize, usize)>,
    ) -> Self {
        Conversation {
            committed: history.len(),
            history,
            carry_over,
            completed_tasks,
            ..Conversation::default()
        }
    }

    // ---- reading ----

    /// The whole history: the committed turns, then the input of a request still out.
    pub(super) fn history(&self) -> &[ModelPayload] {
        &self.history
    }

    /// The committed turns.
    pub(super) fn committed(&self) -> &[ModelPayload] {
        &self.history[..self.committed.min(self.history.len())]
    }

    /// The next task's first input.
    pub(super) fn carry_over(&self) -> &[ModelPayload] {
        &self.carry_over
    }

    /// Steers or notices wait for the next input-assembly point.
    pub(super) fn input_waiting(&self) -> bool {
        !self.pending_notices.is_empty() || !self.pending_steers.is_empty()
    }

    /// Something to compact: a committed turn or a carry-over.
    pub(super) fn has_context(&self) -> bool {
        self.committed > 0 || !self.carry_over.is_empty()
    }

    /// What `fork_turns` copies, oldest first (`docs/collaboration.md#fork_turns`): `all` is
    /// the current context before the running task (after a compaction: the summary and the
    /// turns since); `N` the last N completed tasks in it, or all of it when it holds fewer. A
    /// call whose output is not in the copy (or an output whose call is not) is left out, so
    /// the copy is always paired.
    pub(super) fn fork(&self, turns: ForkTurns, task_running: bool) -> Vec<ModelPayload> {
        let end = if task_running {
            self.task_start
        } else {
            self.committed
        }
        .min(self.history.len());
        let spans: Vec<(usize, usize)> = self
            .completed_tasks
            .iter()
            .copied()
            .filter(|(s, e)| s < e && *e <= end)
            .collect();
        let chosen: Vec<(usize, usize)> = match turns {
            ForkTurns::None => Vec::new(),
            ForkTurns::Last(n) if n <= spans.len() => spans[spans.len() - n..].to_vec(),
            ForkTurns::All | ForkTurns::Last(_) => vec![(0, end)],
        };
        let mut out = Vec::new();
        for (start, end) in chosen {
            if let Some(part) = self.history.get(start..end) {
                out.extend(part.iter().cloned());
            }
        }
        paired(out)
    }

    // ---- writing (the effects executor only) ----

    /// A request starts on `input`: the uncommitted input of an earlier attempt goes, `input`
    /// follows the committed turns (in place; a copy happens only if an old request still
    /// holds the history). Returns the history the request is sent with.
    pub(super) fn begin_request(&mut self, input: Vec<ModelPayload>) -> Arc<Vec<ModelPayload>> {
        let history = Arc::make_mut(&mut self.history);
        history.truncate(self.committed);
        history.extend(input);
        self.history.clone()
    }

    /// The request completed: what it `produced` follows its input, and all of the history is
    /// committed.
    pub(super) fn commit(&mut self, produced: Vec<ModelPayload>) {
        let history = Arc::make_mut(&mut self.history);
        history.extend(produced);
        self.committed = history.len();
    }

    /// The next task's first input becomes `carry`.
    pub(super) fn set_carry_over(&mut self, carry: Vec<ModelPayload>) {
        self.carry_over = carry;
    }

    /// Takes the carry-over (a task's input, or a compaction's pending input).
    pub(super) fn take_carry_over(&mut self) -> Vec<ModelPayload> {
        std::mem::take(&mut self.carry_over)
    }

    /// A completed compaction replaced the context: no turn is left, the spans of the tasks
    /// before it are gone, and a running task continues from the start of the new context
    /// (its summary, which comes as the next input).
    pub(super) fn replace_context(&mut self) {
        self.history = Arc::new(Vec::new());
        self.committed = 0;
        self.completed_tasks.clear();
        self.task_start = 0;
    }

    /// A task starts: its input begins at the committed end of the history.
    pub(super) fn open_task(&mut self) {
        self.task_start = self.committed;
    }

    /// The running task completed: its span of the history (when it committed anything) is a
    /// task `fork_turns` may copy.
    pub(super) fn close_task(&mut self) {
        let span = (self.task_start, self.committed);
        if span.0 < span.1 {
            self.completed_tasks.push(span);
        }
    }

    /// How many completed tasks the context holds (what a rollback may drop).
    pub(super) fn completed_count(&self) -> usize {
        self.completed_tasks.len()
    }

    /// Drops the last `tasks` completed tasks (and whatever follows the first of them) from
    /// the context of an idle session; the number of messages dropped. `None` when `tasks` is
    /// 0 or more than the completed tasks of the context (nothing changes).
    pub(super) fn rollback(&mut self, tasks: usize) -> Option<usize> {
        let keep = self.completed_tasks.len().checked_sub(tasks)?;
        if tasks == 0 {
            return None;
        }
        let start = self.completed_tasks[keep].0.min(self.history.len());
        let history = Arc::make_mut(&mut self.history);
        let dropped = history.len() - start;
        history.truncate(start);
        self.committed = start;
        self.task_start = start;
        self.completed_tasks.truncate(keep);
        Some(dropped)
    }

    /// A steer waits for the next input-assembly point.
    pub(super) fn queue_steer(&mut self, steer: ModelPayload) {
        self.pending_steers.push(steer);
    }

    /// Takes the waiting steers, in arrival order.
    pub(super) fn take_steers(&mut self) -> Vec<ModelPayload> {
        std::mem::take(&mut self.pending_steers)
    }

    /// A notice waits for the next input-assembly point.
    pub(super) fn queue_notice(&mut self, notice: ModelPayload) {
        self.pending_notices.push(notice);
    }

    /// Takes the waiting notices, in arrival order.
    pub(super) fn take_notices(&mut self) -> Vec<ModelPayload> {
        std::mem::take(&mut self.pending_notices)
    }
}

/// `messages` without the calls that have no output among them and the outputs that have no
/// call among them.
fn paired(messages: Vec<ModelPayload>) -> Vec<ModelPayload> {
    let mut calls = HashSet::new();
    let mut outputs = HashSet::new();
    for m in &messages {
        match m {
            ModelPayload::ToolCall { tool_call_id, .. } => {
                calls.insert(tool_call_id.clone());
            }
            ModelPayload::ToolCallOutput { tool_call_id, .. } => {
                outputs.insert(tool_call_id.clone());
            }
            _ => {}
        }
    }
    messages
        .into_iter()
        .filter(|m| match m {
            ModelPayload::ToolCall { tool_call_id, .. } => outputs.contains(tool_call_id),
            ModelPayload::ToolCallOutput { tool_call_id, .. } => calls.contains(tool_call_id),
            _ => true,
        })
        .collect()
}

#[cfg(test)]
mod tests;
