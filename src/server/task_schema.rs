//! The `output_schema` and `max_output_retries` fields of `POST /v1/sessions/{id}/tasks`:
//! compiled before the task starts, so an invalid, oversized or unresolvable schema is a 400
//! `invalid_output_schema` and never reaches a session.
//!
//! It only turns the request's fields into an [`OutputSchema`]; the answer is checked by the
//! session, and nothing here fetches a URL (`$ref`s to other documents are refused).

use serde_json::Value;

use super::error::ApiError;
use crate::actors::session_api::OutputSchema;

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
