//! The read_file builtin (`docs/tools.md#read_file`): a text file as a `cat -n` style window
//! (`offset`/`limit` paging), with the secret-store guard, the missing-path diagnostics, the
//! bounded scan (see `read_file/scan.rs`) and a self-budget that keeps the trailing notes intact.
//!
//! It only reads: it never writes, never follows a URL and never loads a whole file. Its whole
//! output is one [`ToolReply`]; framing and truncation are the close-out's business.

mod error;
mod render;
mod scan;

use std::fs::Metadata;
use std::io::ErrorKind;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use futures::future::BoxFuture;
use serde_json::{Map, Value};

pub use self::error::ReadFileError;
use self::render::{Listing, finish};
use self::scan::ScanLimits;
use super::canonical::canonical_under;
use super::definition::ToolDefinitionConfig;
use super::file_target::{FileKind, TargetError, open_regular_stat};
use super::opened_at::path_of;
use super::path_hint::{normalize_lexically, path_hint};
use super::secret_guard::{secret_by_identity, secret_by_names};
use super::{
    Placement, Tool, ToolContext, ToolReply, ToolResult, args, resolve_path, run_file_work,
};

const TOOL: &str = "read_file";

/// Lines returned per call unless `limit` says otherwise.
pub const DEFAULT_LIMIT: i64 = 2000;

/// Output budget when the definition sets no cap (`maxOutputLength <= 0`).
const DEFAULT_OUTPUT_BUDGET: usize = 64_000;

/// Budget headroom kept for the trailer rows.
const NOTE_RESERVE: usize = 256;

/// Most bytes of a file read in place by the calling task instead of on the blocking pool.
const QUICK_READ_BYTES: u64 = 64 * 1024;

/// The read_file tool: a call whose target is a regular file of at most 64 KiB is read on the
/// calling task (a hop to the blocking pool costs more than the read); the others on the pool.
/// Which one it is comes from the `lstat` that resolving the path makes anyway.
pub struct ReadFile;

impl Tool for ReadFile {
    fn call(&self, ctx: ToolContext, args: Map<String, Value>) -> BoxFuture<'static, ToolResult> {
        Box::pin(async move {
            let workspace = ctx.env.workspace.clone();
            let def = ctx.definition.clone();
            match prepare(&workspace, &args) {
                Ok(call) => {
                    let placement = if call.is_small() {
                        Placement::InPlace
                    } else {
                        Placement::Pool
                    };
                    run_file_work(&ctx, placement, move || {
                        reply_of(read_prepared(&workspace, call, &def))
                    })
                    .await
                }
                Err(e) => {
                    run_file_work(&ctx, Placement::InPlace, move || {
                        ToolReply::fail(e.to_string())
                    })
                    .await
                }
            }
        })
    }
}

/// Runs one read_file call: `file_path` (required), `offset` (1-based, default 1), `limit`
/// (default 2000). Failures are `failed` replies with the documented texts.
pub fn read_file(
    workspace: &Path,
    args: &Map<String, Value>,
    def: &ToolDefinitionConfig,
) -> ToolReply {
    reply_of(prepare(workspace, args).and_then(|call| read_prepared(workspace, call, def)))
}

fn reply_of(result: Result<String, ReadFileError>) -> ToolReply {
    match result {
        Ok(text) => ToolReply::ok(text),
        Err(e) => ToolReply::fail(e.to_string()),
    }
}

/// A call whose arguments are checked, with its path and (when the path is plain under the
/// workspace) its canonical form and the `stat` of the target the proof made on the way.
struct Prepared {
    file_path: String,
    offset: i64,
    limit: i64,
    resolved: PathBuf,
    real: Option<PathBuf>,
    stat: Option<Metadata>,
}

impl Prepared {
    /// A regular file of at most 64 KiB, by the `stat` already made (any doubt answers false).
    fn is_small(&self) -> bool {
        self.stat
            .as_ref()
            .is_some_and(|m| m.is_file() && m.len() <= QUICK_READ_BYTES)
    }
}

/// Checks the arguments and resolves the path, without `realpath` (and without blocking on
/// more than the `lstat` of the target) for a plain path in the workspace.
fn prepare(workspace: &Path, args: &Map<String, Value>) -> Result<Prepared, ReadFileError> {
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

    // The cheap proof that a path plain under the workspace is canonical: one `lstat` per
    // component below it, the last of which is the target's `stat` (not made again to decide
    // where the call runs, nor before opening it).
    let (real, stat) = canonical_under(workspace, &resolved).unzip();
    Ok(Prepared {
        file_path: file_path.to_string(),
        offset,
        limit,
        resolved,
        real,
        stat,
    })
}

/// Opens and reads a prepared call.
fn read_prepared(
    workspace: &Path,
    call: Prepared,
    def: &ToolDefinitionConfig,
) -> Result<String, ReadFileError> {
    let Prepared {
        file_path,
        offset,
        limit,
        resolved,
        real,
        stat,
    } = call;
    let file_path = file_path.as_str();
    // Any other path is resolved here, where blocking is fine (`realpath`).
    let real = real.or_else(|| std::fs::canonicalize(&resolved).ok());
    if let Some(name) = secret_by_names(&resolved, real.as_deref()) {
        return Err(refusal(file_path, name));
    }
    // The file the cheap proof looked at (a regular file reached through real directories).
    let checked = stat.as_ref().map(|m| (m.dev(), m.ino()));
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
    // Decided by the opened file, by where the kernel says it is (a symlink swapped between
    // the look above and the open cannot pass another file off as the one checked) and by its
    // inode (a hard link to a secret store is refused too).
    // When the opened file is the very inode the proof looked at, `real` names it and the
    // kernel need not be asked (no `readlink` on the common path). A file swapped in since is
    // another inode: only a process that could already read it could make one with its content.
    let real = match (checked, real) {
        (Some((dev, ino)), Some(real)) if opened.meta.dev() == dev && opened.meta.ino() == ino => {
            real
        }
        (_, real) => match path_of(&opened.file) {
            Ok(opened_at) => opened_at,
            Err(e) => {
                tracing::debug!(error = %e, "read_file: no path for the opened file");
                real.unwrap_or_else(|| resolved.clone())
            }
        },
    };
    if let Some(name) = secret_by_names(&resolved, Some(&real)) {
        return Err(refusal(file_path, name));
    }
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
    let mut listing = Listing::new(budget.saturating_sub(NOTE_RESERVE).max(1), size);
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
