//! Context compaction of a session (PenguinHarness-compatible): when a request's usage reaches
//! the threshold (`context`), after `compaction.max_turns` turns (`turns`) or on demand
//! (`manual`), the session compacts before its next request.
//!
//! `summarize` sends one request on the current context with the same tools, its pending input
//! (outputs of finished calls) and then [`SUMMARY_PROMPT`]; a reply with tool calls or without a
//! summary is a failed attempt (its calls get failed outputs) retried with [`RETRY_NOTE`],
//! sharing the reconnect budget; a non-retryable error (`auth`) stops at once. The new context
//! starts with the `[context_summary]` text. `discard` keeps only the pending input. Both write
//! `compaction_begin` … `compaction_end` and, on success, ask the trace to rotate.
//!
//! Like `turn.rs`, every function runs inside the actor's `handle` and returns at once; the
//! request's stream runs in a spawned task that casts back with the attempt's id. It must not
//! touch a running turn's calls (a compaction runs only between requests), and it never writes
//! the conversation: it reads it, and replaces the context or sets the carry-over through the
//! executor's effects (`ReplaceContext`, `SetCarryOver`).

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::{FutureExt, StreamExt};
use ractor::ActorRef;
use tokio::task::JoinHandle;

use super::compaction_text::{self as text, CALL_NOT_RUN, RETRY_NOTE, SUMMARY_PROMPT};
use super::effects::{self, Queue};
use super::machine::Effect;
use super::{SessionMsg, SessionState, turn};
use super::{hook_events, hook_outcomes};
use crate::config::CompactionMode;
use crate::message::{
    EventPayload, ModelPayload, OmniMessage, Role, Sender, StopReason, Usage, build,
};
use crate::model::{ModelEvent, ModelOutcome, ModelRequest};
use crate::trace::rotation::Rotation;
use crate::trace::writer::{TraceMsg, record_line};

/// Why a session compacts (`compaction_begin.reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Reason {
    Context,
    Turns,
    Manual,
}

impl Reason {
    fn as_str(self) -> &'static str {
        match self {
            Reason::Context => "context",
            Reason::Turns => "turns",
            Reason::Manual => "manual",
        }
    }
}

use crate::actors::session_api::CompactStart;

/// What follows a compaction.
enum After {
    /// The running task continues with a new request.
    Continue,
    /// A task starts with this prompt.
    Prompt(String, Option<Sender>),
    /// Nothing (a manual compaction of an idle session).
    Idle,
}

/// A compaction in progress.
struct Active {
    /// The id of the current attempt's stream (from the session's turn ids).
    id: u64,
    reason: Reason,
    after: After,
    /// Input waiting for the next request (outputs of finished calls, carry-over).
    pending: Vec<ModelPayload>,
    attempt: u32,
    retry_note: bool,
    reply: String,
    calls: Vec<String>,
    usage: Usage,
    stream: Option<JoinHandle<()>>,
    backoff: Option<JoinHandle<()>>,
}

impl Active {
    fn stop(&mut self) {
        for h in [self.stream.take(), self.backoff.take()]
            .into_iter()
            .flatten()
        {
            h.abort();
        }
    }
}

/// The compaction part of a session's state.
#[derive(Default)]
pub(crate) struct Compaction {
    due: Option<Reason>,
    /// Completed model turns since the last compaction.
    turns: u64,
    /// `total` of the last completed request.
    last_total: u64,
    active: Option<Box<Active>>,
}

impl Compaction {
    /// The state of a session resumed with `turns` turns in its latest trace file.
    pub(crate) fn resumed(turns: u64) -> Self {
        Compaction {
            turns,
            ..Compaction::default()
        }
    }
}

/// The usage threshold of the session's model.
fn threshold(state: &SessionState) -> u64 {
    let window = state
        .options
        .config
        .model
        .as_ref()
        .and_then(|m| m.context_window)
        .or_else(|| state.options.model.info().context_window.as_u64());
    state.options.config.compaction.threshold(window)
}

/// After each completed request: sets the trigger when its usage or the turn count reaches
/// the configured limit (never with `compaction.auto: false`).
pub(super) fn after_request(state: &mut SessionState, usage: &Usage) {
    let cfg = state.options.config.compaction;
    let c = &mut state.compaction;
    c.turns += 1;
    c.last_total = usage.total;
    if c.due.is_some() || !cfg.auto {
        return;
    }
    if usage.total >= threshold(state) {
        state.compaction.due = Some(Reason::Context);
    } else if cfg.max_turns.is_some_and(|m| state.compaction.turns >= m) {
        state.compaction.due = Some(Reason::Turns);
    }
}

/// True when the session must compact before its next request.
pub(super) fn due(state: &SessionState) -> bool {
    state.compaction.due.is_some() && state.compaction.active.is_none()
}

/// True while a compaction's stream with id `turn` is the live one.
pub(super) fn owns(state: &SessionState, turn: u64) -> bool {
    state
        .compaction
        .active
        .as_ref()
        .is_some_and(|a| a.id == turn)
}

pub(super) fn is_active(state: &SessionState) -> bool {
    state.compaction.active.is_some()
}

/// `SessionHandle::compact`: compacts an idle session now, or schedules a compaction before
/// the running task's next request.
pub(super) fn request(
    myself: &ActorRef<SessionMsg>,
    state: &mut SessionState,
) -> Result<CompactStart, crate::error::RookeryError> {
    use crate::error::RookeryError;
    if let Some(reason) = &state.trace_failure {
        return Err(RookeryError::TraceFailed {
            session: state.id.clone(),
            reason: reason.clone(),
        });
    }
    if state.compaction.active.is_some() {
        return Err(RookeryError::Compacting(state.id.clone()));
    }
    if state.task.is_some() {
        state.compaction.due = Some(Reason::Manual);
        return Ok(CompactStart::Scheduled);
    }
    if !state.conversation.has_context() {
        return Err(RookeryError::NothingToCompact(state.id.clone()));
    }
    state.compaction.due = Some(Reason::Manual);
    turn::hold_task(state);
    let pending = effects::take(state, Queue::CarryOver);
    begin(myself, state, pending, After::Idle);
    Ok(CompactStart::Started)
}

/// At a task's start: compacts first when due (the prompt follows the compaction). Returns the
/// prompt back when no compaction is due.
pub(super) fn before_task(
    myself: &ActorRef<SessionMsg>,
    state: &mut SessionState,
    prompt: String,
    sender: Option<Sender>,
) -> Option<(String, Option<Sender>)> {
    if !due(state) {
        return Some((prompt, sender));
    }
    turn::hold_task(state);
    let pending = effects::take(state, Queue::CarryOver);
    begin(myself, state, pending, After::Prompt(prompt, sender));
    None
}

/// Between two requests of a task: compacts first when due. Returns the input back when no
/// compaction is due.
pub(super) fn before_request(
    myself: &ActorRef<SessionMsg>,
    state: &mut SessionState,
    input: Vec<ModelPayload>,
) -> Option<Vec<ModelPayload>> {
    if !due(state) {
        return Some(input);
    }
    begin(myself, state, input, After::Continue);
    None
}

fn begin(
    myself: &ActorRef<SessionMsg>,
    state: &mut SessionState,
    pending: Vec<ModelPayload>,
    after: After,
) {
    let reason = state.compaction.due.take().unwrap_or(Reason::Manual);
    let mode = state.options.config.compaction.mode;
    let trigger = if reason == Reason::Manual {
        "manual"
    } else {
        "auto"
    };
    hook_outcomes::in_background(myself, state, move |site| async move {
        (hook_events::pre_compact(site, trigger).await, None)
    });
    state.emit(
        OmniMessage::event(EventPayload::CompactionBegin {
            reason: reason.as_str().to_string(),
            mode: mode.as_str().to_string(),
            context: Some(state.compaction.last_total),
            turns: Some(state.compaction.turns),
        }),
        true,
    );
    let active = Box::new(Active {
        id: 0,
        reason,
        after,
        pending,
        attempt: 1,
        retry_note: false,
        reply: String::new(),
        calls: Vec::new(),
        usage: Usage::default(),
        stream: None,
        backoff: None,
    });
    state.compaction.active = Some(active);
    match mode {
        CompactionMode::Discard => complete(myself, state, None),
        CompactionMode::Summarize => {
            state.emit(
                build::user_text(SUMMARY_PROMPT, Some(Sender::Harness)),
                true,
            );
            send_attempt(myself, state);
        }
    }
}

/// Sends the summary request of the current attempt.
fn send_attempt(myself: &ActorRef<SessionMsg>, state: &mut SessionState) {
    let id = state.next_turn_id;
    state.next_turn_id += 1;
    let Some(active) = state.compaction.active.as_mut() else {
        return;
    };
    active.id = id;
    active.reply.clear();
    active.calls.clear();
    active.usage = Usage::default();
    let mut history: Vec<ModelPayload> = state.conversation.committed().to_vec();
    history.extend(active.pending.iter().cloned());
    history.push(text::user(SUMMARY_PROMPT));
    if active.retry_note {
        history.push(text::user(RETRY_NOTE));
    }
    let request = ModelRequest {
        system_prompt: state.system_prompt.clone(),
        history: Arc::new(history),
        tools: state.tool_specs.clone(),
    };
    state.emit(build::request_begin(), true);
    // A summary is free text, whatever the task's output schema.
    state.model.set_output_schema(None);
    let stream = state.model.stream(request);
    let handle = spawn_stream(myself.clone(), id, stream);
    if let Some(active) = state.compaction.active.as_mut() {
        active.stream = Some(handle);
    }
}

/// Drives a model stream, casting its events back tagged with `id` (a stream that ends without
/// an end, or panics, ends as an error).
fn spawn_stream(
    me: ActorRef<SessionMsg>,
    id: u64,
    stream: futures::stream::BoxStream<'static, ModelEvent>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let drive = async {
            let mut stream = stream;
            while let Some(event) = stream.next().await {
                let is_end = matches!(event, ModelEvent::End(_));
                if me.cast(SessionMsg::Model { turn: id, event }).is_err() || is_end {
                    return true;
                }
            }
            false
        };
        let outcome = match AssertUnwindSafe(drive).catch_unwind().await {
            Ok(true) => return,
            Ok(false) => {
                ModelOutcome::error(StopReason::Malformed, "model stream ended without a finish")
            }
            Err(_) => ModelOutcome::error(StopReason::Failed, "model stream panicked"),
        };
        let _ = me.cast(SessionMsg::Model {
            turn: id,
            event: ModelEvent::End(outcome),
        });
    })
}

/// An event of the summary request.
pub(super) fn on_event(myself: &ActorRef<SessionMsg>, state: &mut SessionState, event: ModelEvent) {
    let Some(active) = state.compaction.active.as_mut() else {
        return;
    };
    match event {
        ModelEvent::Partial(p) => state.emit(OmniMessage::model(p), false),
        ModelEvent::Usage(u) => active.usage = u,
        ModelEvent::Complete(p) => {
            match &p {
                ModelPayload::Text {
                    role: Role::Assistant,
                    text,
                    ..
                } => active.reply.push_str(text),
                ModelPayload::ToolCall { tool_call_id, .. } => {
                    active.calls.push(tool_call_id.clone())
                }
                _ => {}
            }
            state.emit(OmniMessage::model(p), true);
        }
        ModelEvent::End(outcome) => on_end(myself, state, outcome),
    }
}

fn on_end(myself: &ActorRef<SessionMsg>, state: &mut SessionState, outcome: ModelOutcome) {
    let retry = state.options.config.retry;
    let Some(active) = state.compaction.active.as_mut() else {
        return;
    };
    active.stream = None;
    let attempt = active.attempt;
    if outcome.status == StopReason::Completed {
        let usage = active.usage;
        let calls = std::mem::take(&mut active.calls);
        let summary = text::extract_summary(&active.reply);
        state.session_usage.add(&usage);
        state.emit(build::token_usage(state.session_usage, usage), true);
        state.emit(
            build::request_end(
                StopReason::Completed,
                None,
                (attempt > 1).then_some(attempt),
                None,
            ),
            true,
        );
        for id in &calls {
            state.emit(
                build::tool_call_output(id.clone(), CALL_NOT_RUN, Vec::new(), StopReason::Failed),
                true,
            );
        }
        let problem = match (&summary, calls.is_empty()) {
            (Some(s), true) => return complete(myself, state, Some(s.clone())),
            (_, false) => "the summary reply made tool calls",
            (None, true) => "the summary reply has no [summary] block",
        };
        if attempt <= retry.max_retries {
            if let Some(active) = state.compaction.active.as_mut() {
                active.attempt += 1;
                active.retry_note = true;
            }
            send_attempt(myself, state);
        } else {
            fail(state, problem.to_string());
        }
        return;
    }
    let detail = outcome
        .error_message
        .clone()
        .unwrap_or_else(|| "unknown".to_string());
    let retryable = matches!(
        outcome.status,
        StopReason::Failed | StopReason::Timeout | StopReason::Malformed
    ) && !outcome.permanent;
    if retryable && attempt <= retry.max_retries {
        let wait = outcome
            .retry_after_ms
            .unwrap_or(0)
            .max(retry.backoff_ms(attempt));
        let me = myself.clone();
        let id = active.id;
        active.backoff = Some(tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_millis(wait)).await;
            let _ = me.cast(SessionMsg::RetryNow { turn: id });
        }));
        state.emit(
            build::request_end(outcome.status, Some(detail), Some(attempt), Some(wait)),
            true,
        );
        return;
    }
    state.emit(
        build::request_end(outcome.status, Some(detail.clone()), Some(attempt), None),
        true,
    );
    fail(state, detail);
}

/// The backoff before a retried summary request ended (or "retry now").
pub(super) fn on_retry_now(myself: &ActorRef<SessionMsg>, state: &mut SessionState) {
    let Some(active) = state.compaction.active.as_mut() else {
        return;
    };
    if let Some(b) = active.backoff.take() {
        b.abort();
    }
    active.attempt += 1;
    send_attempt(myself, state);
}

fn end_record(
    state: &SessionState,
    active: &Active,
    status: StopReason,
    error: Option<String>,
) -> OmniMessage {
    OmniMessage::event(EventPayload::CompactionEnd {
        reason: active.reason.as_str().to_string(),
        mode: state.options.config.compaction.mode.as_str().to_string(),
        status,
        attempt: (active.attempt > 1 || status != StopReason::Completed).then_some(active.attempt),
        error_message: error,
    })
}

/// A completed compaction: the context is replaced, the trace rotates, and what waited goes on.
fn complete(myself: &ActorRef<SessionMsg>, state: &mut SessionState, summary: Option<String>) {
    let Some(mut active) = state.compaction.active.take() else {
        return;
    };
    active.stop();
    state.emit(
        end_record(state, &active, StopReason::Completed, None),
        true,
    );
    effects::apply(state, Effect::ReplaceContext);
    state.compaction.turns = 0;
    state.compaction.last_total = 0;
    rotate(state);
    hook_outcomes::in_background(myself, state, |site| async move {
        hook_events::session_start(&site, "compact").await
    });
    let mut input = Vec::new();
    match summary {
        Some(s) => {
            let msg = build::user_text(text::context_summary(&s), Some(Sender::Harness));
            input.extend(msg.as_model().cloned());
            state.emit(msg, true);
        }
        None => {
            for m in text::keep_for_discard(std::mem::take(&mut active.pending)) {
                state.emit(OmniMessage::model(m.clone()), true);
                input.push(m);
            }
        }
    }
    match active.after {
        After::Continue => turn::continue_task(myself, state, input),
        After::Prompt(prompt, sender) => {
            effects::apply(state, Effect::SetCarryOver(input));
            turn::start_task(myself, state, prompt, sender);
        }
        After::Idle => {
            effects::apply(state, Effect::SetCarryOver(input));
            turn::release_task(state);
        }
    }
}

/// Asks the trace to continue in its next file, which starts with the session's meta (with the
/// approval mode now in force) and its tool list.
fn rotate(state: &SessionState) {
    let mut meta = match &state.options.resume {
        Some(r) => {
            let mut m = super::session_meta(&state.id, &state.options);
            m.source = r.meta.source.clone();
            m.owner = r.meta.owner.clone();
            m
        }
        None => super::session_meta(&state.id, &state.options),
    };
    if meta.approval_mode.is_none() {
        meta.approval_mode = state.approval_mode.map(|m| m.as_str().to_string());
    }
    let mut records = vec![
        OmniMessage::session_meta(meta),
        build::tool_list_ready(state.tool_specs.clone()),
    ];
    records.extend(super::model_switch::header_record(state));
    let header = records
        .iter()
        .filter_map(record_line)
        .map(|line| match &state.redactor {
            Some(r) => r.redact_bytes(&line).unwrap_or(line),
            None => line,
        })
        .collect();
    let _ = state.trace.cast(TraceMsg::Rotate(Rotation { header }));
}

/// A failed compaction keeps the context; the task (if any) ends `failed`.
fn fail(state: &mut SessionState, error: String) {
    let Some(mut active) = state.compaction.active.take() else {
        return;
    };
    active.stop();
    tracing::info!(session = %state.id, "compaction failed: {error}");
    state.emit(
        end_record(state, &active, StopReason::Failed, Some(error)),
        true,
    );
    settle(
        state,
        *active,
        StopReason::Failed,
        "compaction failed".to_string(),
    );
}

/// The task is aborted while compacting: the compaction ends `aborted`, the context is kept.
pub(super) fn abort(state: &mut SessionState, reason: &str) {
    let Some(mut active) = state.compaction.active.take() else {
        return;
    };
    active.stop();
    state.emit(end_record(state, &active, StopReason::Aborted, None), true);
    let status = state
        .task
        .as_ref()
        .map_or(StopReason::Aborted, |t| t.end_status);
    let reason = if reason == "aborted by user" {
        "aborted during compaction".to_string()
    } else {
        reason.to_string()
    };
    settle(state, *active, status, reason);
}

/// Ends what waited for a compaction that did not complete: the pending input becomes the
/// carry-over (a prompt that had not started is kept behind it).
fn settle(state: &mut SessionState, active: Active, status: StopReason, reason: String) {
    let mut carry = active.pending;
    match active.after {
        After::Idle => {
            effects::apply(state, Effect::SetCarryOver(carry));
            turn::release_task(state);
        }
        After::Prompt(prompt, sender) => {
            let user = build::user_text(prompt, sender);
            if state.options.stream_prompt {
                state.emit(user.clone(), true);
            } else {
                state.record_only(&user);
            }
            carry.extend(user.as_model().cloned());
            effects::apply(state, Effect::SetCarryOver(carry));
            turn::end_task(state, status, reason);
        }
        After::Continue => {
            effects::apply(state, Effect::SetCarryOver(carry));
            turn::end_task(state, status, reason);
        }
    }
}
