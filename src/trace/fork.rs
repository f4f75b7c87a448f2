//! Fork: a new session's first trace file, copied from another session's trace up to the end
//! of one of its tasks. The copy starts with the new session's own `session_meta` (naming
//! `forked_from {session_id, task, seq}`); resume then rebuilds the fork's context from it like
//! any other trace.
//!
//! Tasks are numbered from 1 by their `task_end` records across the origin's files in history
//! order (`_001`, `_002`, …); `seq` is the index (from 0) of that `task_end` in the file that
//! holds it, and the copy takes that file's records up to it. The copy leaves out the origin's
//! first `session_meta` (the fork has its own) and its `subagent` pointers (the origin's
//! children stay the origin's), and names the fork in every other `session_meta` it copies.
//!
//! This module writes only the new file, created exclusively (0600) before any session owns
//! it; it never touches the origin's files and decides nothing about starting the fork.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::message::{EventPayload, ForkedFrom, OmniMessage, Payload, StopReason};
use crate::trace::paths;
use crate::trace::private::{PRIVATE_FILE_MODE, create_private_dir_all};
use crate::trace::reader::read_trace;

/// What the fork changes of the origin's `session_meta`.
#[derive(Debug, Clone, Default)]
pub struct ForkOverrides {
    /// The fork's workspace (canonical absolute path); `None`: the origin's.
    pub workspace: Option<String>,
    /// The fork's approval mode (recorded as an `approval_mode_changed` after the copy).
    pub approval_mode: Option<String>,
}

/// A fork's trace, written and ready to be resumed.
#[derive(Debug, Clone, PartialEq)]
pub struct ForkedTrace {
    /// The new session's id.
    pub session_id: String,
    /// Its trace file.
    pub path: PathBuf,
    /// What it was copied from (as its `session_meta` records it).
    pub from: ForkedFrom,
}

/// Why a fork could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ForkError {
    /// The asked task has not ended (or does not exist).
    #[error(
        "session {session} has no task {task}: {ended} task(s) have ended (tasks are numbered from 1)"
    )]
    NoSuchTask {
        /// The origin session.
        session: String,
        /// The task asked for.
        task: u64,
        /// How many tasks have ended.
        ended: u64,
    },
    /// No task has completed yet (the default fork point is the last completed one).
    #[error("session {0} has no completed task to fork from yet")]
    NoCompletedTask(String),
    /// The origin's trace cannot be read, or the fork's cannot be written.
    #[error("fork failed: {0}")]
    Io(#[from] std::io::Error),
    /// The origin's trace has no `session_meta`.
    #[error("fork failed: the trace of {0} has no session_meta")]
    NoMeta(String),
}

/// Copies the trace whose latest file is `latest` into a new session's trace under `home`, up
/// to the end of task `at_task` (default: the last completed task). See the module header.
pub fn fork_trace(
    home: &Path,
    latest: &Path,
    at_task: Option<u64>,
    overrides: &ForkOverrides,
) -> Result<ForkedTrace, ForkError> {
    let Some((origin, last_index)) = latest
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(crate::trace::rotation::split_name)
        .map(|(id, i)| (id.to_string(), i))
    else {
        return Err(ForkError::Io(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{} is not a numbered trace file", latest.display()),
        )));
    };
    // Every file of the history, oldest first, with its records.
    let mut files = Vec::new();
    for index in 1..=last_index {
        let Ok(index) = u32::try_from(index) else {
            break;
        };
        let path = latest.with_file_name(paths::trace_file_name(&origin, index));
        if path.is_file() {
            files.push(read_trace(&path)?.records);
        }
    }
    let copy = fork_records(&files, origin, at_task, overrides)?;
    let ForkCopy {
        session_id,
        lines,
        from,
    } = copy;
    let path = paths::trace_path(home, &session_id);
    if let Some(dir) = path.parent() {
        create_private_dir_all(dir)?;
    }
    let mut out = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(PRIVATE_FILE_MODE)
        .open(&path)?;
    let mut bytes = Vec::new();
    for line in lines {
        bytes.extend_from_slice(line.as_bytes());
        bytes.push(b'\n');
    }
    out.write_all(&bytes)?;
    out.sync_all()?;
    Ok(ForkedTrace {
        session_id,
        path,
        from,
    })
}

/// A fork's records, made from the origin's, before they are stored anywhere.
#[derive(Debug, Clone, PartialEq)]
pub struct ForkCopy {
    /// The new session's id.
    pub session_id: String,
    /// Its records, each one JSONL line without its newline, in order.
    pub lines: Vec<String>,
    /// What it was copied from (as its `session_meta` records it).
    pub from: ForkedFrom,
}

/// The fork of the session `origin` whose trace is `files` (the records of each part, oldest
/// first), up to the end of task `at_task` (default: the last completed task). See the module
/// header; the files backend writes the lines to a new file, a store to its rows.
pub fn fork_records(
    files: &[Vec<OmniMessage>],
    origin: String,
    at_task: Option<u64>,
    overrides: &ForkOverrides,
) -> Result<ForkCopy, ForkError> {
    let (file, seq, task) = find_task(files, at_task, &origin)?;
    let records = &files[file][..=seq];
    let Some(Payload::SessionMeta(first)) = files
        .first()
        .and_then(|f| {
            f.iter()
                .find(|r| matches!(r.payload, Payload::SessionMeta(_)))
        })
        .map(|r| &r.payload)
    else {
        return Err(ForkError::NoMeta(origin));
    };
    let from = ForkedFrom {
        session_id: origin,
        task,
        seq: seq as u64,
    };
    let session_id = paths::new_session_id();
    let mut meta = first.as_ref().clone();
    meta.session_id = session_id.clone();
    meta.forked_from = Some(from.clone());
    meta.source = None;
    if let Some(w) = &overrides.workspace {
        meta.workspace = w.clone();
        meta.agent_state = w.clone();
    }
    let mut lines = vec![OmniMessage::session_meta(meta).to_json()];
    let mut skipped_first_meta = false;
    for record in records {
        match &record.payload {
            Payload::SessionMeta(_) if !skipped_first_meta => skipped_first_meta = true,
            Payload::SessionMeta(m) => {
                let mut m = m.as_ref().clone();
                m.session_id = session_id.clone();
                if let Some(w) = &overrides.workspace {
                    m.workspace = w.clone();
                    m.agent_state = w.clone();
                }
                let mut copy = record.clone();
                copy.payload = Payload::SessionMeta(Box::new(m));
                lines.push(copy.to_json());
            }
            Payload::Event(EventPayload::Subagent { .. }) => {}
            _ => lines.push(record.to_json()),
        }
    }
    if let Some(mode) = &overrides.approval_mode {
        lines.push(
            OmniMessage::event(EventPayload::ApprovalModeChanged { mode: mode.clone() }).to_json(),
        );
    }
    Ok(ForkCopy {
        session_id,
        lines,
        from,
    })
}

/// `(file, index in it, task number)` of the `task_end` of task `at_task`, or of the last
/// completed task.
fn find_task(
    files: &[Vec<OmniMessage>],
    at_task: Option<u64>,
    origin: &str,
) -> Result<(usize, usize, u64), ForkError> {
    let mut number = 0u64;
    let mut last_completed = None;
    for (f, records) in files.iter().enumerate() {
        for (i, record) in records.iter().enumerate() {
            if record.has_origin() {
                continue;
            }
            if let Some(EventPayload::TaskEnd { status, .. }) = record.as_event() {
                number += 1;
                if at_task == Some(number) {
                    return Ok((f, i, number));
                }
                if *status == StopReason::Completed {
                    last_completed = Some((f, i, number));
                }
            }
        }
    }
    match at_task {
        Some(task) => Err(ForkError::NoSuchTask {
            session: origin.to_string(),
            task,
            ended: number,
        }),
        None => last_completed.ok_or_else(|| ForkError::NoCompletedTask(origin.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{SessionMeta, build};

    fn end(status: StopReason) -> OmniMessage {
        OmniMessage::event(EventPayload::TaskEnd {
            status,
            reason: None,
            output: None,
        })
    }

    #[test]
    fn tasks_are_numbered_across_files_and_default_to_the_last_completed() {
        let meta = OmniMessage::session_meta(SessionMeta::default());
        let files = vec![
            vec![
                meta.clone(),
                end(StopReason::Completed),
                end(StopReason::Failed),
            ],
            vec![
                meta,
                build::user_text("x", None),
                end(StopReason::Completed),
                end(StopReason::Aborted),
            ],
        ];
        assert_eq!(find_task(&files, None, "s").unwrap(), (1, 2, 3));
        assert_eq!(find_task(&files, Some(1), "s").unwrap(), (0, 1, 1));
        assert_eq!(find_task(&files, Some(4), "s").unwrap(), (1, 3, 4));
        let e = find_task(&files, Some(5), "s").unwrap_err().to_string();
        assert!(e.contains("has no task 5: 4 task(s) have ended"), "{e}");
        let none = vec![vec![end(StopReason::Failed)]];
        assert!(matches!(
            find_task(&none, None, "s"),
            Err(ForkError::NoCompletedTask(_))
        ));
    }
}
