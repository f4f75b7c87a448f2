//! The readable transcript of `rookery sessions show`: a header, then every task of the trace
//! as `rookery run` prints it (see `cli/render.rs`), with the user's prompts (`> …`), task ends,
//! failed model requests, and each subagent's own transcript indented under its `subagent`
//! pointer record.
//!
//! Rendering only: it reads records through [`Histories`] (the catalog of a home's trace
//! files, or the postgres store: `show_stored.rs`) and returns lines, the same for both.

use std::collections::HashSet;

use super::local_time;
use crate::cli::render;
use crate::message::{EventPayload, ModelPayload, OmniMessage, Payload, Role, Sender, StopReason};
use crate::trace::catalog::{Catalog, CatalogError, SessionHistory, read_history};
use crate::trace::summary::SessionSummary;

/// Where the transcript reads the sessions it shows (blocking reads).
pub(super) trait Histories {
    /// Why a history cannot be read.
    type Error: std::fmt::Display;
    /// Whether there is a trace of session `id`.
    fn exists(&self, id: &str) -> bool;
    /// The history of session `id` (one that [`Self::exists`]).
    fn history(&self, id: &str) -> Result<SessionHistory, Self::Error>;
    /// The session whose trace points at the subagent `summary`.
    fn parent_of(&self, summary: &SessionSummary) -> Option<String>;
    /// Where a missing subagent was looked for (`under this home`).
    fn place(&self) -> &'static str;
}

impl Histories for Catalog {
    type Error = CatalogError;

    fn exists(&self, id: &str) -> bool {
        self.get(id).is_some()
    }

    fn history(&self, id: &str) -> Result<SessionHistory, CatalogError> {
        read_history(self.resolve(id)?)
    }

    /// Looked up only for subagents: it reads every trace of the home.
    fn parent_of(&self, summary: &SessionSummary) -> Option<String> {
        if !summary.is_subagent() {
            return None;
        }
        self.summaries()
            .into_iter()
            .find(|s| s.subagents.contains(&summary.id))
            .map(|s| s.id)
    }

    fn place(&self) -> &'static str {
        "under this home"
    }
}

/// Indentation of a subagent's transcript under its pointer.
const CHILD_PREFIX: &str = "    │ ";

/// Nesting limit for subagent transcripts (subagents have depth 1 today).
const MAX_DEPTH: usize = 4;

/// The transcript of `history`, line by line.
pub(super) fn transcript(catalog: &impl Histories, history: &SessionHistory) -> Vec<String> {
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
    if let Some(owner) = &summary.owner {
        out.push(format!("owner {owner}"));
    }
    if let Some(parent) = catalog.parent_of(&summary) {
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

fn push_lines(out: &mut Vec<String>, text: &str, prefix: &str) {
    if text.is_empty() {
        out.push(prefix.trim_end().to_string());
    }
    for line in text.lines() {
        out.push(format!("{prefix}{line}").trim_end().to_string());
    }
}

fn body(
    catalog: &impl Histories,
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
                if text.is_empty() {
                    out.push(">".into());
                }
                out.extend(
                    text.lines()
                        .map(|l| format!("> {l}").trim_end().to_string()),
                );
            }
            Payload::Event(EventPayload::TaskEnd { status, .. }) => {
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
    catalog: &impl Histories,
    id: &str,
    depth: usize,
    visited: &mut HashSet<String>,
    out: &mut Vec<String>,
) {
    if !catalog.exists(id) {
        out.push(format!(
            "    ↳ subagent {id} (no trace of it {})",
            catalog.place()
        ));
        return;
    }
    if depth + 1 > MAX_DEPTH || !visited.insert(id.to_string()) {
        out.push(format!("    ↳ subagent {id} (shown above)"));
        return;
    }
    let history = match catalog.history(id) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{SessionMeta, build};

    fn write(home: &std::path::Path, id: &str, records: &[OmniMessage]) {
        let dir = home.join("traces/2026-12-01");
        std::fs::create_dir_all(&dir).unwrap();
        let text: String = records.iter().map(|r| r.to_json() + "\n").collect();
        std::fs::write(dir.join(format!("{id}_001.jsonl")), text).unwrap();
    }

    fn meta(id: &str) -> OmniMessage {
        OmniMessage::session_meta(SessionMeta {
            session_id: id.into(),
            provider: "p".into(),
            model_id: "m".into(),
            ..SessionMeta::default()
        })
    }

    fn body_of(lines: &[String]) -> Vec<&str> {
        let start = lines.iter().position(String::is_empty).unwrap() + 1;
        lines[start..].iter().map(String::as_str).collect()
    }

    #[test]
    fn failures_resumes_and_missing_or_cyclic_subagents() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path();
        let pointer = |id: &str| {
            OmniMessage::event(EventPayload::Subagent {
                session_id: id.into(),
            })
        };
        write(
            home,
            "a",
            &[
                meta("a"),
                build::user_text("two\nlines", None),
                build::request_end(StopReason::Auth, Some("bad key".into()), None, None),
                build::task_end(StopReason::Failed),
                meta("a"),
                build::user_text("", None),
                pointer("gone"),
                pointer("b"),
                build::assistant_text("multi\nline answer", StopReason::Completed),
                build::task_end(StopReason::Completed),
            ],
        );
        // `b` points back at `a`: shown once, never looped.
        write(
            home,
            "b",
            &[meta("b"), build::user_text("child", None), pointer("a")],
        );
        let catalog = Catalog::scan(home).unwrap();
        let history = read_history(catalog.get("a").unwrap()).unwrap();
        let lines = transcript(&catalog, &history);
        assert_eq!(
            lines[0], "session a · completed · m (p) · tools penguin",
            "{lines:#?}"
        );
        assert_eq!(
            body_of(&lines),
            vec![
                "> two",
                "> lines",
                "! model request auth: bad key",
                "· task failed",
                "· resumed",
                ">",
                "    ↳ subagent gone (no trace of it under this home)",
                "    ↳ subagent b · open",
                "    │ > child",
                "    │     ↳ subagent a (shown above)",
                "multi",
                "line answer",
                "· task completed",
            ]
        );
    }
}
