//! [`OtelSpan`]: one OpenTelemetry span as a cheap, cloneable value the session code passes
//! down as plain data (to a tool call, a child session, a model request), with the few
//! operations the runtime needs: attributes, events, ERROR status, end, and the
//! `traceparent` of the span for propagation.
//!
//! With export off (or without the `otel` feature) a span is empty and every operation is a
//! no-op. It never reads content itself: callers pass only what may be exported.

use super::traceparent::TraceParent;

/// The kind of a span.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpanKind {
    /// Work inside the process (a task, a tool call, an approval).
    Internal,
    /// A request to another service (a model request).
    Client,
}

/// An attribute value of an event.
#[derive(Debug, Clone, PartialEq)]
pub enum AttrValue {
    /// A string.
    Str(String),
    /// An integer.
    Int(i64),
}

/// One span (or none). Clones refer to the same span; it ends on [`OtelSpan::end`] (or when
/// the last clone goes).
#[derive(Clone, Default)]
pub struct OtelSpan {
    #[cfg(feature = "otel")]
    cx: Option<opentelemetry::Context>,
}

impl std::fmt::Debug for OtelSpan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.traceparent() {
            Some(tp) => write!(f, "OtelSpan({tp})"),
            None => f.write_str("OtelSpan(none)"),
        }
    }
}

#[cfg(feature = "otel")]
impl OtelSpan {
    fn with<R>(&self, f: impl FnOnce(&opentelemetry::trace::SpanRef<'_>) -> R) -> Option<R> {
        use opentelemetry::trace::TraceContextExt;
        self.cx.as_ref().map(|cx| f(&cx.span()))
    }
}

impl OtelSpan {
    /// No span.
    pub fn none() -> OtelSpan {
        OtelSpan::default()
    }

    /// Starts a span named `name` under `parent` (a root span when `None` or empty). Empty
    /// when export is off.
    pub fn start(name: impl Into<String>, kind: SpanKind, parent: Option<&OtelSpan>) -> OtelSpan {
        #[cfg(feature = "otel")]
        if let Some(tracer) = super::export::tracer() {
            use opentelemetry::trace::{TraceContextExt, Tracer};
            let parent_cx = parent.and_then(|p| p.cx.clone()).unwrap_or_default();
            let kind = match kind {
                SpanKind::Internal => opentelemetry::trace::SpanKind::Internal,
                SpanKind::Client => opentelemetry::trace::SpanKind::Client,
            };
            let span = tracer
                .span_builder(name.into())
                .with_kind(kind)
                .start_with_context(tracer, &parent_cx);
            return OtelSpan {
                cx: Some(parent_cx.with_span(span)),
            };
        }
        let _ = (name, kind, parent);
        OtelSpan::none()
    }

    /// A parent that lives elsewhere (a `traceparent` a caller sent): spans started under it
    /// join the caller's trace. Empty when export is off.
    pub fn remote(tp: &TraceParent) -> OtelSpan {
        #[cfg(feature = "otel")]
        if super::export::tracer().is_some() {
            use opentelemetry::trace::{
                SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState,
            };
            let sc = SpanContext::new(
                TraceId::from_bytes(tp.trace_id),
                SpanId::from_bytes(tp.span_id),
                TraceFlags::new(tp.flags),
                true,
                TraceState::default(),
            );
            return OtelSpan {
                cx: Some(opentelemetry::Context::new().with_remote_span_context(sc)),
            };
        }
        let _ = tp;
        OtelSpan::none()
    }

    /// Whether this is a real span (export on).
    pub fn is_some(&self) -> bool {
        #[cfg(feature = "otel")]
        {
            self.cx.is_some()
        }
        #[cfg(not(feature = "otel"))]
        {
            false
        }
    }

    /// Sets a string attribute.
    pub fn set_str(&self, key: &'static str, value: impl Into<String>) {
        #[cfg(feature = "otel")]
        self.with(|s| s.set_attribute(opentelemetry::KeyValue::new(key, value.into())));
        #[cfg(not(feature = "otel"))]
        let _ = (key, value);
    }

    /// Sets an integer attribute.
    pub fn set_int(&self, key: &'static str, value: i64) {
        #[cfg(feature = "otel")]
        self.with(|s| s.set_attribute(opentelemetry::KeyValue::new(key, value)));
        #[cfg(not(feature = "otel"))]
        let _ = (key, value);
    }

    /// Sets a string-array attribute.
    pub fn set_strs(&self, key: &'static str, values: Vec<String>) {
        #[cfg(feature = "otel")]
        self.with(|s| {
            let values = values.into_iter().map(Into::into).collect();
            s.set_attribute(opentelemetry::KeyValue::new(
                key,
                opentelemetry::Value::Array(opentelemetry::Array::String(values)),
            ))
        });
        #[cfg(not(feature = "otel"))]
        let _ = (key, values);
    }

    /// Adds an event with attributes.
    pub fn event(&self, name: &'static str, attributes: Vec<(&'static str, AttrValue)>) {
        #[cfg(feature = "otel")]
        self.with(|s| {
            let attributes = attributes
                .into_iter()
                .map(|(k, v)| match v {
                    AttrValue::Str(v) => opentelemetry::KeyValue::new(k, v),
                    AttrValue::Int(v) => opentelemetry::KeyValue::new(k, v),
                })
                .collect();
            s.add_event(name, attributes)
        });
        #[cfg(not(feature = "otel"))]
        let _ = (name, attributes);
    }

    /// Sets the ERROR status with `description`, and `error.type`.
    pub fn set_error(&self, error_type: &str, description: impl Into<String>) {
        #[cfg(feature = "otel")]
        self.with(|s| {
            s.set_attribute(opentelemetry::KeyValue::new(
                "error.type",
                error_type.to_string(),
            ));
            s.set_status(opentelemetry::trace::Status::error(description.into()))
        });
        #[cfg(not(feature = "otel"))]
        let _ = (error_type, description);
    }

    /// Ends the span now (later calls on it, or on a clone, do nothing).
    pub fn end(&self) {
        #[cfg(feature = "otel")]
        self.with(|s| s.end());
    }

    /// The span's `traceparent` (for a request header or a command's `TRACEPARENT`).
    pub fn traceparent(&self) -> Option<TraceParent> {
        #[cfg(feature = "otel")]
        {
            use opentelemetry::trace::TraceContextExt;
            let cx = self.cx.as_ref()?;
            let span = cx.span();
            let sc = span.span_context();
            if !sc.is_valid() {
                return None;
            }
            Some(TraceParent {
                trace_id: sc.trace_id().to_bytes(),
                span_id: sc.span_id().to_bytes(),
                flags: sc.trace_flags().to_u8(),
            })
        }
        #[cfg(not(feature = "otel"))]
        {
            None
        }
    }
}
