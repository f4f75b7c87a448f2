//! The `output_schema` and `max_output_retries` fields of `POST /v1/sessions/{id}/tasks`:
//! compiled before the task starts, so an invalid, oversized or unresolvable schema is a 400
//! `invalid_output_schema` and never reaches a session.
//!
//! It only turns the request's fields into an [`OutputSchema`]; the answer is checked by the
//! session, and nothing here fetches a URL (`$ref`s to other documents are refused).

use serde_json::Value;

use super::error::ApiError;
use crate::actors::session_api::{OutputSchema, SessionHandle};
use crate::error::RookeryError;

/// The task's schema, if the request names one; `max_output_retries` alone is a 400.
pub fn from_request(
    output_schema: Option<Value>,
    max_output_retries: Option<u32>,
) -> Result<Option<OutputSchema>, ApiError> {
    match (output_schema, max_output_retries) {
        (None, None) => Ok(None),
        (None, Some(_)) => Err(ApiError::bad_request(
            "invalid_request",
            "max_output_retries needs an output_schema",
        )),
        (Some(schema), retries) => OutputSchema::new(schema, retries)
            .map(Some)
            .map_err(|e| ApiError::bad_request("invalid_output_schema", e.to_string())),
    }
}

/// Starts the task, with its schema when it has one.
pub async fn start(
    handle: &SessionHandle,
    text: &str,
    schema: Option<OutputSchema>,
) -> Result<(), RookeryError> {
    match schema {
        Some(schema) => handle.start_structured_task(text, schema).await,
        None => handle.start_task(text).await,
    }
}

/// A steer carries no schema: either field is a 400.
pub fn refuse_on_steer(
    output_schema: &Option<Value>,
    max_output_retries: Option<u32>,
) -> Result<(), ApiError> {
    if output_schema.is_some() || max_output_retries.is_some() {
        return Err(ApiError::bad_request(
            "invalid_request",
            "a steer cannot carry an output_schema; start a task with one",
        ));
    }
    Ok(())
}
