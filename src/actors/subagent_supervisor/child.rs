//! One subagent as its parent sees it: the child session, the state of its current round, the
//! undelivered text of its answers, the forwarding task that tags its messages with its origin,
//! and the approver that routes its tool calls to the parent's approver.
//!
//! Nothing here decides admission or eviction: that is the supervisor's job.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use futures::future::BoxFuture;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::actors::background_notice::{self, NoticeKind};
use crate::actors::session_api::{
    MessageReceiver, ModelChoice, SessionHandle, SessionRef, Subscribers, broadcast,
};
use crate::approval::{Answer, ApprovalRequest, Approver};
use crate::message::{Decision, EventPayload, ModelPayload, OmniMessage, Role, StopReason};

/// Most undelivered answer text kept per child (oldest dropped).
const TEXT_CAP: usize = 1024 * 1024;

/// Routes a child's approvals to the parent's approver, origin-tagged; denies once killed.
pub struct ChildApprover {
    parent: Arc<dyn Approver>,
    child_session_id: String,
    cancel: CancellationToken,
    pending: AtomicUsize,
}

impl ChildApprover {
    /// An approver for the child `child_session_id` asking `parent`.
    pub fn new(parent: Arc<dyn Approver>, child_session_id: String) -> Self {
        ChildApprover {
            parent,
            child_session_id,
            cancel: CancellationToken::new(),
            pending: AtomicUsize::new(0),
        }
    }

    /// Calls waiting for a decision right now.
    pub fn pending(&self) -> usize {
        self.pending.load(Ordering::Relaxed)
    }

    /// Denies every pending and future request.
    pub fn deny_all(&self) {
        self.cancel.cancel();
    }
}

struct PendingGuard<'a>(&'a AtomicUsize);

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Approver for Arc<ChildApprover> {
    fn approve(&self, request: ApprovalRequest) -> BoxFuture<'static, Decision> {
        let answer = self.forward(request, false);
        Box::pin(async move { answer.await.decision })
    }

    fn ask(&self, request: ApprovalRequest) -> BoxFuture<'static, Decision> {
        let answer = self.forward(request, true);
        Box::pin(async move { answer.await.decision })
    }

    fn answer(&self, request: ApprovalRequest, ask: bool) -> BoxFuture<'static, Answer> {
        self.forward(request, ask)
    }

    fn decided_by(&self, request: &ApprovalRequest, asked: bool) -> &'static str {
        self.parent.decided_by(request, asked)
    }

    fn mode_name(&self) -> &'static str {
        self.parent.mode_name()
    }

    fn answered_by(&self, tool_call_id: &str) -> Option<String> {
        self.parent.answered_by(tool_call_id)
    }
}

impl ChildApprover {
    /// Forwards to the parent's approver (`ask`: past its mode), origin-tagged.
    fn forward(
        self: &Arc<Self>,
        mut request: ApprovalRequest,
        ask: bool,
    ) -> BoxFuture<'static, Answer> {
        let this = self.clone();
        request.origin.insert(0, this.child_session_id.clone());
        Box::pin(async move {
            if this.cancel.is_cancelled() {
                return Answer::bare(Decision::Deny);
            }
            this.pending.fetch_add(1, Ordering::Relaxed);
            let _guard = PendingGuard(&this.pending);
            let answer = this.parent.answer(request, ask);
            tokio::select! {
                a = answer => a,
                _ = this.cancel.cancelled() => Answer::bare(Decision::Deny),
            }
        })
    }
}

/// How a child's round ended.
#[derive(Debug, Clone, PartialEq)]
pub struct RoundEnd {
    /// The round's `task_end` status.
    pub status: StopReason,
    /// The reason of a direct `abort` event, when the round was aborted or failed.
    pub abort_reason: Option<String>,
    /// The round produced assistant text.
    pub had_text: bool,
    /// Set when the child session itself failed (panicked).
    pub error: Option<String>,
}

#[derive(Debug, Default)]
struct ChildState {
    running: bool,
    text: String,
    dropped: usize,
    round_had_text: bool,
    round_abort: Option<String>,
    last: Option<RoundEnd>,
    turns: u64,
    tokens: u64,
    background: bool,
    error: Option<String>,
    last_used: Option<Instant>,
    /// A spawned agent: every round ends with a report to the parent.
    reports: bool,
    /// The current round was interrupted by the parent.
    interrupted: bool,
    /// The last answer text of the current round.
    round_last_text: Option<String>,
    /// Completed rounds.
    rounds: u64,
    /// `send_message` texts waiting for the current round to end (mode `normal`).
    queue: std::collections::VecDeque<Queued>,
    /// `provider/model` and context window after a model switch (`model_switched`).
    model: Option<(String, serde_json::Value)>,
    /// `spawn_agent`'s `task_name` and `agent_name`.
    task_name: String,
    agent_name: Option<String>,
}

/// Most `send_message` texts queued for one busy agent.
pub const QUEUE_CAP: usize = 8;

/// A `send_message` text waiting for the agent's next round, and the model switch it brings.
#[derive(Debug, Clone)]
pub struct Queued {
    /// The message.
    pub text: String,
    /// The model switch it asks for, if any.
    pub switch: Option<ModelChoice>,
}

/// What a child's message makes the forwarder send to the parent.
enum Outgoing {
    Notice(String),
    Report { text: String, what: String },
}

/// A subagent: its session and everything its tools read.
pub struct Child {
    /// The subagent's id (`subagent-…` or the agent id).
    pub id: String,
    /// The child's session.
    pub session: SessionHandle,
    /// The first line of its prompt (clipped).
    pub label: String,
    /// The approver of its calls.
    pub approver: Arc<ChildApprover>,
    state: Mutex<ChildState>,
    version: watch::Sender<u64>,
}

/// What `list_subagents` shows of a child.
#[derive(Debug, Clone, PartialEq)]
pub struct ChildListing {
    /// The subagent's id.
    pub id: String,
    /// A round runs.
    pub running: bool,
    /// Model turns so far.
    pub turns: u64,
    /// Tokens used so far.
    pub tokens: u64,
    /// The first line of its prompt (clipped).
    pub label: String,
}

impl Child {
    /// A registered child for `prompt` (marked used now).
    pub fn new(
        id: String,
        session: SessionHandle,
        prompt: &str,
        approver: Arc<ChildApprover>,
    ) -> Arc<Self> {
        let (version, _) = watch::channel(0);
        Arc::new(Child {
            id,
            session,
            label: background_notice::label(prompt),
            approver,
            state: Mutex::new(ChildState {
                last_used: Some(Instant::now()),
                ..ChildState::default()
            }),
            version,
        })
    }

    fn with<R>(&self, f: impl FnOnce(&mut ChildState) -> R) -> R {
        match self.state.lock() {
            Ok(mut s) => f(&mut s),
            Err(poisoned) => f(&mut poisoned.into_inner()),
        }
    }

    fn bump(&self) {
        self.version.send_modify(|v| *v += 1);
    }

    /// True while a round runs.
    pub fn is_running(&self) -> bool {
        self.with(|s| s.running)
    }

    /// Marks a round as started (before the task is started, so no end is missed).
    pub fn begin_round(&self) {
        self.with(|s| {
            s.running = true;
            s.round_had_text = false;
            s.round_abort = None;
            s.interrupted = false;
            s.round_last_text = None;
        });
        self.bump();
    }

    /// Makes the child a spawned agent: a report after every round.
    pub fn set_agent(&self, task_name: &str, agent_name: Option<String>) {
        self.with(|s| {
            s.reports = true;
            s.task_name = task_name.to_string();
            s.agent_name = agent_name;
        });
    }

    /// Marks the current round as interrupted (its report says so).
    pub fn mark_interrupted(&self) {
        self.with(|s| s.interrupted = true);
    }

    /// Queues a text (and the model switch its round starts with) for the next round; false
    /// when [`QUEUE_CAP`] texts already wait.
    pub fn enqueue(&self, text: String, switch: Option<ModelChoice>) -> bool {
        self.with(|s| {
            if s.queue.len() >= QUEUE_CAP {
                return false;
            }
            s.queue.push_back(Queued { text, switch });
            true
        })
    }

    /// `(provider/model, context window)` the agent runs on since its last model switch
    /// (`None`: its spawn's model, in its `session_meta`).
    pub fn switched_model(&self) -> Option<(String, serde_json::Value)> {
        self.with(|s| s.model.clone())
    }

    /// Texts queued for the next round.
    pub fn queued(&self) -> usize {
        self.with(|s| s.queue.len())
    }

    /// `(task_name, agent_name, rounds, interrupted)` of a spawned agent.
    pub fn agent_info(&self) -> (String, Option<String>, u64, bool) {
        self.with(|s| {
            (
                s.task_name.clone(),
                s.agent_name.clone(),
                s.rounds,
                s.interrupted,
            )
        })
    }

    /// The failure of the child session itself, if it failed.
    pub fn error(&self) -> Option<String> {
        self.with(|s| s.error.clone())
    }

    /// Takes the next queued text and marks a round as started, when idle.
    fn next_queued(&self) -> Option<Queued> {
        let next = self.with(|s| {
            if s.running {
                return None;
            }
            s.queue.pop_front()
        });
        if next.is_some() {
            self.begin_round();
        }
        next
    }

    /// Arms (or disarms) the completion notice fired at the end of every round.
    pub fn set_background(&self, on: bool) {
        self.with(|s| s.background = on);
    }

    /// Marks the child used now (for the eviction order).
    pub fn touch(&self) {
        self.with(|s| s.last_used = Some(Instant::now()));
    }

    /// When the child was last used.
    pub fn last_used(&self) -> Option<Instant> {
        self.with(|s| s.last_used)
    }

    /// Takes the undelivered text (with the dropped-text marker when some was lost).
    pub fn take_text(&self) -> String {
        self.with(|s| {
            let text = std::mem::take(&mut s.text);
            let dropped = std::mem::take(&mut s.dropped);
            if dropped > 0 {
                format!("[... {dropped} chars of earlier subagent output dropped ...]\n{text}")
            } else {
                text
            }
        })
    }

    /// The end of the last round, when no round runs.
    pub fn finished(&self) -> Option<RoundEnd> {
        self.with(|s| if s.running { None } else { s.last.clone() })
    }

    /// A receiver that wakes on every change of the child.
    pub fn watch(&self) -> watch::Receiver<u64> {
        self.version.subscribe()
    }

    /// Marks the child session as failed (its actor panicked).
    pub fn fail(&self, error: String) {
        self.with(|s| s.error = Some(error));
        self.bump();
    }

    /// What `list_subagents` shows of it.
    pub fn listing(&self) -> ChildListing {
        self.with(|s| ChildListing {
            id: self.id.clone(),
            running: s.running,
            turns: s.turns,
            tokens: s.tokens,
            label: self.label.clone(),
        })
    }

    /// Applies one message of the child's own stream; returns a completion notice to deliver.
    fn observe(&self, msg: &OmniMessage) -> Option<Outgoing> {
        if msg.has_origin() {
            return None;
        }
        let mut notice = None;
        self.with(|s| {
            if let Some(ModelPayload::Text {
                role: Role::Assistant,
                text,
                ..
            }) = msg.as_model()
                && !text.is_empty()
            {
                if !s.text.is_empty() && !s.text.ends_with('\n') {
                    s.text.push('\n');
                }
                s.text.push_str(text);
                s.round_had_text = true;
                s.round_last_text = Some(text.clone());
                // Characters never outnumber bytes: count them only when the bytes exceed the cap.
                if s.text.len() > TEXT_CAP {
                    let len = s.text.chars().count();
                    if len > TEXT_CAP {
                        let cut = len - TEXT_CAP;
                        s.text = s.text.chars().skip(cut).collect();
                        s.dropped += cut;
                    }
                }
            }
            match msg.as_event() {
                Some(EventPayload::RequestEnd {
                    status: StopReason::Completed,
                    ..
                }) => s.turns += 1,
                Some(EventPayload::TokenUsage { session, .. }) => s.tokens = session.total,
                Some(EventPayload::ModelSwitched {
                    provider,
                    model_id,
                    context_window,
                    ..
                }) => s.model = Some((format!("{provider}/{model_id}"), context_window.clone())),
                Some(EventPayload::Abort { reason }) => {
                    s.round_abort = Some(reason.clone().unwrap_or_else(|| "aborted".into()));
                }
                Some(EventPayload::TaskEnd { status, .. }) => {
                    s.running = false;
                    let end = RoundEnd {
                        status: *status,
                        abort_reason: s.round_abort.take(),
                        had_text: s.round_had_text,
                        error: s.error.clone(),
                    };
                    s.rounds += 1;
                    if s.reports {
                        let (failed, detail) = exit_note(&end);
                        s.text.clear();
                        s.dropped = 0;
                        let status = if s.interrupted {
                            "interrupted"
                        } else if failed {
                            "failed"
                        } else {
                            "completed"
                        };
                        notice = Some(Outgoing::Report {
                            text: super::report::report(
                                &self.id,
                                &s.task_name,
                                s.rounds,
                                status,
                                &detail,
                                s.round_last_text.as_deref().unwrap_or(""),
                            ),
                            what: format!("agent {} reported ({status})", self.id),
                        });
                    } else if s.background {
                        let (failed, detail) = exit_note(&end);
                        let tail = background_notice::tail(&std::mem::take(&mut s.text));
                        s.dropped = 0;
                        notice = Some(Outgoing::Notice(background_notice::notice(
                            NoticeKind::Subagent,
                            &self.id,
                            failed,
                            &detail,
                            &self.label,
                            &tail,
                        )));
                    }
                    s.last = Some(end);
                }
                _ => {}
            }
        });
        self.bump();
        notice
    }
}

/// `(failed, note without brackets)` of a finished round; the note is empty for a plain answer.
pub fn exit_note(end: &RoundEnd) -> (bool, String) {
    if let Some(e) = &end.error {
        return (true, format!("subagent error: {e}"));
    }
    if let Some(r) = &end.abort_reason {
        return (true, format!("subagent aborted: {r}"));
    }
    if !end.had_text {
        return (false, "subagent finished without a text answer".to_string());
    }
    (false, String::new())
}

/// Where a child's messages go: the parent's stream (origin-tagged) and its notices.
#[derive(Clone)]
pub struct ParentLink {
    /// The parent's subscribers.
    pub subscribers: Subscribers,
    /// The parent session (for notices).
    pub session: SessionRef,
}

/// Forwards every message of the child to the parent's stream with the child's id prepended to
/// its origin, and feeds the child's state. Ends when the child's stream closes.
pub fn spawn_forwarder(child: Arc<Child>, mut rx: MessageReceiver, parent: ParentLink) {
    tokio::spawn(async move {
        let child_sid = child.session.id().to_string();
        while let Some(msg) = rx.recv().await {
            let outgoing = child.observe(&msg);
            let tagged = Arc::new(msg.as_ref().clone().with_origin(&child_sid));
            broadcast(&parent.subscribers, &tagged);
            match outgoing {
                Some(Outgoing::Notice(text)) => {
                    let _ = parent.session.notice(text);
                }
                Some(Outgoing::Report { text, what }) => {
                    let _ = parent.session.agent_input(text, what);
                    // A message queued while the round ran starts the next round (on the
                    // model it asked for).
                    if let Some(next) = child.next_queued() {
                        if let Some(choice) = next.switch
                            && let Err(e) = child.session.switch_model(choice, true).await
                        {
                            tracing::warn!(agent = %child.id, "queued model switch not applied: {e}");
                        }
                        if child
                            .session
                            .start_task_as(next.text, Some(crate::message::Sender::ParentAgent))
                            .await
                            .is_err()
                        {
                            child.with(|s| s.running = false);
                        }
                    }
                }
                None => {}
            }
        }
    });
}
