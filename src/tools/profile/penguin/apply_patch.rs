//! apply_patch: applies a patch in codex's apply-patch format (argument `input`) to the
//! workspace, all or nothing: the patch is parsed ([`parser`]), every change is computed in
//! memory ([`compute`], hunks applied by [`hunks`], found with the [`seek`] ladder), and only
//! then written ([`commit`]: temp files beside each target, renames, rollback on a failed
//! rename).
//! Success answers codex's `Success. Updated the following files:` with `A|M|D path` lines.
//!
//! A call is stopped with its cancel (an abort or its timeout): the plan asks the cancel
//! between files, hunks and during long searches, and the commit before each rename, undoing
//! the renames already done. A cancelled call writes nothing after it was seen, so its
//! answer is never followed by a change, and it lets go of its files' locks at once.
//!
//! This module only glues those steps to the tool interface; it must not write files itself
//! and never panics on any input.

pub mod commit;
pub mod compute;
pub mod hunks;
pub mod parser;
pub mod seek;

use std::io;
use std::path::Path;

use futures::future::BoxFuture;
use serde_json::{Map, Value};

use super::args::require_str;
use super::path_locks::{PathKey, keys_of};
use super::{
    Placement, Tool, ToolContext, ToolDefinitionConfig, ToolReply, ToolResult, resolve_path,
    run_file_work,
};
use compute::{MAX_BYTES, PlanError};
use parser::{FileOp, parse_patch};

/// The tool's name.
pub const NAME: &str = "apply_patch";

/// The first line of a successful answer (codex's text).
pub const SUCCESS: &str = "Success. Updated the following files:";

/// The tool: each call runs on the blocking pool and is stopped by its cancel.
pub struct ApplyPatch;

impl Tool for ApplyPatch {
    fn call(&self, ctx: ToolContext, args: Map<String, Value>) -> BoxFuture<'static, ToolResult> {
        Box::pin(async move {
            let workspace = ctx.env.workspace.clone();
            let def = ctx.definition.clone();
            let cancel = ctx.cancel.clone();
            run_file_work(&ctx, Placement::Pool, move || {
                match require_str(&args, "input", &def.name) {
                    Ok(input) => {
                        apply_text_until(&workspace, input, &|| cancel.is_cancelled(), &mut |_| {
                            Ok(())
                        })
                    }
                    Err(e) => ToolReply::fail(e.to_string()),
                }
            })
            .await
        })
    }

    fn write_keys(&self, workspace: &Path, args: &Map<String, Value>) -> Vec<PathKey> {
        write_keys(workspace, args)
    }
}

/// Runs one apply_patch call to its end (no cancel).
pub fn apply_patch(
    workspace: &Path,
    args: &Map<String, Value>,
    def: &ToolDefinitionConfig,
) -> ToolReply {
    match require_str(args, "input", &def.name) {
        Ok(input) => apply_text(workspace, input, &mut |_| Ok(())),
        Err(e) => ToolReply::fail(e.to_string()),
    }
}

/// Applies `input` to `workspace`; `before_step` is the commit's step hook (see
/// [`commit::commit_with`]).
pub fn apply_text(
    workspace: &Path,
    input: &str,
    before_step: &mut dyn FnMut(usize) -> io::Result<()>,
) -> ToolReply {
    apply_text_until(workspace, input, &|| false, before_step)
}

/// [`apply_text`] that stops once `stop` says so (see the module header): a stop seen while
/// planning or before the commit changes nothing; one seen before a rename undoes the
/// renames already done.
pub fn apply_text_until(
    workspace: &Path,
    input: &str,
    stop: &dyn Fn() -> bool,
    before_step: &mut dyn FnMut(usize) -> io::Result<()>,
) -> ToolReply {
    let changes = match plan_text(workspace, input, stop) {
        Ok(changes) => changes,
        Err(PlanError::NoChanges) => return ToolReply::fail(PlanError::NoChanges.to_string()),
        Err(e) => {
            tracing::debug!(error = %e, "apply_patch refused");
            return ToolReply::fail(format!("{e}\nNo file was changed."));
        }
    };
    let mut summary = String::from(SUCCESS);
    for change in &changes {
        summary.push('\n');
        summary.push(change.letter);
        summary.push(' ');
        summary.push_str(&change.shown);
    }
    if stop() {
        return ToolReply::fail(format!("{}\nNo file was changed.", PlanError::Stopped));
    }
    let mut step = |i: usize| {
        if stop() {
            return Err(io::Error::other(
                "the call was cancelled before this file was written",
            ));
        }
        before_step(i)
    };
    match commit::commit_with(workspace, changes, &mut step) {
        Ok(()) => ToolReply::ok(summary + "\n"),
        Err(e) => ToolReply::fail(e.to_string()),
    }
}

fn plan_text(
    workspace: &Path,
    input: &str,
    stop: &dyn Fn() -> bool,
) -> Result<Vec<compute::Change>, PlanError> {
    if input.len() > MAX_BYTES {
        return Err(PlanError::PatchTooLarge { bytes: input.len() });
    }
    let sections = parse_patch(input)?;
    compute::plan(workspace, &sections, stop)
}

/// Every file a call writes (sources and move destinations), for the per-file locks. A patch
/// that does not parse writes nothing.
pub fn write_keys(workspace: &Path, args: &Map<String, Value>) -> Vec<PathKey> {
    let Some(input) = args.get("input").and_then(Value::as_str) else {
        return Vec::new();
    };
    if input.len() > MAX_BYTES {
        return Vec::new();
    }
    let Ok(sections) = parse_patch(input) else {
        return Vec::new();
    };
    let mut keys = Vec::new();
    for section in sections.iter().take(compute::MAX_FILES) {
        keys.extend(keys_of(&resolve_path(workspace, section.op.path())));
        if let FileOp::Update {
            move_to: Some(dest),
            ..
        } = &section.op
        {
            keys.extend(keys_of(&resolve_path(workspace, dest)));
        }
    }
    let mut seen = std::collections::HashSet::new();
    keys.retain(|k| seen.insert(k.clone()));
    keys
}

#[cfg(test)]
mod tests;
