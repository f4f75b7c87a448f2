//! Resume: rebuilds what a session needs to continue (committed history, carry-over input,
//! turn count, token totals, tool-call id counter) from the records of its trace, following the
//! resume rules of `docs/protocol.md#resume`, adapted to Rookery's turn loop.
//!
//! This module is pure interpretation of records: it must not write, repair or rotate a trace.
//! It names the calls the trace leaves without an output ([`ResumeState::unpaired`]); the
//! resumed session records their placeholders, so the next resume finds them in the trace.
//! It does not build compaction summaries.
//!
//! Rules, in one pass over the records (origin-tagged records, partials and unknown payloads are
//! ignored):
//! * user-role messages always go to a `pending` buffer; `request_begin` takes `pending` as the
//!   request's input (an open request is dropped first);
//! * assistant messages inside a request are its outputs (outside one they are not context,
//!   e.g. the max-turns notice);
//! * `request_end(completed)` commits: the input (see [`ResumeState::history`] for its order)
//!   and the outputs go to history, and the request's completed `tool_call`s become committed
//!   calls awaiting exactly one output;
//! * `request_end(other)`, `abort`, `task_end` or the end of the records inside a request drop
//!   the round: its input goes back to the front of `pending`, its model output is lost;
//! * a `compaction_begin … compaction_end` span is skipped (only tool outputs landing in it are
//!   kept, token usage is still counted); a completed `compaction_end` closes the context
//!   (history, pending input and owed outputs are dropped; the records after it, e.g. the
//!   `[context_summary]` text, start the new context);
//! * a `rollback {tasks: N}` drops the last N completed tasks from the history (from the start
//!   of the first of them), as the live session did.

use std::collections::HashMap;
use std::path::Path;

use crate::message::{EventPayload, ModelPayload, OmniMessage, Payload, Role, SessionMeta};
use crate::message::{StopReason, Usage};
use crate::trace::reader::read_trace;

/// Output given on resume to a committed call whose output never reached the trace.
pub const EXITED_PLACEHOLDER: &str = "[interrupted: process exited before the tool finished]";

/// What a session needs to continue where its trace ends.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ResumeState {
    /// The first `session_meta` of the trace.
    pub meta: SessionMeta,
    /// Committed turns only, in order: each request's input, then what the model produced.
    /// Within an input, the outputs owed to earlier committed calls come first, in call order
    /// (the real output, or an [`EXITED_PLACEHOLDER`] output), then the other user messages in
    /// trace order — the order the live loop sends them.
    pub history: Vec<ModelPayload>,
    /// Input for the next request: outputs owed to committed calls (in call order, real or
    /// placeholder) then the uncommitted user messages, in trace order.
    pub carry_over: Vec<ModelPayload>,
    /// Committed requests (`request_end` completed), outside compaction spans.
    pub turns: u64,
    /// The last `token_usage.session`.
    pub session_usage: Usage,
    /// A `tool_list_ready` was recorded.
    pub tools_announced: bool,
    /// 1 + the highest `n` of tool-call ids `call_<n>` (or `call_<n>#<k>`) seen; 0 if none.
    pub next_call_index: u64,
    /// The approval mode recorded last (`session_meta.approval_mode`, then each
    /// `approval_mode_changed`), as written; `None` when the trace records none.
    pub approval_mode: Option<String>,
    /// The grants recorded (`approval_grant`) and not revoked since.
    pub grants: Vec<crate::message::Grant>,
    /// Model requests begun (`request_begin`, compaction requests included): the scripted
    /// model's position in its script.
    pub requests: u64,
    /// `(start, end)` in `history` of every completed task of the current context (the
    /// turns `fork_turns` copies), oldest first.
    pub completed_tasks: Vec<(usize, usize)>,
    /// The sandbox of the last `session_meta` (each one a resume appends is never looser than
    /// the one before it).
    pub sandbox: crate::sandbox::SandboxPolicy,
    /// The last `model_switched` record (the session continues on that model).
    pub model_switch: Option<EventPayload>,
    /// Completed `tool_call`s of the file without a `tool_call_output` in it (the calls in
    /// flight when the process died), in call order: the resumed session records a
    /// [`placeholder`] output for each before anything else.
    pub unpaired: Vec<String>,
    /// Records the resumed session appends first, before the placeholders of [`Self::unpaired`]
    /// and anything else (a takeover's failover records, `docs/protocol.md#failover`; the
    /// state already counts them). Empty unless the resumer sets it.
    pub append_first: Vec<OmniMessage>,
}

/// Why a trace's records cannot be resumed.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ResumeError {
    /// The trace has no `session_meta`, so no session to rebuild.
    #[error("trace has no session_meta; cannot resume")]
    NoMeta,
}

/// Why a trace file cannot be resumed: it cannot be read, its records do not resume, or the
/// blocking task that read it failed. Each text starts `trace error: `.
#[derive(Debug, thiserror::Error)]
pub enum ResumeFileError {
    /// The trace file cannot be read.
    #[error("trace error: {0}")]
    Read(#[source] std::io::Error),
    /// The records do not resume (e.g. no `session_meta`).
    #[error("trace error: {0}")]
    Records(#[source] ResumeError),
    /// The blocking task reading the trace panicked or was cancelled.
    #[error("trace error: trace reader: {0}")]
    Reader(#[source] tokio::task::JoinError),
}

impl ResumeFileError {
    /// The reason without the `trace error: ` prefix.
    pub fn reason(&self) -> String {
        match self {
            ResumeFileError::Read(e) => e.to_string(),
            ResumeFileError::Records(e) => e.to_string(),
            ResumeFileError::Reader(e) => format!("trace reader: {e}"),
        }
    }
}

/// Reads the trace at `path` tolerantly (a torn last line is ignored, malformed middle lines are
/// skipped with a warning) and resumes from its records. I/O errors are
/// [`ResumeFileError::Read`]; a trace without `session_meta` is [`ResumeFileError::Records`],
/// whose text is `trace error: trace has no session_meta; cannot resume`.
pub fn resume_from_file(path: impl AsRef<Path>) -> Result<ResumeState, ResumeFileError> {
    let path = path.as_ref();
    let read = read_trace(path).map_err(ResumeFileError::Read)?;
    if read.torn_tail {
        tracing::info!(
            "[trace] ignored a torn last line in {} on resume",
            path.display()
        );
    }
    let mut state = resume_from_records(&read.records).map_err(|e| {
        tracing::warn!("cannot resume {}: {e}", path.display());
        ResumeFileError::Records(e)
    })?;
    // A rotated trace: the context is the latest file's, but the counters that must never
    // repeat (tool-call ids, the scripted model's position) run over the whole history.
    let (requests, next_call) = earlier_counters(path);
    state.requests += requests;
    state.next_call_index = state.next_call_index.max(next_call);
    Ok(state)
}

/// `(request_begin count, 1 + highest call number)` of the files before `path` in its
/// session's history (`_001` … `_NNN-1`, in the same directory).
fn earlier_counters(path: &Path) -> (u64, u64) {
    let Some((id, index)) = path
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(crate::trace::rotation::split_name)
    else {
        return (0, 0);
    };
    let mut replay = Replay::default();
    for i in 1..index {
        let Ok(i) = u32::try_from(i) else { break };
        let earlier = path.with_file_name(crate::trace::paths::trace_file_name(id, i));
        let Ok(read) = read_trace(&earlier) else {
            continue;
        };
        count_earlier(&mut replay, &read.records);
    }
    (
        replay.requests,
        replay.max_call.map_or(0, |n| n.saturating_add(1)),
    )
}

/// Adds the requests and calls of an earlier part's `records` to `replay`'s counters.
fn count_earlier(replay: &mut Replay, records: &[OmniMessage]) {
    for record in records.iter().filter(|r| !r.has_origin()) {
        match &record.payload {
            Payload::Event(EventPayload::RequestBegin {}) => replay.requests += 1,
            Payload::Model(ModelPayload::ToolCall { tool_call_id, .. }) => {
                if let Some(n) = call_index(tool_call_id) {
                    replay.max_call = Some(replay.max_call.map_or(n, |m| m.max(n)));
                }
            }
            _ => {}
        }
    }
}

/// [`resume_from_file`] for a trace held elsewhere (a store): `latest` the JSONL bytes of its
/// latest part (the context), `earlier` those of every part before (only their counters
/// count, as for a rotated file trace).
pub fn resume_from_bytes(earlier: &[u8], latest: &[u8]) -> Result<ResumeState, ResumeError> {
    let read = crate::trace::reader::parse_trace_bytes(latest);
    let mut state = resume_from_records(&read.records)?;
    let mut replay = Replay::default();
    count_earlier(
        &mut replay,
        &crate::trace::reader::parse_trace_bytes(earlier).records,
    );
    state.requests += replay.requests;
    let next_call = replay.max_call.map_or(0, |n| n.saturating_add(1));
    state.next_call_index = state.next_call_index.max(next_call);
    Ok(state)
}

/// [`resume_from_file`] on the blocking pool: reading and replaying a large trace never
/// holds an async worker (the server keeps answering while a session resumes).
pub async fn resume_from_file_off_runtime(
    path: std::path::PathBuf,
) -> Result<ResumeState, ResumeFileError> {
    tokio::task::spawn_blocking(move || resume_from_file(&path))
        .await
        .map_err(ResumeFileError::Reader)?
}

/// Rebuilds the resume state from trace records (see the module doc for the rules).
pub fn resume_from_records(records: &[OmniMessage]) -> Result<ResumeState, ResumeError> {
    let mut replay = Replay::default();
    let mut last: Option<&OmniMessage> = None;
    for record in records.iter().filter(|r| !r.has_origin()) {
        replay.step(record);
        last = Some(record);
    }
    replay.drop_open_request();
    let meta = replay.meta.take().ok_or(ResumeError::NoMeta)?;
    let closed = matches!(
        last.and_then(OmniMessage::as_event),
        Some(EventPayload::CompactionEnd { status: StopReason::Completed, mode, .. }) if mode == "discard"
    );
    let (history, carry_over, turns) = if closed {
        replay.tasks.context_closed();
        (Vec::new(), Vec::new(), 0)
    } else {
        let pending = std::mem::take(&mut replay.pending);
        let carry_over = replay.settle(pending);
        (replay.history, carry_over, replay.turns)
    };
    Ok(ResumeState {
        meta,
        history,
        carry_over,
        turns,
        session_usage: replay.session_usage,
        tools_announced: replay.tools_announced,
        next_call_index: replay.max_call.map_or(0, |n| n.saturating_add(1)),
        approval_mode: replay.approval_mode,
        grants: replay.grants,
        requests: replay.requests,
        completed_tasks: replay.tasks.spans,
        model_switch: replay.model_switch,
        sandbox: replay.sandbox,
        unpaired: replay.calls.unpaired(),
        append_first: Vec::new(),
    })
}

/// A request between `request_begin` and its end.
struct OpenRequest {
    input: Vec<ModelPayload>,
    outputs: Vec<ModelPayload>,
}

#[derive(Default)]
struct Replay {
    meta: Option<SessionMeta>,
    sandbox: crate::sandbox::SandboxPolicy,
    history: Vec<ModelPayload>,
    pending: Vec<ModelPayload>,
    open: Option<OpenRequest>,
    /// Committed calls still owed an output, in call order.
    unanswered: Vec<String>,
    in_compaction: bool,
    turns: u64,
    session_usage: Usage,
    tools_announced: bool,
    max_call: Option<u64>,
    approval_mode: Option<String>,
    grants: Vec<crate::message::Grant>,
    requests: u64,
    tasks: tasks::TaskSpans,
    model_switch: Option<EventPayload>,
    calls: Pairing,
}

/// Which completed calls of the records have an output (whatever their request became).
#[derive(Default)]
struct Pairing {
    /// Completed call ids, in call order.
    calls: Vec<String>,
    answered: std::collections::HashSet<String>,
}

impl Pairing {
    fn see(&mut self, message: &ModelPayload) {
        match message {
            ModelPayload::ToolCall {
                tool_call_id,
                stop_reason: StopReason::Completed,
                ..
            } => self.calls.push(tool_call_id.clone()),
            ModelPayload::ToolCallOutput { tool_call_id, .. } => {
                self.answered.insert(tool_call_id.clone());
            }
            _ => {}
        }
    }

    /// The calls without an output, each once, in call order.
    fn unpaired(self) -> Vec<String> {
        let mut answered = self.answered;
        self.calls
            .into_iter()
            .filter(|id| answered.insert(id.clone()))
            .collect()
    }
}

impl Replay {
    fn step(&mut self, record: &OmniMessage) {
        match &record.payload {
            Payload::SessionMeta(meta) => {
                self.sandbox = meta.launch.sandbox_policy();
                if self.meta.is_none() {
                    self.approval_mode = meta.approval_mode.clone();
                    self.meta = Some(meta.as_ref().clone());
                }
            }
            Payload::Model(message) => self.on_model(message),
            Payload::Event(EventPayload::ApprovalGrant { grant_id, rule, .. }) => {
                self.grants.push(crate::message::Grant {
                    grant_id: grant_id.clone(),
                    rule: rule.clone(),
                    created_at: record.timestamp.clone(),
                });
            }
            Payload::Event(EventPayload::ApprovalGrantRevoked { grant_id }) => {
                self.grants.retain(|g| &g.grant_id != grant_id);
            }
            Payload::Event(event) => self.on_event(event),
            Payload::Unknown { .. } => {}
        }
    }

    fn on_model(&mut self, message: &ModelPayload) {
        if message.is_partial() {
            return;
        }
        self.calls.see(message);
        if let ModelPayload::ToolCall { tool_call_id, .. } = message
            && let Some(n) = call_index(tool_call_id)
        {
            self.max_call = Some(self.max_call.map_or(n, |m| m.max(n)));
        }
        let is_output = matches!(message, ModelPayload::ToolCallOutput { .. });
        if self.in_compaction {
            // The compaction request's own messages are not context; a tool output landing
            // here still belongs to the next turn.
            if is_output {
                self.pending.push(message.clone());
            }
            return;
        }
        match (message.role(), self.open.as_mut()) {
            (Role::User, _) => self.pending.push(message.clone()),
            (Role::Assistant, Some(open)) => open.outputs.push(message.clone()),
            (Role::Assistant, None) => {
                tracing::debug!("resume: assistant message outside a request ignored");
            }
        }
    }

    fn on_event(&mut self, event: &EventPayload) {
        if matches!(event, EventPayload::RequestBegin {}) {
            self.requests += 1;
        }
        match event {
            EventPayload::TokenUsage { session, .. } => self.session_usage = *session,
            EventPayload::ToolListReady { .. } => self.tools_announced = true,
            EventPayload::ApprovalModeChanged { mode } => self.approval_mode = Some(mode.clone()),
            EventPayload::ForkedHistory { messages } => self.history.extend(messages.clone()),
            EventPayload::ModelSwitched { .. } => self.model_switch = Some(event.clone()),
            EventPayload::CompactionBegin { .. } => {
                self.drop_open_request();
                self.in_compaction = true;
            }
            EventPayload::CompactionEnd { status, .. } => {
                self.in_compaction = false;
                if *status == StopReason::Completed {
                    // The old context is closed: what follows (the summary, or the input a
                    // discard kept) starts the new one, in this file or the next.
                    self.history.clear();
                    self.pending.clear();
                    self.unanswered.clear();
                    self.turns = 0;
                    self.tasks.context_closed();
                }
            }
            _ if self.in_compaction => {}
            EventPayload::RequestBegin {} => {
                self.drop_open_request();
                self.tasks.request_begins(self.history.len());
                let input = std::mem::take(&mut self.pending);
                self.open = Some(OpenRequest {
                    input,
                    outputs: Vec::new(),
                });
            }
            EventPayload::RequestEnd {
                status: StopReason::Completed,
                ..
            } => self.commit(),
            EventPayload::RequestEnd { .. } | EventPayload::Abort { .. } => {
                self.drop_open_request();
            }
            EventPayload::TaskEnd { status, .. } => {
                self.drop_open_request();
                self.tasks.task_ends(*status, self.history.len());
            }
            EventPayload::Rollback { tasks, .. } => {
                // The last `tasks` completed tasks leave the context, with everything after
                // the first of them; their calls are owed nothing any more.
                if let Some(start) = self.tasks.roll_back(*tasks) {
                    self.history.truncate(start);
                    self.unanswered.clear();
                }
            }
            _ => {}
        }
    }

    /// `request_end(completed)`: the input (settled) and outputs join history; the request's
    /// completed tool calls are now owed an output each.
    fn commit(&mut self) {
        let Some(open) = self.open.take() else {
            tracing::debug!("resume: request_end without request_begin ignored");
            return;
        };
        let input = self.settle(open.input);
        self.history.extend(input);
        for message in &open.outputs {
            if let ModelPayload::ToolCall {
                tool_call_id,
                stop_reason: StopReason::Completed,
                ..
            } = message
            {
                self.unanswered.push(tool_call_id.clone());
            }
        }
        self.history.extend(open.outputs);
        self.turns += 1;
    }

    /// Drops an open request: its input goes back to the front of `pending`.
    fn drop_open_request(&mut self) {
        if let Some(open) = self.open.take() {
            let mut input = open.input;
            input.append(&mut self.pending);
            self.pending = input;
        }
    }

    /// Orders `messages` as the input of a request and pays every debt: first one output per
    /// committed unanswered call, in call order (its first output among `messages`, else a
    /// placeholder), then the other messages in order. Outputs of calls that are not owed one
    /// (uncommitted, already answered, duplicates) are dropped.
    fn settle(&mut self, messages: Vec<ModelPayload>) -> Vec<ModelPayload> {
        let owed = std::mem::take(&mut self.unanswered);
        let mut found: HashMap<String, ModelPayload> = HashMap::new();
        let mut others = Vec::new();
        for message in messages {
            match &message {
                ModelPayload::ToolCallOutput { tool_call_id, .. } => {
                    if owed.contains(tool_call_id) && !found.contains_key(tool_call_id) {
                        found.insert(tool_call_id.clone(), message);
                    } else {
                        tracing::debug!("resume: output of {tool_call_id} is not owed; dropped");
                    }
                }
                _ => others.push(message),
            }
        }
        let mut settled: Vec<ModelPayload> = owed
            .iter()
            .map(|id| found.remove(id).unwrap_or_else(|| placeholder(id)))
            .collect();
        settled.extend(others);
        settled
    }
}

/// An aborted `tool_call_output` carrying [`EXITED_PLACEHOLDER`].
pub fn placeholder(tool_call_id: &str) -> ModelPayload {
    ModelPayload::ToolCallOutput {
        role: Role::User,
        output: EXITED_PLACEHOLDER.to_string(),
        images: Vec::new(),
        tool_call_id: tool_call_id.to_string(),
        stop_reason: StopReason::Aborted,
    }
}

/// `n` of an id `call_<n>` or `call_<n>#<k>` (the per-session disambiguation suffix).
pub(crate) fn call_index(id: &str) -> Option<u64> {
    let rest = id.strip_prefix("call_")?;
    let digits = rest.split_once('#').map_or(rest, |(n, _)| n);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

mod tasks;

#[cfg(test)]
mod tests;
