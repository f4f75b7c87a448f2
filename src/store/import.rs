//! `rookery store import HOME`: every session trace of a `files` home loaded into the store,
//! its records with the exact bytes of their lines, part by file (`_001` is part 1, …), and a
//! subagent's row naming as `parent` the session whose trace points at it.
//! Idempotent: a session row and each `(session_id, seq)` are inserted only when missing, so a
//! second import changes nothing. A torn last line (no newline) is not a record and is left out.
//! It owns the import; it must not change the files.

use std::collections::HashMap;
use std::path::Path;

use crate::trace::catalog::{Catalog, read_history};
use crate::trace::summary::SessionSummary;

use super::PgStore;
use super::error::StoreError;

/// Rows of one insert at most.
const CHUNK: usize = 1000;

/// What an import did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Imported {
    /// Sessions found under the home.
    pub sessions: u64,
    /// Session rows created (0 on a repeated import).
    pub new_sessions: u64,
    /// Records inserted (0 on a repeated import).
    pub new_records: u64,
}

/// Imports every session under `home` (see the module doc).
pub async fn import(store: &PgStore, home: &Path) -> Result<Imported, StoreError> {
    let catalog = Catalog::scan(home)?;
    let mut summaries = Vec::new();
    for session in catalog.sessions() {
        summaries.push(read_history(session)?.summary());
    }
    let parents = parents(&summaries);
    let mut done = Imported::default();
    for (session, summary) in catalog.sessions().iter().zip(&summaries) {
        let parent = parents.get(summary.id.as_str()).copied();
        let mut client = store.client().await?;
        let tx = client.transaction().await?;
        let model = match (&summary.provider, &summary.model) {
            (Some(p), Some(m)) => format!("{p}/{m}"),
            (None, Some(m)) => m.clone(),
            _ => String::new(),
        };
        let created = tx
            .execute(
                "INSERT INTO sessions (id, parent, workspace, tool_profile, model, status,
                                       created_at, last_activity, epoch)
                 VALUES ($1, $2, $3, $4, $5, 'idle',
                         coalesce($6::text::timestamptz, now()),
                         coalesce($7::text::timestamptz, now()), 0)
                 ON CONFLICT (id) DO NOTHING",
                &[
                    &session.id,
                    &parent,
                    &summary.workspace.clone().unwrap_or_default(),
                    &summary.tool_profile,
                    &model,
                    &summary.started,
                    &summary.last_activity,
                ],
            )
            .await?;
        if created == 0 && parent.is_some() {
            // Imported before its parent was known (or written by a node that did not fill
            // it): the row learns it; one that names a parent keeps it.
            tx.execute(
                "UPDATE sessions SET parent = $2 WHERE id = $1 AND parent IS NULL",
                &[&session.id, &parent],
            )
            .await?;
        }
        done.sessions += 1;
        done.new_sessions += created;
        let mut seq: i64 = 0;
        for (index, file) in session.files.iter().enumerate() {
            let bytes = std::fs::read(file)?;
            let lines: Vec<&[u8]> = bytes
                .split_inclusive(|b| *b == b'\n')
                .filter(|l| l.ends_with(b"\n"))
                .collect();
            let part = i32::try_from(index + 1).unwrap_or(i32::MAX);
            for chunk in lines.chunks(CHUNK) {
                let n = tx
                    .execute(
                        "INSERT INTO trace_records (session_id, seq, epoch, part, record)
                         SELECT $1, $2 + r.ord - 1, 0, $3, r.record
                           FROM unnest($4::bytea[]) WITH ORDINALITY AS r(record, ord)
                         ON CONFLICT (session_id, seq) DO NOTHING",
                        &[&session.id, &seq, &part, &chunk],
                    )
                    .await?;
                done.new_records += n;
                seq += chunk.len() as i64;
            }
        }
        tx.commit().await?;
    }
    Ok(done)
}

/// Each subagent's parent: the first session whose trace points at it with a `subagent`
/// record (the files home says who the parent is only there).
fn parents(summaries: &[SessionSummary]) -> HashMap<&str, &str> {
    let mut parents = HashMap::new();
    for summary in summaries {
        for child in &summary.subagents {
            parents.entry(child.as_str()).or_insert(summary.id.as_str());
        }
    }
    parents
}
