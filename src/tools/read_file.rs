//! The read_file builtin (`docs/tools.md#read_file`): a text file as a `cat -n` style window
//! (`offset`/`limit` paging), with the secret-store guard, the missing-path diagnostics, the
//! bounded scan (see `read_file/scan.rs`) and a self-budget that keeps the trailing notes intact.
//!
//! It only reads: it never writes, never follows a URL and never loads a whole file. Its whole
//! output is one [`ToolReply`]; framing and truncation are the close-out's business.

mod error;
mod render;
mod scan;

use std::io::ErrorKind;
use std::path::Path;

use serde_json::{Map, Value};

pub use self::error::ReadFileError;
use self::render::{Listing, finish};
use self::scan::ScanLimits;
use super::canonical::canonical_with_stat;
use super::file_target::{FileKind, TargetError, open_regular_stat};
use super::path_hint::{normalize_lexically, path_hint};
use super::secret_guard::{secret_by_identity, secret_by_names};
use super::{ToolDefinitionConfig, ToolReply, args, resolve_path};

const TOOL: &str = "read_file";

/// Lines returned per call unless `limit` says otherwise.
pub const DEFAULT_LIMIT: i64 = 2000;

/// Output budget when the definition sets no cap (`maxOutputLength <= 0`).
const DEFAULT_OUTPUT_BUDGET: usize = 64_000;

/// Budget headroom kept for the trailer rows.
const NOTE_RESERVE: usize = 256;

/// Most bytes of a file read in place by the calling task instead of on the blocking pool.
const QUICK_READ_BYTES: u64 = 64 * 1024;

/// True when `file_path` names a regular file of at most 64 KiB (one `stat`): reading it costs
/// less than handing the call to the blocking pool. Any doubt answers false.
pub fn is_small_file(workspace: &Path, args: &Map<String, Value>) -> bool {
    let Some(file_path) = args.get("file_path").and_then(Value::as_str) else {
        return false;
    };
    if file_path.is_empty() {
        return false;
    }
    let resolved = normalize_lexically(&resolve_path(workspace, file_path));
    std::fs::metadata(resolved).is_ok_and(|m| m.is_file() && m.len() <= QUICK_READ_BYTES)
}

/// Runs one read_file call: `file_path` (required), `offset` (1-based, default 1), `limit`
/// (default 2000). Failures are `failed` replies with the documented texts.
pub fn read_file(
    workspace: &Path,
    args: &Map<String, Value>,
    def: &ToolDefinitionConfig,
) -> ToolReply {
    match read_file_inner(workspace, args, def) {
        Ok(text) => ToolReply::ok(text),
        Err(e) => ToolReply::fail(e.to_string()),
    }
}

fn read_file_inner(
    workspace: &Path,
    args: &Map<String, Value>,
    def: &ToolDefinitionConfig,
) -> Result<String, ReadFileError> {
    let file_path =
        match args::require_str(args, "file_path", TOOL).map_err(ReadFileError::Argument)? {
            "" => {
                return Err(ReadFileError::Argument(args::MissingArg::new(
                    "file_path",
                    TOOL,
                )));
            }
            p => p,
        };
    let offset = match args::lenient_integer(args, "offset") {
        Ok(n) => n.unwrap_or(1).max(1),
        Err(()) => {
            return Err(ReadFileError::InvalidOffset {
                got: json_of(args.get("offset")),
            });
        }
    };
    let limit = match args::lenient_integer(args, "limit") {
        Ok(n) if n.unwrap_or(DEFAULT_LIMIT) > 0 => n.unwrap_or(DEFAULT_LIMIT),
        _ => {
            return Err(ReadFileError::InvalidLimit {
                got: json_of(args.get("limit")),
            });
        }
    };
    let resolved = normalize_lexically(&resolve_path(workspace, file_path));
    tracing::debug!(path = %resolved.display(), offset, limit, "read_file");

    // Resolved once for the whole call (no `realpath` for a plain path in the workspace).
    // The proof's `lstat` of a plain target is its `stat`: not made twice.
    let (real, stat) = canonical_with_stat(workspace, &resolved);
    if let Some(name) = secret_by_names(&resolved, real.as_deref()) {
        return Err(refusal(file_path, name));
    }

    let opened = match open_regular_stat(&resolved, stat) {
        Ok(opened) => opened,
        Err(TargetError::Io(e))
            if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) =>
        {
            return Err(ReadFileError::NotFound {
                file_path: file_path.to_string(),
                workspace: workspace.to_path_buf(),
                hint: path_hint(&resolved),
                source: e,
            });
        }
        Err(TargetError::Io(source)) => {
            return Err(ReadFileError::Io {
                file_path: file_path.to_string(),
                source,
            });
        }
        Err(TargetError::NotRegular(FileKind::Directory)) => {
            return Err(ReadFileError::Directory {
                file_path: file_path.to_string(),
            });
        }
        Err(source @ TargetError::NotRegular(_)) => {
            return Err(ReadFileError::NotRegular {
                file_path: file_path.to_string(),
                source,
            });
        }
    };
    // Decided by the opened file: a hard link to a secret store is refused too.
    let real = real.unwrap_or_else(|| resolved.clone());
    if let Some(name) = secret_by_identity(&real, &opened.meta, workspace) {
        return Err(refusal(file_path, name));
    }
    // The size does not bound the scan: procfs and sysfs files report 0 (or a page) and still
    // have content, so a file is read until EOF (within the scan cap). It only spares the last
    // `read` of a file that is not growing: a short read that reaches the size is the end.
    let size = opened.meta.len();

    let budget = usize::try_from(def.max_output_length)
        .ok()
        .filter(|b| *b > 0)
        .unwrap_or(DEFAULT_OUTPUT_BUDGET);
    let mut listing = Listing::new(budget.saturating_sub(NOTE_RESERVE).max(1));
    // Both are >= 1 here, so the conversions and the sum cannot fail.
    let first = u64::try_from(offset).unwrap_or(1);
    let last = first.saturating_add(u64::try_from(limit - 1).unwrap_or(0));
    let mut file = opened.file;
    let scanned = scan::scan(
        &mut file,
        first,
        last,
        ScanLimits {
            end_at: (size > 0).then_some(size),
            ..ScanLimits::default()
        },
        &mut |n, bytes, cut| listing.push(n, bytes, cut),
    );
    let outcome = scanned.map_err(|source| {
        let file_path = file_path.to_string();
        match source.kind() {
            // Opened with O_NONBLOCK: a file that has nothing to give yet (e.g. /proc/kmsg).
            ErrorKind::WouldBlock => ReadFileError::WouldBlock { file_path, source },
            _ => ReadFileError::Io { file_path, source },
        }
    })?;
    if outcome.total_known && outcome.total == 0 && !outcome.binary {
        return Ok(format!("\"{file_path}\" is an empty file (0 lines)."));
    }
    finish(file_path, offset, limit, &outcome, listing)
}

/// The refusal of a secret store.
fn refusal(file_path: &str, name: &'static str) -> ReadFileError {
    ReadFileError::Secret {
        file_path: file_path.to_string(),
        name,
    }
}

/// The argument as JSON text, as the error texts quote it.
fn json_of(value: Option<&Value>) -> String {
    value.map_or_else(|| "undefined".to_string(), Value::to_string)
}

#[cfg(test)]
mod tests;
