//! The catalog of recorded sessions under a Rookery home: finds every session's trace files
//! (`<home>/traces/<date>/<id>_<NNN>.jsonl`; all files of one id, in index order, are one
//! history), reads and summarizes them, resolves abbreviated ids, and deletes a session's files.
//!
//! It never writes into a trace and never repairs one: reading is tolerant (a torn last line is
//! ignored, malformed lines are skipped with a warning) and [`remove_files`] only deletes whole
//! files that a scan found. Interpreting records for a summary is `summary.rs`.

use std::collections::{BTreeMap, HashMap};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::message::{OmniMessage, Payload};
use crate::trace::paths::{TRACES_DIR_NAME, is_valid_session_id};
use crate::trace::reader::skipped_lines_diagnostic;
use crate::trace::summary::{SessionSummary, summarize};

/// Candidates an ambiguity error names before `and N more`.
const LISTED_CANDIDATES: usize = 10;

/// Failures of the catalog. Each is one line naming the path or the id concerned.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// The given home exists but is not a directory.
    #[error("{0} is not a directory, so it cannot be a Rookery home")]
    NotADirectory(PathBuf),
    /// A directory or trace file cannot be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The path that failed.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A trace file cannot be deleted.
    #[error("cannot delete {path}: {source}")]
    Remove {
        /// The file that failed.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// No recorded session's id matches the query.
    #[error("no session matches \"{query}\" under {}", home.display())]
    UnknownSession {
        /// The id or prefix asked for.
        query: String,
        /// The Rookery home searched.
        home: PathBuf,
    },
    /// The query (an id prefix) matches more than one session.
    #[error(
        "session id \"{query}\" is ambiguous; it matches {}",
        list_candidates(candidates)
    )]
    AmbiguousSession {
        /// The id or prefix asked for.
        query: String,
        /// The ids it matches.
        candidates: Vec<String>,
    },
}

fn list_candidates(candidates: &[String]) -> String {
    let mut text = candidates
        .iter()
        .take(LISTED_CANDIDATES)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if candidates.len() > LISTED_CANDIDATES {
        text.push_str(&format!(
            " and {} more",
            candidates.len() - LISTED_CANDIDATES
        ));
    }
    text
}

/// The trace files of one session id, in history order (`_001`, `_002`, …).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionFiles {
    /// The session id.
    pub id: String,
    /// Its trace files, `_001` first.
    pub files: Vec<PathBuf>,
}

/// Every session found under one Rookery home.
#[derive(Debug, Clone)]
pub struct Catalog {
    home: PathBuf,
    /// Sorted by id.
    sessions: Vec<SessionFiles>,
}

/// The records of one session, read from all of its files.
#[derive(Debug, Clone, Default)]
pub struct SessionHistory {
    /// The session id.
    pub id: String,
    /// Its trace files, `_001` first.
    pub files: Vec<PathBuf>,
    /// Every record that parsed, in history order.
    pub records: Vec<OmniMessage>,
    /// The verbatim JSON line of each record (same order and length as `records`).
    pub lines: Vec<String>,
    /// The raw payloads of the `session_meta` records, in order.
    pub metas: Vec<Value>,
    /// Malformed lines skipped (torn last lines not counted).
    pub skipped: usize,
}

impl Catalog {
    /// Scans `<home>/traces`. A home (or traces directory) that does not exist is an empty
    /// catalog; a home that is not a directory is [`CatalogError::NotADirectory`]. Unreadable
    /// date directories are skipped with a warning.
    pub fn scan(home: &Path) -> Result<Catalog, CatalogError> {
        let mut catalog = Catalog {
            home: home.to_path_buf(),
            sessions: Vec::new(),
        };
        if home.exists() && !home.is_dir() {
            return Err(CatalogError::NotADirectory(home.to_path_buf()));
        }
        let traces = home.join(TRACES_DIR_NAME);
        let days = match std::fs::read_dir(&traces) {
            Ok(days) => days,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(catalog),
            Err(source) => {
                return Err(CatalogError::Read {
                    path: traces,
                    source,
                });
            }
        };
        let mut found: BTreeMap<String, Vec<(u64, OsString, PathBuf)>> = BTreeMap::new();
        for day in days.flatten() {
            if !day.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            let files = match std::fs::read_dir(day.path()) {
                Ok(files) => files,
                Err(e) => {
                    tracing::warn!("cannot read {}: {e}", day.path().display());
                    continue;
                }
            };
            let day_name = day.file_name();
            for file in files.flatten() {
                let name = file.file_name();
                let Some((id, index)) = name.to_str().and_then(split_trace_file_name) else {
                    continue;
                };
                if !file.file_type().is_ok_and(|t| t.is_file()) {
                    continue;
                }
                found.entry(id.to_string()).or_default().push((
                    index,
                    day_name.clone(),
                    file.path(),
                ));
            }
        }
        catalog.sessions = found
            .into_iter()
            .map(|(id, mut files)| {
                files.sort();
                SessionFiles {
                    id,
                    files: files.into_iter().map(|(_, _, path)| path).collect(),
                }
            })
            .collect();
        Ok(catalog)
    }

    /// The Rookery home the catalog was read from.
    pub fn home(&self) -> &Path {
        &self.home
    }

    /// Every session, sorted by id.
    pub fn sessions(&self) -> &[SessionFiles] {
        &self.sessions
    }

    /// The session with exactly this id.
    pub fn get(&self, id: &str) -> Option<&SessionFiles> {
        self.sessions
            .binary_search_by(|s| s.id.as_str().cmp(id))
            .ok()
            .map(|i| &self.sessions[i])
    }

    /// Resolves a full or abbreviated id (see [`matches_abbreviation`]). An exact id wins;
    /// otherwise exactly one session must match.
    pub fn resolve(&self, query: &str) -> Result<&SessionFiles, CatalogError> {
        let query = query.trim();
        let unknown = || CatalogError::UnknownSession {
            query: query.to_string(),
            home: self.home.clone(),
        };
        if !is_valid_session_id(query) {
            return Err(unknown());
        }
        if let Some(exact) = self.get(query) {
            return Ok(exact);
        }
        let matching: Vec<&SessionFiles> = self
            .sessions
            .iter()
            .filter(|s| matches_abbreviation(&s.id, query))
            .collect();
        match matching.as_slice() {
            [] => Err(unknown()),
            [one] => Ok(one),
            many => Err(CatalogError::AmbiguousSession {
                query: query.to_string(),
                candidates: many.iter().map(|s| s.id.clone()).collect(),
            }),
        }
    }

    /// Summaries of every session, newest first (by the first record's timestamp, then id),
    /// with `parent` set for each session some other session points at. A session whose files
    /// cannot be read is summarized as
    /// [`crate::trace::summary::RecordedStatus::Unknown`] (with a warning).
    pub fn summaries(&self) -> Vec<SessionSummary> {
        let mut out: Vec<SessionSummary> = self
            .sessions
            .iter()
            .map(|s| match read_history(s) {
                Ok(history) => history.summary(),
                Err(e) => {
                    tracing::warn!("{e}");
                    summarize(&s.id, &[], &[], path_strings(&s.files))
                }
            })
            .collect();
        let mut parents: HashMap<String, String> = HashMap::new();
        for summary in &out {
            for child in &summary.subagents {
                parents
                    .entry(child.clone())
                    .or_insert_with(|| summary.id.clone());
            }
        }
        for summary in &mut out {
            summary.parent = parents.get(&summary.id).cloned();
        }
        out.sort_by(|a, b| {
            (b.started.as_deref(), b.id.as_str()).cmp(&(a.started.as_deref(), a.id.as_str()))
        });
        out
    }

    /// The files of `id` and of every session it points at with `subagent` records
    /// (recursively), each session once, `id` first.
    pub fn files_with_subagents(&self, id: &str) -> Result<Vec<SessionFiles>, CatalogError> {
        let mut out: Vec<SessionFiles> = Vec::new();
        let mut queue = vec![id.to_string()];
        while let Some(next) = queue.pop() {
            if out.iter().any(|s| s.id == next) {
                continue;
            }
            let Some(files) = self.get(&next) else {
                continue;
            };
            let history = read_history(files)?;
            queue.extend(history.summary().subagents.into_iter().rev());
            out.push(files.clone());
        }
        Ok(out)
    }
}

/// Whether `query` abbreviates `id`: a prefix of the id (`session-2026-12-01-08`), a prefix of
/// the part after `session-` (`2026-12-01-08`), or a prefix of the 8-hex random suffix of a
/// standard id, optionally written as the subagent id `subagent-<hex>` (`f505`,
/// `subagent-f505e095`).
pub fn matches_abbreviation(id: &str, query: &str) -> bool {
    if query.is_empty() {
        return false;
    }
    if id.starts_with(query)
        || id
            .strip_prefix("session-")
            .is_some_and(|rest| rest.starts_with(query))
    {
        return true;
    }
    let hex = query.strip_prefix("subagent-").unwrap_or(query);
    let is_hex = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_hexdigit());
    id.starts_with("session-")
        && is_hex(hex)
        && id.rsplit_once('-').is_some_and(|(_, suffix)| {
            suffix.len() == 8 && is_hex(suffix) && suffix.starts_with(hex)
        })
}

/// `<id>_<NNN>.jsonl` → `(id, NNN)` for a valid session id and an all-digit index.
pub fn split_trace_file_name(name: &str) -> Option<(&str, u64)> {
    let (id, digits) = name.strip_suffix(".jsonl")?.rsplit_once('_')?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if !is_valid_session_id(id) {
        return None;
    }
    Some((id, digits.parse().ok()?))
}

fn path_strings(files: &[PathBuf]) -> Vec<String> {
    files.iter().map(|p| p.display().to_string()).collect()
}

/// Reads every file of a session in order. In each file a torn last line is ignored and other
/// malformed lines are skipped with a warning naming them.
pub fn read_history(session: &SessionFiles) -> Result<SessionHistory, CatalogError> {
    let mut history = SessionHistory {
        id: session.id.clone(),
        files: session.files.clone(),
        ..SessionHistory::default()
    };
    for path in &session.files {
        let bytes = std::fs::read(path).map_err(|source| CatalogError::Read {
            path: path.clone(),
            source,
        })?;
        let skipped = history.push_bytes(&bytes);
        if !skipped.is_empty() {
            tracing::warn!("{}", skipped_lines_diagnostic(&skipped, path));
            history.skipped += skipped.len();
        }
    }
    Ok(history)
}

impl SessionHistory {
    /// Parses one file's bytes onto the history; returns the 1-based numbers of the malformed
    /// lines that were not the file's last non-blank line.
    fn push_bytes(&mut self, bytes: &[u8]) -> Vec<usize> {
        let is_blank = |line: &[u8]| line.iter().all(u8::is_ascii_whitespace);
        let lines: Vec<&[u8]> = bytes.split(|&b| b == b'\n').collect();
        let last = lines.iter().rposition(|l| !is_blank(l));
        let mut skipped = Vec::new();
        for (index, line) in lines.iter().enumerate() {
            if is_blank(line) {
                continue;
            }
            if self.push_record(line) {
                continue;
            }
            if Some(index) != last {
                skipped.push(index + 1);
            }
        }
        skipped
    }

    /// Parses one record (a JSONL line, its newline optional) onto the history; `false`, and
    /// nothing added, when it does not parse.
    pub fn push_record(&mut self, line: &[u8]) -> bool {
        let text = std::str::from_utf8(line).ok().map(str::trim_end);
        let Some((text, record)) =
            text.and_then(|t| OmniMessage::from_json(t).ok().map(|m| (t, m)))
        else {
            return false;
        };
        if let Payload::SessionMeta(_) = record.payload
            && let Ok(raw) = serde_json::from_str::<Value>(text)
        {
            self.metas.push(raw["payload"].clone());
        }
        self.lines.push(text.to_string());
        self.records.push(record);
        true
    }

    /// The session at a glance (status, times, model, first prompt, …).
    pub fn summary(&self) -> SessionSummary {
        summarize(
            &self.id,
            &self.records,
            &self.metas,
            path_strings(&self.files),
        )
    }
}

/// Deletes `files`, then every directory that held one of them and is now empty. A file
/// already gone counts as deleted. Returns how many files were deleted.
pub fn remove_files(files: &[PathBuf]) -> Result<usize, CatalogError> {
    let mut removed = 0;
    for path in files {
        match std::fs::remove_file(path) {
            Ok(()) => removed += 1,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => {
                return Err(CatalogError::Remove {
                    path: path.clone(),
                    source,
                });
            }
        }
    }
    let mut dirs: Vec<&Path> = files.iter().filter_map(|p| p.parent()).collect();
    dirs.sort();
    dirs.dedup();
    for dir in dirs {
        // Fails (and is meant to) when the directory still holds other sessions.
        let _ = std::fs::remove_dir(dir);
    }
    Ok(removed)
}

#[cfg(test)]
mod tests;
