//! `--otel` and `--otel-log-content`, shared by `run`, `chat`, `serve` and `bench`, and the
//! start of export they ask for.
//!
//! Nothing is exported without `--otel`, whatever the `OTEL_*` variables say.

use clap::Args;

use super::CliError;
use crate::telemetry::{self, OtelSettings, Telemetry};

/// The OpenTelemetry flags of a command that runs sessions.
#[derive(Debug, Clone, Default, Args)]
pub struct OtelArgs {
    /// Export spans and metrics over OTLP (configured by the standard OTEL_* variables:
    /// OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_PROTOCOL, OTEL_EXPORTER_OTLP_HEADERS,
    /// OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES, OTEL_TRACES_SAMPLER).
    #[arg(long)]
    pub otel: bool,
    /// With --otel, also export prompts, outputs and tool arguments (secrets scrubbed; or
    /// ROOKERY_OTEL_LOG_CONTENT=1).
    #[arg(long, requires = "otel")]
    pub otel_log_content: bool,
}

impl OtelArgs {
    /// Starts export when `--otel` was given.
    pub fn start(&self) -> Result<Option<Telemetry>, CliError> {
        if !self.otel {
            return Ok(None);
        }
        let settings = OtelSettings::from_env(self.otel_log_content)?;
        Ok(Some(telemetry::start(&settings)?))
    }
}
