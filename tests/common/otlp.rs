//! A loopback OTLP receiver (HTTP/protobuf or gRPC) for the telemetry tests: it decodes what the
//! `rookery` binary exports with the official protobuf definitions (`opentelemetry-proto`)
//! and keeps the spans and metric names. It can also refuse (503) or hang (never answer), to
//! show that a bad collector never slows a session.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::trace::v1::status::StatusCode as SpanStatus;
use prost::Message;

/// How the receiver answers.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Behaviour {
    /// 200 with an empty answer.
    Accept,
    /// 503 to everything.
    Refuse,
    /// Reads the request and never answers.
    Hang,
}

/// One received span, flattened.
#[derive(Clone, Debug)]
pub struct Span {
    pub name: String,
    pub trace_id: String,
    pub span_id: String,
    pub parent: String,
    pub attrs: HashMap<String, String>,
    pub events: Vec<(String, HashMap<String, String>)>,
    pub error: bool,
    pub status_message: String,
    pub resource: HashMap<String, String>,
}

#[derive(Default)]
pub struct Received {
    pub spans: Mutex<Vec<Span>>,
    pub metrics: Mutex<Vec<String>>,
    /// The integer gauge points: (metric name, its attributes as `k=v` joined by `,`, value).
    pub gauge_points: Mutex<Vec<(String, String, i64)>>,
    pub requests: Mutex<usize>,
}

pub struct Receiver {
    pub endpoint: String,
    pub received: Arc<Received>,
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn text(v: &Option<opentelemetry_proto::tonic::common::v1::AnyValue>) -> String {
    match v.as_ref().and_then(|v| v.value.as_ref()) {
        Some(AnyValue::StringValue(s)) => s.clone(),
        Some(AnyValue::IntValue(i)) => i.to_string(),
        Some(AnyValue::BoolValue(b)) => b.to_string(),
        Some(AnyValue::DoubleValue(d)) => d.to_string(),
        Some(AnyValue::ArrayValue(a)) => {
            let items: Vec<String> = a.values.iter().map(|v| text(&Some(v.clone()))).collect();
            format!("[{}]", items.join(","))
        }
        Some(other) => format!("{other:?}"),
        None => String::new(),
    }
}

fn attrs(kvs: &[KeyValue]) -> HashMap<String, String> {
    kvs.iter()
        .map(|kv| (kv.key.clone(), text(&kv.value)))
        .collect()
}

impl Received {
    fn take_traces(&self, body: &[u8]) {
        let req = ExportTraceServiceRequest::decode(body).expect("an OTLP trace request");
        let mut out = self.spans.lock().unwrap();
        for rs in req.resource_spans {
            let resource = rs
                .resource
                .as_ref()
                .map(|r| attrs(&r.attributes))
                .unwrap_or_default();
            for ss in rs.scope_spans {
                for s in ss.spans {
                    let status = s.status.clone().unwrap_or_default();
                    out.push(Span {
                        name: s.name.clone(),
                        trace_id: hex(&s.trace_id),
                        span_id: hex(&s.span_id),
                        parent: hex(&s.parent_span_id),
                        attrs: attrs(&s.attributes),
                        events: s
                            .events
                            .iter()
                            .map(|e| (e.name.clone(), attrs(&e.attributes)))
                            .collect(),
                        error: status.code == SpanStatus::Error as i32,
                        status_message: status.message,
                        resource: resource.clone(),
                    });
                }
            }
        }
    }

    fn take_metrics(&self, body: &[u8]) {
        let req = ExportMetricsServiceRequest::decode(body).expect("an OTLP metrics request");
        use opentelemetry_proto::tonic::metrics::v1::metric::Data;
        use opentelemetry_proto::tonic::metrics::v1::number_data_point::Value as Number;
        let mut out = self.metrics.lock().unwrap();
        let mut points = self.gauge_points.lock().unwrap();
        for rm in req.resource_metrics {
            for sm in rm.scope_metrics {
                out.extend(sm.metrics.iter().map(|m| m.name.clone()));
                for m in &sm.metrics {
                    let Some(Data::Gauge(g)) = &m.data else {
                        continue;
                    };
                    for p in &g.data_points {
                        let Some(Number::AsInt(v)) = p.value else {
                            continue;
                        };
                        let attrs: Vec<String> = p
                            .attributes
                            .iter()
                            .map(|kv| {
                                let v = match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                                    Some(AnyValue::StringValue(s)) => s.clone(),
                                    other => format!("{other:?}"),
                                };
                                format!("{}={v}", kv.key)
                            })
                            .collect();
                        points.push((m.name.clone(), attrs.join(","), v));
                    }
                }
            }
        }
    }
}

struct Shared {
    received: Arc<Received>,
    behaviour: Behaviour,
}

async fn answer(shared: &Shared) -> Option<Response> {
    *shared.received.requests.lock().unwrap() += 1;
    match shared.behaviour {
        Behaviour::Accept => None,
        Behaviour::Refuse => Some(StatusCode::SERVICE_UNAVAILABLE.into_response()),
        Behaviour::Hang => {
            futures::future::pending::<()>().await;
            None
        }
    }
}

async fn traces(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
    if let Some(r) = answer(&shared).await {
        return r;
    }
    shared.received.take_traces(&body);
    (
        [("content-type", "application/x-protobuf")],
        Vec::<u8>::new(),
    )
        .into_response()
}

async fn metrics(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
    if let Some(r) = answer(&shared).await {
        return r;
    }
    shared.received.take_metrics(&body);
    (
        [("content-type", "application/x-protobuf")],
        Vec::<u8>::new(),
    )
        .into_response()
}

impl Receiver {
    /// A receiver on a free loopback port; `endpoint` is its base URL (for
    /// `OTEL_EXPORTER_OTLP_ENDPOINT`).
    pub async fn start(behaviour: Behaviour) -> Receiver {
        let received = Arc::new(Received::default());
        let shared = Arc::new(Shared {
            received: received.clone(),
            behaviour,
        });
        let app = Router::new()
            .route("/v1/traces", post(traces))
            .route("/v1/metrics", post(metrics))
            .with_state(shared);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Receiver {
            endpoint: format!("http://{addr}"),
            received,
        }
    }

    pub fn spans(&self) -> Vec<Span> {
        self.received.spans.lock().unwrap().clone()
    }

    pub fn metric_names(&self) -> Vec<String> {
        self.received.metrics.lock().unwrap().clone()
    }

    pub fn gauge_points(&self) -> Vec<(String, String, i64)> {
        self.received.gauge_points.lock().unwrap().clone()
    }
}

struct Grpc(Arc<Received>);

#[tonic::async_trait]
impl opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::TraceService for Grpc {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<
        tonic::Response<
            opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceResponse,
        >,
        tonic::Status,
    > {
        *self.0.requests.lock().unwrap() += 1;
        self.0.take_traces(&request.into_inner().encode_to_vec());
        Ok(tonic::Response::new(Default::default()))
    }
}

#[tonic::async_trait]
impl opentelemetry_proto::tonic::collector::metrics::v1::metrics_service_server::MetricsService
    for Grpc
{
    async fn export(
        &self,
        request: tonic::Request<ExportMetricsServiceRequest>,
    ) -> Result<
        tonic::Response<
            opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceResponse,
        >,
        tonic::Status,
    > {
        *self.0.requests.lock().unwrap() += 1;
        self.0.take_metrics(&request.into_inner().encode_to_vec());
        Ok(tonic::Response::new(Default::default()))
    }
}

impl Receiver {
    /// A gRPC receiver (`OTEL_EXPORTER_OTLP_PROTOCOL=grpc`) on a free loopback port.
    pub async fn start_grpc() -> Receiver {
        use opentelemetry_proto::tonic::collector::metrics::v1::metrics_service_server::MetricsServiceServer;
        use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::TraceServiceServer;
        let received = Arc::new(Received::default());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let incoming = tonic::transport::server::TcpIncoming::from(listener);
        let (traces, metrics) = (Grpc(received.clone()), Grpc(received.clone()));
        tokio::spawn(async move {
            tonic::transport::Server::builder()
                .add_service(TraceServiceServer::new(traces))
                .add_service(MetricsServiceServer::new(metrics))
                .serve_with_incoming(incoming)
                .await
                .unwrap();
        });
        Receiver {
            endpoint: format!("http://{addr}"),
            received,
        }
    }
}
