//! OpenTelemetry for the runtime: the process-wide switch (`--otel`), the OTLP export pipeline
//! (`export.rs`, feature `otel`), the span handle the session code passes around as plain data
//! ([`OtelSpan`]), W3C `traceparent` values ([`TraceParent`]) and the GenAI metrics.
//!
//! It is the lowest area: it imports nothing from the crate, so every area above may hold an
//! [`OtelSpan`] or ask whether content may be exported. It never decides what a span means
//! (the session maps its trace records to spans) and never sees a secret it could not scrub:
//! callers hand it text already scrubbed. Without `--otel` (or without the `otel` feature)
//! every call here is a no-op that costs one atomic load.

#[cfg(feature = "otel")]
mod export;
pub mod metrics;
pub mod settings;
pub mod span;
pub mod traceparent;

pub use settings::{OtelProtocol, OtelSettings, TelemetryError};
pub use span::{OtelSpan, SpanKind};
pub use traceparent::TraceParent;

use std::sync::atomic::{AtomicBool, Ordering};

/// Whether prompts, outputs and tool arguments go into spans (`--otel-log-content`).
static LOG_CONTENT: AtomicBool = AtomicBool::new(false);

/// Whether export is on in this process.
pub fn enabled() -> bool {
    #[cfg(feature = "otel")]
    {
        export::tracer().is_some()
    }
    #[cfg(not(feature = "otel"))]
    {
        false
    }
}

/// Whether content (prompts, outputs, tool arguments and results) may be put into spans: only
/// with export on and `--otel-log-content` (or `ROOKERY_OTEL_LOG_CONTENT=1`).
pub fn log_content() -> bool {
    LOG_CONTENT.load(Ordering::Relaxed) && enabled()
}

/// The running export of this process; [`Telemetry::shutdown`] sends what is queued (waiting
/// at most [`settings::SHUTDOWN_WAIT`]) and reports the spans that were dropped.
pub struct Telemetry {
    #[cfg(feature = "otel")]
    pipeline: export::Pipeline,
}

impl std::fmt::Debug for Telemetry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Telemetry")
    }
}

/// Turns export on for this process (once; a second call is refused). Must run inside the
/// tokio runtime: the exporters' connections live on it.
pub fn start(settings: &OtelSettings) -> Result<Telemetry, TelemetryError> {
    #[cfg(feature = "otel")]
    {
        let pipeline = export::Pipeline::start(settings)?;
        LOG_CONTENT.store(settings.log_content, Ordering::Relaxed);
        Ok(Telemetry { pipeline })
    }
    #[cfg(not(feature = "otel"))]
    {
        let _ = settings;
        Err(TelemetryError::NotBuilt)
    }
}

impl Telemetry {
    /// How many spans were dropped so far (queue full, or the collector refused or timed out).
    pub fn dropped_spans(&self) -> u64 {
        #[cfg(feature = "otel")]
        {
            self.pipeline.dropped()
        }
        #[cfg(not(feature = "otel"))]
        {
            0
        }
    }

    /// Sends what is queued, waiting at most [`settings::SHUTDOWN_WAIT`], then stops export.
    pub async fn shutdown(self) {
        #[cfg(feature = "otel")]
        self.pipeline.shutdown().await;
    }
}
