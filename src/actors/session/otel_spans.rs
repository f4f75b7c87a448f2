//! The session's OpenTelemetry spans, following the GenAI semantic conventions: a task is an
//! `invoke_agent {agent}` span, each model request (with its retries) one `chat {model}`
//! span, each tool call an `execute_tool {name}` span with its approval wait as a
//! `rookery.approval` child, and compactions, MCP connects and hook decisions their own
//! spans under the task.
//!
//! The spans follow the session's own records: `emit`/`record_only` hand every message,
//! already scrubbed, to [`SessionSpans::observe`], so a span says what the trace says. The
//! few moments no record marks (a task's start, an approval's start) are told directly.
//! Content (prompts, outputs, tool arguments and results) goes in only with
//! `--otel-log-content`. With export off a session holds nothing here and every call
//! returns at once.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

use crate::message::{Decision, EventPayload, ModelPayload, OmniMessage, Role, StopReason};
use crate::telemetry::span::AttrValue;
use crate::telemetry::{self, OtelSpan, SpanKind, metrics};

/// The most characters of one content attribute (a long output is cut, with a note).
const MAX_CONTENT: usize = 16 * 1024;

/// The session's open spans (`None` with export off).
#[derive(Default)]
pub(crate) struct SessionSpans {
    open: Option<Box<Mutex<Open>>>,
}

struct ChatSpan {
    span: OtelSpan,
    started: Instant,
    first_chunk: bool,
    tool_calls: bool,
    input_tokens: u64,
    output_tokens: u64,
}

struct ToolSpan {
    span: OtelSpan,
    name: String,
    denied: bool,
}

#[derive(Default)]
struct Open {
    session_id: String,
    agent: String,
    provider: String,
    model: String,
    content: bool,
    /// The parent of the session's tasks (a subagent's: the call that started it).
    parent: OtelSpan,
    /// The parent of the next task only (a `traceparent` a client sent with it).
    next_parent: Option<OtelSpan>,
    task: OtelSpan,
    chat: Option<ChatSpan>,
    tools: HashMap<String, ToolSpan>,
    approvals: HashMap<String, OtelSpan>,
    compaction: Option<OtelSpan>,
    mcp: HashMap<String, OtelSpan>,
}

/// `text` cut to [`MAX_CONTENT`] characters.
fn content(text: &str) -> String {
    match text.char_indices().nth(MAX_CONTENT) {
        Some((at, _)) => format!("{}… [cut]", &text[..at]),
        None => text.to_string(),
    }
}

/// The GenAI message list of one text (`gen_ai.input.messages`, `gen_ai.output.messages`).
fn messages(role: &str, text: &str) -> String {
    serde_json::json!([{"role": role, "parts": [{"type": "text", "content": content(text)}]}])
        .to_string()
}

fn is_error(status: StopReason) -> bool {
    matches!(
        status,
        StopReason::Failed | StopReason::Timeout | StopReason::Malformed | StopReason::Auth
    )
}

impl SessionSpans {
    /// The spans of session `session_id` (nothing when export is off).
    pub(crate) fn new(
        session_id: &str,
        agent: &str,
        provider: &str,
        model: &str,
        parent: OtelSpan,
    ) -> SessionSpans {
        if !telemetry::enabled() {
            return SessionSpans::default();
        }
        SessionSpans {
            open: Some(Box::new(Mutex::new(Open {
                session_id: session_id.to_string(),
                agent: agent.to_string(),
                provider: provider.to_string(),
                model: model.to_string(),
                content: telemetry::log_content(),
                parent,
                ..Open::default()
            }))),
        }
    }

    fn with(&self, f: impl FnOnce(&mut Open)) {
        if let Some(open) = &self.open
            && let Ok(mut open) = open.lock()
        {
            f(&mut open);
        }
    }

    /// A client sent `tp` with what comes next: a running task notes it (a steer); else the
    /// next task joins that trace.
    pub(crate) fn join_trace(&self, tp: &crate::telemetry::TraceParent, running: bool) {
        self.with(|o| {
            if running && o.task.is_some() {
                o.task.event(
                    "rookery.steer",
                    vec![("traceparent", AttrValue::Str(tp.to_string()))],
                );
            } else {
                o.next_parent = Some(OtelSpan::remote(tp));
            }
        });
    }

    /// A task starts with `prompt` (scrubbed).
    pub(crate) fn task_begin(&self, prompt: &str) {
        self.with(|o| {
            o.close_all("a new task started");
            let parent = o.next_parent.take().unwrap_or_else(|| o.parent.clone());
            let span = OtelSpan::start(
                format!("invoke_agent {}", o.agent),
                SpanKind::Internal,
                Some(&parent),
            );
            span.set_str("gen_ai.operation.name", "invoke_agent");
            span.set_str("gen_ai.agent.name", o.agent.clone());
            span.set_str("gen_ai.conversation.id", o.session_id.clone());
            span.set_str("gen_ai.provider.name", o.provider.clone());
            span.set_str("gen_ai.request.model", o.model.clone());
            if o.content {
                span.set_str("gen_ai.input.messages", messages("user", prompt));
            }
            o.task = span;
            metrics::record_task_started();
        });
    }

    /// The gate starts deciding call `tool_call_id`.
    pub(crate) fn approval_begin(&self, tool_call_id: &str) {
        self.with(|o| {
            let parent = o.tools.get(tool_call_id).map(|t| t.span.clone());
            let span = OtelSpan::start(
                "rookery.approval",
                SpanKind::Internal,
                Some(parent.as_ref().unwrap_or(&o.task)),
            );
            span.set_str("gen_ai.tool.call.id", tool_call_id.to_string());
            o.approvals.insert(tool_call_id.to_string(), span);
        });
    }

    /// The span of tool call `tool_call_id` (for its `TRACEPARENT`, a subagent it starts).
    pub(crate) fn tool_span(&self, tool_call_id: &str) -> OtelSpan {
        let mut out = OtelSpan::none();
        self.with(|o| {
            if let Some(t) = o.tools.get(tool_call_id) {
                out = t.span.clone();
            }
        });
        out
    }

    /// The current model request's span, else the task's (for a request's `traceparent`).
    pub(crate) fn request_span(&self) -> OtelSpan {
        let mut out = OtelSpan::none();
        self.with(|o| {
            out = o
                .chat
                .as_ref()
                .map_or_else(|| o.task.clone(), |c| c.span.clone());
        });
        out
    }

    /// Maps one message the session streams or records (scrubbed) to its spans.
    pub(crate) fn observe(&self, msg: &OmniMessage) {
        if self.open.is_none() {
            return;
        }
        if let Some(p) = msg.as_model() {
            self.with(|o| o.on_model(p));
        } else if let Some(e) = msg.as_event() {
            self.with(|o| o.on_event(e));
        }
    }
}

impl Open {
    fn on_model(&mut self, p: &ModelPayload) {
        if p.is_partial() {
            if let Some(chat) = self.chat.as_mut()
                && !chat.first_chunk
            {
                chat.first_chunk = true;
                let ms = chat.started.elapsed().as_millis();
                chat.span.set_int(
                    "rookery.time_to_first_chunk_ms",
                    i64::try_from(ms).unwrap_or(i64::MAX),
                );
            }
            return;
        }
        match p {
            ModelPayload::ToolCall {
                name,
                arguments,
                tool_call_id,
                ..
            } => {
                if let Some(chat) = self.chat.as_mut() {
                    chat.tool_calls = true;
                }
                let span = OtelSpan::start(
                    format!("execute_tool {name}"),
                    SpanKind::Internal,
                    Some(&self.task),
                );
                span.set_str("gen_ai.operation.name", "execute_tool");
                span.set_str("gen_ai.tool.name", name.clone());
                span.set_str("gen_ai.tool.call.id", tool_call_id.clone());
                if self.content {
                    span.set_str("gen_ai.tool.call.arguments", content(arguments));
                }
                self.tools.insert(
                    tool_call_id.clone(),
                    ToolSpan {
                        span,
                        name: name.clone(),
                        denied: false,
                    },
                );
            }
            ModelPayload::ToolCallOutput {
                output,
                tool_call_id,
                stop_reason,
                ..
            } => {
                if let Some(approval) = self.approvals.remove(tool_call_id) {
                    approval.end();
                }
                if let Some(t) = self.tools.remove(tool_call_id) {
                    t.span
                        .set_str("rookery.tool.stop_reason", stop_reason.as_str());
                    if self.content {
                        t.span.set_str("gen_ai.tool.call.result", content(output));
                    }
                    if is_error(*stop_reason) && !t.denied {
                        t.span.set_error(stop_reason.as_str(), content(output));
                    }
                    t.span.end();
                    metrics::record_tool_call(&t.name, stop_reason.as_str());
                }
            }
            ModelPayload::Text {
                role: Role::Assistant,
                text,
                ..
            } if self.content => {
                if let Some(chat) = &self.chat {
                    chat.span
                        .set_str("gen_ai.output.messages", messages("assistant", text));
                }
                self.task
                    .set_str("gen_ai.output.messages", messages("assistant", text));
            }
            _ => {}
        }
    }

    fn on_event(&mut self, e: &EventPayload) {
        match e {
            EventPayload::RequestBegin {} if self.chat.is_none() => {
                let span = OtelSpan::start(
                    format!("chat {}", self.model),
                    SpanKind::Client,
                    Some(&self.task),
                );
                span.set_str("gen_ai.operation.name", "chat");
                span.set_str("gen_ai.provider.name", self.provider.clone());
                span.set_str("gen_ai.request.model", self.model.clone());
                span.set_str("gen_ai.conversation.id", self.session_id.clone());
                self.chat = Some(ChatSpan {
                    span,
                    started: Instant::now(),
                    first_chunk: false,
                    tool_calls: false,
                    input_tokens: 0,
                    output_tokens: 0,
                });
            }
            EventPayload::TokenUsage { request, .. } => {
                if let Some(chat) = self.chat.as_mut() {
                    chat.input_tokens = request.total.saturating_sub(request.output);
                    chat.output_tokens = request.output;
                    chat.span.set_int(
                        "gen_ai.usage.input_tokens",
                        i64::try_from(chat.input_tokens).unwrap_or(i64::MAX),
                    );
                    chat.span.set_int(
                        "gen_ai.usage.output_tokens",
                        i64::try_from(request.output).unwrap_or(i64::MAX),
                    );
                }
            }
            EventPayload::RequestEnd {
                status,
                error_message,
                attempt,
                retry_in_ms,
            } => self.request_end(*status, error_message.as_deref(), *attempt, *retry_in_ms),
            EventPayload::ApprovalDecision {
                decision,
                tool_call_id,
                source,
                ..
            } => {
                let decision_name = match decision {
                    Decision::Allow => "allow",
                    Decision::Deny => "deny",
                    Decision::Forbidden => "forbidden",
                    Decision::AllowForSession => "allow_for_session",
                };
                let source = source.as_deref().unwrap_or("policy");
                if let Some(span) = self.approvals.remove(tool_call_id) {
                    span.set_str("rookery.approval.decision", decision_name);
                    span.set_str("rookery.approval.source", source.to_string());
                    span.end();
                }
                if let Some(t) = self.tools.get_mut(tool_call_id) {
                    t.denied = matches!(decision, Decision::Deny | Decision::Forbidden);
                    t.span.set_str("rookery.approval.decision", decision_name);
                }
                metrics::record_approval(decision_name, source);
            }
            EventPayload::CompactionBegin { reason, mode, .. } => {
                let span =
                    OtelSpan::start("rookery.compaction", SpanKind::Internal, Some(&self.task));
                span.set_str("rookery.compaction.reason", reason.clone());
                span.set_str("rookery.compaction.mode", mode.clone());
                if let Some(old) = self.compaction.replace(span) {
                    old.end();
                }
            }
            EventPayload::CompactionEnd {
                status,
                error_message,
                ..
            } => {
                if let Some(span) = self.compaction.take() {
                    span.set_str("rookery.compaction.status", status.as_str());
                    if is_error(*status) {
                        span.set_error(status.as_str(), error_message.clone().unwrap_or_default());
                    }
                    span.end();
                }
            }
            EventPayload::McpConnectBegin { servers, server } => {
                let names = match server {
                    Some(s) => vec![s.clone()],
                    None => servers.clone(),
                };
                for name in names {
                    let span = OtelSpan::start(
                        format!("rookery.mcp.connect {name}"),
                        SpanKind::Client,
                        Some(&self.task),
                    );
                    span.set_str("rookery.mcp.server", name.clone());
                    if let Some(old) = self.mcp.insert(name, span) {
                        old.end();
                    }
                }
            }
            EventPayload::McpConnectEnd {
                status,
                server,
                error,
                results,
                ..
            } => {
                let names: Vec<String> = match server {
                    Some(s) => vec![s.clone()],
                    None => self.mcp.keys().cloned().collect(),
                };
                for name in names {
                    if let Some(span) = self.mcp.remove(&name) {
                        let failed = results.iter().any(|r| {
                            r.get("server").and_then(|s| s.as_str()) == Some(name.as_str())
                                && r.get("status").and_then(|s| s.as_str()) != Some("completed")
                        });
                        if is_error(*status) || failed {
                            span.set_error("mcp_connect", error.clone().unwrap_or_default());
                        }
                        span.end();
                    }
                }
            }
            EventPayload::HookDecision {
                event,
                command,
                decision,
                tool_call_id,
                ..
            } => {
                let parent = tool_call_id
                    .as_ref()
                    .and_then(|id| self.tools.get(id))
                    .map_or_else(|| self.task.clone(), |t| t.span.clone());
                let span = OtelSpan::start(
                    format!("rookery.hook {event}"),
                    SpanKind::Internal,
                    Some(&parent),
                );
                span.set_str("rookery.hook.event", event.clone());
                span.set_str("rookery.hook.command", content(command));
                span.set_str("rookery.hook.decision", decision.clone());
                span.end();
            }
            EventPayload::HookError {
                tool_call_id,
                event,
                command,
                exit_code,
                ..
            } => {
                let parent = self
                    .tools
                    .get(tool_call_id)
                    .map_or_else(|| self.task.clone(), |t| t.span.clone());
                let event = event.clone().unwrap_or_default();
                let span = OtelSpan::start(
                    format!("rookery.hook {event}"),
                    SpanKind::Internal,
                    Some(&parent),
                );
                span.set_str("rookery.hook.event", event);
                span.set_str("rookery.hook.command", content(command));
                span.set_error(
                    "hook_error",
                    exit_code.map_or_else(|| "no exit code".to_string(), |c| format!("exit {c}")),
                );
                span.end();
            }
            EventPayload::Abort { reason } => {
                self.task.event(
                    "rookery.abort",
                    vec![("reason", AttrValue::Str(reason.clone().unwrap_or_default()))],
                );
            }
            EventPayload::ModelSwitched {
                provider, model_id, ..
            } => {
                self.provider = provider.clone();
                self.model = model_id.clone();
            }
            EventPayload::TaskEnd { status, .. } => {
                self.close_all("the task ended");
                self.task.set_str("rookery.task.status", status.as_str());
                if is_error(*status) {
                    self.task.set_error(status.as_str(), "the task failed");
                }
                self.task.end();
                self.task = OtelSpan::none();
                metrics::record_task_finished(status.as_str());
            }
            _ => {}
        }
    }

    fn request_end(
        &mut self,
        status: StopReason,
        error_message: Option<&str>,
        attempt: Option<u32>,
        retry_in_ms: Option<u64>,
    ) {
        let Some(chat) = self.chat.as_mut() else {
            return;
        };
        if let Some(wait) = retry_in_ms {
            chat.span.event(
                "rookery.retry",
                vec![
                    ("attempt", AttrValue::Int(i64::from(attempt.unwrap_or(1)))),
                    ("error.type", AttrValue::Str(status.as_str().to_string())),
                    (
                        "retry_in_ms",
                        AttrValue::Int(i64::try_from(wait).unwrap_or(i64::MAX)),
                    ),
                ],
            );
            chat.first_chunk = false;
            return;
        }
        let Some(chat) = self.chat.take() else {
            return;
        };
        chat.span
            .set_str("gen_ai.response.model", self.model.clone());
        let finish = if status == StopReason::Completed && chat.tool_calls {
            "tool_calls"
        } else if status == StopReason::Completed {
            "stop"
        } else {
            status.as_str()
        };
        chat.span
            .set_strs("gen_ai.response.finish_reasons", vec![finish.to_string()]);
        if let Some(a) = attempt {
            chat.span.set_int("rookery.attempts", i64::from(a));
        }
        let error = is_error(status).then_some(status.as_str());
        if let Some(kind) = error {
            chat.span
                .set_error(kind, content(error_message.unwrap_or("the request failed")));
        }
        chat.span.end();
        metrics::record_chat(
            &self.provider,
            &self.model,
            chat.started.elapsed().as_secs_f64(),
            error,
            chat.input_tokens,
            chat.output_tokens,
        );
    }

    /// Ends every span still open under the task (`why` as an event).
    fn close_all(&mut self, why: &'static str) {
        let open = self
            .chat
            .take()
            .map(|c| c.span)
            .into_iter()
            .chain(self.approvals.drain().map(|(_, s)| s))
            .chain(self.tools.drain().map(|(_, t)| t.span))
            .chain(self.compaction.take());
        for span in open {
            span.event(
                "rookery.unfinished",
                vec![("reason", AttrValue::Str(why.to_string()))],
            );
            span.end();
        }
    }
}
