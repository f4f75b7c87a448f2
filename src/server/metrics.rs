//! Server metrics in the Prometheus text format: counters fed from each session's message
//! stream (tasks, tool calls, approval decisions, model request latency) and gauges the
//! caller samples at render time (sessions by status, pending approvals, trace bytes, SSE
//! clients).
//!
//! Observation only: nothing here changes a session. Label values are escaped and the number
//! of distinct tool names is capped (model-chosen names could otherwise grow without bound).

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write;
use std::sync::Mutex;
use std::time::Instant;

use crate::message::{EventPayload, ModelPayload, OmniMessage};

/// Upper bounds (seconds) of the model request latency histogram.
pub const LATENCY_BUCKETS: [f64; 14] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0,
];
/// Distinct tool names counted by name; the rest count as `other`.
pub const MAX_TOOL_LABELS: usize = 64;

#[derive(Default)]
struct Counters {
    tasks_started: u64,
    tasks_finished: BTreeMap<String, u64>,
    tool_calls: BTreeMap<(String, String), u64>,
    approval_decisions: BTreeMap<String, u64>,
    sse_clients_dropped: u64,
    latency_buckets: [u64; LATENCY_BUCKETS.len()],
    latency_count: u64,
    latency_sum: f64,
}

/// Process-wide counters.
#[derive(Default)]
pub struct Metrics {
    c: Mutex<Counters>,
    /// The per-principal series (`metrics_principal.rs`).
    pub principals: super::metrics_principal::PrincipalCounters,
}

/// Values sampled when `/metrics` is read.
#[derive(Debug, Default, Clone)]
pub struct Gauges {
    /// Sessions open and waiting for a task.
    pub sessions_idle: u64,
    /// Sessions running a task.
    pub sessions_running: u64,
    /// Sessions whose trace could not be written (they take no new task).
    pub sessions_failed: u64,
    /// Approval questions waiting for an answer.
    pub approvals_pending: u64,
    /// Bytes written to traces since the start.
    pub trace_bytes: u64,
    /// SSE clients connected.
    pub sse_clients: u64,
    /// Registered background commands, over all sessions.
    pub live_commands: u64,
    /// Registered subagents, over all sessions.
    pub live_subagents: u64,
}

/// Escapes a label value (`\`, `"` and newlines).
fn esc(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

impl Metrics {
    /// Counts a task started.
    pub fn task_started(&self) {
        if let Ok(mut c) = self.c.lock() {
            c.tasks_started += 1;
        }
    }

    /// Counts `n` SSE clients dropped for falling behind.
    pub fn sse_clients_dropped(&self, n: usize) {
        if n > 0
            && let Ok(mut c) = self.c.lock()
        {
            c.sse_clients_dropped += n as u64;
        }
    }

    fn tool_call(&self, name: &str, stop_reason: &str) {
        if let Ok(mut c) = self.c.lock() {
            let known = c.tool_calls.keys().any(|(n, _)| n == name);
            let distinct = c
                .tool_calls
                .keys()
                .map(|(n, _)| n.as_str())
                .collect::<std::collections::BTreeSet<_>>()
                .len();
            let name = if known || distinct < MAX_TOOL_LABELS {
                name
            } else {
                "other"
            };
            *c.tool_calls
                .entry((name.to_string(), stop_reason.to_string()))
                .or_default() += 1;
        }
    }

    fn observe_latency(&self, secs: f64) {
        if let Ok(mut c) = self.c.lock() {
            for (i, le) in LATENCY_BUCKETS.iter().enumerate() {
                if secs <= *le {
                    c.latency_buckets[i] += 1;
                }
            }
            c.latency_count += 1;
            c.latency_sum += secs;
        }
    }

    /// The Prometheus text exposition.
    pub fn render(&self, g: &Gauges) -> String {
        let mut lines: Vec<String> = Vec::new();
        let head = |lines: &mut Vec<String>, name: &str, kind: &str, help: &str| {
            lines.push(format!("# HELP {name} {help}\n# TYPE {name} {kind}"));
        };
        head(
            &mut lines,
            "rookery_sessions",
            "gauge",
            "Sessions by status.",
        );
        lines.push(format!(
            "rookery_sessions{{status=\"idle\"}} {}",
            g.sessions_idle
        ));
        lines.push(format!(
            "rookery_sessions{{status=\"running\"}} {}",
            g.sessions_running
        ));
        lines.push(format!(
            "rookery_sessions{{status=\"failed\"}} {}",
            g.sessions_failed
        ));
        head(
            &mut lines,
            "rookery_live_commands",
            "gauge",
            "Registered background commands.",
        );
        lines.push(format!("rookery_live_commands {}", g.live_commands));
        head(
            &mut lines,
            "rookery_live_subagents",
            "gauge",
            "Registered subagents.",
        );
        lines.push(format!("rookery_live_subagents {}", g.live_subagents));
        head(
            &mut lines,
            "rookery_approvals_pending",
            "gauge",
            "Tool calls waiting for an API approval.",
        );
        lines.push(format!("rookery_approvals_pending {}", g.approvals_pending));
        head(
            &mut lines,
            "rookery_trace_bytes_written_total",
            "counter",
            "Bytes written to session traces.",
        );
        lines.push(format!(
            "rookery_trace_bytes_written_total {}",
            g.trace_bytes
        ));
        head(
            &mut lines,
            "rookery_sse_clients",
            "gauge",
            "Connected SSE clients.",
        );
        lines.push(format!("rookery_sse_clients {}", g.sse_clients));
        if let Ok(c) = self.c.lock() {
            head(
                &mut lines,
                "rookery_sse_clients_dropped_total",
                "counter",
                "SSE clients dropped because they fell behind.",
            );
            lines.push(format!(
                "rookery_sse_clients_dropped_total {}",
                c.sse_clients_dropped
            ));
            head(
                &mut lines,
                "rookery_tasks_started_total",
                "counter",
                "Tasks started.",
            );
            lines.push(format!("rookery_tasks_started_total {}", c.tasks_started));
            head(
                &mut lines,
                "rookery_tasks_finished_total",
                "counter",
                "Tasks finished, by status.",
            );
            for (status, n) in &c.tasks_finished {
                lines.push(format!(
                    "rookery_tasks_finished_total{{status=\"{}\"}} {n}",
                    esc(status)
                ));
            }
            head(
                &mut lines,
                "rookery_tool_calls_total",
                "counter",
                "Finished tool calls, by tool and stop_reason.",
            );
            for ((tool, reason), n) in &c.tool_calls {
                lines.push(format!(
                    "rookery_tool_calls_total{{tool=\"{}\",stop_reason=\"{}\"}} {n}",
                    esc(tool),
                    esc(reason)
                ));
            }
            head(
                &mut lines,
                "rookery_approval_decisions_total",
                "counter",
                "Approval decisions, by decision.",
            );
            for (d, n) in &c.approval_decisions {
                lines.push(format!(
                    "rookery_approval_decisions_total{{decision=\"{}\"}} {n}",
                    esc(d)
                ));
            }
            let name = "rookery_model_request_duration_seconds";
            head(
                &mut lines,
                name,
                "histogram",
                "Model request latency (request_begin to request_end).",
            );
            for (i, le) in LATENCY_BUCKETS.iter().enumerate() {
                lines.push(format!(
                    "{name}_bucket{{le=\"{le}\"}} {}",
                    c.latency_buckets[i]
                ));
            }
            lines.push(format!("{name}_bucket{{le=\"+Inf\"}} {}", c.latency_count));
            lines.push(format!("{name}_sum {}", c.latency_sum));
            lines.push(format!("{name}_count {}", c.latency_count));
        }
        let mut out = String::new();
        for l in lines {
            let _ = writeln!(out, "{l}");
        }
        out
    }
}

/// Per-session observation state (lives in the session's pump): open model requests and the
/// names of tool calls awaiting their output, keyed by origin so child sessions don't clash.
#[derive(Default)]
pub struct SessionObserver {
    request_started: HashMap<String, Instant>,
    tool_names: HashMap<(String, String), String>,
}

impl SessionObserver {
    /// Updates `metrics` from one message of the session's stream (requests, tool calls, tokens).
    pub fn observe(&mut self, msg: &OmniMessage, metrics: &Metrics) {
        let origin = msg.origin.as_ref().map(|o| o.join("/")).unwrap_or_default();
        if let Some(m) = msg.as_model() {
            match m {
                ModelPayload::ToolCall {
                    name, tool_call_id, ..
                } => {
                    self.tool_names
                        .insert((origin, tool_call_id.clone()), name.clone());
                }
                ModelPayload::ToolCallOutput {
                    tool_call_id,
                    stop_reason,
                    ..
                } => {
                    let name = self
                        .tool_names
                        .remove(&(origin, tool_call_id.clone()))
                        .unwrap_or_else(|| "unknown".to_string());
                    metrics.tool_call(&name, stop_reason.as_str());
                }
                _ => {}
            }
            return;
        }
        match msg.as_event() {
            Some(EventPayload::RequestBegin {}) => {
                self.request_started.insert(origin, Instant::now());
            }
            Some(EventPayload::RequestEnd { .. }) => {
                if let Some(t) = self.request_started.remove(&origin) {
                    metrics.observe_latency(t.elapsed().as_secs_f64());
                }
            }
            Some(EventPayload::ApprovalDecision { decision, .. }) => {
                let d = serde_json::to_value(decision)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default();
                if let Ok(mut c) = metrics.c.lock() {
                    *c.approval_decisions.entry(d).or_default() += 1;
                }
            }
            Some(EventPayload::TaskEnd { status, .. }) if origin.is_empty() => {
                if let Ok(mut c) = metrics.c.lock() {
                    *c.tasks_finished
                        .entry(status.as_str().to_string())
                        .or_default() += 1;
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{Decision, StopReason, build};

    #[test]
    fn counts_what_the_stream_shows() {
        let m = Metrics::default();
        let mut o = SessionObserver::default();
        m.task_started();
        for msg in [
            build::request_begin(),
            build::tool_call("read_file", "{}", "call_0"),
            build::request_end(StopReason::Completed, None, None, None),
            build::approval_decision(Decision::Allow, "call_0"),
            build::tool_call_output("call_0", "x", vec![], StopReason::Completed),
            build::tool_call("we\"ird", "{}", "call_0").with_origin("child-1"),
            build::tool_call_output("call_0", "x", vec![], StopReason::Failed)
                .with_origin("child-1"),
            build::task_end(StopReason::Completed).with_origin("child-1"),
            build::task_end(StopReason::Aborted),
        ] {
            o.observe(&msg, &m);
        }
        let text = m.render(&Gauges {
            sessions_idle: 2,
            sessions_running: 1,
            sessions_failed: 4,
            approvals_pending: 0,
            trace_bytes: 77,
            sse_clients: 0,
            live_commands: 3,
            live_subagents: 1,
        });
        for line in [
            "rookery_sessions{status=\"idle\"} 2",
            "rookery_sessions{status=\"running\"} 1",
            "rookery_sessions{status=\"failed\"} 4",
            "rookery_trace_bytes_written_total 77",
            "rookery_live_commands 3",
            "rookery_live_subagents 1",
            "rookery_tasks_started_total 1",
            "rookery_tasks_finished_total{status=\"aborted\"} 1",
            "rookery_tool_calls_total{tool=\"read_file\",stop_reason=\"completed\"} 1",
            "rookery_tool_calls_total{tool=\"we\\\"ird\",stop_reason=\"failed\"} 1",
            "rookery_approval_decisions_total{decision=\"allow\"} 1",
            "rookery_model_request_duration_seconds_bucket{le=\"+Inf\"} 1",
            "rookery_model_request_duration_seconds_count 1",
            "# TYPE rookery_model_request_duration_seconds histogram",
        ] {
            assert!(text.lines().any(|l| l == line), "missing {line} in\n{text}");
        }
        assert!(!text.contains("status=\"completed\"}"), "{text}");
    }
}
