//! Shared helpers of the integration tests: scripted models, a request-recording model wrapper,
//! test-only tools and trace reading here; the helpers of one kind of test in the modules below.

pub mod anthropic_mock;
pub mod browser;
pub mod cli;
pub mod commands;
pub mod mcp;
pub mod openai_mock;
pub mod otlp;
pub mod own_process;
pub mod paired;
pub mod postgres;
pub mod pty;
pub mod replay;
pub mod serve;
pub mod tmpfs;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use rookery::SessionOptions;
use rookery::approval::AllowAllApprover;
use rookery::config::RetryPolicy;
use rookery::message::StopReason;
use rookery::message::{ModelPayload, OmniMessage};
use rookery::model::scripted::ScriptedModel;
use rookery::model::{
    Model, ModelEvent, ModelInfo, ModelRequest, ModelSession, ModelSessionContext,
};
use rookery::tools::{Tool, ToolContext, ToolResult};
use serde_json::{Map, Value, json};

pub fn scripted(script: Value) -> Arc<ScriptedModel> {
    Arc::new(ScriptedModel::from_json_str(&script.to_string()).expect("valid script"))
}

/// Wraps a model and records the history of every request it is sent.
pub struct Recording {
    inner: Arc<dyn Model>,
    pub requests: Arc<Mutex<Vec<Vec<ModelPayload>>>>,
}

impl Recording {
    pub fn new(inner: Arc<dyn Model>) -> Arc<Self> {
        Arc::new(Recording {
            inner,
            requests: Arc::new(Mutex::new(Vec::new())),
        })
    }

    pub fn requests(&self) -> Vec<Vec<ModelPayload>> {
        self.requests.lock().unwrap().clone()
    }
}

struct RecordingSession {
    inner: Box<dyn ModelSession>,
    requests: Arc<Mutex<Vec<Vec<ModelPayload>>>>,
}

impl ModelSession for RecordingSession {
    fn stream(&mut self, request: ModelRequest) -> BoxStream<'static, ModelEvent> {
        self.requests
            .lock()
            .unwrap()
            .push(request.history.as_ref().clone());
        self.inner.stream(request)
    }
}

impl Model for Recording {
    fn info(&self) -> ModelInfo {
        self.inner.info()
    }
    fn open(&self, ctx: &ModelSessionContext) -> Box<dyn ModelSession> {
        Box::new(RecordingSession {
            inner: self.inner.open(ctx),
            requests: self.requests.clone(),
        })
    }
}

/// Every tool_call of a request's history is followed (later) by exactly one output.
pub fn assert_paired(history: &[ModelPayload]) {
    for (i, m) in history.iter().enumerate() {
        if let ModelPayload::ToolCall { tool_call_id, .. } = m {
            let outputs = history[i..]
                .iter()
                .filter(|o| matches!(o, ModelPayload::ToolCallOutput { tool_call_id: id, .. } if id == tool_call_id))
                .count();
            assert_eq!(
                outputs, 1,
                "call {tool_call_id} has {outputs} outputs in {history:#?}"
            );
        }
    }
}

pub fn fast_retry(max_retries: u32) -> RetryPolicy {
    RetryPolicy {
        max_retries,
        base_ms: 0,
        cap_ms: 0,
    }
}

/// Sleeps `ms` (or until cancelled), recording when it ran.
pub struct SlowTool {
    pub spans: Arc<Mutex<Vec<(String, Instant, Instant)>>>,
}

impl Tool for SlowTool {
    fn call(&self, ctx: ToolContext, args: Map<String, Value>) -> BoxFuture<'static, ToolResult> {
        let spans = self.spans.clone();
        Box::pin(async move {
            let ms = args.get("ms").and_then(Value::as_u64).unwrap_or(100);
            let start = Instant::now();
            ctx.emit(format!("slept start {ms}"));
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(ms)) => {}
                _ = ctx.cancel.cancelled() => {}
            }
            spans
                .lock()
                .unwrap()
                .push((ctx.tool_call_id.clone(), start, Instant::now()));
            ctx.emit(format!("\nslept {ms}"));
            ToolResult::completed()
        })
    }
}

pub struct PanicTool;

impl Tool for PanicTool {
    fn call(&self, _ctx: ToolContext, _args: Map<String, Value>) -> BoxFuture<'static, ToolResult> {
        Box::pin(async move { panic!("boom in tool") })
    }
}

pub fn slow_def(name: &str) -> rookery::tools::ToolDefinitionConfig {
    rookery::tools::ToolDefinitionConfig::new(
        name,
        "test tool",
        json!({"type": "object", "properties": {"ms": {"type": "number"}}}),
        rookery::tools::Permission::Read,
    )
}

/// All records of a trace (panics on an unreadable file).
pub fn trace_records(path: impl AsRef<Path>) -> Vec<OmniMessage> {
    rookery::trace::reader::read_trace(path.as_ref())
        .expect("trace readable")
        .records
}

/// `(envelope type, payload type)` of each record, for order assertions.
pub fn kinds(records: &[OmniMessage]) -> Vec<String> {
    records
        .iter()
        .map(|r| {
            let v: Value = serde_json::from_str(&r.to_json()).unwrap();
            match v["payload"]["type"].as_str() {
                Some(t) => t.to_string(),
                None => v["type"].as_str().unwrap_or("?").to_string(),
            }
        })
        .collect()
}

/// One request: system prompt "be brief", a user `text`, no tools.
pub fn user_text_request(text: &str) -> ModelRequest {
    ModelRequest {
        system_prompt: Arc::from("be brief"),
        history: Arc::new(vec![ModelPayload::Text {
            role: rookery::message::Role::User,
            text: text.to_string(),
            sender: None,
            stop_reason: StopReason::Completed,
            fidelity: None,
        }]),
        tools: Arc::new(Vec::new()),
    }
}

pub fn tempdirs() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    let home = dir.path().join("home");
    std::fs::create_dir_all(&ws).unwrap();
    (dir, ws, home)
}

/// A session on `model` in `ws` that allows every call and retries model errors at once.
pub fn options(ws: &Path, model: Arc<dyn Model>) -> SessionOptions {
    let mut o = SessionOptions::new(ws, model);
    o.approver = Arc::new(AllowAllApprover);
    o.config.retry = fast_retry(5);
    o
}

/// `(output, stop_reason)` of every tool output of a request's history, in order.
pub fn outputs(history: &[ModelPayload]) -> Vec<(String, StopReason)> {
    history
        .iter()
        .filter_map(|m| match m {
            ModelPayload::ToolCallOutput {
                output,
                stop_reason,
                ..
            } => Some((output.clone(), *stop_reason)),
            _ => None,
        })
        .collect()
}
