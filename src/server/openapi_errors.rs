//! The error answers of the OpenAPI document: every `code` the server can answer, with its
//! status and an example message ([`ERROR_CODES`]), and the pass ([`error_responses`]) that
//! turns the codes a route's annotation names into `{"error":{"code","message"}}` responses with
//! one example per code, adding the answers every route shares (the listener, auth, the guard,
//! JSON bodies, a session's lookup).
//!
//! A route's annotation names its own codes in the description of each 4xx/5xx response
//! (`"unknown_session, session_closed"`); this file owns the wording shown for them. It only
//! edits the document; it never builds an [`ApiError`](super::error::ApiError).

use std::collections::BTreeMap;

use utoipa::openapi::path::Operation;
use utoipa::openapi::{OpenApi, Ref, RefOr, Response};

/// One error `code` the server can answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ErrorCode {
    /// The HTTP status it comes with.
    pub status: u16,
    /// The `error.code`.
    pub code: &'static str,
    /// A message the server answers with it (the example's `error.message`).
    pub example: &'static str,
}

const fn code(status: u16, code: &'static str, example: &'static str) -> ErrorCode {
    ErrorCode {
        status,
        code,
        example,
    }
}

/// Every error code of the API (a route's annotation may name only these).
pub const ERROR_CODES: &[ErrorCode] = &[
    code(
        400,
        "bad_json",
        "invalid request body: EOF while parsing an object at line 1 column 9",
    ),
    code(
        400,
        "invalid_request",
        "invalid request body: missing field `text` at line 1 column 2",
    ),
    code(400, "bad_request", "Failed to buffer the request body"),
    code(
        400,
        "invalid_config",
        "config: unknown field `max_turn`, expected one of `max_turns`, …",
    ),
    code(
        400,
        "invalid_workspace",
        "workspace /nope does not exist or is not a directory",
    ),
    code(
        400,
        "invalid_tools_profile",
        "unknown tools profile \"x\" (use penguin or openvaala)",
    ),
    code(
        400,
        "invalid_sandbox",
        "sandbox: unknown variant `all`, expected one of `off`, `read-only`, `workspace-write`",
    ),
    code(
        400,
        "invalid_webhook",
        "webhook: relative URL without a base (expected an http or https URL)",
    ),
    code(
        400,
        "invalid_output_schema",
        "output_schema is not a valid JSON Schema: \"x\" is not valid under any of the schemas",
    ),
    code(
        400,
        "invalid_cursor",
        "cursor is not one this route gave out for this session (not a position of this session); leave it out to start over",
    ),
    code(
        401,
        "unauthorized",
        "missing or wrong bearer token (send Authorization: Bearer <token>)",
    ),
    code(
        401,
        "cluster_unauthorized",
        "a forwarded request needs the cluster's token in Rookery-Cluster-Token (the value of every node's --cluster-token-env variable)",
    ),
    code(
        404,
        "cluster_off",
        "this server is no cluster node (start it with --store postgres://… --node-id NAME --advertise URL --cluster-token-env VAR)",
    ),
    code(
        403,
        "forbidden_host",
        "Host \"evil.example\" is not served here (use the listen address or localhost, or start the server with --allow-host NAME)",
    ),
    code(
        403,
        "forbidden_origin",
        "Origin \"https://evil.example\" may not call this API (start the server with --allow-origin ORIGIN to allow it)",
    ),
    code(
        403,
        "sandbox_not_allowed",
        "sandbox mode off is looser than the server's workspace-write",
    ),
    code(
        403,
        "workspace_not_allowed",
        "workspace /srv/other is outside the workspace roots of principal alice",
    ),
    code(
        403,
        "webhook_not_allowed",
        "webhook origin https://hooks.example is not one of --webhook-allow",
    ),
    code(404, "not_found", "no such route"),
    code(
        404,
        "unknown_session",
        "unknown session session-2026-12-06-05-10-04-3f8a1c2d",
    ),
    code(
        404,
        "session_closed",
        "session session-2026-12-06-05-10-04-3f8a1c2d was closed; POST /v1/sessions/session-2026-12-06-05-10-04-3f8a1c2d/resume reopens it",
    ),
    code(
        404,
        "session_ended",
        "session session-2026-12-06-05-10-04-3f8a1c2d has ended",
    ),
    code(
        404,
        "unknown_queue_entry",
        "no queued task q-2 in session session-2026-12-06-05-10-04-3f8a1c2d",
    ),
    code(
        404,
        "unknown_grant",
        "no grant g-1 in session session-2026-12-06-05-10-04-3f8a1c2d",
    ),
    code(
        404,
        "unknown_approval",
        "no pending approval for tool call call_1 in session session-2026-12-06-05-10-04-3f8a1c2d",
    ),
    code(
        405,
        "method_not_allowed",
        "method not allowed on this route",
    ),
    code(
        408,
        "request_timeout",
        "the request body did not arrive within 30 s",
    ),
    code(
        409,
        "session_busy",
        "session session-2026-12-06-05-10-04-3f8a1c2d is busy: a task is already running",
    ),
    code(
        409,
        "session_locked",
        "session session-2026-12-06-05-10-04-3f8a1c2d is open in another process (pid 4242)",
    ),
    code(
        409,
        "session_failed",
        "session session-2026-12-06-05-10-04-3f8a1c2d cannot go on: its trace failed (No space left on device)",
    ),
    code(
        409,
        "nothing_to_compact",
        "session session-2026-12-06-05-10-04-3f8a1c2d has nothing to compact",
    ),
    code(
        409,
        "compacting",
        "session session-2026-12-06-05-10-04-3f8a1c2d is compacting its context",
    ),
    code(
        409,
        "no_such_task",
        "session session-2026-12-06-05-10-04-3f8a1c2d has no completed task 3",
    ),
    code(
        409,
        "ambiguous_approval",
        "2 pending approvals have tool call id call_1 (ap-1, ap-2); decide one by its approval_id",
    ),
    code(
        413,
        "payload_too_large",
        "request body is larger than 1048576 bytes",
    ),
    code(
        415,
        "unsupported_media_type",
        "a request body must be sent with Content-Type: application/json",
    ),
    code(
        422,
        "prompt_blocked",
        "the prompt was blocked by a UserPromptSubmit hook: no secrets",
    ),
    code(
        422,
        "sandbox_unavailable",
        "the sandbox cannot be enforced here: Landlock is not supported by this kernel",
    ),
    code(
        422,
        "no_model",
        "the server was started without a model: it resumes recorded sessions (each with its recorded model) but cannot create new ones",
    ),
    code(
        422,
        "invalid_recorded_config",
        "the session's recorded config cannot be used: unknown field `max_turn`",
    ),
    code(
        429,
        "quota_exceeded",
        "max_sessions is 4 and 4 are in use: close one first",
    ),
    code(
        429,
        "queue_full",
        "session session-2026-12-06-05-10-04-3f8a1c2d already has 16 queued tasks; wait for one to start or cancel one (DELETE …/queue/{entry_id})",
    ),
    code(
        400,
        "invalid_cron",
        "invalid cron pattern `61 * * * *`: the minute field must be 0-59",
    ),
    code(
        400,
        "unknown_timezone",
        "unknown time zone `Mars/Olympus`: use an IANA name such as `Europe/Paris`",
    ),
    code(404, "schedules_off", "this server runs no schedules"),
    code(
        409,
        "workspace_missing",
        "cannot wake session-2026-12-06-05-10-04-3f8a1c2d on node node-b: its workspace /srv/ws does not exist on this node (every node needs the same workspace paths, e.g. shared storage)",
    ),
    code(
        404,
        "unknown_schedule",
        "session session-2026-12-06-05-10-04-3f8a1c2d has no schedule sch-0f3a",
    ),
    code(
        429,
        "too_many_schedules",
        "session session-2026-12-06-05-10-04-3f8a1c2d already has 32 schedules; delete one first",
    ),
    code(
        503,
        "store_unavailable",
        "the trace store cannot be reached: connection refused; try again",
    ),
    code(500, "internal", "an internal error (see the server log)"),
    code(
        500,
        "unreadable_trace",
        "cannot read the trace /home/u/.rookery/sessions/s.jsonl: Permission denied",
    ),
    code(
        503,
        "session_start_failed",
        "the session could not be started: too many open files",
    ),
    code(
        503,
        "node_unreachable",
        "node b holds this session but cannot be reached at http://10.0.0.2:7878; try again (its lease moves once it expires)",
    ),
    code(
        503,
        "session_elsewhere",
        "session session-2026-12-06-05-10-04-3f8a1c2d moved to node c while this request was forwarded; send it again",
    ),
    code(503, "shutting_down", "the server is shutting down"),
    code(
        503,
        "too_many_sessions",
        "the server already serves its limit of 64 sessions (--max-sessions); close one first",
    ),
    code(
        503,
        "too_many_connections",
        "the server has 10000 connections open (--max-connections); retry later",
    ),
    code(
        503,
        "too_many_stream_tokens",
        "4096 stream tokens are live; try again once some expire",
    ),
    code(
        503,
        "too_many_webhooks",
        "the webhook queue is full; try again later",
    ),
];

/// The entry of `name` in [`ERROR_CODES`].
pub fn error_code(name: &str) -> Option<&'static ErrorCode> {
    ERROR_CODES.iter().find(|c| c.code == name)
}

/// Codes every route can answer (the listener's, before any routing).
const EVERY_ROUTE: &[&str] = &["too_many_connections"];
/// Codes every authenticated route can answer.
const AUTHENTICATED: &[&str] = &["unauthorized", "forbidden_host", "forbidden_origin"];
/// Codes every route of one session (`/v1/sessions/{id}/…`) can answer: a malformed or
/// unknown id, and what waking a hibernated session can fail with.
const OF_A_SESSION: &[&str] = &[
    "invalid_request",
    "unknown_session",
    "session_closed",
    "session_locked",
    "invalid_recorded_config",
    "sandbox_unavailable",
    "internal",
    "session_start_failed",
    "too_many_sessions",
    "store_unavailable",
    "cluster_unauthorized",
    "node_unreachable",
    "session_elsewhere",
    "workspace_missing",
];
/// Codes every route with a JSON request body can answer besides its own.
const WITH_BODY: &[&str] = &[
    "bad_json",
    "invalid_request",
    "bad_request",
    "request_timeout",
    "payload_too_large",
    "unsupported_media_type",
];

/// A route's annotation names a code [`ERROR_CODES`] lacks, or one under another status.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{method} {path}: response {status} names {code:?}, {why}")]
pub struct UnknownErrorCode {
    /// The route's method.
    pub method: String,
    /// The route's path.
    pub path: String,
    /// The response's status.
    pub status: String,
    /// The code named.
    pub code: String,
    /// What is wrong with it.
    pub why: &'static str,
}

/// The codes a response's description names: comma-separated words of `[a-z_]`.
fn named_codes(description: &str) -> Vec<String> {
    description
        .split(',')
        .map(str::trim)
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect()
}

/// The error responses of one operation: `status → codes`, from the annotation plus the shared
/// ones; an unknown code or one under the wrong status is an error.
fn codes_of(
    method: &str,
    path: &str,
    op: &Operation,
) -> Result<BTreeMap<String, Vec<&'static ErrorCode>>, UnknownErrorCode> {
    let mut by_status: BTreeMap<String, Vec<&'static ErrorCode>> = BTreeMap::new();
    let mut add = |status: &str, name: &str| -> Result<(), UnknownErrorCode> {
        let fail = |why| UnknownErrorCode {
            method: method.to_string(),
            path: path.to_string(),
            status: status.to_string(),
            code: name.to_string(),
            why,
        };
        let entry = error_code(name).ok_or_else(|| fail("which is not in ERROR_CODES"))?;
        if entry.status.to_string() != status {
            return Err(fail("which the server answers with another status"));
        }
        let list = by_status.entry(status.to_string()).or_default();
        if !list.contains(&entry) {
            list.push(entry);
        }
        Ok(())
    };
    for (status, response) in &op.responses.responses {
        if !(status.starts_with('4') || status.starts_with('5')) {
            continue;
        }
        if let RefOr::T(r) = response {
            for name in named_codes(&r.description) {
                add(status, &name)?;
            }
        }
    }
    let shared = if path == "/healthz" {
        &[][..]
    } else {
        AUTHENTICATED
    };
    let body = if op.request_body.is_some() {
        WITH_BODY
    } else {
        &[][..]
    };
    let session = if path.starts_with("/v1/sessions/{id}") {
        OF_A_SESSION
    } else {
        &[][..]
    };
    let every = EVERY_ROUTE.iter().chain(shared).chain(body).chain(session);
    for name in every {
        if let Some(c) = error_code(name) {
            add(&c.status.to_string(), name)?;
        }
    }
    Ok(by_status)
}

/// The response of `codes` (all of one status): the error body's schema and an example each.
fn error_response(codes: &[&'static ErrorCode]) -> Response {
    let description = codes
        .iter()
        .map(|c| format!("`{}`", c.code))
        .collect::<Vec<_>>()
        .join(", ");
    let examples = codes.iter().map(|c| {
        let value = serde_json::json!({"error": {"code": c.code, "message": c.example}});
        (
            c.code,
            utoipa::openapi::example::ExampleBuilder::new()
                .value(Some(value))
                .build(),
        )
    });
    let content = utoipa::openapi::ContentBuilder::new()
        .schema(Some(Ref::from_schema_name("ErrorBody")))
        .examples_from_iter(examples)
        .build();
    let mut response = Response::new(format!("An error: {description}."));
    response
        .content
        .insert("application/json".to_string(), content);
    response
}

/// The operations of a path item with their method names.
pub fn operations_mut(
    item: &mut utoipa::openapi::PathItem,
) -> impl Iterator<Item = (&'static str, &mut Operation)> {
    [
        ("get", item.get.as_mut()),
        ("put", item.put.as_mut()),
        ("post", item.post.as_mut()),
        ("delete", item.delete.as_mut()),
        ("patch", item.patch.as_mut()),
        ("head", item.head.as_mut()),
        ("options", item.options.as_mut()),
        ("trace", item.trace.as_mut()),
    ]
    .into_iter()
    .filter_map(|(m, op)| op.map(|op| (m, op)))
}

/// Rewrites every operation's 4xx/5xx responses in the API's error shape (see the module doc).
pub fn error_responses(doc: &mut OpenApi) -> Result<(), UnknownErrorCode> {
    for (path, item) in doc.paths.paths.iter_mut() {
        for (method, op) in operations_mut(item) {
            let codes = codes_of(method, path, op)?;
            for (status, list) in codes {
                op.responses
                    .responses
                    .insert(status, RefOr::T(error_response(&list)));
            }
        }
    }
    Ok(())
}
