//! The settings of OpenTelemetry export, read from the standard `OTEL_*` variables and the
//! command line's flags, and the errors of starting it.
//!
//! Plain data: it starts nothing. The exporters read the endpoint, headers and timeout
//! variables themselves (`OTEL_EXPORTER_OTLP_ENDPOINT`, `OTEL_EXPORTER_OTLP_HEADERS`,
//! `OTEL_EXPORTER_OTLP_TIMEOUT` and their per-signal forms), the SDK reads
//! `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES` and `OTEL_TRACES_SAMPLER`.

use std::time::Duration;

/// The longest the process waits, when it ends, for queued spans and metrics to be sent.
pub const SHUTDOWN_WAIT: Duration = Duration::from_millis(1500);

/// The most finished spans held for export; past it new ones are dropped (and counted).
pub const SPAN_QUEUE: usize = 4096;

/// The variable that turns content export on, as `--otel-log-content` does.
pub const LOG_CONTENT_ENV: &str = "ROOKERY_OTEL_LOG_CONTENT";

/// How spans and metrics travel to the collector (`OTEL_EXPORTER_OTLP_PROTOCOL`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OtelProtocol {
    /// `http/protobuf` (the default; port 4318).
    HttpProtobuf,
    /// `grpc` (port 4317).
    Grpc,
}

/// What `--otel` starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OtelSettings {
    /// The transport.
    pub protocol: OtelProtocol,
    /// Whether prompts, outputs and tool arguments go into spans (scrubbed).
    pub log_content: bool,
}

/// Why export could not start.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    /// `OTEL_EXPORTER_OTLP_PROTOCOL` names a protocol this build does not speak.
    #[error(
        "OTEL_EXPORTER_OTLP_PROTOCOL={0:?} is not supported: use `http/protobuf` (the default) or `grpc`"
    )]
    Protocol(String),
    /// The exporter refused its configuration (a bad endpoint or header).
    #[error("cannot set up OTLP export: {0}")]
    Exporter(String),
    /// Export was already started in this process.
    #[error("OpenTelemetry export is already on in this process")]
    AlreadyStarted,
    /// The build has no `otel` feature.
    #[error("this build has no OpenTelemetry support: rebuild with the `otel` feature")]
    NotBuilt,
}

impl OtelSettings {
    /// The settings from the environment, with `log_content` from the flag (or
    /// [`LOG_CONTENT_ENV`] set to `1` or `true`).
    pub fn from_env(log_content_flag: bool) -> Result<OtelSettings, TelemetryError> {
        Self::from_lookup(log_content_flag, |k| std::env::var(k).ok())
    }

    /// As [`OtelSettings::from_env`], reading variables through `var`.
    pub fn from_lookup(
        log_content_flag: bool,
        var: impl Fn(&str) -> Option<String>,
    ) -> Result<OtelSettings, TelemetryError> {
        let protocol = var("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
            .or_else(|| var("OTEL_EXPORTER_OTLP_PROTOCOL"))
            .filter(|p| !p.trim().is_empty());
        let protocol = match protocol.as_deref().map(str::trim) {
            None | Some("http/protobuf") => OtelProtocol::HttpProtobuf,
            Some("grpc") => OtelProtocol::Grpc,
            Some(other) => return Err(TelemetryError::Protocol(other.to_string())),
        };
        let env_content = var(LOG_CONTENT_ENV)
            .is_some_and(|v| matches!(v.trim().to_ascii_lowercase().as_str(), "1" | "true"));
        Ok(OtelSettings {
            protocol,
            log_content: log_content_flag || env_content,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
    }

    #[test]
    fn protocol_and_content_come_from_the_environment() {
        let s = OtelSettings::from_lookup(false, lookup(&[])).unwrap();
        assert_eq!(s.protocol, OtelProtocol::HttpProtobuf);
        assert!(!s.log_content);
        let s = OtelSettings::from_lookup(
            false,
            lookup(&[
                ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
                (LOG_CONTENT_ENV, "true"),
            ]),
        )
        .unwrap();
        assert_eq!(s.protocol, OtelProtocol::Grpc);
        assert!(s.log_content);
        let err = OtelSettings::from_lookup(
            true,
            lookup(&[("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")]),
        )
        .unwrap_err();
        assert!(err.to_string().contains("http/protobuf"), "{err}");
    }
}
