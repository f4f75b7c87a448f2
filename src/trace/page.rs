//! A session's conversation read from its trace a page at a time: the `model_msg` records
//! (prompts, answers, tool calls and outputs, …) of all its files in order, with each
//! subagent's own conversation read from the child's trace where the parent's `subagent`
//! record points at it, tagged with the child's id as `origin`.
//!
//! A page reads its files line by line from a [`Position`] (file number and byte offset, one
//! per nesting level), never a whole trace, and stops after `limit` messages or
//! [`PAGE_BYTES`]. It only reads traces; it never writes one, never starts a session and
//! trusts no position: one that is not at a record's start in the session's own files, or
//! whose nesting does not start at a `subagent` record, is [`PageError::BadPosition`].

use std::fs::File;
use std::io::{BufRead, BufReader, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use crate::message::{EventPayload, OmniMessage, Payload};
use crate::trace::paths::{locate_trace, trace_file_name};
use crate::trace::rotation::split_name;

/// Bytes of message JSON a page holds at most (a page has at least one message).
pub const PAGE_BYTES: usize = 8 * 1024 * 1024;
/// Subagent levels followed at most (deeper pointers are skipped).
pub const MAX_DEPTH: usize = 8;

/// Failures of a page read.
#[derive(Debug, thiserror::Error)]
pub enum PageError {
    /// The position does not point at a record of this session's history.
    #[error("the cursor does not point into this session's messages ({0})")]
    BadPosition(&'static str),
    /// A trace file cannot be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// Where one nesting level stands: the 1-based number of a file among its session's files
/// and a byte offset in it (a record's first byte).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spot {
    /// 1-based file number among the session's files.
    pub file: u32,
    /// Byte offset of a record's first byte (or the file's end).
    pub offset: u64,
}

/// Where a page starts: the session's own spot, then one spot per subagent being read (each
/// outer spot then points at the `subagent` record of the next level).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Position(pub Vec<Spot>);

impl Position {
    /// The start of the history.
    pub fn start() -> Self {
        Position(vec![Spot { file: 1, offset: 0 }])
    }
}

/// One page of messages.
#[derive(Debug, Default)]
pub struct Page {
    /// The messages, oldest first, each as its JSON line.
    pub messages: Vec<String>,
    /// Where the next page starts; `None` when the history ended.
    pub next: Option<Position>,
}

/// The trace files of the session whose latest file is `latest`, oldest first.
pub fn files_from_latest(latest: &Path) -> Vec<PathBuf> {
    let Some((id, last)) = latest
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(split_name)
    else {
        return vec![latest.to_path_buf()];
    };
    (1..=last)
        .filter_map(|i| u32::try_from(i).ok())
        .map(|i| latest.with_file_name(trace_file_name(id, i)))
        .collect()
}

/// One level being read.
struct Level {
    files: Vec<PathBuf>,
    origin: Vec<String>,
    /// The next record to read (while a child is read: its `subagent` record).
    at: Spot,
    /// While a child is read: the spot after its `subagent` record, where this level goes on.
    resume: Option<Spot>,
    /// The open file and where its next read starts.
    reader: Option<(Spot, BufReader<File>)>,
}

impl Level {
    fn new(files: Vec<PathBuf>, origin: Vec<String>, at: Spot) -> Self {
        Level {
            files,
            origin,
            at,
            resume: None,
            reader: None,
        }
    }

    /// The record at `self.at` and the spot after it; `None` at the end of the last file.
    fn next_line(&mut self) -> Result<Option<(String, Spot)>, PageError> {
        loop {
            let index = self.at.file as usize;
            let Some(path) = index.checked_sub(1).and_then(|i| self.files.get(i)) else {
                return Ok(None);
            };
            if !matches!(&self.reader, Some((spot, _)) if *spot == self.at) {
                self.reader = Some((self.at, open_at(path, self.at.offset)?));
            }
            let Some((spot, reader)) = self.reader.as_mut() else {
                return Ok(None);
            };
            let mut bytes = Vec::new();
            let read = reader
                .read_until(b'\n', &mut bytes)
                .map_err(|source| PageError::Read {
                    path: path.clone(),
                    source,
                })? as u64;
            if read == 0 {
                self.reader = None;
                if index == self.files.len() {
                    return Ok(None);
                }
                self.at = Spot {
                    file: self.at.file + 1,
                    offset: 0,
                };
                continue;
            }
            let after = Spot {
                file: self.at.file,
                offset: self.at.offset + read,
            };
            if bytes.last() != Some(&b'\n') && index == self.files.len() {
                // A last line still being written: not a record yet.
                self.reader = None;
                return Ok(None);
            }
            *spot = after;
            return Ok(Some((String::from_utf8_lossy(&bytes).into_owned(), after)));
        }
    }
}

/// `path` opened at `offset`, which must start a line (or be the file's end).
fn open_at(path: &Path, offset: u64) -> Result<BufReader<File>, PageError> {
    let read_err = |source| PageError::Read {
        path: path.to_path_buf(),
        source,
    };
    let mut file = File::open(path).map_err(read_err)?;
    let len = file.metadata().map_err(read_err)?.len();
    if offset > len {
        return Err(PageError::BadPosition("beyond the end of a file"));
    }
    if offset > 0 {
        file.seek(SeekFrom::Start(offset - 1)).map_err(read_err)?;
        let mut before = [0u8; 1];
        std::io::Read::read_exact(&mut file, &mut before).map_err(read_err)?;
        if before[0] != b'\n' {
            return Err(PageError::BadPosition("not at the start of a record"));
        }
    }
    Ok(BufReader::new(file))
}

/// The id of the child a `subagent` record points at.
fn pointer(msg: &OmniMessage) -> Option<&str> {
    match &msg.payload {
        Payload::Event(EventPayload::Subagent { session_id }) => Some(session_id),
        _ => None,
    }
}

/// The files of the recorded session `id` under `home` (none when it has no trace).
fn session_files(home: &Path, id: &str) -> Vec<PathBuf> {
    locate_trace(home, id)
        .map(|latest| files_from_latest(&latest))
        .unwrap_or_default()
}

/// Reads at most `limit` messages of the session whose files are `files` (oldest first),
/// from `from`. Subagents' traces are looked up under `home`.
pub fn read_page(
    home: &Path,
    files: Vec<PathBuf>,
    from: &Position,
    limit: usize,
) -> Result<Page, PageError> {
    let Some((first, nested)) = from.0.split_first() else {
        return Err(PageError::BadPosition("empty"));
    };
    if nested.len() >= MAX_DEPTH {
        return Err(PageError::BadPosition("nested too deep"));
    }
    if first.file == 0 || first.file as usize > files.len().max(1) {
        return Err(PageError::BadPosition("no such file"));
    }
    let mut stack = vec![Level::new(files, Vec::new(), *first)];
    // Back into the subagents the position was reading.
    for spot in nested {
        let Some(top) = stack.last_mut() else { break };
        let Some((line, after)) = top.next_line()? else {
            return Err(PageError::BadPosition("no subagent record there"));
        };
        top.resume = Some(after);
        let child = OmniMessage::from_json(line.trim_end())
            .ok()
            .and_then(|m| pointer(&m).map(str::to_string))
            .ok_or(PageError::BadPosition("no subagent record there"))?;
        let files = session_files(home, &child);
        if spot.file == 0 || spot.file as usize > files.len() {
            return Err(PageError::BadPosition("no such subagent file"));
        }
        let mut origin = top.origin.clone();
        origin.push(child);
        stack.push(Level::new(files, origin, *spot));
    }
    let mut page = Page::default();
    let mut bytes = 0usize;
    loop {
        let depth = stack.len();
        let Some(top) = stack.last_mut() else { break };
        if page.messages.len() >= limit.max(1) || bytes >= PAGE_BYTES {
            page.next = Some(Position(stack.iter().map(|l| l.at).collect()));
            return Ok(page);
        }
        let Some((line, after)) = top.next_line()? else {
            // This level ended: its parent goes on after the `subagent` record.
            stack.pop();
            if let Some(parent) = stack.last_mut()
                && let Some(after) = parent.resume.take()
            {
                parent.at = after;
            }
            continue;
        };
        let Ok(mut msg) = OmniMessage::from_json(line.trim_end()) else {
            // A malformed line is skipped, as every trace reader does.
            top.at = after;
            continue;
        };
        if let Some(child) = pointer(&msg) {
            let files = session_files(home, child);
            if depth < MAX_DEPTH && !files.is_empty() {
                let mut origin = top.origin.clone();
                origin.push(child.to_string());
                // The parent stays at the pointer until the child's history is read.
                top.resume = Some(after);
                stack.push(Level::new(files, origin, Spot { file: 1, offset: 0 }));
            } else {
                top.at = after;
            }
            continue;
        }
        top.at = after;
        if !matches!(msg.payload, Payload::Model(_)) {
            continue;
        }
        if !top.origin.is_empty() {
            msg.origin = Some(top.origin.clone());
        }
        let json = msg.to_json();
        bytes += json.len();
        page.messages.push(json);
    }
    Ok(page)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{SessionMeta, build};

    fn line(msg: &OmniMessage) -> String {
        format!("{}\n", msg.to_json())
    }

    fn texts(page: &Page) -> Vec<String> {
        page.messages
            .iter()
            .map(|j| {
                let v: serde_json::Value = serde_json::from_str(j).unwrap();
                let origin = v["origin"].as_array().map(|o| o.len()).unwrap_or(0);
                format!(
                    "{}{}",
                    v["payload"]["text"].as_str().unwrap(),
                    "'".repeat(origin)
                )
            })
            .collect()
    }

    #[test]
    fn pages_follow_files_and_subagents_in_order() {
        let home = tempfile::tempdir().unwrap();
        let dir = home.path().join("traces").join("2026-01-01");
        std::fs::create_dir_all(&dir).unwrap();
        let meta = line(&OmniMessage::session_meta(SessionMeta::default()));
        let text = |t: &str| line(&build::user_text(t.to_string(), None));
        let ptr = line(&OmniMessage::event(EventPayload::Subagent {
            session_id: "kid".into(),
        }));
        std::fs::write(
            dir.join("p_001.jsonl"),
            format!("{meta}{}{ptr}{}", text("a"), text("b")),
        )
        .unwrap();
        std::fs::write(dir.join("p_002.jsonl"), format!("{meta}{}", text("c"))).unwrap();
        std::fs::write(
            dir.join("kid_001.jsonl"),
            format!("{meta}{}{}", text("k1"), text("k2")),
        )
        .unwrap();
        let files = files_from_latest(&dir.join("p_002.jsonl"));
        let mut all = Vec::new();
        let mut at = Position::start();
        let mut pages = 0;
        loop {
            let page = read_page(home.path(), files.clone(), &at, 2).unwrap();
            all.extend(texts(&page));
            pages += 1;
            match page.next {
                Some(next) => at = next,
                None => break,
            }
        }
        assert_eq!(all, ["a", "k1'", "k2'", "b", "c"]);
        assert!(pages >= 3);
        // A spot inside a record is refused.
        let bad = Position(vec![Spot { file: 1, offset: 3 }]);
        assert!(matches!(
            read_page(home.path(), files.clone(), &bad, 2),
            Err(PageError::BadPosition(_))
        ));
        // A nested spot whose parent spot is no subagent record is refused.
        let bad = Position(vec![
            Spot { file: 1, offset: 0 },
            Spot { file: 1, offset: 0 },
        ]);
        assert!(matches!(
            read_page(home.path(), files, &bad, 2),
            Err(PageError::BadPosition(_))
        ));
    }
}
