//! The data of a session's running task: the `Task`, its current `Turn` (one request attempt)
//! and the turn's `Call`s, and the `TaskSummary` callers get when it ends.
//!
//! Plain data with small queries. The transitions over it live in `machine.rs`; the handles of
//! what runs for a turn (`TurnIo`) are only touched by the executor (`effects.rs`).

use std::collections::VecDeque;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::message::{ModelPayload, StopReason, Usage};

use crate::actors::session_api::OutputSchema;
pub(super) use crate::actors::session_api::TaskSummary;

pub(super) struct Call {
    pub(super) id: String,
    pub(super) name: String,
    pub(super) arguments: String,
    pub(super) output: Option<ModelPayload>,
    pub(super) running: bool,
}

/// One request attempt and the tool calls it produced.
pub(crate) struct Turn {
    pub(crate) id: u64,
    /// The turn's input, without the retry transcript.
    pub(super) base_input: Vec<ModelPayload>,
    /// `[turn_retried]` block after failed attempts.
    pub(super) retry_note: Option<ModelPayload>,
    /// What failed attempts produced (for the transcript).
    pub(super) failed_produced: Vec<ModelPayload>,
    pub(super) attempt: u32,
    /// An approval is being decided (at most one at a time, in call order).
    pub(super) approving: bool,
    /// The turn waits for the backoff before its next attempt.
    pub(super) in_backoff: bool,
    /// The stream completed: its calls are committed.
    pub(super) completed: bool,
    pub(super) produced: Vec<ModelPayload>,
    pub(super) calls: Vec<Call>,
    pub(super) approval_queue: VecDeque<usize>,
    pub(super) usage: Usage,
    /// What runs for this turn (stream, approval, backoff, the tools' cancel token).
    pub(super) io: TurnIo,
}

/// The handles of what runs for a turn. Only the executor uses them; a transition asks for
/// them to be stopped with an effect.
#[derive(Default)]
pub(super) struct TurnIo {
    pub(super) stream: Option<JoinHandle<()>>,
    pub(super) approving: Option<JoinHandle<()>>,
    pub(super) backoff: Option<JoinHandle<()>>,
    /// Cancels the tools of the current attempt.
    pub(super) cancel: CancellationToken,
}

impl TurnIo {
    /// Stops the stream, the approval and the backoff, and cancels the tools.
    pub(super) fn stop(&mut self) {
        for h in [
            self.stream.take(),
            self.approving.take(),
            self.backoff.take(),
        ]
        .into_iter()
        .flatten()
        {
            h.abort();
        }
        self.cancel.cancel();
    }
}

impl Turn {
    /// A first attempt on `base_input`.
    pub(super) fn new(id: u64, base_input: Vec<ModelPayload>) -> Turn {
        Turn {
            id,
            base_input,
            retry_note: None,
            failed_produced: Vec::new(),
            attempt: 1,
            approving: false,
            in_backoff: false,
            completed: false,
            produced: Vec::new(),
            calls: Vec::new(),
            approval_queue: VecDeque::new(),
            usage: Usage::default(),
            io: TurnIo::default(),
        }
    }

    pub(super) fn input(&self) -> Vec<ModelPayload> {
        let mut v = self.base_input.clone();
        v.extend(self.retry_note.clone());
        v
    }

    pub(super) fn outputs_in_call_order(&self) -> Vec<ModelPayload> {
        self.calls.iter().filter_map(|c| c.output.clone()).collect()
    }

    pub(super) fn running_tools(&self) -> usize {
        self.calls.iter().filter(|c| c.running).count()
    }
}

pub(crate) struct Task {
    pub(crate) turn: Turn,
    pub(super) aborting: Option<String>,
    /// How an abort ends the task: `aborted`, or `failed` when the trace cannot be written.
    pub(super) end_status: StopReason,
    pub(super) tool_calls: usize,
    pub(super) final_text: Option<String>,
    /// The turn whose end the Stop hooks are checking (or checked).
    pub(super) stop_checked: Option<u64>,
    /// How many times Stop hooks made this task go on.
    pub(super) stop_continuations: u32,
    /// The schema the final answer must meet (`output_check.rs`).
    pub(super) output_schema: Option<OutputSchema>,
    /// How many times the model was asked again for a valid answer.
    pub(super) output_retries: u32,
    /// The parsed answer once it met the schema (carried by `task_end`).
    pub(super) output: Option<serde_json::Value>,
}

impl Task {
    pub(super) fn new(turn: Turn) -> Task {
        Task {
            turn,
            aborting: None,
            end_status: StopReason::Aborted,
            tool_calls: 0,
            final_text: None,
            stop_checked: None,
            stop_continuations: 0,
            output_schema: None,
            output_retries: 0,
            output: None,
        }
    }
}

/// The running task if `turn` is its current turn and it is not aborting.
pub(super) fn live(task: &mut Option<Box<Task>>, turn: u64) -> Option<&mut Task> {
    task.as_deref_mut()
        .filter(|t| t.turn.id == turn && t.aborting.is_none())
}
