//! The readable transcript of `rookery sessions show`: a header, then every task of the trace
//! as `rookery run` prints it (see `cli/render.rs`), with the user's prompts (`> …`), task ends,
//! failed model requests, and each subagent's own transcript indented under its `subagent`
//! pointer record.
//!
//! Rendering only: it reads records the catalog has read and returns lines.

use std::collections::HashSet;

use super::local_time;
use crate::cli::render;
use crate::message::{EventPayload, ModelPayload, OmniMessage, Payload, Role, Sender, StopReason};
use crate::trace::catalog::{Catalog, SessionHistory, read_history};
use crate::trace::summary::SessionSummary;

/// Indentation of a subagent's transcript under its pointer.
const CHILD_PREFIX: &str = "    │ ";

/// Nesting limit for subagent transcripts (subagents have depth 1 today).
const MAX_DEPTH: usize = 4;

/// The transcript of `history`, line by line.
pub fn transcript(catalog: &Catalog, history: &SessionHistory) -> Vec<String> {
    let summary = history.summary();
    let mut out = vec![
        format!(
            "session {} · {} · {} ({}) · tools {}",
            summary.id,
            summary.status,
            summary.model.as_deref().unwrap_or("-"),
            summary.provider.as_deref().unwrap_or("-"),
            summary.tool_profile
        ),
        format!(
            "started {} · last activity {} · workspace {}",
            local_time(summary.started.as_deref()),
            local_time(summary.last_activity.as_deref()),
            summary.workspace.as_deref().unwrap_or("-")
        ),
    ];
    if let Some(parent) = parent_of(catalog, &summary) {
        out.push(format!("subagent of {parent}"));
    }
    for file in &summary.files {
        out.push(format!("trace {file}"));
    }
    out.push(String::new());
    let mut visited = HashSet::from([history.id.clone()]);
    body(catalog, &history.records, 0, &mut visited, &mut out);
    out
}

/// The session whose trace points at this subagent (looked up only for subagents: it reads
/// every trace of the home).
fn parent_of(catalog: &Catalog, summary: &SessionSummary) -> Option<String> {
    if !summary.is_subagent() {
        return None;
    }
    catalog
        .summaries()
        .into_iter()
        .find(|s| s.subagents.contains(&summary.id))
        .map(|s| s.id)
}

fn push_lines(out: &mut Vec<String>, text: &str, prefix: &str) {
    if text.is_empty() {
        out.push(prefix.trim_end().to_string());
    }
    for line in text.lines() {
        out.push(format!("{prefix}{line}").trim_end().to_string());
    }
}

fn body(
    catalog: &Catalog,
    records: &[OmniMessage],
    depth: usize,
    visited: &mut HashSet<String>,
    out: &mut Vec<String>,
) {
    let mut metas = 0;
    for record in records {
        match &record.payload {
            Payload::SessionMeta(_) => {
                metas += 1;
                if metas > 1 {
                    out.push("· resumed".into());
                }
            }
            Payload::Model(ModelPayload::Text {
                role: Role::User,
                text,
                sender,
                ..
            }) if *sender != Some(Sender::Harness) && !record.has_origin() => {
                let prompt: Vec<String> = text.lines().map(|l| format!("> {l}")).collect();
                push_lines(out, &prompt.join("\n"), "");
            }
            Payload::Event(EventPayload::TaskEnd { status }) => {
                out.push(format!("· task {status}"));
            }
            Payload::Event(EventPayload::RequestEnd {
                status,
                error_message,
                retry_in_ms: None,
                ..
            }) if *status != StopReason::Completed => {
                out.push(format!(
                    "! model request {status}: {}",
                    error_message.as_deref().unwrap_or("no message")
                ));
            }
            Payload::Event(EventPayload::Subagent { session_id }) => {
                subagent(catalog, session_id, depth, visited, out);
            }
            _ => {
                if let Some(text) = render::render(record) {
                    push_lines(out, &text, "");
                }
            }
        }
    }
}

fn subagent(
    catalog: &Catalog,
    id: &str,
    depth: usize,
    visited: &mut HashSet<String>,
    out: &mut Vec<String>,
) {
    let Some(files) = catalog.get(id) else {
        out.push(format!(
            "    ↳ subagent {id} (no trace of it under this home)"
        ));
        return;
    };
    if depth + 1 > MAX_DEPTH || !visited.insert(id.to_string()) {
        out.push(format!("    ↳ subagent {id} (shown above)"));
        return;
    }
    let history = match read_history(files) {
        Ok(h) => h,
        Err(e) => {
            out.push(format!("    ↳ subagent {id} ({e})"));
            return;
        }
    };
    out.push(format!(
        "    ↳ subagent {id} · {}",
        history.summary().status
    ));
    let mut inner = Vec::new();
    body(catalog, &history.records, depth + 1, visited, &mut inner);
    for line in inner {
        out.push(format!("{CHILD_PREFIX}{line}").trim_end().to_string());
    }
}
