//! The metrics of OpenTelemetry export: the GenAI client metrics
//! (`gen_ai.client.operation.duration`, `gen_ai.client.token.usage`), the session figures
//! `/metrics` also has (`rookery.tasks.started`, `rookery.tasks.finished`,
//! `rookery.tool.calls`, `rookery.approval.decisions`) and its server-wide gauges
//! (`rookery.sessions` by status, `rookery.commands.live`, `rookery.subagents.live`,
//! `rookery.approvals.pending`, `rookery.sse.clients`, `rookery.trace.bytes_written`; set by
//! the server as plain numbers with [`set_server_gauges`]), pushed over OTLP every
//! `OTEL_METRIC_EXPORT_INTERVAL` ms (default 60 s) and when the process ends.
//!
//! Each `record_*` function is a no-op (one atomic load) while export is off. It takes plain
//! values; it never reads a session.

#[cfg(feature = "otel")]
mod instruments {
    use std::sync::OnceLock;

    use opentelemetry::metrics::{Counter, Histogram};

    /// The instruments, made once the meter provider is set.
    pub(super) struct Instruments {
        pub(super) duration: Histogram<f64>,
        pub(super) tokens: Histogram<u64>,
        pub(super) tasks_started: Counter<u64>,
        pub(super) tasks_finished: Counter<u64>,
        pub(super) tool_calls: Counter<u64>,
        pub(super) approvals: Counter<u64>,
    }

    pub(super) static INSTRUMENTS: OnceLock<Instruments> = OnceLock::new();

    /// The server-wide gauges as the server last set them (`None` before, and outside serve).
    pub(super) fn server_gauges() -> Option<super::ServerGauges> {
        super::SERVER_GAUGES.lock().ok().and_then(|g| *g)
    }

    /// The observable instruments of the server-wide gauges; the SDK calls their callbacks at
    /// each export. Kept so that they live as long as the provider.
    pub(super) struct ServerInstruments {
        _sessions: opentelemetry::metrics::ObservableGauge<u64>,
        _gauges: Vec<opentelemetry::metrics::ObservableGauge<u64>>,
        _trace_bytes: opentelemetry::metrics::ObservableCounter<u64>,
    }

    /// One gauge of the server's, read from its field by `read`.
    fn gauge(
        meter: &opentelemetry::metrics::Meter,
        name: &'static str,
        description: &'static str,
        read: fn(&super::ServerGauges) -> u64,
    ) -> opentelemetry::metrics::ObservableGauge<u64> {
        meter
            .u64_observable_gauge(name)
            .with_description(description)
            .with_callback(move |o| {
                if let Some(g) = server_gauges() {
                    o.observe(read(&g), &[]);
                }
            })
            .build()
    }

    pub(super) fn make_server(meter: &opentelemetry::metrics::Meter) -> ServerInstruments {
        use opentelemetry::KeyValue;
        ServerInstruments {
            _sessions: meter
                .u64_observable_gauge("rookery.sessions")
                .with_description("Resident sessions, by status (idle, running, failed)")
                .with_callback(|o| {
                    if let Some(g) = server_gauges() {
                        o.observe(g.sessions_idle, &[KeyValue::new("status", "idle")]);
                        o.observe(g.sessions_running, &[KeyValue::new("status", "running")]);
                        o.observe(g.sessions_failed, &[KeyValue::new("status", "failed")]);
                    }
                })
                .build(),
            _gauges: vec![
                gauge(
                    meter,
                    "rookery.commands.live",
                    "Registered background commands, over all sessions",
                    |g| g.live_commands,
                ),
                gauge(
                    meter,
                    "rookery.subagents.live",
                    "Registered subagents, over all sessions",
                    |g| g.live_subagents,
                ),
                gauge(
                    meter,
                    "rookery.approvals.pending",
                    "Approval questions waiting for an answer",
                    |g| g.approvals_pending,
                ),
                gauge(
                    meter,
                    "rookery.sse.clients",
                    "Event-stream clients connected",
                    |g| g.sse_clients,
                ),
            ],
            _trace_bytes: meter
                .u64_observable_counter("rookery.trace.bytes_written")
                .with_unit("By")
                .with_description("Bytes written to traces since the start")
                .with_callback(|o| {
                    if let Some(g) = server_gauges() {
                        o.observe(g.trace_bytes, &[]);
                    }
                })
                .build(),
        }
    }

    pub(super) static SERVER_INSTRUMENTS: OnceLock<ServerInstruments> = OnceLock::new();

    pub(super) fn make(meter: &opentelemetry::metrics::Meter) -> Instruments {
        Instruments {
            duration: meter
                .f64_histogram("gen_ai.client.operation.duration")
                .with_unit("s")
                .with_description("GenAI operation duration")
                .with_boundaries(vec![
                    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48,
                    40.96, 81.92,
                ])
                .build(),
            tokens: meter
                .u64_histogram("gen_ai.client.token.usage")
                .with_unit("{token}")
                .with_description("Measures number of input and output tokens used")
                .with_boundaries(vec![
                    1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0, 262144.0,
                    1048576.0, 4194304.0, 16777216.0, 67108864.0,
                ])
                .build(),
            tasks_started: meter
                .u64_counter("rookery.tasks.started")
                .with_description("Tasks started")
                .build(),
            tasks_finished: meter
                .u64_counter("rookery.tasks.finished")
                .with_description("Tasks finished, by status")
                .build(),
            tool_calls: meter
                .u64_counter("rookery.tool.calls")
                .with_description("Tool calls finished, by tool and stop reason")
                .build(),
            approvals: meter
                .u64_counter("rookery.approval.decisions")
                .with_description("Approval decisions, by decision and source")
                .build(),
        }
    }
}

#[cfg(feature = "otel")]
use opentelemetry::KeyValue;

/// The server-wide figures of `/metrics`, as plain numbers (the server computes them; this
/// area never reads a session).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ServerGauges {
    /// Sessions open and waiting for a task.
    pub sessions_idle: u64,
    /// Sessions running a task.
    pub sessions_running: u64,
    /// Sessions whose trace could not be written.
    pub sessions_failed: u64,
    /// Approval questions waiting for an answer.
    pub approvals_pending: u64,
    /// Bytes written to traces since the start.
    pub trace_bytes: u64,
    /// Event-stream clients connected.
    pub sse_clients: u64,
    /// Registered background commands, over all sessions.
    pub live_commands: u64,
    /// Registered subagents, over all sessions.
    pub live_subagents: u64,
}

/// The gauges the next export reads.
static SERVER_GAUGES: std::sync::Mutex<Option<ServerGauges>> = std::sync::Mutex::new(None);

/// True while metrics are exported (the server then keeps [`set_server_gauges`] current).
pub fn metrics_on() -> bool {
    #[cfg(feature = "otel")]
    {
        instruments::INSTRUMENTS.get().is_some()
    }
    #[cfg(not(feature = "otel"))]
    {
        false
    }
}

/// Sets the server-wide figures the next export reads. A no-op while export is off.
pub fn set_server_gauges(gauges: ServerGauges) {
    if !metrics_on() {
        return;
    }
    if let Ok(mut g) = SERVER_GAUGES.lock() {
        *g = Some(gauges);
    }
}

/// One finished model request (`chat`): its duration and token counts.
pub fn record_chat(
    provider: &str,
    model: &str,
    seconds: f64,
    error_type: Option<&str>,
    input_tokens: u64,
    output_tokens: u64,
) {
    #[cfg(feature = "otel")]
    if let Some(i) = instruments::INSTRUMENTS.get() {
        let mut attrs = vec![
            KeyValue::new("gen_ai.operation.name", "chat"),
            KeyValue::new("gen_ai.provider.name", provider.to_string()),
            KeyValue::new("gen_ai.request.model", model.to_string()),
        ];
        if let Some(e) = error_type {
            attrs.push(KeyValue::new("error.type", e.to_string()));
        }
        i.duration.record(seconds, &attrs);
        if error_type.is_none() {
            attrs.push(KeyValue::new("gen_ai.token.type", "input"));
            i.tokens.record(input_tokens, &attrs);
            if let Some(last) = attrs.last_mut() {
                *last = KeyValue::new("gen_ai.token.type", "output");
            }
            i.tokens.record(output_tokens, &attrs);
        }
    }
    #[cfg(not(feature = "otel"))]
    let _ = (
        provider,
        model,
        seconds,
        error_type,
        input_tokens,
        output_tokens,
    );
}

/// A task started.
pub fn record_task_started() {
    #[cfg(feature = "otel")]
    if let Some(i) = instruments::INSTRUMENTS.get() {
        i.tasks_started.add(1, &[]);
    }
}

/// A task ended with `status`.
pub fn record_task_finished(status: &str) {
    #[cfg(feature = "otel")]
    if let Some(i) = instruments::INSTRUMENTS.get() {
        i.tasks_finished
            .add(1, &[KeyValue::new("status", status.to_string())]);
    }
    #[cfg(not(feature = "otel"))]
    let _ = status;
}

/// A tool call ended with `stop_reason`.
pub fn record_tool_call(tool: &str, stop_reason: &str) {
    #[cfg(feature = "otel")]
    if let Some(i) = instruments::INSTRUMENTS.get() {
        i.tool_calls.add(
            1,
            &[
                KeyValue::new("gen_ai.tool.name", tool.to_string()),
                KeyValue::new("rookery.tool.stop_reason", stop_reason.to_string()),
            ],
        );
    }
    #[cfg(not(feature = "otel"))]
    let _ = (tool, stop_reason);
}

/// An approval was decided.
pub fn record_approval(decision: &str, source: &str) {
    #[cfg(feature = "otel")]
    if let Some(i) = instruments::INSTRUMENTS.get() {
        i.approvals.add(
            1,
            &[
                KeyValue::new("rookery.approval.decision", decision.to_string()),
                KeyValue::new("rookery.approval.source", source.to_string()),
            ],
        );
    }
    #[cfg(not(feature = "otel"))]
    let _ = (decision, source);
}

/// The metric side of the pipeline: a meter provider whose periodic reader pushes over OTLP.
#[cfg(feature = "otel")]
pub(super) struct MetricsPipeline {
    provider: opentelemetry_sdk::metrics::SdkMeterProvider,
}

#[cfg(feature = "otel")]
impl MetricsPipeline {
    /// Builds the metric exporter and sets the instruments up (`None` when
    /// `OTEL_METRICS_EXPORTER=none`).
    pub(super) fn start(
        settings: &super::OtelSettings,
        resource: opentelemetry_sdk::Resource,
    ) -> Result<Option<MetricsPipeline>, super::TelemetryError> {
        use opentelemetry::metrics::MeterProvider as _;
        use opentelemetry_otlp::{Protocol, WithExportConfig};
        use opentelemetry_sdk::metrics::periodic_reader_with_async_runtime::PeriodicReader;

        if std::env::var("OTEL_METRICS_EXPORTER").is_ok_and(|v| v.trim() == "none") {
            return Ok(None);
        }
        let built = match settings.protocol {
            super::OtelProtocol::HttpProtobuf => opentelemetry_otlp::MetricExporter::builder()
                .with_http()
                .with_protocol(Protocol::HttpBinary)
                .build(),
            super::OtelProtocol::Grpc => opentelemetry_otlp::MetricExporter::builder()
                .with_tonic()
                .build(),
        };
        let exporter = built.map_err(|e| super::TelemetryError::Exporter(e.to_string()))?;
        let interval = std::env::var("OTEL_METRIC_EXPORT_INTERVAL")
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .filter(|ms| *ms > 0)
            .unwrap_or(60_000);
        let reader = PeriodicReader::builder(exporter, opentelemetry_sdk::runtime::Tokio)
            .with_interval(std::time::Duration::from_millis(interval))
            // Also bounds the last push at exit (on a blocking thread the runtime waits for).
            .with_timeout(std::time::Duration::from_secs(1))
            .build();
        let provider = opentelemetry_sdk::metrics::SdkMeterProvider::builder()
            .with_resource(resource)
            .with_reader(reader)
            .build();
        let meter = provider.meter("rookery");
        let _ = instruments::INSTRUMENTS.set(instruments::make(&meter));
        let _ = instruments::SERVER_INSTRUMENTS.set(instruments::make_server(&meter));
        Ok(Some(MetricsPipeline { provider }))
    }

    /// Pushes the last figures and stops, waiting at most `wait`.
    pub(super) async fn shutdown(self, wait: std::time::Duration) {
        let provider = self.provider;
        let stop = tokio::task::spawn_blocking(move || provider.shutdown());
        match tokio::time::timeout(wait, stop).await {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(e))) => tracing::warn!("OpenTelemetry: cannot export metrics: {e}"),
            Ok(Err(_)) | Err(_) => {
                tracing::warn!("OpenTelemetry: the collector did not take the last metrics in time")
            }
        }
    }
}
