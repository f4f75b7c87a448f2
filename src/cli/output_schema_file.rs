//! `rookery run --output-schema FILE [--max-output-retries N]`: reads and compiles the schema
//! before anything starts, so a missing, oversized or invalid schema is a usage error (exit 2).
//!
//! It only loads the file; the check of the answer is the session's.

use std::io::Read;
use std::path::Path;

use super::error::CliError;
use crate::actors::session_api::{MAX_SCHEMA_BYTES, OutputSchema};

/// The compiled schema of `path`, with `max_retries` (default 2), or a usage error naming the
/// file and what is wrong with it.
pub fn load(path: &Path, max_retries: Option<u32>) -> Result<OutputSchema, CliError> {
    let shown = path.display();
    let file = std::fs::File::open(path)
        .map_err(|e| CliError::Usage(format!("--output-schema {shown}: cannot open: {e}")))?;
    let mut text = String::new();
    // One byte over the limit is enough to refuse the file without reading all of it.
    file.take(MAX_SCHEMA_BYTES as u64 + 1)
        .read_to_string(&mut text)
        .map_err(|e| CliError::Usage(format!("--output-schema {shown}: cannot read: {e}")))?;
    OutputSchema::parse(&text, max_retries)
        .map_err(|e| CliError::Usage(format!("--output-schema {shown}: {e}")))
}
