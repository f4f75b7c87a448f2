//! The OTLP export pipeline of the process (feature `otel`): the tracer, and a span processor
//! of its own between the SDK and the exporter. A finished span goes into a bounded queue
//! ([`SPAN_QUEUE`]) with a non-blocking send; a full queue drops it and counts it. One tokio
//! task drains the queue in batches and exports them, each export bounded in time, so a
//! collector that refuses or hangs costs the sessions nothing and the process at most
//! [`SHUTDOWN_WAIT`] when it ends.
//!
//! It must not block the caller of `on_end` (a session actor) and never retries forever.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider, SpanData, SpanExporter as _};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::settings::{OtelProtocol, OtelSettings, SHUTDOWN_WAIT, SPAN_QUEUE, TelemetryError};

/// The most spans in one export.
const BATCH: usize = 512;

/// How long a batch waits for more spans once one arrived.
const BATCH_DELAY: Duration = Duration::from_millis(200);

/// The longest one export may take; past it the batch is dropped (and counted).
const EXPORT_TIMEOUT: Duration = Duration::from_secs(5);

static TRACER: OnceLock<SdkTracer> = OnceLock::new();

/// The process's tracer, once export is on.
pub(super) fn tracer() -> Option<&'static SdkTracer> {
    TRACER.get()
}

/// The queue's sending side, shared by the processor and the pipeline.
#[derive(Debug)]
struct Queue {
    tx: Mutex<Option<mpsc::Sender<SpanData>>>,
    dropped: Arc<AtomicU64>,
    /// Spans queued or being exported (lost if the process ends first).
    pending: Arc<AtomicU64>,
}

/// The SDK side of the queue: `on_end` never waits.
#[derive(Debug)]
struct QueueProcessor {
    queue: Arc<Queue>,
}

impl opentelemetry_sdk::trace::SpanProcessor for QueueProcessor {
    fn on_start(&self, _span: &mut opentelemetry_sdk::trace::Span, _cx: &opentelemetry::Context) {}

    fn on_end(&self, span: SpanData) {
        let sent = match self.queue.tx.lock() {
            Ok(tx) => tx.as_ref().is_some_and(|tx| tx.try_send(span).is_ok()),
            Err(_) => false,
        };
        if sent {
            self.queue.pending.fetch_add(1, Ordering::Relaxed);
        } else {
            self.queue.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn force_flush(&self) -> OTelSdkResult {
        Ok(())
    }

    fn shutdown_with_timeout(&self, _timeout: Duration) -> OTelSdkResult {
        if let Ok(mut tx) = self.queue.tx.lock() {
            tx.take();
        }
        Ok(())
    }
}

/// The running export: the provider, the queue and the exporting task.
pub(super) struct Pipeline {
    provider: SdkTracerProvider,
    queue: Arc<Queue>,
    worker: JoinHandle<()>,
    metrics: Option<super::metrics::MetricsPipeline>,
}

/// The resource: the SDK's (`OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`), with the
/// service name `rookery` when neither names one.
fn resource() -> Resource {
    let named = std::env::var_os("OTEL_SERVICE_NAME").is_some()
        || std::env::var("OTEL_RESOURCE_ATTRIBUTES").is_ok_and(|a| {
            a.split(',')
                .any(|kv| kv.trim().starts_with("service.name="))
        });
    let builder = Resource::builder();
    let builder = if named {
        builder
    } else {
        builder.with_service_name("rookery")
    };
    builder
        .with_attributes([opentelemetry::KeyValue::new(
            "service.version",
            env!("CARGO_PKG_VERSION"),
        )])
        .build()
}

impl Pipeline {
    /// Builds the exporter and starts the pipeline (inside the tokio runtime).
    pub(super) fn start(settings: &OtelSettings) -> Result<Pipeline, TelemetryError> {
        static STARTED: AtomicBool = AtomicBool::new(false);
        if STARTED.swap(true, Ordering::SeqCst) {
            return Err(TelemetryError::AlreadyStarted);
        }
        let built = match settings.protocol {
            OtelProtocol::HttpProtobuf => opentelemetry_otlp::SpanExporter::builder()
                .with_http()
                .with_protocol(Protocol::HttpBinary)
                .build(),
            OtelProtocol::Grpc => opentelemetry_otlp::SpanExporter::builder()
                .with_tonic()
                .build(),
        };
        let mut exporter = built.map_err(|e| TelemetryError::Exporter(e.to_string()))?;
        let resource = resource();
        exporter.set_resource(&resource);
        let (tx, rx) = mpsc::channel(SPAN_QUEUE);
        let queue = Arc::new(Queue {
            tx: Mutex::new(Some(tx)),
            dropped: Arc::new(AtomicU64::new(0)),
            pending: Arc::new(AtomicU64::new(0)),
        });
        let worker = tokio::spawn(drain(
            exporter,
            rx,
            queue.dropped.clone(),
            queue.pending.clone(),
        ));
        let provider = SdkTracerProvider::builder()
            .with_resource(resource.clone())
            .with_span_processor(QueueProcessor {
                queue: queue.clone(),
            })
            .build();
        let tracer = provider.tracer("rookery");
        if TRACER.set(tracer).is_err() {
            return Err(TelemetryError::AlreadyStarted);
        }
        let metrics = super::metrics::MetricsPipeline::start(settings, resource)?;
        Ok(Pipeline {
            provider,
            queue,
            worker,
            metrics,
        })
    }

    /// Spans dropped so far.
    pub(super) fn dropped(&self) -> u64 {
        self.queue.dropped.load(Ordering::Relaxed)
    }

    /// Closes the queue and waits at most [`SHUTDOWN_WAIT`] for the last exports.
    pub(super) async fn shutdown(self) {
        let Pipeline {
            provider,
            queue,
            mut worker,
            metrics,
        } = self;
        let _ = provider.shutdown();
        // Spans and metrics go out side by side, both within the one wait.
        let spans = async {
            if tokio::time::timeout(SHUTDOWN_WAIT, &mut worker)
                .await
                .is_err()
            {
                worker.abort();
                // What was still queued or in flight is lost.
                let lost = queue.pending.swap(0, Ordering::Relaxed);
                queue.dropped.fetch_add(lost, Ordering::Relaxed);
                tracing::warn!("OpenTelemetry: the collector did not take the last spans in time");
            }
        };
        let metrics = async {
            if let Some(metrics) = metrics {
                metrics.shutdown(SHUTDOWN_WAIT).await;
            }
        };
        tokio::join!(spans, metrics);
        let dropped = queue.dropped.load(Ordering::Relaxed);
        if dropped > 0 {
            tracing::warn!(
                dropped,
                "OpenTelemetry: {dropped} spans were dropped (queue full, or the collector refused or timed out)"
            );
        }
    }
}

/// The exporting task: batches from the queue until it closes.
async fn drain(
    exporter: opentelemetry_otlp::SpanExporter,
    mut rx: mpsc::Receiver<SpanData>,
    dropped: Arc<AtomicU64>,
    pending: Arc<AtomicU64>,
) {
    let mut warned = false;
    while let Some(first) = rx.recv().await {
        let mut batch = Vec::with_capacity(BATCH.min(64));
        batch.push(first);
        let deadline = tokio::time::Instant::now() + BATCH_DELAY;
        while batch.len() < BATCH {
            match tokio::time::timeout_at(deadline, rx.recv()).await {
                Ok(Some(span)) => batch.push(span),
                Ok(None) | Err(_) => break,
            }
        }
        let n = batch.len() as u64;
        let result = tokio::time::timeout(EXPORT_TIMEOUT, exporter.export(batch)).await;
        let failure = match result {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(e.to_string()),
            Err(_) => Some(format!("no answer within {} s", EXPORT_TIMEOUT.as_secs())),
        };
        // Saturating: a shutdown that gave up may have zeroed it meanwhile.
        let _ = pending.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |p| {
            Some(p.saturating_sub(n))
        });
        if let Some(why) = failure {
            dropped.fetch_add(n, Ordering::Relaxed);
            if !warned {
                warned = true;
                tracing::warn!("OpenTelemetry: cannot export spans: {why}");
            } else {
                tracing::debug!("OpenTelemetry: cannot export spans: {why}");
            }
        }
    }
}
