//! The OpenAPI 3.1 document of the HTTP API, assembled from the handlers' `#[utoipa::path]`
//! annotations and the request and answer types (`openapi_shapes.rs`), with the error answers
//! filled in by `openapi_errors.rs`: served at `GET /v1/openapi.json` and printed by
//! `rookery serve --print-openapi`.
//!
//! This file only assembles and serves the document; what a route takes and answers is said
//! next to its handler. `tests/suite/openapi.rs` checks that every route of the router is in it
//! and that real answers match it.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use utoipa::openapi::schema::{AllOfBuilder, ObjectBuilder, Type};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{OpenApi as Document, Server};
use utoipa::{Modify, OpenApi};

use super::error::ApiError;
use super::openapi_errors::{UnknownErrorCode, error_responses};
use super::openapi_shapes::{ErrorBody, StreamEvent};

/// The name of the bearer scheme in the document.
pub const BEARER: &str = "bearer";

/// Adds the bearer token scheme (the token of `--token-env`, the generated token file, a
/// principal's token of `--auth`, or a JWT) under [`BEARER`].
struct BearerScheme;

impl Modify for BearerScheme {
    fn modify(&self, doc: &mut Document) {
        let components = doc.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            BEARER,
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "The server's token (`--token-env`, or the generated `serve.token` under \
                         the home), a principal's token of `--auth`, or a JWT it accepts. \
                         `GET …/events` also takes `?stream_token=` from \
                         `POST …/stream_token`.",
                    ))
                    .build(),
            ),
        );
    }
}

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Rookery",
        description = "The HTTP API of `rookery serve`: sessions of LLM agents, their tasks, \
                       event streams (SSE), approvals and grants. Every error answers \
                       `{\"error\":{\"code\",\"message\"}}`; a path the API does not have answers \
                       404 `not_found`, a method a path does not take 405 \
                       `method_not_allowed`. See `docs/guide/serve.md` and `docs/guide/openapi.md`.",
        license(name = "MIT OR Apache-2.0", identifier = "MIT OR Apache-2.0")
    ),
    paths(
        super::routes::healthz,
        super::routes::metrics,
        serve,
        super::create_route::create_session,
        super::session_list::list,
        super::routes::get_session,
        super::routes::delete_session,
        super::routes::resume,
        super::fork::fork,
        super::rollback::rollback,
        super::compact::compact,
        super::routes::start_task,
        super::routes::cancel_queued,
        super::routes::steer,
        super::routes::abort,
        super::routes::events,
        super::messages::messages,
        super::stream_token_route::issue,
        super::approval_routes::list_approvals,
        super::approval_routes::decide_approval,
        super::approval_routes::set_approval_mode,
        super::grants::list,
        super::grants::revoke,
        super::schedule_routes::create,
        super::schedule_routes::list,
        super::schedule_routes::delete,
        super::trace_download::download,
        super::console::index,
        super::console::file,
    ),
    components(schemas(ErrorBody, StreamEvent)),
    modifiers(&BearerScheme),
    security(("bearer" = [])),
    tags(
        (name = "sessions", description = "Create, list, read, close, resume, fork and roll back sessions."),
        (name = "tasks", description = "Start, queue, steer, abort and compact the work of a session."),
        (name = "events", description = "A session's event stream and its conversation."),
        (name = "approvals", description = "Tool calls waiting for an answer, the approval mode and grants."),
        (name = "schedules", description = "A session's tasks on a cron pattern."),
        (name = "server", description = "Health, metrics and this document."),
        (name = "console", description = "The web console's files (no token: the page signs in)."),
    )
)]
struct ApiDoc;

/// Why the document cannot be had (a fault of the code, never of a request).
#[derive(Debug, thiserror::Error)]
pub enum OpenApiError {
    /// An annotation names an error code wrongly.
    #[error(transparent)]
    Code(#[from] UnknownErrorCode),
    /// The document does not serialize.
    #[error("the document does not serialize: {0}")]
    Serialize(#[from] serde_json::Error),
}

/// The document: the derive's paths and types, with every 4xx/5xx answer in the error shape
/// with an example per code, and links from a created session to its operations.
pub fn document() -> Result<Value, OpenApiError> {
    let mut doc = ApiDoc::openapi();
    #[cfg(feature = "postgres")]
    doc.merge(super::cluster_route::ClusterDoc::openapi());
    doc.info.version = env!("CARGO_PKG_VERSION").to_string();
    doc.servers = Some(vec![Server::new("/")]);
    require_workspace_on_create(&mut doc);
    error_responses(&mut doc)?;
    let mut json = serde_json::to_value(&doc)?;
    link_created_sessions(&mut json);
    Ok(json)
}

/// Links from the `session_id` a create or a fork answers to every operation on one session
/// (`{id}` and no other path parameter), so a client, or a fuzzer, can follow them. Written
/// into the JSON: utoipa 5's `Link` serializes its fields in snake case (`operation_id`).
fn link_created_sessions(doc: &mut Value) {
    let Some(paths) = doc.get_mut("paths").and_then(Value::as_object_mut) else {
        return;
    };
    let mut links = serde_json::Map::new();
    for (path, item) in paths.iter() {
        if !path.starts_with("/v1/sessions/{id}") || path.matches('{').count() != 1 {
            continue;
        }
        let ops = item.as_object().into_iter().flat_map(|item| item.values());
        for id in ops.filter_map(|op| op["operationId"].as_str()) {
            let link =
                json!({"operationId": id, "parameters": {"id": "$response.body#/session_id"}});
            links.insert(id.to_string(), link);
        }
    }
    for path in ["/v1/sessions", "/v1/sessions/{id}/fork"] {
        let created = paths
            .get_mut(path)
            .and_then(|item| item.get_mut("post"))
            .and_then(|op| op.get_mut("responses"))
            .and_then(|responses| responses.get_mut("201"))
            .and_then(Value::as_object_mut);
        if let Some(created) = created {
            created.insert("links".to_string(), Value::Object(links.clone()));
        }
    }
}

/// `POST /v1/sessions` takes the body of a resume with its `workspace` required.
fn require_workspace_on_create(doc: &mut Document) {
    let create = doc
        .paths
        .paths
        .get_mut("/v1/sessions")
        .and_then(|item| item.post.as_mut())
        .and_then(|op| op.request_body.as_mut());
    for content in create
        .into_iter()
        .flat_map(|body| body.content.values_mut())
    {
        if let Some(schema) = content.schema.take() {
            let required = ObjectBuilder::new()
                .property("workspace", ObjectBuilder::new().schema_type(Type::String))
                .required("workspace");
            content.schema = Some(AllOfBuilder::new().item(schema).item(required).into());
        }
    }
}

/// The document as pretty JSON (what `--print-openapi` prints).
pub fn document_json() -> Result<String, OpenApiError> {
    Ok(serde_json::to_string_pretty(&document()?)?)
}

/// `GET /v1/openapi.json`.
#[utoipa::path(
    get,
    path = "/v1/openapi.json",
    tag = "server",
    operation_id = "openapi_document",
    responses(
        (status = 200, description = "This document.", content_type = "application/json", body = Object),
        (status = 500, description = "internal"),
    )
)]
pub async fn serve() -> Response {
    match document() {
        Ok(doc) => (StatusCode::OK, Json(doc)).into_response(),
        Err(e) => {
            ApiError::internal(format!("the OpenAPI document cannot be built: {e}")).into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_named_code_is_known() {
        let doc = document().unwrap();
        let json = doc;
        assert_eq!(json["openapi"], "3.1.0");
        let op = &json["paths"]["/v1/sessions/{id}"]["get"];
        let not_found = &op["responses"]["404"]["content"]["application/json"];
        assert_eq!(
            not_found["examples"]["unknown_session"]["value"]["error"]["code"],
            "unknown_session"
        );
        assert_eq!(
            not_found["schema"]["$ref"],
            "#/components/schemas/ErrorBody"
        );
        assert!(op["responses"]["401"].is_object(), "{op}");
        let create = &json["paths"]["/v1/sessions"]["post"]["requestBody"]["content"];
        assert_eq!(
            create["application/json"]["schema"]["allOf"][1]["required"],
            serde_json::json!(["workspace"])
        );
    }

    #[test]
    fn operation_ids_are_unique_and_creates_link_to_their_session() {
        let json = document().unwrap();
        let mut ids = std::collections::BTreeSet::new();
        for item in json["paths"].as_object().unwrap().values() {
            for op in item.as_object().unwrap().values() {
                let id = op["operationId"].as_str().unwrap();
                assert!(ids.insert(id.to_string()), "operationId {id} twice");
            }
        }
        let links = &json["paths"]["/v1/sessions"]["post"]["responses"]["201"]["links"];
        assert_eq!(
            links["get_session"]["parameters"]["id"],
            "$response.body#/session_id"
        );
        assert!(links["start_task"].is_object(), "{links}");
        assert!(links.get("cancel_queued").is_none(), "{links}");
    }

    /// The document with `description` as the answer `status` of `GET /healthz`.
    fn naming(status: &str, description: &str) -> Document {
        let mut doc = ApiDoc::openapi();
        let item = doc.paths.paths.get_mut("/healthz").unwrap();
        item.get.as_mut().unwrap().responses.responses.insert(
            status.into(),
            utoipa::openapi::RefOr::T(utoipa::openapi::Response::new(description)),
        );
        doc
    }

    #[test]
    fn an_unknown_code_is_refused() {
        let e = error_responses(&mut naming("404", "no_such_code")).unwrap_err();
        assert_eq!(
            (e.code.as_str(), e.status.as_str()),
            ("no_such_code", "404")
        );
        assert_eq!(e.why, "which is not in ERROR_CODES");
    }

    #[test]
    fn a_code_under_another_status_is_refused() {
        let e = error_responses(&mut naming("400", "unknown_session")).unwrap_err();
        assert_eq!(e.why, "which the server answers with another status");
    }
}
