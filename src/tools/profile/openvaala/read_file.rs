//! The openvaala profile's `read_file` (`docs/tools-openvaala.md#read_file`): `path`, `offset`
//! (1-based, default 1), `limit` (1..2000, default 200). Text files come back as numbered lines,
//! at most 64 KB of whole lines per call, then where to continue; PNG, JPEG, GIF and WebP
//! (sniffed by content) come back as images; the `AGENTS.md` files between the workspace root
//! and the file's directory come along the first time the session meets them.
//!
//! A local tool: it reads files on the blocking pool and holds the session's "seen" set only
//! through the call's [`SessionScope`](super::session_scope::SessionScope). It never writes,
//! and opens nothing its `guard` module refuses (a path leading out of the workspace, a secret
//! store), an `AGENTS.md` included.

// Open to `tools` for the profile's tests of the tool as the profile defines it.
pub(in crate::tools) mod agents;
mod guard;
mod image;
#[cfg(test)]
mod tests;
mod text;

use std::path::{Component, Path, PathBuf};

use futures::future::BoxFuture;
use serde_json::{Map, Value};

use super::args::{finite_number, require_nonempty_str};
use super::canonical::under_workspace;
use super::{Tool, ToolContext, ToolResult};

/// Default of `tools.max_image_kb`.
pub const DEFAULT_MAX_IMAGE_KB: u64 = 500;
/// Bytes of numbered lines one result holds at most ("64 KB").
pub const MAX_RESULT_BYTES: usize = 65_536;
/// Default and largest `limit`.
pub const DEFAULT_LIMIT: u64 = 200;
/// Largest `limit`.
pub const MAX_LIMIT: u64 = 2000;

const NAME: &str = "read_file";

/// The openvaala read_file tool.
#[derive(Debug, Clone, Copy)]
pub struct VaalaReadFile {
    vision: bool,
    max_image_kb: u64,
}

impl VaalaReadFile {
    /// `vision`: the model takes images; `max_image_kb`: larger images are re-encoded.
    pub fn new(vision: bool, max_image_kb: u64) -> Self {
        VaalaReadFile {
            vision,
            max_image_kb: max_image_kb.max(1),
        }
    }
}

/// The validated arguments of one call.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadArgs {
    /// The path as the call gave it.
    pub path: String,
    /// The first line to read (1-based).
    pub offset: u64,
    /// Lines to read at most.
    pub limit: u64,
}

/// Parses the arguments: `path` required; `offset` at least 1 (default 1); `limit` clamped
/// into 1..=2000 (default 200). Fractions are cut; non-numbers count as absent.
pub fn parse_args(args: &Map<String, Value>) -> Result<ReadArgs, crate::tools::args::MissingArg> {
    let path = require_nonempty_str(args, "path", NAME)?.to_string();
    let whole = |v: f64| v.floor().clamp(1.0, u64::MAX as f64) as u64;
    let offset = finite_number(args, "offset").map_or(1, whole);
    let limit = finite_number(args, "limit")
        .map_or(DEFAULT_LIMIT, whole)
        .min(MAX_LIMIT);
    Ok(ReadArgs {
        path,
        offset,
        limit,
    })
}

/// `path` with `.` and `..` resolved lexically (no file system access).
pub fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// A path that resolves outside the workspace (as the call gave it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Path \"{path}\" is outside the workspace {}.", .workspace.display())]
pub struct OutsideWorkspace {
    /// The path as the call gave it.
    pub path: String,
    /// The workspace.
    pub workspace: PathBuf,
}

/// The absolute path of `path` under `workspace` (relative to it, or absolute through the
/// workspace under any of its names, see [`under_workspace`]), or the error naming it and the
/// workspace as given. Where the path really leads is the `guard` module's question.
pub fn inside_workspace(workspace: &Path, path: &str) -> Result<PathBuf, OutsideWorkspace> {
    let abs = normalize(&super::resolve_path(workspace, path));
    under_workspace(workspace, &abs).ok_or_else(|| OutsideWorkspace {
        path: path.to_string(),
        workspace: workspace.to_path_buf(),
    })
}

/// The refusal of a secret store, in penguin's read_file words.
fn secret_refusal(path: &str, name: &'static str) -> String {
    crate::tools::profile::penguin::read_file::ReadFileError::Secret {
        file_path: path.to_string(),
        name,
    }
    .to_string()
}

/// What one call produced.
struct Reply {
    text: String,
    images: Vec<String>,
    ok: bool,
}

impl Tool for VaalaReadFile {
    fn call(&self, ctx: ToolContext, args: Map<String, Value>) -> BoxFuture<'static, ToolResult> {
        let tool = *self;
        Box::pin(async move {
            let workspace = ctx.env.workspace.clone();
            let scope = ctx.env.scope.clone();
            let work = tokio::task::spawn_blocking(move || tool.read(&workspace, &args, &scope));
            let reply = tokio::select! {
                biased;
                _ = ctx.cancel.cancelled() => {
                    return ToolResult {
                        stop_reason: Some(crate::message::StopReason::Aborted),
                        ..ToolResult::default()
                    };
                }
                r = work => r,
            };
            match reply {
                Ok(r) => {
                    ctx.emit(r.text);
                    let mut result = if r.ok {
                        ToolResult::completed()
                    } else {
                        ToolResult::failed()
                    };
                    result.images = r.images;
                    result
                }
                Err(e) => ToolResult {
                    error: Some(format!("read_file failed: {e}")),
                    ..ToolResult::default()
                },
            }
        })
    }
}

impl VaalaReadFile {
    fn read(
        &self,
        workspace: &Path,
        args: &Map<String, Value>,
        scope: &super::session_scope::SessionScope,
    ) -> Reply {
        let fail = |text: String| Reply {
            text,
            images: Vec::new(),
            ok: false,
        };
        let a = match parse_args(args) {
            Ok(a) => a,
            Err(t) => return fail(t.to_string()),
        };
        let path = match inside_workspace(workspace, &a.path) {
            Ok(p) => p,
            Err(e) => return fail(e.to_string()),
        };
        let opened = match guard::open_guarded(workspace, &path) {
            Ok(o) => o,
            Err(guard::Refused::Outside) => {
                let outside = OutsideWorkspace {
                    path: a.path,
                    workspace: workspace.to_path_buf(),
                };
                return fail(outside.to_string());
            }
            Err(guard::Refused::Secret(name)) => return fail(secret_refusal(&a.path, name)),
            Err(guard::Refused::Target(e)) => {
                return fail(format!("Cannot read \"{}\": {e}.", a.path));
            }
        };
        let mut reply = match image::sniff(&opened) {
            Some(mime) => match image::load(opened, mime, self.max_image_kb) {
                Ok(img) if self.vision => Reply {
                    text: img.summary(&a.path),
                    images: vec![img.data_url],
                    ok: true,
                },
                Ok(img) => Reply {
                    text: img.placeholder(&a.path),
                    images: Vec::new(),
                    ok: true,
                },
                Err(t) => return fail(format!("Cannot read image \"{}\": {t}", a.path)),
            },
            None => match text::read_lines(opened.file, a.offset, a.limit, MAX_RESULT_BYTES) {
                Ok(page) => Reply {
                    text: page.render(a.offset),
                    images: Vec::new(),
                    ok: true,
                },
                Err(e) => return fail(format!("Cannot read \"{}\": {e}", a.path)),
            },
        };
        let brought = agents::bring(workspace, &path, scope);
        if !brought.is_empty() {
            reply.text.push_str("\n\n");
            reply.text.push_str(&brought);
        }
        reply
    }
}
