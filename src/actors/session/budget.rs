//! The concurrency budget of one session's tool calls (`tools.max_parallel`): at most that many
//! calls run at once; the others wait for a slot in call order (a FIFO queue entered
//! synchronously by the dispatcher, so the order is the order of the calls, not of task
//! polling). A slot is held while the call runs and handed to the next waiter when it ends, so a
//! call whose command went to the background frees its slot as soon as it returns.
//!
//! It only admits and times calls, and frames the wait: the `[waited …]` note of a call that
//! waited longer than [`NOTE_AFTER`], and the aborted output of a call cancelled while it
//! waited. It runs no tool and knows nothing of commands or approvals.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::oneshot;

use crate::message::{EventType, ModelPayload, OmniMessage, Payload, StopReason, build};

/// A call that waited longer than this for its slot says so in its output.
pub(crate) const NOTE_AFTER: Duration = Duration::from_secs(1);

/// The output of a call aborted before it started (the close-out's abort note).
const ABORTED_TEXT: &str = "[interrupted: tool aborted by user]";

#[derive(Debug)]
struct Inner {
    free: usize,
    queue: VecDeque<oneshot::Sender<Slot>>,
}

/// One session's budget. Cheap to clone (shared).
#[derive(Debug, Clone)]
pub(crate) struct ToolBudget {
    inner: Arc<Mutex<Inner>>,
    max: usize,
}

/// A running call's slot; dropping it hands the slot to the oldest live waiter.
#[derive(Debug)]
pub(crate) struct Slot {
    budget: Option<Arc<Mutex<Inner>>>,
}

/// The answer to [`ToolBudget::enter`]: a slot now, or a place in the queue.
pub(crate) enum Admission {
    Now(Slot),
    Queued(oneshot::Receiver<Slot>),
}

fn lock(m: &Mutex<Inner>) -> MutexGuard<'_, Inner> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl ToolBudget {
    /// A budget of `max` concurrent calls (at least 1).
    pub(crate) fn new(max: usize) -> Self {
        let max = max.max(1);
        ToolBudget {
            inner: Arc::new(Mutex::new(Inner {
                free: max,
                queue: VecDeque::new(),
            })),
            max,
        }
    }

    pub(crate) fn max(&self) -> usize {
        self.max
    }

    /// Takes a slot if one is free, else queues behind every earlier caller. Never blocks.
    pub(crate) fn enter(&self) -> Admission {
        let mut inner = lock(&self.inner);
        if inner.free > 0 && inner.queue.is_empty() {
            inner.free -= 1;
            return Admission::Now(Slot {
                budget: Some(self.inner.clone()),
            });
        }
        let (tx, rx) = oneshot::channel();
        inner.queue.push_back(tx);
        Admission::Queued(rx)
    }
}

impl Admission {
    /// The slot, once it is this caller's turn.
    pub(crate) async fn wait(self) -> Slot {
        match self {
            Admission::Now(slot) => slot,
            // The sender is only dropped with the budget, i.e. never while a session dispatches;
            // should it happen, run without a slot rather than never.
            Admission::Queued(rx) => rx.await.unwrap_or(Slot { budget: None }),
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let Some(budget) = self.budget.take() else {
            return;
        };
        let mut inner = lock(&budget);
        while let Some(tx) = inner.queue.pop_front() {
            let slot = Slot {
                budget: Some(budget.clone()),
            };
            match tx.send(slot) {
                Ok(()) => return,
                // That waiter was cancelled: disarm the slot it did not take, try the next.
                Err(mut unsent) => unsent.budget = None,
            }
        }
        inner.free += 1;
    }
}

/// Where a call's partials go.
pub(crate) type Emit = Arc<dyn Fn(OmniMessage) + Send + Sync>;

/// A call that has its slot: the partial sink to run it with (it streams the wait note, if
/// any, before the `stop` partial) and what [`Admitted::finish`] needs.
pub(crate) struct Admitted {
    slot: Slot,
    pub(crate) emit: Emit,
    note: Option<String>,
}

impl Admitted {
    /// The call is over: frees the slot for the next waiter and adds the wait note to the
    /// complete output.
    pub(crate) fn finish(self, output: OmniMessage) -> OmniMessage {
        drop(self.slot);
        match &self.note {
            Some(n) => append_note(output, n),
            None => output,
        }
    }
}

/// Waits for the call's slot. An abort wins over a slot it freed: a call cancelled while it
/// waits never starts and gets the aborted output (`Err`, boxed: it is large) instead.
pub(crate) async fn admit(
    admission: Admission,
    cancel: &tokio_util::sync::CancellationToken,
    tool_call_id: &str,
    max: usize,
    emit: Emit,
) -> Result<Admitted, Box<OmniMessage>> {
    let queued_at = std::time::Instant::now();
    let slot = tokio::select! {
        biased;
        _ = cancel.cancelled() => None,
        slot = admission.wait() => Some(slot),
    };
    let Some(slot) = slot else {
        return Err(Box::new(aborted_while_waiting(tool_call_id, emit.as_ref())));
    };
    let note = waited_note(queued_at.elapsed(), max);
    let emit = match &note {
        Some(n) => emit_with_note(emit, n.clone()),
        None => emit,
    };
    Ok(Admitted { slot, emit, note })
}

/// The note of a call that waited `waited` for a slot of a budget of `max` (none for short
/// waits).
fn waited_note(waited: Duration, max: usize) -> Option<String> {
    (waited > NOTE_AFTER).then(|| {
        format!(
            "[waited {:.1} s for a free tool slot: at most {max} tool calls run at once (tools.max_parallel)]",
            waited.as_secs_f64()
        )
    })
}

/// Wraps the partial sink of one call so the note is streamed as the last delta, just before
/// the `stop` partial (the complete output gets it through [`append_note`]).
fn emit_with_note(emit: Emit, note: String) -> Emit {
    Arc::new(move |msg: OmniMessage| {
        if let Payload::Model(ModelPayload::PartialToolCallOutput {
            event_type: EventType::Stop,
            tool_call_id,
            ..
        }) = &msg.payload
        {
            emit(build::partial_tool_call_output(
                tool_call_id.clone(),
                EventType::Delta,
                format!("\n{note}"),
                Vec::new(),
                StopReason::Completed,
            ));
        }
        emit(msg);
    })
}

/// Appends `note` on its own line to a complete `tool_call_output`.
fn append_note(mut output: OmniMessage, note: &str) -> OmniMessage {
    if let Payload::Model(ModelPayload::ToolCallOutput { output: text, .. }) = &mut output.payload {
        text.push('\n');
        text.push_str(note);
    }
    output
}

/// The framing of a call aborted while it waited for a slot: start, the abort note, stop, and
/// the complete output (the same texts as the close-out's for an aborted call).
fn aborted_while_waiting(
    tool_call_id: &str,
    emit: &(dyn Fn(OmniMessage) + Send + Sync),
) -> OmniMessage {
    let partial = |event, text: &str, stop| {
        build::partial_tool_call_output(tool_call_id, event, text, Vec::new(), stop)
    };
    emit(partial(EventType::Start, "", StopReason::Completed));
    emit(partial(
        EventType::Delta,
        ABORTED_TEXT,
        StopReason::Completed,
    ));
    emit(partial(EventType::Stop, "", StopReason::Aborted));
    build::tool_call_output(tool_call_id, ABORTED_TEXT, Vec::new(), StopReason::Aborted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn slots_go_to_waiters_in_call_order() {
        let budget = ToolBudget::new(2);
        let a = budget.enter().wait().await;
        let b = budget.enter().wait().await;
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        // Entered in order 0..5, polled in reverse: the queue decides, not the scheduler.
        let admissions: Vec<Admission> = (0..5).map(|_| budget.enter()).collect();
        for (i, adm) in admissions.into_iter().enumerate().rev() {
            let order = order.clone();
            tasks.push(tokio::spawn(async move {
                let slot = adm.wait().await;
                order.lock().unwrap().push(i);
                tokio::task::yield_now().await;
                drop(slot);
            }));
        }
        tokio::task::yield_now().await;
        assert!(order.lock().unwrap().is_empty(), "no slot was free");
        drop(a);
        drop(b);
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(*order.lock().unwrap(), vec![0, 1, 2, 3, 4]);
        // Everything returned: both slots free again.
        assert!(matches!(budget.enter(), Admission::Now(_)));
        assert_eq!(lock(&budget.inner).free, 2);
    }

    #[tokio::test]
    async fn a_cancelled_waiter_passes_its_turn_on() {
        let budget = ToolBudget::new(1);
        let held = budget.enter().wait().await;
        let cancelled = budget.enter();
        let next = budget.enter();
        drop(cancelled);
        drop(held);
        let slot = tokio::time::timeout(Duration::from_secs(20), next.wait())
            .await
            .unwrap();
        drop(slot);
        assert_eq!(lock(&budget.inner).free, 1);
    }

    #[test]
    fn notes_only_for_long_waits() {
        assert_eq!(waited_note(Duration::from_millis(900), 16), None);
        assert_eq!(
            waited_note(Duration::from_millis(2340), 4).as_deref(),
            Some(
                "[waited 2.3 s for a free tool slot: at most 4 tool calls run at once (tools.max_parallel)]"
            )
        );
        let out = append_note(
            build::tool_call_output("c", "hi", Vec::new(), StopReason::Completed),
            "[n]",
        );
        assert!(
            matches!(out.as_model(), Some(ModelPayload::ToolCallOutput { output, .. }) if output == "hi\n[n]")
        );
    }
}
