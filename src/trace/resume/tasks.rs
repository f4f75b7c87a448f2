//! The completed tasks of a resumed session's context, as spans of its rebuilt history: what
//! `fork_turns` copies after a resume (`docs/collaboration.md#fork_turns`).
//!
//! It only follows the replay's positions (a task starts at its first request outside a
//! compaction and ends with its `task_end`); it reads no records itself and never decides
//! what a fork copies.

use crate::message::StopReason;

/// The spans so far and the start of the task in progress.
#[derive(Debug, Default)]
pub(super) struct TaskSpans {
    /// `(start, end)` of every completed task in the history, oldest first.
    pub(super) spans: Vec<(usize, usize)>,
    /// Where the task in progress began in the history.
    start: Option<usize>,
}

impl TaskSpans {
    /// A request begins with the history at `len` entries: the first one starts a task.
    pub(super) fn request_begins(&mut self, len: usize) {
        self.start.get_or_insert(len);
    }

    /// The task ends with the history at `len` entries; a completed one is a turn.
    pub(super) fn task_ends(&mut self, status: StopReason, len: usize) {
        if let Some(start) = self.start.take()
            && status == StopReason::Completed
            && start < len
        {
            self.spans.push((start, len));
        }
    }

    /// A `rollback` of the last `tasks` completed tasks: where the history is cut (the start of
    /// the first of them), or `None` when the context holds fewer (nothing changes).
    pub(super) fn roll_back(&mut self, tasks: u64) -> Option<usize> {
        let tasks = usize::try_from(tasks).ok().filter(|n| *n > 0)?;
        let keep = self.spans.len().checked_sub(tasks)?;
        let start = self.spans[keep].0;
        self.spans.truncate(keep);
        Some(start)
    }

    /// A completed compaction replaced the context: earlier turns are gone, and a task in
    /// progress continues from the start of the new context (its summary).
    pub(super) fn context_closed(&mut self) {
        self.spans.clear();
        if self.start.is_some() {
            self.start = Some(0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn completed_tasks_are_spans_and_a_compaction_restarts_them() {
        let mut t = TaskSpans::default();
        t.request_begins(0);
        t.request_begins(3);
        t.task_ends(StopReason::Completed, 5);
        t.request_begins(5);
        t.task_ends(StopReason::Aborted, 7);
        t.request_begins(7);
        t.task_ends(StopReason::Completed, 9);
        assert_eq!(t.spans, vec![(0, 5), (7, 9)]);
        assert_eq!(t.roll_back(3), None);
        assert_eq!(t.roll_back(0), None);
        assert_eq!(t.roll_back(1), Some(7));
        assert_eq!(t.spans, vec![(0, 5)]);
        t.request_begins(9);
        t.context_closed();
        assert!(t.spans.is_empty());
        t.request_begins(0);
        t.task_ends(StopReason::Completed, 4);
        assert_eq!(t.spans, vec![(0, 4)]);
    }
}
