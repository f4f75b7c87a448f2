//! `OutputSchema`: a task's structured-output contract — a JSON Schema its final answer must
//! meet, compiled once, with how often the model may be asked again (`max_output_retries`), and
//! the check of an answer against it ([`OutputSchema::check`]).
//!
//! It owns parsing and bounding the schema, the answer's JSON extraction (the whole text, or
//! one fenced ```` ```json ```` block) and the bounded list of validation errors. It never runs
//! a turn, records or streams anything (the session's machine does, `machine/output_check.rs`),
//! and it never resolves a remote or file `$ref`: the crate is built without those features, so
//! a schema cannot make the server fetch a URL or read a file.

use std::sync::Arc;

use serde_json::Value;

/// The largest schema accepted, in bytes of JSON text.
pub const MAX_SCHEMA_BYTES: usize = 64 * 1024;
/// `max_output_retries` when none is given.
pub const DEFAULT_MAX_OUTPUT_RETRIES: u32 = 2;
/// The largest `max_output_retries` accepted.
pub const MAX_OUTPUT_RETRIES: u32 = 10;
/// How many validation errors are reported (to the model and in the failure) at most.
pub const MAX_REPORTED_ERRORS: usize = 8;
/// How long one reported validation error may be, in characters.
const MAX_ERROR_CHARS: usize = 300;

/// Why a schema (or its retry count) was refused before the task started.
#[derive(Debug, thiserror::Error)]
pub enum OutputSchemaError {
    /// The schema text is over [`MAX_SCHEMA_BYTES`].
    #[error("output_schema is {size} bytes; at most {max} are accepted")]
    TooLarge {
        /// Its size.
        size: usize,
        /// The limit.
        max: usize,
    },
    /// The schema text is not JSON.
    #[error("output_schema is not JSON: {0}")]
    NotJson(String),
    /// The schema is JSON but not a valid JSON Schema (or names a reference that cannot be
    /// resolved locally).
    #[error("output_schema is not a valid JSON Schema: {0}")]
    Invalid(String),
    /// `max_output_retries` is over [`MAX_OUTPUT_RETRIES`].
    #[error("max_output_retries is {0}; at most {MAX_OUTPUT_RETRIES} are accepted")]
    TooManyRetries(u32),
}

/// Why an answer does not meet the schema: the validation errors (or the parse error), bounded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputInvalid {
    /// One line per error (`<json pointer>: <message>`), at most [`MAX_REPORTED_ERRORS`].
    pub errors: Vec<String>,
    /// How many errors there were in all.
    pub total: usize,
}

impl OutputInvalid {
    /// The errors as lines, with a note when some were left out.
    pub fn describe(&self) -> String {
        let mut text = self.errors.join("\n");
        if self.total > self.errors.len() {
            text.push_str(&format!(
                "\n(and {} more errors)",
                self.total - self.errors.len()
            ));
        }
        text
    }
}

/// A compiled output schema and its retry budget (cheap to clone).
#[derive(Clone)]
pub struct OutputSchema {
    inner: Arc<Inner>,
}

struct Inner {
    schema: Value,
    validator: jsonschema::Validator,
    max_retries: u32,
}

impl std::fmt::Debug for OutputSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OutputSchema")
            .field("schema", &self.inner.schema)
            .field("max_retries", &self.inner.max_retries)
            .finish()
    }
}

impl OutputSchema {
    /// Compiles `schema` (JSON text), refusing one over [`MAX_SCHEMA_BYTES`], one that is not
    /// JSON, and one that is not a valid JSON Schema.
    pub fn parse(text: &str, max_retries: Option<u32>) -> Result<OutputSchema, OutputSchemaError> {
        if text.len() > MAX_SCHEMA_BYTES {
            return Err(OutputSchemaError::TooLarge {
                size: text.len(),
                max: MAX_SCHEMA_BYTES,
            });
        }
        let schema: Value =
            serde_json::from_str(text).map_err(|e| OutputSchemaError::NotJson(e.to_string()))?;
        OutputSchema::new(schema, max_retries)
    }

    /// Compiles an already parsed `schema` (bounded like [`OutputSchema::parse`]).
    pub fn new(schema: Value, max_retries: Option<u32>) -> Result<OutputSchema, OutputSchemaError> {
        let size = serde_json::to_string(&schema).map_or(usize::MAX, |s| s.len());
        if size > MAX_SCHEMA_BYTES {
            return Err(OutputSchemaError::TooLarge {
                size,
                max: MAX_SCHEMA_BYTES,
            });
        }
        let max_retries = max_retries.unwrap_or(DEFAULT_MAX_OUTPUT_RETRIES);
        if max_retries > MAX_OUTPUT_RETRIES {
            return Err(OutputSchemaError::TooManyRetries(max_retries));
        }
        if !(schema.is_object() || schema.is_boolean()) {
            return Err(OutputSchemaError::Invalid(
                "a schema must be a JSON object or a boolean".to_string(),
            ));
        }
        let validator = jsonschema::options()
            .build(&schema)
            .map_err(|e| OutputSchemaError::Invalid(bounded(&e.to_string())))?;
        Ok(OutputSchema {
            inner: Arc::new(Inner {
                schema,
                validator,
                max_retries,
            }),
        })
    }

    /// The schema as given.
    pub fn schema(&self) -> &Value {
        &self.inner.schema
    }

    /// How many times the model is asked again after an invalid answer.
    pub fn max_retries(&self) -> u32 {
        self.inner.max_retries
    }

    /// The answer's JSON when it meets the schema: the whole text (trimmed) parsed as JSON, or
    /// else the content of its single fenced ```` ```json ```` (or bare ```` ``` ````) block.
    pub fn check(&self, answer: &str) -> Result<Value, OutputInvalid> {
        let value = extract_json(answer).ok_or_else(|| OutputInvalid {
            errors: vec![
                "the answer is not JSON (send only the JSON value, or one ```json block)"
                    .to_string(),
            ],
            total: 1,
        })?;
        let mut errors = Vec::new();
        let mut total = 0;
        for e in self.inner.validator.iter_errors(&value) {
            total += 1;
            if errors.len() < MAX_REPORTED_ERRORS {
                let path = e.instance_path().to_string();
                let path = if path.is_empty() {
                    "/".to_string()
                } else {
                    path
                };
                errors.push(bounded(&format!("{path}: {e}")));
            }
        }
        if total == 0 {
            Ok(value)
        } else {
            Err(OutputInvalid { errors, total })
        }
    }
}

/// The JSON value of an answer: the whole trimmed text, or the one fenced block's content.
fn extract_json(answer: &str) -> Option<Value> {
    let text = answer.trim();
    if let Ok(v) = serde_json::from_str(text) {
        return Some(v);
    }
    let mut blocks = text.split("```").skip(1).step_by(2);
    let block = blocks.next()?;
    if blocks.next().is_some() {
        return None;
    }
    let body = block
        .strip_prefix("json")
        .or_else(|| block.strip_prefix("JSON"))
        .unwrap_or(block);
    serde_json::from_str(body.trim()).ok()
}

fn bounded(text: &str) -> String {
    if text.chars().count() <= MAX_ERROR_CHARS {
        return text.to_string();
    }
    let mut s: String = text.chars().take(MAX_ERROR_CHARS).collect();
    s.push('…');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> OutputSchema {
        OutputSchema::parse(
            r#"{"type":"object","required":["n"],"properties":{"n":{"type":"integer"}}}"#,
            None,
        )
        .unwrap()
    }

    #[test]
    fn accepts_plain_and_fenced_json() {
        let s = schema();
        assert_eq!(s.check(" {\"n\": 3} ").unwrap()["n"], 3);
        assert_eq!(
            s.check("Here:\n```json\n{\"n\": 4}\n```\n").unwrap()["n"],
            4
        );
    }

    #[test]
    fn reports_bounded_errors() {
        let s = schema();
        let err = s.check("{\"n\": \"x\"}").unwrap_err();
        assert_eq!(err.total, 1);
        assert!(err.errors[0].starts_with("/n: "), "{:?}", err.errors);
        let err = s.check("not json").unwrap_err();
        assert!(err.errors[0].contains("not JSON"));
        let two = "```json\n{\"n\":1}\n``` and ```json\n{\"n\":2}\n```";
        assert!(s.check(two).is_err());
    }

    #[test]
    fn refuses_bad_schemas() {
        assert!(matches!(
            OutputSchema::parse("{", None),
            Err(OutputSchemaError::NotJson(_))
        ));
        assert!(matches!(
            OutputSchema::parse(r#"{"type": 12}"#, None),
            Err(OutputSchemaError::Invalid(_))
        ));
        assert!(matches!(
            OutputSchema::parse(r#"{"$ref": "http://127.0.0.1:9/x.json"}"#, None),
            Err(OutputSchemaError::Invalid(_))
        ));
        let big = format!("{{\"description\": \"{}\"}}", "x".repeat(MAX_SCHEMA_BYTES));
        assert!(matches!(
            OutputSchema::parse(&big, None),
            Err(OutputSchemaError::TooLarge { .. })
        ));
        assert!(matches!(
            OutputSchema::parse("{}", Some(MAX_OUTPUT_RETRIES + 1)),
            Err(OutputSchemaError::TooManyRetries(_))
        ));
    }
}
