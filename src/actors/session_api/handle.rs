//! `SessionHandle`: the public handle on a session actor — tasks, aborts, status, subscription,
//! the trace's path and health, close.
//!
//! It only sends messages to the actor (and reads the trace's shared health); it never runs a
//! turn or writes a trace record itself.

use std::path::PathBuf;
use std::sync::Arc;

use super::{
    CompactStart, ForkTurns, Inbox, MessageReceiver, ModelChoice, SessionRef, SessionRequest,
    SessionStatus, SteerOutcome, SwitchError, Switched, TaskSummary,
};
use crate::error::RookeryError;
use crate::message::{OmniMessage, Sender, SessionMeta};
use crate::trace::health::TraceHealth;
use crate::trace::hub::TraceHandle;
use crate::trace::writer::TraceMsg;

/// The public handle on a session.
#[derive(Clone)]
pub struct SessionHandle {
    pub(crate) id: String,
    /// Set by `close` (on every clone): the host then treats the session as gone.
    pub(crate) closing: Arc<std::sync::atomic::AtomicBool>,
    /// The `session_meta` record (its payload is the meta).
    pub(crate) meta_message: Arc<OmniMessage>,
    pub(crate) actor: SessionRef,
    pub(crate) trace: TraceHandle,
    /// Also names the file records go to now (the session's path is not kept twice).
    pub(crate) trace_health: Arc<TraceHealth>,
    /// The sandbox mode and network the session runs with (restored on a resume).
    pub(crate) sandbox: (crate::sandbox::SandboxMode, crate::sandbox::NetworkAccess),
}

impl std::fmt::Debug for SessionHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionHandle")
            .field("id", &self.id)
            .finish()
    }
}

impl SessionHandle {
    /// The sandbox mode and network the session runs with.
    pub fn sandbox(&self) -> (crate::sandbox::SandboxMode, crate::sandbox::NetworkAccess) {
        self.sandbox
    }

    /// The session's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The session's `session_meta` (the first line of its trace).
    pub fn meta(&self) -> &SessionMeta {
        static NONE: std::sync::OnceLock<SessionMeta> = std::sync::OnceLock::new();
        match &self.meta_message.payload {
            crate::message::Payload::SessionMeta(m) => m,
            _ => NONE.get_or_init(SessionMeta::default),
        }
    }

    /// The `session_meta` record exactly as the trace has it.
    pub fn meta_message(&self) -> &OmniMessage {
        &self.meta_message
    }

    /// The trace file records go to now: `<session_id>_001.jsonl`, then `_002`, … once a
    /// compaction rotated the trace.
    pub fn trace_path(&self) -> PathBuf {
        // Set before the session starts, so never empty.
        self.trace_health.current().unwrap_or_default()
    }

    /// The first failed write of the session's trace (`trace write failed: <reason> (<path>)`),
    /// if any. Once set, the session takes no new task.
    pub fn trace_failure(&self) -> Option<String> {
        self.trace_health.failure().map(str::to_string)
    }

    /// Waits until every record sent to the trace so far is written (no sync).
    pub async fn flush_trace(&self) -> Result<(), RookeryError> {
        Ok(ractor::call!(self.trace, TraceMsg::Written)?)
    }

    /// A new stream of everything the session emits from now on.
    pub async fn subscribe(&self) -> Result<MessageReceiver, RookeryError> {
        Ok(ractor::call!(self.actor.0, SessionRequest::Subscribe)?)
    }

    /// Starts a task with a user message; fails with `SessionBusy` while one runs.
    pub async fn start_task(&self, text: impl Into<String>) -> Result<(), RookeryError> {
        self.start_task_as(text, None).await
    }

    /// Like `start_task`, with the user text marked as written by `sender`.
    pub async fn start_task_as(
        &self,
        text: impl Into<String>,
        sender: Option<Sender>,
    ) -> Result<(), RookeryError> {
        ractor::call!(self.actor.0, SessionRequest::StartTask, text.into(), sender)?
    }

    /// Starts a task whose final answer must be JSON valid against `schema`: an invalid answer
    /// is sent back to the model with the validation errors, at most `schema.max_retries()`
    /// times, then the task fails (`output_invalid: …`). The parsed answer is the task's
    /// [`TaskSummary::output`] and its `task_end`'s `output`.
    pub async fn start_structured_task(
        &self,
        text: impl Into<String>,
        schema: super::OutputSchema,
    ) -> Result<(), RookeryError> {
        ractor::call!(
            self.actor.0,
            SessionRequest::StartStructured,
            text.into(),
            schema
        )?
    }

    /// Steers the running task: `text` joins it at its next input-assembly point (after the
    /// running calls finish, before the next request), recorded in the trace now. With no task
    /// running it starts one. A blank text is `InvalidInput`.
    pub async fn steer(&self, text: impl Into<String>) -> Result<SteerOutcome, RookeryError> {
        self.steer_as(text, None).await
    }

    /// Like `steer`, with the text marked as written by `sender` (e.g. a parent agent).
    pub async fn steer_as(
        &self,
        text: impl Into<String>,
        sender: Option<Sender>,
    ) -> Result<SteerOutcome, RookeryError> {
        let text = text.into();
        if text.trim().is_empty() {
            return Err(RookeryError::InvalidInput(
                "steer text must not be empty".to_string(),
            ));
        }
        ractor::call!(self.actor.0, SessionRequest::Steer, text, sender)?
    }

    /// A receiver of the session's inbox: what arrived for its model (`wait_agent`).
    pub async fn inbox(&self) -> Result<tokio::sync::watch::Receiver<Inbox>, RookeryError> {
        self.actor.inbox().await
    }

    /// The history of the session's completed tasks chosen by `turns` (oldest first).
    pub async fn fork_history(
        &self,
        turns: ForkTurns,
    ) -> Result<Vec<crate::message::ModelPayload>, RookeryError> {
        self.actor.fork_history(turns).await
    }

    /// Wakes the session's `wait_agent` (a message was queued for it elsewhere).
    #[doc(hidden)]
    pub fn poke(&self, what: String) -> Result<(), RookeryError> {
        self.actor.poke(what)
    }

    /// The address of the session (what a subagent supervisor reaches its parent through).
    #[doc(hidden)]
    pub fn session_ref(&self) -> &SessionRef {
        &self.actor
    }

    /// Switches the session's model from its next request on (`apply`), or only checks that
    /// `choice` resolves against its config and builds. The history is kept.
    pub async fn switch_model(
        &self,
        choice: ModelChoice,
        apply: bool,
    ) -> Result<Switched, SwitchError> {
        let switched = ractor::call!(self.actor.0, SessionRequest::SwitchModel, choice, apply)
            .map_err(RookeryError::from)?;
        Ok(switched?)
    }

    /// Records in the trace that an API request of principal `by` did `action` (`task_start`,
    /// `steer`, `abort`, `approval_mode` with the `mode` it set, `delete`).
    #[doc(hidden)]
    pub fn record_action(
        &self,
        action: &str,
        by: &str,
        mode: Option<&str>,
    ) -> Result<(), RookeryError> {
        self.actor.cast(SessionRequest::ApiAction {
            action: action.to_string(),
            by: by.to_string(),
            mode: mode.map(str::to_string),
        })
    }

    /// Records in the trace (and the session's stream) that one of its schedules was added,
    /// removed or ran (`rookery serve`'s schedules; the server keeps what they mean).
    pub fn record_schedule(
        &self,
        record: crate::message::schedule::ScheduleRecord,
    ) -> Result<(), RookeryError> {
        self.actor.cast(SessionRequest::Schedule(record))
    }

    /// Aborts the running task (no-op when idle).
    pub fn abort(&self) -> Result<(), RookeryError> {
        self.actor.cast(SessionRequest::Abort)
    }

    /// What this caller sends next belongs to the trace of `traceparent` (W3C; an invalid
    /// value is ignored, as the spec says): the next task's span joins it, a running task
    /// records it on a `rookery.steer` event. A no-op with OpenTelemetry export off.
    pub fn join_trace(&self, traceparent: &str) -> Result<(), RookeryError> {
        match crate::telemetry::TraceParent::parse(traceparent) {
            Some(tp) if crate::telemetry::enabled() => {
                self.actor.cast(SessionRequest::JoinTrace(tp))
            }
            _ => Ok(()),
        }
    }

    /// Compacts the session's context: at once when idle (`Started`; `wait_idle` waits for
    /// it), before the running task's next request otherwise (`Scheduled`). An empty context
    /// is [`RookeryError::NothingToCompact`].
    pub async fn compact(&self) -> Result<CompactStart, RookeryError> {
        ractor::call!(self.actor.0, SessionRequest::Compact)?
    }

    /// Waits until no task runs; the last task's summary.
    pub async fn wait_idle(&self) -> Result<Option<TaskSummary>, RookeryError> {
        Ok(ractor::call!(self.actor.0, SessionRequest::WaitIdle)?)
    }

    /// Runs one task to its end.
    pub async fn run_task(&self, text: impl Into<String>) -> Result<TaskSummary, RookeryError> {
        self.start_task(text).await?;
        self.wait_idle()
            .await?
            .ok_or_else(|| RookeryError::SessionEnded(self.id.clone()))
    }

    /// Whether the session is idle, running a task, or failed.
    pub async fn status(&self) -> Result<SessionStatus, RookeryError> {
        Ok(ractor::call!(self.actor.0, SessionRequest::Status)?)
    }

    /// Registered background commands and subagents right now.
    pub async fn live_counts(&self) -> Result<(usize, usize), RookeryError> {
        Ok(ractor::call!(self.actor.0, SessionRequest::LiveCounts)?)
    }

    /// Aborts any task, writes out the trace and stops the session.
    pub async fn close(&self) -> Result<(), RookeryError> {
        self.closing
            .store(true, std::sync::atomic::Ordering::SeqCst);
        Ok(ractor::call!(self.actor.0, SessionRequest::Close)?)
    }

    /// Makes the session's actor panic, for the tests of crash reporting. Not part of the API.
    #[doc(hidden)]
    pub fn inject_panic_for_tests(&self) {
        let _ = self.actor.cast(SessionRequest::InjectPanic);
    }
}
