//! The standard workload's model and its light instrumentation: [`BenchModel`] (the built-in
//! model of `rookery bench`: one tool call per request until K tool results are in the
//! conversation, then `Done: ran {t} tool calls.`), [`Probed`] (wraps any model and records, per
//! session, when each request was sent and when its stream ended) and [`TimedTool`] (wraps a tool
//! and records how long each call of it ran).
//!
//! It measures; it does not decide what the figures mean (that is `bench.rs`), and it never
//! touches the session's messages or traces.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::{self, BoxStream};
use serde_json::{Map, Value, json};

use super::Workload;
use crate::message::{ModelPayload, Role, StopReason, Usage};
use crate::model::{
    Model, ModelEvent, ModelInfo, ModelOutcome, ModelRequest, ModelSession, ModelSessionContext,
};
use crate::tools::{Tool, ToolContext, ToolResult};

/// The final answer once `t` tool results are in the conversation.
pub fn done_text(t: usize) -> String {
    format!("Done: ran {t} tool calls.")
}

/// The built-in bench model (see the module doc); `latency` delays each answer.
#[derive(Debug, Clone)]
pub struct BenchModel {
    /// Which tool it asks for.
    pub workload: Workload,
    /// Tool results in the conversation before it answers with a text.
    pub turns: usize,
    /// Delay before each answer.
    pub latency: Duration,
}

impl Model for BenchModel {
    fn info(&self) -> ModelInfo {
        ModelInfo {
            provider: "bench".to_string(),
            model_id: format!("bench-{}", self.workload.as_str()),
            context_window: json!(128_000),
        }
    }

    fn open(&self, ctx: &ModelSessionContext) -> Box<dyn ModelSession> {
        Box::new(BenchSession {
            model: self.clone(),
            next_call: ctx.next_call_index,
        })
    }
}

struct BenchSession {
    model: BenchModel,
    next_call: u64,
}

impl ModelSession for BenchSession {
    fn stream(&mut self, request: ModelRequest) -> BoxStream<'static, ModelEvent> {
        let t = request.tool_results();
        let mut events = Vec::with_capacity(6);
        if t < self.model.turns {
            let name = self.model.workload.tool_name();
            let arguments = self.model.workload.arguments();
            let id = format!("call_{}", self.next_call);
            self.next_call += 1;
            let complete = ModelPayload::ToolCall {
                role: Role::Assistant,
                name: name.to_string(),
                arguments: arguments.to_string(),
                tool_call_id: id.clone(),
                stop_reason: StopReason::Completed,
                fidelity: None,
            };
            crate::model::push_segment(
                &mut events,
                arguments,
                complete,
                |event_type, arguments| ModelPayload::PartialToolCall {
                    role: Role::Assistant,
                    event_type,
                    name: name.to_string(),
                    arguments,
                    tool_call_id: id.clone(),
                    stop_reason: StopReason::Completed,
                },
            );
        } else {
            let text = done_text(t);
            let complete = ModelPayload::Text {
                role: Role::Assistant,
                text: text.clone(),
                sender: None,
                stop_reason: StopReason::Completed,
                fidelity: None,
            };
            crate::model::push_segment(&mut events, &text, complete, |event_type, text| {
                ModelPayload::PartialText {
                    role: Role::Assistant,
                    event_type,
                    text,
                    stop_reason: StopReason::Completed,
                }
            });
        }
        events.push(ModelEvent::Usage(Usage {
            output: 12,
            total: 12,
            ..Usage::default()
        }));
        events.push(ModelEvent::End(ModelOutcome::completed()));
        let latency = self.model.latency;
        if latency.is_zero() {
            stream::iter(events).boxed()
        } else {
            stream::once(async move {
                tokio::time::sleep(latency).await;
                stream::iter(events)
            })
            .flatten()
            .boxed()
        }
    }
}

/// What one session's instrumentation saw, in order.
#[derive(Debug, Default, Clone)]
pub struct ProbeData {
    /// When each model request was handed to the model.
    pub requests: Vec<Instant>,
    /// When each request's stream yielded its `End`.
    pub ends: Vec<Instant>,
    /// How long each call of the timed tool ran.
    pub tools: Vec<Duration>,
}

impl ProbeData {
    /// Harness overhead of each tool turn: from the end of the model stream to the next request,
    /// minus the tool's own run time (one tool call per turn), in microseconds.
    pub fn overheads_us(&self) -> Vec<u64> {
        self.ends
            .iter()
            .zip(self.requests.iter().skip(1))
            .zip(self.tools.iter())
            .map(|((end, next), tool)| {
                let gap = next.saturating_duration_since(*end);
                u64::try_from(gap.saturating_sub(*tool).as_micros()).unwrap_or(u64::MAX)
            })
            .collect()
    }
}

impl ProbeData {
    /// The latency of each tool call as the session sees it: from the end of the model stream
    /// that asked for it to the next request, which carries its result (the tool's run plus the
    /// harness overhead), in microseconds.
    pub fn tool_call_latencies_us(&self) -> Vec<u64> {
        self.ends
            .iter()
            .zip(self.requests.iter().skip(1))
            .map(|(end, next)| {
                u64::try_from(next.saturating_duration_since(*end).as_micros()).unwrap_or(u64::MAX)
            })
            .collect()
    }
}

/// One session's recorder (shared by its [`Probed`] model and [`TimedTool`]).
#[derive(Debug, Default)]
pub struct Probe(Mutex<ProbeData>);

impl Probe {
    fn with(&self, f: impl FnOnce(&mut ProbeData)) {
        if let Ok(mut d) = self.0.lock() {
            f(&mut d);
        }
    }

    /// How many calls of the timed tool have finished so far.
    pub fn tool_calls(&self) -> usize {
        self.0.lock().map(|d| d.tools.len()).unwrap_or(0)
    }

    /// A copy of what was recorded so far.
    pub fn data(&self) -> ProbeData {
        self.0.lock().map(|d| d.clone()).unwrap_or_default()
    }
}

/// Wraps a model, recording request and stream-end instants into `probe`.
pub struct Probed {
    /// The model wrapped.
    pub inner: Arc<dyn Model>,
    /// Where the instants go.
    pub probe: Arc<Probe>,
}

impl Model for Probed {
    fn info(&self) -> ModelInfo {
        self.inner.info()
    }

    fn open(&self, ctx: &ModelSessionContext) -> Box<dyn ModelSession> {
        Box::new(ProbedSession {
            inner: self.inner.open(ctx),
            probe: self.probe.clone(),
        })
    }
}

struct ProbedSession {
    inner: Box<dyn ModelSession>,
    probe: Arc<Probe>,
}

impl ModelSession for ProbedSession {
    fn stream(&mut self, request: ModelRequest) -> BoxStream<'static, ModelEvent> {
        let now = Instant::now();
        self.probe.with(|d| d.requests.push(now));
        let probe = self.probe.clone();
        self.inner
            .stream(request)
            .map(move |event| {
                if matches!(event, ModelEvent::End(_)) {
                    let now = Instant::now();
                    probe.with(|d| d.ends.push(now));
                }
                event
            })
            .boxed()
    }
}

/// Wraps a tool, recording the run time of each call into `probe`.
pub struct TimedTool {
    /// The tool wrapped.
    pub inner: Arc<dyn Tool>,
    /// Where the run times go.
    pub probe: Arc<Probe>,
}

impl Tool for TimedTool {
    fn call(&self, ctx: ToolContext, args: Map<String, Value>) -> BoxFuture<'static, ToolResult> {
        let call = self.inner.call(ctx, args);
        let probe = self.probe.clone();
        Box::pin(async move {
            let start = Instant::now();
            let result = call.await;
            let took = start.elapsed();
            probe.with(|d| d.tools.push(took));
            result
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(tool_results: usize) -> ModelRequest {
        let mut history = vec![ModelPayload::Text {
            role: Role::User,
            text: "Run the benchmark task.".into(),
            sender: None,
            stop_reason: StopReason::Completed,
            fidelity: None,
        }];
        for i in 0..tool_results {
            history.push(ModelPayload::ToolCallOutput {
                role: Role::User,
                tool_call_id: format!("call_{i}"),
                output: "x".into(),
                images: Vec::new(),
                stop_reason: StopReason::Completed,
            });
        }
        ModelRequest {
            system_prompt: Arc::from("s"),
            history: Arc::new(history),
            tools: Arc::new(Vec::new()),
        }
    }

    fn completes(events: &[ModelEvent]) -> Vec<ModelPayload> {
        events
            .iter()
            .filter_map(|e| match e {
                ModelEvent::Complete(p) => Some(p.clone()),
                _ => None,
            })
            .collect()
    }

    #[tokio::test]
    async fn follows_the_workload_rule() {
        let model = BenchModel {
            workload: Workload::Read,
            turns: 2,
            latency: Duration::ZERO,
        };
        let mut s = model.open(&ModelSessionContext::default());
        let first: Vec<ModelEvent> = s.stream(request(0)).collect().await;
        match completes(&first).as_slice() {
            [
                ModelPayload::ToolCall {
                    name,
                    arguments,
                    tool_call_id,
                    ..
                },
            ] => {
                assert_eq!(name, "read_file");
                assert_eq!(arguments, r#"{"file_path":"bench-input.txt"}"#);
                assert_eq!(tool_call_id, "call_0");
            }
            other => panic!("unexpected {other:?}"),
        }
        assert_eq!(
            first.last(),
            Some(&ModelEvent::End(ModelOutcome::completed()))
        );
        let second: Vec<ModelEvent> = s.stream(request(1)).collect().await;
        assert!(matches!(
            completes(&second).as_slice(),
            [ModelPayload::ToolCall { tool_call_id, .. }] if tool_call_id == "call_1"
        ));
        let last: Vec<ModelEvent> = s.stream(request(2)).collect().await;
        assert!(matches!(
            completes(&last).as_slice(),
            [ModelPayload::Text { text, .. }] if text == "Done: ran 2 tool calls."
        ));
    }

    #[test]
    fn overhead_subtracts_the_tool_time() {
        let t0 = Instant::now();
        let data = ProbeData {
            requests: vec![t0, t0 + Duration::from_micros(1000)],
            ends: vec![
                t0 + Duration::from_micros(100),
                t0 + Duration::from_micros(1100),
            ],
            tools: vec![Duration::from_micros(700)],
        };
        assert_eq!(data.overheads_us(), vec![200]);
        assert_eq!(data.tool_call_latencies_us(), vec![900]);
    }
}
